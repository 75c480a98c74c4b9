// Resource bounds on real sockets. The transparent proxy runs with a 500 ms head/handshake deadline: a client
// trickling header bytes, one stalling its TLS handshake (to the proxy itself or inside a CONNECT) is closed
// while a normal client's tunnel keeps working; oversized heads get 431 and over-long request lines 414, on
// the proxy listener and inside a tunnel. The API listener (Bun.serve) answers oversized heads with a 4xx.
// Timing is never asserted beyond generous upper bounds (the deadline is 500 ms; we allow 5 s).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Socket } from "node:net";
import { rawRequest } from "./proxy-fixture.ts";
import { Conn, dialProxy, openTunnel, sendConnect, startTunnelEnv, type TunnelEnv } from "./tunnel-fixture.ts";

const HEAD_TIMEOUT_MS = 500;
const CLOSE_WITHIN_MS = 5_000;

let t: TunnelEnv;
beforeAll(async () => {
  t = await startTunnelEnv({ tunnel: { headerTimeoutMs: HEAD_TIMEOUT_MS, maxHeadBytes: 64 * 1024, idleTimeoutMs: 120_000 } });
});
afterAll(async () => {
  await t?.stop();
});

/** Writes `text` one byte every 100 ms until stopped or the socket closes. */
function trickle(sock: Socket, text: string): () => void {
  let i = 0;
  const timer = setInterval(() => {
    if (sock.destroyed) return clearInterval(timer);
    sock.write(text[i++ % text.length]!);
  }, 100);
  return () => clearInterval(timer);
}

/** The start of a TLS ClientHello record announcing 512 bytes, of which only a few are ever sent. */
const PARTIAL_CLIENT_HELLO = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]);

async function stalledTlsToProxy(): Promise<Conn> {
  const sock = await dialProxy(t.proxyPort);
  sock.write(PARTIAL_CLIENT_HELLO);
  return new Conn(sock);
}

async function stalledTlsInsideConnect(): Promise<Conn> {
  const sock = await dialProxy(t.proxyPort);
  const res = await sendConnect(sock, t.authority, t.proxyAuth);
  expect(res.status).toBe(200);
  const conn = new Conn(sock);
  sock.resume();
  sock.write(PARTIAL_CLIENT_HELLO);
  return conn;
}

async function trickler(): Promise<{ conn: Conn; stop: () => void }> {
  const sock = await dialProxy(t.proxyPort);
  const conn = new Conn(sock);
  const stop = trickle(sock, `CONNECT ${t.authority} HTTP/1.1\r\nHost: ${t.authority}\r\nX-Slow: ${"z".repeat(1000)}`);
  return { conn, stop };
}

