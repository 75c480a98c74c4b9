// WebSocket (wss://) through the transparent proxy: the upgrade request has its credential
// injected by the egress core, then frames are relayed both ways; revocation and audit apply.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { createTestPki } from "../helpers/pki.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

let broker: Broker;
let upstream: ReturnType<typeof Bun.serve>;
let caPem: string;
const secret = `sk-ws-${crypto.randomUUID()}`;
const seenAuth: (string | null)[] = [];

beforeAll(async () => {
  const pki = await createTestPki();
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    tls: { cert: pki.certPem, key: pki.keyPem },
    fetch(req, srv) {
      seenAuth.push(req.headers.get("authorization"));
      return srv.upgrade(req, { data: undefined }) ? undefined : new Response("upgrade required", { status: 426 });
    },
    websocket: {
      message(ws, msg) {
        ws.send(`echo:${msg}`);
      },
    },
  });
  broker = await startBroker({ caPem: pki.caPem, tunnel: true });
  broker.dns.set("upstream.test", ["127.0.0.1"]);
  await broker.setCredential("WS_KEY", secret);
  await broker.addService(`upstream.test:${upstream.port}`, { type: "bearer", token: "WS_KEY" });
  caPem = await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text();
});

afterAll(async () => {
  await broker.stop();
  upstream.stop(true);
});

function connect(token: string): WebSocket {
  const proxy = `http://${token}:${broker.vault}@${broker.proxyAddress}`;
  // Bun's WebSocket accepts proxy and tls options (not in the DOM typings).
  return new WebSocket(`wss://upstream.test:${upstream.port}/socket`, { proxy, tls: { ca: caPem } } as unknown as string[]);
}

function exchange(ws: WebSocket, messages: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const got: string[] = [];
    ws.onopen = () => messages.forEach((m) => ws.send(m));
    ws.onmessage = (e) => {
      got.push(String(e.data));
      if (got.length === messages.length) resolve(got);
    };
    ws.onerror = () => reject(new Error("websocket error"));
    setTimeout(() => reject(new Error("websocket timed out")), 10_000);
  });
}

test("frames flow both ways after an upgrade that carried the injected credential", async () => {
  const ws = connect(broker.sessionToken);
  const got = await exchange(ws, ["one", "two", "three"]);
  ws.close();
  expect(got).toEqual(["echo:one", "echo:two", "echo:three"]);
  expect(seenAuth.at(-1)).toBe(`Bearer ${secret}`);
  await Bun.sleep(400); // audit batches flush every 250 ms
  const records = await broker.auditLogs();
  expect(records.some((r: { path: string; status: number }) => r.path === "/socket" && r.status === 101)).toBe(true);
  await expectNoLeak(broker, secret, got);
});

test("a revoked session cannot open a WebSocket", async () => {
  const minted = await broker.api("POST", "/v1/sessions", { vault: broker.vault, role: "proxy" }, broker.userToken);
  expect(minted.status).toBe(201);
  expect(await broker.api("DELETE", `/v1/sessions/${minted.body.id}`, undefined, broker.userToken)).toMatchObject({ status: 204 });
  const before = seenAuth.length;
  const ws = connect(minted.body.token);
  await expect(exchange(ws, ["x"])).rejects.toThrow();
  expect(seenAuth.length).toBe(before);
});
