// WebSocket upgrades through the egress core: the request head the upstream receives. An IPv6
// literal upstream gets a bracketed Host (RFC 9110 §7.2), as the plain HTTP path sends it; and the
// answer, read by the same head reader as the upstream client (egress/upstream-head.ts).

import { beforeAll, expect, test } from "bun:test";
import { UpstreamUnreachable } from "../../../src/errors.ts";
import { compileNetPolicy, createPlanCache, egressUpgrade, type EgressDeps, type PlanCache, type Upstream } from "../../../src/egress/index.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createTestApi, type TestApi } from "../../helpers/api.ts";

let api: TestApi;
let plans: PlanCache;
let vault: { id: number; name: string };

beforeAll(async () => {
  api = await createTestApi();
  const reg = await api.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "correct horse battery" } });
  const token = reg.body.token as string;
  expect((await api.call("POST", "/v1/vaults", { token, body: { name: "v1" } })).status).toBe(201);
  for (const host of ["[::1]:8443", "api.example.com"]) {
    expect((await api.call("POST", "/v1/vaults/v1/services", { token, body: { host, auth: { type: "passthrough" } } })).status).toBe(201);
  }
  vault = { id: (await api.store.vaults.byName("v1"))!.id, name: "v1" };
  plans = createPlanCache(api.store, api.domain.dataKey, () => ({}));
});

/** An upstream whose connection records what is written and answers 101. */
const SWITCHED = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n";

function recordingUpstream(written: Uint8Array[], answer: string[] = [SWITCHED]): Upstream {
  let pending: Uint8Array[] = answer.map((a) => Buffer.from(a, "latin1"));
  return {
    send: async () => {
      throw new Error("unused");
    },
    openPlain: async () => {
      throw new Error("unused");
    },
    open: async () => ({
      read: async () => pending.shift() ?? null,
      unread: (chunk) => void (chunk.byteLength && pending.unshift(chunk)),
      write: async (bytes) => void written.push(bytes),
      idleTimeout() {},
      close() {
        pending = [];
      },
      closed: false,
      buffered: 0,
      key: "test",
    }),
    close() {},
  };
}

function deps(upstream: Upstream): EgressDeps {
  return {
    plans,
    policy: compileNetPolicy({ allowPrivateRanges: true, allowlist: [], ownListeners: [] }),
    resolver: async () => ["192.0.2.10"],
    upstream,
    audit: { record() {} },
    log: createMemoryLogger(),
    now: Date.now,
    maxRequestBytes: 0,
    maxResponseBytes: 0,
  };
}

function upgradeInput(host: string, port: number) {
  const headers: [string, string][] = [
    ["Upgrade", "websocket"],
    ["Connection", "Upgrade"],
    ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
    ["Sec-WebSocket-Version", "13"],
  ];
  return {
    principal: "p",
    contained: false,
    vault,
    host,
    port,
    method: "GET",
    target: "/ws",
    headers,
    body: null,
    bodyLength: null,
    ingress: "explicit" as const,
  };
}

async function upgradeHead(host: string, port: number): Promise<string> {
  const written: Uint8Array[] = [];
  const up = await egressUpgrade(upgradeInput(host, port), deps(recordingUpstream(written)));
  expect(up.kind).toBe("switched");
  if (up.kind === "switched") up.finish(0, 0);
  return Buffer.concat(written).toString("latin1");
}

test("an upgrade to an IPv6 literal sends a bracketed Host with the port", async () => {
  const head = await upgradeHead("::1", 8443);
  expect(head.startsWith("GET /ws HTTP/1.1\r\n")).toBe(true);
  expect(head).toContain("\r\nHost: [::1]:8443\r\n");
});

test("an upgrade to a name on 443 sends the bare name", async () => {
  expect(await upgradeHead("api.example.com", 443)).toContain("\r\nHost: api.example.com\r\n");
});

test("an interim 100 is skipped, the 101 split across reads is the answer, and frame bytes after it stay on the connection", async () => {
  const frame = "\x81\x02hi";
  const answer = ["HTTP/1.1 100 Continue\r\n\r\n", SWITCHED.slice(0, 20), SWITCHED.slice(20) + frame];
  const up = await egressUpgrade(upgradeInput("api.example.com", 443), deps(recordingUpstream([], answer)));
  if (up.kind !== "switched") throw new Error(`expected a switch, got ${up.kind}`);
  expect(up.head.status).toBe(101);
  expect(Buffer.from((await up.conn.read())!).toString("latin1")).toBe(frame);
  up.finish(0, 0);
});

test("an upstream that hangs up before its head is unreachable, said in words", async () => {
  const err = await egressUpgrade(upgradeInput("api.example.com", 443), deps(recordingUpstream([], ["HTTP/1.1 101 Swi"]))).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(UpstreamUnreachable);
  expect((err as Error).message).toBe("the upstream closed the connection during the upgrade");
});

test("an upgrade never carries Range, If-Range or Request-Range upstream, even on a passthrough service", async () => {
  // An upstream that ignores the Upgrade and honours a Range would answer with pieces of an echo (ranges.ts).
  const written: Uint8Array[] = [];
  const input = upgradeInput("api.example.com", 443);
  const headers: [string, string][] = [...input.headers, ["Range", "bytes=74-84"], ["If-Range", '"e1"'], ["Request-Range", "bytes=0-10"], ["X-Kept", "yes"]];
  const up = await egressUpgrade({ ...input, headers }, deps(recordingUpstream(written)));
  if (up.kind === "switched") up.finish(0, 0);
  const head = Buffer.concat(written).toString("latin1").toLowerCase();
  expect({ range: head.includes("range:"), kept: head.includes("\r\nx-kept: yes\r\n") }).toEqual({ range: false, kept: true });
});
