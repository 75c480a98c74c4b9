// Pooled upstream connections: one the upstream closed while idle is not reused, and a request that
// meets a connection dying under it (nothing came back) is replayed once on a fresh connection when
// that cannot double an effect: idempotent methods, or a POST carrying an Idempotency-Key.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { createServer, type TLSSocket } from "node:tls";
import type { AddressInfo } from "node:net";
import { createTestPki, type TestPki } from "../helpers/pki.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

let upstream: TestUpstream;
let broker: Broker;

beforeAll(async () => {
  upstream = await startUpstream(undefined, { keepAliveTimeoutMs: 300 }); // far shorter than the broker's 4 s pool idle
  broker = await startBroker({ caPem: upstream.pki.caPem });
  await broker.setCredential("API_KEY", `sk-keepalive-${crypto.randomUUID()}`);
  await broker.addService(`127.0.0.1:${upstream.port}`, { type: "bearer", token: "API_KEY" });
});

afterAll(async () => {
  await broker.stop();
  await upstream.close();
});

test("a pooled connection the upstream closed while idle is not reused", async () => {
  const hp = `127.0.0.1:${upstream.port}`;
  const first = await broker.proxy(hp, "/one", { method: "POST", body: JSON.stringify({ n: 1 }) });
  expect(first.status).toBe(200);
  await first.arrayBuffer();
  await Bun.sleep(800); // the upstream has closed its side by now
  const second = await broker.proxy(hp, "/two", { method: "POST", body: JSON.stringify({ n: 2 }) });
  expect(second.status).toBe(200);
  expect(((await second.json()) as { body: string }).body).toBe(JSON.stringify({ n: 2 }));
});

/** An upstream that answers the first request on each connection and drops the connection on the second. */
async function startDroppingUpstream(pki: TestPki) {
  const seen: string[] = [];
  const server = createServer({ cert: pki.certPem, key: pki.keyPem }, (socket: TLSSocket) => {
    let served = 0;
    let buf = "";
    socket.on("data", (d: Buffer) => {
      buf += d.toString("latin1");
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      const path = buf.split(" ")[1] ?? "";
      buf = buf.slice(end + 4 + length);
      if (++served === 2) return void socket.destroy(); // the race: the request is lost, nothing answered
      seen.push(path);
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${path.length}\r\n\r\n${path}`);
    });
    socket.on("error", () => {});
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { port: (server.address() as AddressInfo).port, seen, close: () => server.close() };
}

test("a request whose reused connection dies before any answer is replayed once when it is safe to", async () => {
  const pki = await createTestPki();
  const dropping = await startDroppingUpstream(pki);
  await using b = await startBroker({ caPem: pki.caPem });
  await b.setCredential("API_KEY", "sk-dropping");
  const hp = `127.0.0.1:${dropping.port}`;
  await b.addService(hp, { type: "bearer", token: "API_KEY" });
  for (const [path, init] of [
    ["/get-1", {}],
    ["/get-2", {}], // second on its connection: dropped, then replayed on a fresh one
    ["/put-1", { method: "PUT", body: "x".repeat(100) }],
    ["/post-1", { method: "POST", body: "y".repeat(100), headers: { "idempotency-key": "k-1" } }],
  ] as const) {
    const res = await b.proxy(hp, path, init);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(path);
  }
  expect(dropping.seen).toEqual(["/get-1", "/get-2", "/put-1", "/post-1"]);

  // A plain POST is never replayed: the upstream may have acted on it before the connection died.
  const warm = await b.proxy(hp, "/get-3");
  await warm.text();
  const lost = await b.proxy(hp, "/post-2", { method: "POST", body: "z" });
  expect(lost.status).toBe(502);
  expect(dropping.seen).not.toContain("/post-2");
  dropping.close();
});