describe("slow clients on the proxy listener", () => {
  test("a client trickling header bytes (one per 100 ms, never finishing) is closed", async () => {
    const { conn, stop } = await trickler();
    try {
      expect(await conn.closesWithin(CLOSE_WITHIN_MS)).toBe(true);
    } finally {
      stop();
    }
  });

  test("a client that starts TLS to the proxy and stalls the handshake is closed", async () => {
    const conn = await stalledTlsToProxy();
    expect(await conn.closesWithin(CLOSE_WITHIN_MS)).toBe(true);
  });

  test("a client that stalls the TLS handshake inside an accepted CONNECT is closed", async () => {
    const conn = await stalledTlsInsideConnect();
    expect(await conn.closesWithin(CLOSE_WITHIN_MS)).toBe(true);
  });

  test("a client that connects and never sends a byte is closed within the head deadline", async () => {
    const conn = new Conn(await dialProxy(t.proxyPort));
    expect(await conn.closesWithin(CLOSE_WITHIN_MS)).toBe(true);
  });

  test("while slow clients stall, a normal client's CONNECT and requests keep succeeding", async () => {
    const slow = await Promise.all([trickler(), trickler()]);
    const stalled = await Promise.all([stalledTlsToProxy(), stalledTlsInsideConnect()]);
    try {
      const { conn } = await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem });
      for (let i = 0; i < 8; i++) {
        conn.write(`GET /normal/${i} HTTP/1.1\r\nHost: ${t.authority}\r\n\r\n`);
        const res = await conn.readResponse();
        expect(res.status).toBe(200);
        expect(JSON.parse(res.body.toString()).url).toBe(`/normal/${i}`);
        await Bun.sleep(100); // the whole exchange outlasts the stalled clients' deadline
      }
      conn.close();
      // A fresh CONNECT after the stalled ones were dropped works as well.
      const again = await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem });
      again.conn.write(`GET /after HTTP/1.1\r\nHost: ${t.authority}\r\n\r\n`);
      expect((await again.conn.readResponse()).status).toBe(200);
      again.conn.close();
      for (const s of [...slow.map((s) => s.conn), ...stalled]) expect(await s.closesWithin(CLOSE_WITHIN_MS)).toBe(true);
    } finally {
      for (const s of slow) s.stop();
      for (const s of stalled) s.close();
    }
  });

  test("one principal's open tunnels are capped (429, BROKER_MAX_TUNNELS_PER_PRINCIPAL), and a closed tunnel frees its slot", async () => {
    await using capped = await startTunnelEnv({ env: { BROKER_MAX_TUNNELS_PER_PRINCIPAL: "2" } }).then((e) =>
      Object.assign(e, { [Symbol.asyncDispose]: () => e.stop() }),
    );
    const a = await openTunnel(capped.proxyPort, capped.authority, capped.proxyAuth, { ca: capped.caPem });
    const b = await openTunnel(capped.proxyPort, capped.authority, capped.proxyAuth, { ca: capped.caPem });
    const sock = await dialProxy(capped.proxyPort);
    const third = await sendConnect(sock, capped.authority, capped.proxyAuth);
    expect(third.status).toBe(429);
    sock.destroy();
    a.conn.close();
    await Bun.sleep(200);
    const fourth = await openTunnel(capped.proxyPort, capped.authority, capped.proxyAuth, { ca: capped.caPem });
    fourth.conn.write(`GET /ok HTTP/1.1\r\nHost: ${capped.authority}\r\n\r\n`);
    expect((await fourth.conn.readResponse()).status).toBe(200);
    b.conn.close();
    fourth.conn.close();
  });

  test("an idle kept-alive tunnel outlives the head deadline: only a started head is timed", async () => {
    const { conn } = await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem });
    conn.write(`GET /first HTTP/1.1\r\nHost: ${t.authority}\r\n\r\n`);
    expect((await conn.readResponse()).status).toBe(200);
    await Bun.sleep(HEAD_TIMEOUT_MS * 3); // idle between requests, as a client's connection pool is
    conn.write(`GET /second HTTP/1.1\r\nHost: ${t.authority}\r\n\r\n`);
    expect((await conn.readResponse()).status).toBe(200);
    conn.close();
  });
});

/** Sends `bytes` on a raw proxy connection and reads one response. */
async function proxyRaw(bytes: string): Promise<{ status: number; headers: Record<string, string>; closed: boolean }> {
  const conn = new Conn(await dialProxy(t.proxyPort));
  conn.write(bytes);
  const res = await conn.readResponse({ timeoutMs: CLOSE_WITHIN_MS });
  const closed = await conn.closesWithin(CLOSE_WITHIN_MS);
  conn.close();
  return { status: res.status, headers: res.headers, closed };
}

async function tunnelRaw(bytes: string): Promise<{ status: number; headers: Record<string, string>; closed: boolean }> {
  const { conn } = await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem });
  conn.write(bytes);
  const res = await conn.readResponse({ timeoutMs: CLOSE_WITHIN_MS });
  const closed = await conn.closesWithin(CLOSE_WITHIN_MS);
  conn.close();
  return { status: res.status, headers: res.headers, closed };
}

const bigHeader = (n: number) => `X-Big: ${"b".repeat(n)}\r\n`;

