// No reveal by echo over WebSockets through the transparent proxy (architecture.md D15): a raw TLS
// upstream (Bun.listen, exact control of every frame and TCP write) echoes the injected
// Authorization in its 101 head (base64 in a -bin header too), in frames split every way, in control
// frames, in a refusal body, and tries to negotiate compression; the agent must never read the value.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import type { Socket, TCPSocketListener } from "bun";
import { createTestPki } from "../helpers/pki.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";
import { basicProxyAuth, openTunnel, type Conn } from "./tunnel-fixture.ts";

const secret = `sk-wsecho-${crypto.randomUUID()}`;
const auth = `Bearer ${secret}`;
let broker: Broker;
let upstream: TCPSocketListener<{ buf: string; started: boolean }>;
let caPem: string;
let authority: string;
/** Request heads the upstream received, raw. */
const received: string[] = [];
/** Everything any client read, for the leak check at the end. */
const seenByAgents: string[] = [];

function frame(opcode: number, payload: string | Uint8Array, opts: { fin?: boolean; rsv1?: boolean } = {}): Buffer {
  const data = typeof payload === "string" ? Buffer.from(payload) : Buffer.from(payload);
  const n = data.length;
  const head = n < 126 ? Buffer.from([0, n]) : n < 65536 ? Buffer.from([0, 126, n >> 8, n & 255]) : Buffer.alloc(10);
  if (n >= 65536) (head[1] = 127), head.writeBigUInt64BE(BigInt(n), 2);
  head[0] = ((opts.fin ?? true) ? 0x80 : 0) | (opts.rsv1 ? 0x40 : 0) | opcode;
  return Buffer.concat([head, data]);
}

const close = (code: number, reason: string) => frame(8, Buffer.concat([Buffer.from([code >> 8, code & 255]), Buffer.from(reason)]));

/** Writes pieces with pauses, so each reaches the broker as its own TLS record / TCP read. */
async function writeSlowly(s: Socket<unknown>, pieces: Uint8Array[]): Promise<void> {
  for (const p of pieces) {
    s.write(p);
    s.flush();
    await Bun.sleep(30);
  }
}

function accept(key: string): string {
  return createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
}

