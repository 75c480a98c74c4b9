// Upstreams for no-reveal-attacks-4.test.ts (no reveal, round four, attacked): one raw HTTP/1.1 TLS
// server (node:tls, every byte scripted) that is a request bin (/store keeps the Authorization a
// request brought, /replay hands it back, /live pushes each stored one as an SSE event), an honest
// ranged echo file, a token endpoint (OAuth client credentials) and a GitHub App installation-token
// endpoint that keep what they were sent, and a few odd answers; plus an HTTP/2-only server
// (node:http2) whose Content-Length says less than its body holds.
//
// Nothing here prints a value: the tests assert booleans and names of pieces.

import { createSecureServer, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { createServer as createTlsServer, type Server, type TLSSocket } from "node:tls";
import type { TestPki } from "../helpers/pki.ts";

/** slot → what was kept there (an Authorization header, a token request's). */
export const slots = new Map<string, string>();
/** Installation and access tokens the endpoints handed out. */
export const issued: string[] = [];

/** /file: dots, the Authorization at FILE_ECHO_AT, dots up to FILE_BYTES. */
export const FILE_ECHO_AT = 74;
export const FILE_BYTES = 400;
export function fileBody(auth: string): Buffer {
  const head = ".".repeat(FILE_ECHO_AT) + auth;
  return Buffer.from(head + ".".repeat(Math.max(0, FILE_BYTES - head.length)), "latin1");
}

/** The ordinary JSON /json answers (nothing echoed). */
export const PLAIN_JSON = '{"ok":true,"items":[1,2,3],"note":"plain \\"quoted\\" text"}';

/** Bytes /cl-lie sends after saying `Content-Length: 5` (HTTP/2). */
export const CL_LIE_BYTES = 2 * 1024 * 1024;

interface RawRequest {
  method: string;
  url: URL;
  get(name: string): string | undefined;
}

const live = new Set<TLSSocket>();

function chunk(data: string | Buffer): Buffer {
  const b = typeof data === "string" ? Buffer.from(data, "latin1") : data;
  return Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from("\r\n")]);
}

function head(status: string, fields: [string, string | number][]): string {
  return `HTTP/1.1 ${status}\r\n${fields.map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`;
}

/** A whole answer with Content-Length (a HEAD answer's says what a GET would get; a 304 has none), then the connection closes. */
function answer(s: TLSSocket, status: string, fields: [string, string | number][], body: Buffer | string = "", method = "GET"): void {
  const b = typeof body === "string" ? Buffer.from(body, "latin1") : body;
  const bodyless = method === "HEAD" || status.startsWith("304");
  const length: [string, number][] = status.startsWith("304") ? [] : [["Content-Length", b.length]];
  const h = Buffer.from(head(status, [...fields, ...length, ["Connection", "close"]]), "latin1");
  s.end(bodyless ? h : Buffer.concat([h, b]));
}

function wsFrame(opcode: number, payload: Buffer | string): Buffer {
  const data = typeof payload === "string" ? Buffer.from(payload, "latin1") : payload;
  const n = data.length;
  const h = n < 126 ? Buffer.from([0x80 | opcode, n]) : Buffer.from([0x80 | opcode, 126, n >> 8, n & 255]);
  return Buffer.concat([h, data]);
}