describe("head size bounds on the proxy listener", () => {
  test("an oversized CONNECT head (100 KiB of headers) gets 431 and the connection is closed", async () => {
    const r = await proxyRaw(`CONNECT ${t.authority} HTTP/1.1\r\nHost: ${t.authority}\r\n${bigHeader(100 * 1024)}\r\n`);
    expect(r.status).toBe(431);
    expect(r.closed).toBe(true);
  });

  test("an oversized head trickled in 8 KiB writes (end never in the buffer) gets 431", async () => {
    const conn = new Conn(await dialProxy(t.proxyPort));
    conn.write(`CONNECT ${t.authority} HTTP/1.1\r\nHost: ${t.authority}\r\nX-Big: `);
    for (let i = 0; i < 12 && !conn.closed; i++) {
      conn.write("b".repeat(8 * 1024));
      await Bun.sleep(20);
    }
    const res = await conn.readResponse({ timeoutMs: CLOSE_WITHIN_MS });
    conn.close();
    expect(res.status).toBe(431);
  });

  test("a request line over 8 KiB (still unterminated) gets 414", async () => {
    const r = await proxyRaw(`CONNECT ${"a".repeat(20 * 1024)}`);
    expect(r.status).toBe(414);
    expect(r.closed).toBe(true);
  });

  test("a complete request line over 8 KiB, sent in one write with its head, gets 414", async () => {
    const r = await proxyRaw(
      `GET https://${t.authority}/${"a".repeat(9 * 1024)} HTTP/1.1\r\nHost: ${t.authority}\r\nProxy-Authorization: ${t.proxyAuth}\r\n\r\n`,
    );
    expect(r.status).toBe(414);
  });
});

describe("head size bounds inside a tunnel", () => {
  test("an oversized request head gets 431 and the tunnel is closed", async () => {
    const r = await tunnelRaw(`GET / HTTP/1.1\r\nHost: ${t.authority}\r\n${bigHeader(100 * 1024)}\r\n`);
    expect(r.status).toBe(431);
    expect(r.headers["x-broker-error"]).toBe("request_header_too_large");
    expect(r.closed).toBe(true);
  });

  test("a request line over 8 KiB (still unterminated) gets 414", async () => {
    const r = await tunnelRaw(`GET /${"a".repeat(20 * 1024)}`);
    expect(r.status).toBe(414);
    expect(r.closed).toBe(true);
  });

  test("a complete request line over 8 KiB, sent in one write with its head, gets 414 and never reaches the upstream", async () => {
    const path = `/long-${"a".repeat(9 * 1024)}`;
    const r = await tunnelRaw(`GET ${path} HTTP/1.1\r\nHost: ${t.authority}\r\n\r\n`);
    expect(r.status).toBe(414);
    expect(t.upstream.received.some((x) => x.url === path)).toBe(false);
  });

  test("a head just over the 64 KiB cap, whose end arrives in the last TLS record, gets the broker's 431", async () => {
    const r = await tunnelRaw(`GET / HTTP/1.1\r\nHost: ${t.authority}\r\n${bigHeader(64 * 1024 + 200)}\r\n`);
    expect(r.status).toBe(431);
    expect(r.headers["x-broker-error"]).toBe("request_header_too_large"); // the upstream (Node, 16 KiB) sends none
  });

  test("a 7 KiB request line with 6 KiB of headers still goes through", async () => {
    const path = `/ok-${"a".repeat(7 * 1024)}`;
    const { conn } = await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem });
    conn.write(`GET ${path} HTTP/1.1\r\nHost: ${t.authority}\r\n${bigHeader(6 * 1024)}\r\n`);
    expect((await conn.readResponse()).status).toBe(200);
    expect(t.upstream.received.some((x) => x.url === path)).toBe(true);
    conn.close();
  });
});

describe("head size bounds on the API listener (Bun.serve)", () => {
  const statusOf = (raw: Buffer) => Number(/^HTTP\/1\.[01] (\d{3})/.exec(raw.toString("latin1"))?.[1]);

  test("a 100 KiB header gets 431 (Bun's own limit), not a hang or a 5xx", async () => {
    const raw = await rawRequest(t.broker.apiUrl, Buffer.from(`GET /health HTTP/1.1\r\nHost: x\r\n${bigHeader(100 * 1024)}\r\n`), 3000);
    expect(statusOf(raw)).toBe(431);
  });

  test("a 20 KiB request line gets 431 from Bun (it counts the line in its head limit; no 414)", async () => {
    const raw = await rawRequest(t.broker.apiUrl, Buffer.from(`GET /health?q=${"a".repeat(20 * 1024)} HTTP/1.1\r\nHost: x\r\n\r\n`), 3000);
    const status = statusOf(raw);
    expect([400, 414, 431]).toContain(status);
    expect(status).toBe(431);
  });

  test("the API still answers normally afterwards", async () => {
    expect((await fetch(`${t.broker.apiUrl}/health`)).status).toBe(200);
  });
});