/** The scripted upstream: the request path picks what it answers. */
async function script(s: Socket<unknown>, head: string): Promise<void> {
  const path = head.split(" ")[1] ?? "/";
  const echoed = /^authorization: (.*)$/im.exec(head)?.[1] ?? "";
  const key = /^sec-websocket-key: (.*)$/im.exec(head)?.[1] ?? "";
  const switching = (extra = "") =>
    `HTTP/1.1 101 Switching ${echoed}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(key)}\r\nX-Echo: ${echoed}\r\n${extra}\r\n`;
  if (path === "/split") {
    const first = frame(1, `before ${echoed.slice(0, 15)}`, { fin: false });
    const second = frame(0, `${echoed.slice(15)} after`);
    const large = frame(1, `${"x".repeat(70_000)}${echoed}${"y".repeat(100)}`);
    // The 101 and half a frame head in one write; then the rest of the head, the payload in two, a ping in between.
    const wire = Buffer.concat([Buffer.from(switching()), first]);
    const headEnd = wire.length - first.length;
    await writeSlowly(s, [
      wire.subarray(0, headEnd + 1),
      wire.subarray(headEnd + 1, headEnd + 9),
      wire.subarray(headEnd + 9),
      frame(9, `ping ${echoed}`),
      second.subarray(0, 12),
      second.subarray(12),
    ]);
    await writeSlowly(s, [
      frame(2, Buffer.concat([Buffer.from([0, 1, 2]), Buffer.from(echoed), Buffer.from([255])])),
      large.subarray(0, 35_000),
      large.subarray(35_000),
    ]);
    await writeSlowly(s, [close(4000, `bye ${echoed}`)]);
    return void s.end();
  }
  if (path === "/deflate") return void s.write(switching("Sec-WebSocket-Extensions: permessage-deflate\r\n"));
  // gRPC-style binary metadata: base64 (here unpadded) that a client decodes; then the same with "." inserted,
  // not base64, though Node's lenient decoder still reads the value out of it.
  if (path === "/bin") return void s.end(switching(`X-Echo-Bin: ${Buffer.from(echoed).toString("base64").replace(/=+$/, "")}\r\n`));
  if (path === "/bad-bin")
    return void s.end(
      switching(
        `X-Echo-Bin: ${Buffer.from(echoed)
          .toString("base64")
          .replace(/(.{8})/g, "$1.")}\r\n`,
      ),
    );
  if (path === "/rsv1") return writeSlowly(s, [Buffer.from(switching()), frame(1, "clean first"), frame(1, `compressed? ${echoed}`, { rsv1: true })]);
  if (path === "/refuse-plain") {
    const body = `{"error":"no","auth":"${echoed}"}`;
    return void s.end(
      `HTTP/1.1 401 Nope ${echoed}\r\nContent-Type: application/json\r\nX-Echo: ${echoed}\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    );
  }
  if (path === "/refuse-gzip") {
    const body = gzipSync(Buffer.from(`{"auth":"${echoed}"}`));
    s.write(`HTTP/1.1 403 Forbidden\r\nContent-Encoding: gzip\r\nContent-Length: ${body.length}\r\n\r\n`);
    return void s.end(body);
  }
  if (path === "/refuse-unknown") return void s.end(`HTTP/1.1 403 Forbidden\r\nContent-Encoding: snappy\r\nContent-Length: 9\r\n\r\nUNSCANNED`);
  s.end("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
}

beforeAll(async () => {
  const pki = await createTestPki();
  upstream = Bun.listen<{ buf: string; started: boolean }>({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: pki.certPem, key: pki.keyPem },
    socket: {
      open(s) {
        s.data = { buf: "", started: false };
      },
      data(s, chunk) {
        if (s.data.started) return; // client frames are not needed by any scenario
        s.data.buf += chunk.toString("latin1");
        const end = s.data.buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        s.data.started = true;
        received.push(s.data.buf.slice(0, end));
        void script(s as Socket<unknown>, s.data.buf.slice(0, end));
      },
    },
  });
  broker = await startBroker({ caPem: pki.caPem, tunnel: true });
  broker.dns.set("upstream.test", ["127.0.0.1"]);
  authority = `upstream.test:${upstream.port}`;
  await broker.setCredential("WS_KEY", secret);
  await broker.addService(authority, { type: "bearer", token: "WS_KEY" });
  caPem = await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text();
});

afterAll(async () => {
  await expectNoLeak(broker, secret, seenByAgents);
  await broker.stop();
  upstream.stop(true);
});

/** A raw agent: CONNECT, TLS with the broker CA, then an upgrade request offering permessage-deflate. */
async function rawUpgrade(path: string): Promise<Conn> {
  const { conn } = await openTunnel(Number(broker.proxyAddress!.split(":").at(-1)), authority, basicProxyAuth(broker.sessionToken, broker.vault), {
    ca: caPem,
  });
  conn.write(
    `GET ${path} HTTP/1.1\r\nHost: ${authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n`,
  );
  return conn;
}

async function auditFor(path: string): Promise<{ status: number; error: string | null }> {
  await Bun.sleep(400); // audit batches flush every 250 ms
  const records: { path: string; status: number; error: string | null }[] = await broker.auditLogs();
  return records.filter((r) => r.path === path).at(-1)!;
}

test("a value echoed in the 101 head and split across fragments, TCP reads and a ping never reaches a real client", async () => {
  const proxy = `http://${broker.sessionToken}:${broker.vault}@${broker.proxyAddress}`;
  // Bun's WebSocket accepts proxy and tls options (not in the DOM typings).
  const ws = new WebSocket(`wss://${authority}/split`, { proxy, tls: { ca: caPem } } as unknown as string[]);
  ws.binaryType = "arraybuffer";
  const got: (string | Buffer)[] = [];
  const closed = await new Promise<CloseEvent>((resolve, reject) => {
    ws.onmessage = (e) => got.push(typeof e.data === "string" ? e.data : Buffer.from(e.data as ArrayBuffer));
    ws.onclose = resolve;
    ws.onerror = () => reject(new Error("websocket error"));
    setTimeout(() => reject(new Error("websocket timed out")), 10_000);
  });
  seenByAgents.push(...got.map(String), closed.reason);
  expect(got[0]).toBe("before Bearer [redacted] after");
  expect(got[1]).toEqual(Buffer.from([0, 1, 2, ...Buffer.from("Bearer [redacted]"), 255]));
  expect(got[2]).toBe(`${"x".repeat(70_000)}Bearer [redacted]${"y".repeat(100)}`);
  expect({ code: closed.code, reason: closed.reason }).toEqual({ code: 4000, reason: "bye Bearer [redacted]" });
  const request = received.find((h) => h.startsWith("GET /split"))!;
  expect(/^authorization: (.*)$/im.exec(request)?.[1]).toBe(auth);
  expect(request).not.toMatch(/sec-websocket-extensions/i); // whatever the client offered, compression was not
  expect(await auditFor("/split")).toMatchObject({ status: 101, error: null });
});

test("the raw 101 head, frames and close as an agent reads them off the wire", async () => {
  const conn = await rawUpgrade("/split");
  const res = await conn.readResponse({ noBody: true });
  await conn.closesWithin(5000);
  const wire = Buffer.concat([Buffer.from(res.head, "latin1"), conn.buf]);
  seenByAgents.push(wire.toString("latin1"));
  expect(res.status).toBe(101);
  expect(res.head).toStartWith("HTTP/1.1 101 Switching Bearer [redacted]");
  expect(res.headers["x-echo"]).toBe("Bearer [redacted]");
  expect(res.headers["sec-websocket-extensions"]).toBeUndefined();
  expect(wire.includes(secret)).toBe(false);
  expect(conn.buf.includes("[redacted] after")).toBe(true);
  expect(conn.buf.includes("ping Bearer [redacted]")).toBe(true);
});

test("an upstream that negotiates permessage-deflate anyway gets no 101 through", async () => {
  const conn = await rawUpgrade("/deflate");
  const res = await conn.readResponse();
  seenByAgents.push(res.head, res.body.toString("latin1"));
  expect(res.status).toBe(502);
  expect(res.headers["x-broker-error"]).toBe("undecodable_response");
  expect(await conn.closesWithin()).toBe(true);
  expect(await auditFor("/deflate")).toMatchObject({ status: 502, error: "undecodable_response" });
});

test("a -bin header in the 101 is scanned decoded; one that is not base64 gets no 101 through", async () => {
  const conn = await rawUpgrade("/bin");
  const res = await conn.readResponse({ noBody: true });
  const decoded = Buffer.from(res.headers["x-echo-bin"] ?? "", "base64").toString("latin1");
  seenByAgents.push(res.head, decoded);
  expect(res.status).toBe(101);
  expect(decoded).toBe("Bearer [redacted]");
  expect(res.headers["x-echo-bin"]!.endsWith("=")).toBe(false); // unpadded as it came

  const bad = await rawUpgrade("/bad-bin");
  const refused = await bad.readResponse();
  seenByAgents.push(refused.head, refused.body.toString("latin1"));
  expect(refused.status).toBe(502);
  expect(refused.headers["x-broker-error"]).toBe("undecodable_response");
  expect("x-echo-bin" in refused.headers).toBe(false);
  expect(await auditFor("/bad-bin")).toMatchObject({ status: 502, error: "undecodable_response" });
});

test("a frame with RSV1 ends the relay with a close frame, never its payload", async () => {
  const conn = await rawUpgrade("/rsv1");
  const res = await conn.readResponse({ noBody: true });
  expect(res.status).toBe(101);
  expect(await conn.closesWithin(5000)).toBe(true);
  seenByAgents.push(conn.buf.toString("latin1"));
  const clean = Buffer.concat([Buffer.from([0x81, 11]), Buffer.from("clean first")]);
  expect(conn.buf.subarray(0, clean.length)).toEqual(clean);
  const closeFrame = conn.buf.subarray(clean.length);
  expect(closeFrame[0]).toBe(0x88);
  expect(closeFrame.readUInt16BE(2)).toBe(1011);
  expect(conn.buf.includes("compressed?")).toBe(false);
  expect(await auditFor("/rsv1")).toMatchObject({ status: 101, error: "websocket_protocol_error" });
});

test("a refused upgrade's head and body are redacted, plain or compressed", async () => {
  const plain = await rawUpgrade("/refuse-plain");
  const r1 = await plain.readResponse();
  seenByAgents.push(r1.head, r1.body.toString("latin1"));
  expect(r1.status).toBe(401);
  expect(r1.head).toStartWith("HTTP/1.1 401 Nope Bearer [redacted]");
  expect(r1.headers["x-echo"]).toBe("Bearer [redacted]");
  expect(JSON.parse(r1.body.toString())).toEqual({ error: "no", auth: "Bearer [redacted]" });

  const gz = await rawUpgrade("/refuse-gzip");
  const r2 = await gz.readResponse();
  seenByAgents.push(r2.body.toString("latin1"));
  expect(r2.status).toBe(403);
  expect(r2.headers["content-encoding"]).toBe("gzip");
  expect(JSON.parse(Buffer.from(Bun.gunzipSync(new Uint8Array(r2.body))).toString())).toEqual({ auth: "Bearer [redacted]" });

  const unknown = await rawUpgrade("/refuse-unknown");
  const r3 = await unknown.readResponse();
  expect(r3.status).toBe(502);
  expect(r3.headers["x-broker-error"]).toBe("undecodable_response");
  expect(r3.body.includes("UNSCANNED")).toBe(false);
  expect(await auditFor("/refuse-unknown")).toMatchObject({ status: 502, error: "undecodable_response" });
});