function wsAccept(key: string): string {
  return new Bun.CryptoHasher("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
}

/** An honest ranged answer (one range: 206; several: multipart/byteranges), as any static file server sends. */
function rangedAnswer(s: TLSSocket, body: Buffer, range: string | undefined): void {
  const m = range === undefined ? null : /^\s*bytes\s*=\s*(.+)$/i.exec(range);
  const list = m
    ? m[1]!.split(",").map((spec) => {
        const r = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(spec)!;
        return [Number(r[1]), Math.min(Number(r[2]), body.length - 1)] as [number, number];
      })
    : undefined;
  if (!list)
    return answer(
      s,
      "200 OK",
      [
        ["Content-Type", "text/plain"],
        ["Accept-Ranges", "bytes"],
      ],
      body,
    );
  if (list.length === 1) {
    const [a, b] = list[0]!;
    return answer(
      s,
      "206 Partial Content",
      [
        ["Content-Type", "text/plain"],
        ["Content-Range", `bytes ${a}-${b}/${body.length}`],
      ],
      body.subarray(a, b + 1),
    );
  }
  const boundary = "attack4-boundary";
  const parts = list.map(([a, b]) =>
    Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes ${a}-${b}/${body.length}\r\n\r\n`),
      body.subarray(a, b + 1),
      Buffer.from("\r\n"),
    ]),
  );
  answer(
    s,
    "206 Partial Content",
    [["Content-Type", `multipart/byteranges; boundary=${boundary}`]],
    Buffer.concat([...parts, Buffer.from(`--${boundary}--\r\n`)]),
  );
}

async function route(s: TLSSocket, req: RawRequest): Promise<void> {
  const auth = req.get("authorization") ?? "";
  const slot = req.url.searchParams.get("slot") ?? "default";
  const p = req.url.pathname;
  if (p === "/store") {
    slots.set(slot, auth);
    for (const l of live) l.write(chunk(`data: stored ${auth}\n\n`));
    return answer(s, "200 OK", [["Content-Type", "application/json"]], '{"stored":true}');
  }
  if (p === "/replay") return answer(s, "200 OK", [["Content-Type", "application/json"]], JSON.stringify({ previous: slots.get(slot) ?? "" }));
  if (p === "/live") {
    s.write(
      head("200 OK", [
        ["Content-Type", "text/event-stream"],
        ["Transfer-Encoding", "chunked"],
        ["Connection", "close"],
      ]),
    );
    s.write(chunk(": ready\n\n"));
    live.add(s);
    s.on("close", () => live.delete(s));
    return;
  }
  // An echo of the request that honours Range, whatever else the request says (Upgrade included).
  if (p === "/file") return rangedAnswer(s, fileBody(auth), req.get("range"));
  if (p === "/token") {
    // OAuth token endpoint (client credentials): keeps the client authentication it got.
    slots.set("token", auth);
    const token = `at-${crypto.randomUUID()}`;
    issued.push(token);
    return answer(s, "200 OK", [["Content-Type", "application/json"]], JSON.stringify({ access_token: token, token_type: "Bearer", expires_in: 3600 }));
  }
  if (/^\/app\/installations\/\d+\/access_tokens$/.test(p)) {
    // GitHub's installation-token endpoint: keeps the app JWT it was sent.
    slots.set("jwt", auth);
    const token = `ghs_${crypto.randomUUID().replaceAll("-", "")}`;
    issued.push(token);
    return answer(
      s,
      "201 Created",
      [["Content-Type", "application/json"]],
      JSON.stringify({ token, expires_at: new Date(Date.now() + 3_600_000).toISOString() }),
    );
  }
  if (p === "/401")
    return answer(
      s,
      "401 Unauthorized",
      [
        ["Content-Type", "application/json"],
        ["WWW-Authenticate", 'Bearer error="insufficient_scope"'],
      ],
      '{"error":"insufficient_scope"}',
    );
  if (p === "/connection-tokens") {
    // A Connection header naming 12,000 distinct (nonexistent) hop-by-hop headers: 46 KB, under the 64 KiB head limit.
    const tokens = Array.from({ length: 12_000 }, (_, i) => i.toString(36)).join(",");
    return answer(
      s,
      "200 OK",
      [
        ["Content-Type", "application/json"],
        ["Connection", tokens],
      ],
      PLAIN_JSON,
    );
  }
  if (p === "/json") return answer(s, "200 OK", [["Content-Type", "application/json"]], PLAIN_JSON);
  if (p === "/status099") return answer(s, "099 Odd", [["Content-Type", "text/plain"]], "ok");
  if (p === "/head-304") {
    // A HEAD answer with a Content-Encoding and the length a GET would get; a 304 echoing in a header.
    if (req.get("if-none-match"))
      return answer(s, "304 Not Modified", [
        ["ETag", '"e1"'],
        ["X-Echo", auth],
      ]);
    return answer(
      s,
      "200 OK",
      [
        ["Content-Type", "text/plain"],
        ["Content-Encoding", "gzip"],
        ["ETag", '"e1"'],
      ],
      Buffer.alloc(1234, 0x2e),
      req.method,
    );
  }
  if (p === "/ws-control") {
    // A WebSocket whose ping payload and close reason quote the value (control frames: one frame each).
    const key = req.get("sec-websocket-key") ?? "";
    s.write(
      head("101 Switching Protocols", [
        ["Upgrade", "websocket"],
        ["Connection", "Upgrade"],
        ["Sec-WebSocket-Accept", wsAccept(key)],
      ]),
    );
    s.write(wsFrame(9, `ping ${auth}`.slice(0, 125)));
    s.write(wsFrame(1, "hello"));
    s.write(wsFrame(8, Buffer.concat([Buffer.from([0x03, 0xe8]), Buffer.from(`bye ${auth}`.slice(0, 123))])));
    return void s.end();
  }
  answer(s, "404 Not Found", []);
}

export interface Upstreams {
  /** The raw HTTP/1.1 bin. */
  readonly port: number;
  /** The HTTP/2-only server. */
  readonly h2Port: number;
  close(): Promise<void>;
}

function h2Route(stream: ServerHttp2Stream, h: IncomingHttpHeaders): void {
  const p = new URL(String(h[":path"] ?? "/"), "https://h2.test").pathname;
  if (p === "/cl-lie") {
    // Says 5 bytes, sends 2 MiB (node:http2 and Bun's client do not check the one against the other).
    stream.respond({ ":status": 200, "content-type": "text/plain", "content-length": "5" });
    return void stream.end(Buffer.alloc(CL_LIE_BYTES, 0x61));
  }
  stream.respond({ ":status": 404 });
  stream.end();
}

export async function startUpstreams(pki: TestPki): Promise<Upstreams> {
  const server: Server = createTlsServer({ cert: pki.certPem, key: pki.keyPem, ALPNProtocols: ["http/1.1"] }, (s) => {
    s.on("error", () => {});
    let buf = Buffer.alloc(0);
    let done = false;
    s.on("data", (d: Buffer) => {
      if (done) return;
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const [line, ...lines] = buf.subarray(0, end).toString("latin1").split("\r\n");
      const [method = "", path = "/"] = line!.split(" ");
      const headers = lines.map((l) => [l.slice(0, l.indexOf(":")).trim().toLowerCase(), l.slice(l.indexOf(":") + 1).trim()] as [string, string]);
      const get = (n: string) => headers.find(([k]) => k === n)?.[1];
      const length = Number(get("content-length") ?? 0);
      if (buf.length - end - 4 < length) return; // routes ignore bodies, but wait for them
      done = true;
      void route(s, { method, url: new URL(path, "https://bin.test"), get }).catch(() => s.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const h2 = createSecureServer({ cert: pki.certPem, key: pki.keyPem }).on("stream", (stream: ServerHttp2Stream, h: IncomingHttpHeaders) => {
    stream.on("error", () => {});
    stream.resume();
    stream.on("end", () => h2Route(stream, h));
  });
  h2.on("session", (s) => s.on("error", () => {}));
  await new Promise<void>((resolve) => h2.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    h2Port: (h2.address() as AddressInfo).port,
    async close() {
      for (const l of live) l.destroy();
      await Promise.all([new Promise<void>((resolve) => server.close(() => resolve())), new Promise<void>((resolve) => h2.close(() => resolve()))]);
    },
  };
}
