// Admission to the pipeline inside a tunnel (architecture.md §3, stage 1; identity/admission.ts): every
// request, WebSocket upgrades included, is charged to the PROXY tier like its CONNECT; a request sent
// to the proxy without CONNECT is refused (407) before the broker asks for its body (no 100 Continue);
// and a 407 leaves the connection open for the client's retry with credentials (architecture.md D7).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createClock } from "../helpers/api.ts";
import { basicProxyAuth, Conn, dialProxy, openTunnel, startTunnelEnv, type TunnelEnv } from "./tunnel-fixture.ts";

const cleanup: (() => Promise<unknown>)[] = [];
/** Everything the broker answered here, and the brokers whose logs are checked at the end. */
const seen: string[] = [];
const envs: TunnelEnv[] = [];
const keep = <T extends { head: string; body: Buffer }>(res: T): T => (seen.push(res.head, res.body.toString("latin1")), res);
afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => {});
});

async function tunnelEnv(env: Record<string, string>, opts: Parameters<typeof startTunnelEnv>[0] = {}): Promise<TunnelEnv> {
  const t = await startTunnelEnv({ ...opts, env: { BROKER_RATELIMIT_PROFILE: "default", ...env } });
  cleanup.push(() => t.stop());
  envs.push(t);
  return t;
}

const wsUpgrade = (authority: string, path = "/ws") =>
  `GET ${path} HTTP/1.1\r\nHost: ${authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
  `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;

describe("the PROXY tier inside a tunnel", () => {
  test("a WebSocket upgrade is charged like any request in the tunnel: with one token, spent by the CONNECT, it gets 429", async () => {
    const clock = createClock(Date.now());
    const t = await tunnelEnv({ BROKER_RATELIMIT_PROXY_BURST: "1", BROKER_RATELIMIT_PROXY_RPS: "1" }, { now: clock.now });
    const { conn } = await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem }); // spends the one token
    conn.write(wsUpgrade(t.authority));
    const res = keep(await conn.readResponse({ timeoutMs: 10_000 }));
    expect(res.status).toBe(429);
    expect(res.headers["x-broker-error"]).toBe("rate_limited");
    expect(res.headers["retry-after"]).toBeDefined();
    conn.close();
  });
});

describe("https:// URLs sent to the proxy without CONNECT", () => {
  let t: TunnelEnv;
  beforeAll(async () => {
    t = await tunnelEnv({ BROKER_RATELIMIT_PROFILE: "off" });
  });

  test("a wrong token with Expect: 100-continue gets 407 before any 100 Continue", async () => {
    const conn = new Conn(await dialProxy(t.proxyPort));
    const bad = basicProxyAuth("brk_not-a-token", t.broker.vault);
    conn.write(
      `POST https://${t.authority}/x HTTP/1.1\r\nHost: ${t.authority}\r\nProxy-Authorization: ${bad}\r\n` + `Content-Length: 5\r\nExpect: 100-continue\r\n\r\n`,
    );
    const first = keep(await conn.readResponse());
    expect(first.status).toBe(407);
    conn.close();
  });

  test("a wrong token on a bodyless GET gets 407, and the client retries on the same connection", async () => {
    const conn = new Conn(await dialProxy(t.proxyPort));
    const bad = basicProxyAuth("brk_not-a-token", t.broker.vault);
    conn.write(`GET https://${t.authority}/x HTTP/1.1\r\nHost: ${t.authority}\r\nProxy-Authorization: ${bad}\r\n\r\n`);
    const refused = keep(await conn.readResponse());
    expect(refused.status).toBe(407);
    expect(refused.headers["proxy-authenticate"]).toBe('Basic realm="broker"');
    conn.write(`GET https://${t.authority}/x HTTP/1.1\r\nHost: ${t.authority}\r\nProxy-Authorization: ${t.proxyAuth}\r\n\r\n`);
    const retried = keep(await conn.readResponse({ timeoutMs: 10_000 }));
    expect(retried.status).not.toBe(407);
    expect(retried.headers["x-broker-error"]).toBeUndefined();
    conn.close();
  });
});

test("no answer or log line here holds the stored credential", () => {
  expect(envs.length).toBe(2);
  for (const t of envs) {
    for (const text of [...seen, ...t.broker.logLines]) expect(text).not.toContain(t.secret);
  }
});
