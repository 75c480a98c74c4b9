// Upstreams for no-reveal-attacks-3.test.ts (issue 31, round three, attacked): one raw HTTP/1.1 TLS
// server (node:tls, so every byte of an answer is scripted: lying Content-Range, short bodies, chunk
// boundaries, 101 heads) listening on two ports with one memory, and one HTTP/2-only server
// (node:http2) sharing that memory. Both are "request bins": /store keeps the Authorization a request
// brought in a named slot, /replay hands a slot back in the form asked for, so one vault's value can be
// served to another vault's agent. Plus ranged echo files, a fake S3 (no signature check: the broker
// signs, nothing here verifies), gRPC and gRPC-like framings, and -bin metadata spelt every way.
//
// Nothing here prints a value: the test asserts booleans and names of pieces.

import { createSecureServer, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { createServer as createTlsServer, type Server, type TLSSocket } from "node:tls";
import { gzipSync } from "node:zlib";
import type { TestPki } from "../helpers/pki.ts";
import { polyglotBody } from "../helpers/grpc-hostile-server.ts";

/** slot → the Authorization last stored there (shared by both servers: one bin). */
export const slots = new Map<string, string>();
/** Access tokens /token handed out (to check that none reaches another agent). */
export const issued: string[] = [];
/** Every request either server got: method, path, header lines (names lower-cased), protocol. */
export const received: { method: string; path: string; headers: [string, string][]; protocol: string; port: number }[] = [];

/** Where the echoed Authorization starts in /file: "Bearer " is 7 bytes, so the value starts at 81. */
export const FILE_ECHO_AT = 74;
export const FILE_BYTES = 400;

/** /file: dots, the Authorization at FILE_ECHO_AT, dots to FILE_BYTES. */
export function fileBody(auth: string): Buffer {
  const head = ".".repeat(FILE_ECHO_AT) + auth;
  return Buffer.from(head + ".".repeat(Math.max(0, FILE_BYTES - head.length)), "latin1");
}

/** The fake S3's plain object: deterministic bytes, no run of 4 repeating. */
export const OBJECT_BYTES = 20_011;
export const OBJECT = Buffer.from(Array.from({ length: OBJECT_BYTES }, (_, i) => (i * 7 + (i >> 8)) % 251));
/** The part /s3/part?partNumber=1 serves, as S3 does for a multipart object. */
export const PART_BYTES = 8192;

/** The access key id out of a SigV4 Authorization (what the S3 echo object holds). */
export function accessKeyOf(auth: string): string {
  return /Credential=([^/]+)\//.exec(auth)?.[1] ?? "";
}

/**
 * "." * at, the key id, "." * tail; with `entity`, each character of the key after the first is
 * preceded by 64 zero-width spaces written as HTML references with leading zeros (68 bytes each):
 * a form the scanner reads (it drops up to 64 invisible characters and reads 64-digit references),
 * 4,353 bytes between characters, about 48 KB for 12 of them (within the 64 KiB a ranged read is widened by).
 */
export function s3EchoObject(key: string, at: number, tail: number, entity = false): Buffer {
  const zw = `&#x${"0".repeat(60)}200b;`;
  const spelt = entity ? [...key].map((c, i) => (i === 0 ? c : zw.repeat(64) + c)).join("") : key;
  return Buffer.from(".".repeat(at) + spelt + ".".repeat(tail), "latin1");
}

/** Where each key character sits in s3EchoObject(…, entity = true). */
export function entityOffsets(key: string, at: number): number[] {
  const gap = 64 * (3 + 60 + 4 + 1);
  return [...key].map((_, i) => at + i * (gap + 1));
}

// ---- gRPC-like framing ----

function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) out.push((n & 0x7f) | 0x80), (n >>>= 7);
  out.push(n);
  return Buffer.from(out);
}

/** EchoReply{message} (tests/helpers/grpc-echo.proto) as protobuf bytes. */
export function echoReply(message: string): Buffer {
  const m = Buffer.from(message);
  return Buffer.concat([Buffer.from([0x0a]), varint(m.length), m]);
}

/** One length-prefixed message: flag byte, 4-byte big-endian length, the bytes. */
export function lpm(flag: number, payload: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(payload.byteLength, 1);
  return Buffer.concat([head, Buffer.from(payload)]);
}

// ---- the raw HTTP/1.1 server ----

export interface RawRequest {
  method: string;
  path: string;
  url: URL;
  headers: [string, string][];
  get(name: string): string | undefined;
  all(name: string): string[];
  body: Buffer;
  port: number;
}

/** Sockets holding /live open: each /store pushes the stored Authorization to them as an SSE event. */
const live = new Set<TLSSocket>();

function chunk(data: string | Buffer): Buffer {
  const b = typeof data === "string" ? Buffer.from(data, "latin1") : data;
  return Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from("\r\n")]);
}

function head(status: string, fields: [string, string | number][]): string {
  return `HTTP/1.1 ${status}\r\n${fields.map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`;
}

/** Sockets whose request was HEAD: answers carry the length a GET would get, and no body. */
const heads = new WeakSet<TLSSocket>();

/** A whole answer with Content-Length, then the connection closes. */
function answer(s: TLSSocket, status: string, fields: [string, string | number][], body: Buffer | string = ""): void {
  const b = typeof body === "string" ? Buffer.from(body, "latin1") : body;
  const h = Buffer.from(head(status, [...fields, ["Content-Length", b.length], ["Connection", "close"]]), "latin1");
  s.end(heads.has(s) ? h : Buffer.concat([h, b]));
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

/** Resolves one single Range value against `size`: [first, last] pairs; undefined when not read. */
function ranges(value: string, size: number): [number, number][] | undefined {
  const m = /^\s*bytes\s*=\s*(.+)$/i.exec(value);
  if (!m) return undefined;
  const out: [number, number][] = [];
  for (const spec of m[1]!.split(",")) {
    const r = /^\s*(\d*)\s*-\s*(\d*)\s*$/.exec(spec);
    if (!r || (r[1] === "" && r[2] === "")) return undefined;
    const [a, b] = r[1] === "" ? [Math.max(0, size - Number(r[2])), size - 1] : [Number(r[1]), r[2] === "" ? size - 1 : Math.min(Number(r[2]), size - 1)];
    if (a <= b && a < size) out.push([a, b]);
  }
  return out;
}

const BOUNDARY = "attack3-boundary";

function multipart(body: Buffer, list: [number, number][]): Buffer {
  const parts = list.map(([a, b]) =>
    Buffer.concat([
      Buffer.from(`--${BOUNDARY}\r\nContent-Type: text/plain\r\nContent-Range: bytes ${a}-${b}/${body.length}\r\n\r\n`),
      body.subarray(a, b + 1),
      Buffer.from("\r\n"),
    ]),
  );
  return Buffer.concat([...parts, Buffer.from(`--${BOUNDARY}--\r\n`)]);
}

/** An honest ranged answer over `body` for whichever range header the upstream honours. */
function rangedAnswer(s: TLSSocket, body: Buffer, rangeValue: string | undefined, extra: [string, string][] = []): void {
  const list = rangeValue === undefined ? undefined : ranges(rangeValue, body.length);
  if (!list) return answer(s, "200 OK", [["Content-Type", "text/plain"], ["Accept-Ranges", "bytes"], ...extra], body);
  if (list.length === 0) return answer(s, "416 Range Not Satisfiable", [["Content-Range", `bytes */${body.length}`]]);
  if (list.length === 1) {
    const [a, b] = list[0]!;
    return answer(
      s,
      "206 Partial Content",
      [["Content-Type", "text/plain"], ["Content-Range", `bytes ${a}-${b}/${body.length}`], ...extra],
      body.subarray(a, b + 1),
    );
  }
  answer(s, "206 Partial Content", [["Content-Type", `multipart/byteranges; boundary=${BOUNDARY}`], ...extra], multipart(body, list));
}

/** The fake S3's echo object read with `mode`: how this upstream answers the (widened) Range it got. */
async function s3Echo(s: TLSSocket, req: RawRequest): Promise<void> {
  const key = accessKeyOf(req.get("authorization") ?? "");
  const at = Number(req.url.searchParams.get("at") ?? 300);
  const obj = s3EchoObject(key, at, 300, req.url.searchParams.get("mode") === "entity");
  const mode = req.url.searchParams.get("mode") ?? "honest";
  const range = req.get("range");
  const list = range === undefined ? undefined : ranges(range, obj.length);
  if (mode === "ignore" || !list || list.length !== 1) return answer(s, "200 OK", [["Content-Type", "application/octet-stream"]], obj);
  const [a, b] = list[0]!;
  const cr = (x: number, y: number, total = obj.length) => ["Content-Range", `bytes ${x}-${y}/${total}`] as [string, string];
  const ct: [string, string] = ["Content-Type", "application/octet-stream"];
  switch (mode) {
    case "narrow": {
      // Answers the agent's own range, 4 KiB in from each side of what was sent.
      const x = a === 0 ? a : a + 4096;
      const y = Math.max(x, Math.min(b - 4096, obj.length - 1));
      return answer(s, "206 Partial Content", [ct, cr(x, y)], obj.subarray(x, y + 1));
    }
    case "shift":
      // Claims the range asked for, sends the bytes 7 further on.
      return answer(s, "206 Partial Content", [ct, cr(a, b)], Buffer.concat([obj, Buffer.alloc(7, 0x2e)]).subarray(a + 7, b + 8));
    case "lie-total": {
      // Claims the object ends `cut` bytes after the key starts (inside it), honestly otherwise.
      const end = at + Number(req.url.searchParams.get("cut") ?? 10) - 1;
      return answer(s, "206 Partial Content", [ct, cr(a, end, end + 1)], obj.subarray(a, end + 1));
    }
    case "multipart":
      return answer(s, "206 Partial Content", [["Content-Type", `multipart/byteranges; boundary=${BOUNDARY}`]], multipart(obj, [[a, b]]));
    case "identity":
      return answer(s, "206 Partial Content", [ct, cr(a, b), ["Content-Encoding", "identity"]], obj.subarray(a, b + 1));
    case "chunked": {
      // Transfer-Encoding: chunked, a chunk every 7 bytes (the key split across many).
      const piece = obj.subarray(a, b + 1);
      const out: Buffer[] = [Buffer.from(head("206 Partial Content", [ct, cr(a, b), ["Transfer-Encoding", "chunked"], ["Connection", "close"]]))];
      for (let i = 0; i < piece.length; i += 7) out.push(chunk(piece.subarray(i, i + 7)));
      out.push(Buffer.from("0\r\n\r\n"));
      return void s.end(Buffer.concat(out));
    }
    case "long": {
      // The body runs on past its Content-Range with the key again.
      const body = Buffer.concat([obj.subarray(a, b + 1), Buffer.from(`tail ${key} tail`)]);
      s.write(head("206 Partial Content", [ct, cr(a, b), ["Transfer-Encoding", "chunked"], ["Connection", "close"]]));
      return void s.end(Buffer.concat([chunk(body), Buffer.from("0\r\n\r\n")]));
    }
    case "short": {
      // Chunked, and ends cleanly after 11 characters of the key (the Content-Range promised more).
      const stop = at + 11;
      s.write(head("206 Partial Content", [ct, cr(a, b), ["Transfer-Encoding", "chunked"], ["Connection", "close"]]));
      s.write(chunk(obj.subarray(a, stop)));
      await Bun.sleep(100);
      return void s.end("0\r\n\r\n");
    }
    case "short-cl": {
      // Content-Length as promised, but the connection closes after 11 characters of the key.
      const stop = at + 11;
      s.write(head("206 Partial Content", [ct, cr(a, b), ["Content-Length", String(b - a + 1)], ["Connection", "close"]]));
      s.write(obj.subarray(a, stop));
      await Bun.sleep(100);
      return void s.end();
    }
    default:
      return rangedAnswer(s, obj, range);
  }
}

async function rawRoute(s: TLSSocket, req: RawRequest): Promise<void> {
  const auth = req.get("authorization") ?? "";
  const slot = req.url.searchParams.get("slot") ?? "default";
  const p = req.url.pathname;
  if (p === "/store") {
    slots.set(slot, auth);
    for (const l of live) l.write(chunk(`data: stored ${auth}\n\n`));
    return answer(s, "200 OK", [["Content-Type", "application/json"]], '{"stored":true}');
  }
  if (p === "/token") {
    // Kept per Host the broker addressed: token@<host:port> (its Authorization), token-body@<host:port>.
    const host = req.get("host") ?? "";
    slots.set(`token@${host}`, auth);
    slots.set(`token-body@${host}`, req.body.toString("latin1"));
    const token = `at-${crypto.randomUUID()}`;
    issued.push(token);
    return answer(s, "200 OK", [["Content-Type", "application/json"]], JSON.stringify({ access_token: token, token_type: "Bearer", expires_in: 3600 }));
  }
  if (p === "/replay") {
    const value = slots.get(slot) ?? "";
    switch (req.url.searchParams.get("how") ?? "json") {
      case "json":
        return answer(
          s,
          "200 OK",
          [
            ["Content-Type", "application/json"],
            ["X-Previous", value],
          ],
          JSON.stringify({ previous: value }),
        );
      case "early":
        // 103 Early Hints whose Link carries the value, then the answer.
        s.write(head("103 Early Hints", [["Link", `<https://elsewhere.test/p?auth=${encodeURIComponent(value)}>; rel=preload`]]));
        return answer(s, "200 OK", [["Content-Type", "text/plain"]], "ok");
      case "reason":
        return answer(s, `200 OK ${value}`, [["Content-Type", "text/plain"]], "ok");
      case "location":
        return answer(s, "302 Found", [["Location", `https://elsewhere.test/cb?auth=${encodeURIComponent(value)}`]]);
      case "sse": {
        // One event, its value split over two chunks written apart.
        s.write(
          head("200 OK", [
            ["Content-Type", "text/event-stream"],
            ["Transfer-Encoding", "chunked"],
            ["Connection", "close"],
          ]),
        );
        s.write(chunk(`data: previous ${value.slice(0, 17)}`));
        await Bun.sleep(150);
        s.write(chunk(`${value.slice(17)}\n\n`));
        return void s.end("0\r\n\r\n");
      }
      case "ws": {
        const key = req.get("sec-websocket-key") ?? "";
        s.write(
          head("101 Switching Protocols", [
            ["Upgrade", "websocket"],
            ["Connection", "Upgrade"],
            ["Sec-WebSocket-Accept", wsAccept(key)],
            ["X-Previous", value],
          ]),
        );
        s.write(wsFrame(1, `previous ${value.slice(0, 20)}`));
        await Bun.sleep(100);
        s.write(wsFrame(1, `previous ${value}`));
        s.write(wsFrame(8, Buffer.concat([Buffer.from([0x03, 0xe8]), Buffer.from("bye")])));
        return void s.end();
      }
    }
  }
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
  if (p === "/file") {
    // Honours Range, the pre-standard Request-Range and Azure's x-ms-range, as servers do.
    const r = req.get("range") ?? req.get("request-range") ?? req.get("x-ms-range");
    return rangedAnswer(s, fileBody(auth), r);
  }
  if (p === "/s3/object.bin") return rangedAnswer(s, OBJECT, req.get("range"), [["ETag", '"object-etag"']]);
  if (p === "/s3/part") {
    // S3 GetObject/HeadObject with partNumber: 206 and the part's Content-Range, no Range asked.
    const last = PART_BYTES - 1;
    const fields: [string, string | number][] = [
      ["Content-Type", "application/octet-stream"],
      ["Content-Range", `bytes 0-${last}/${OBJECT_BYTES}`],
      ["x-amz-mp-parts-count", 3],
      ["ETag", '"object-etag-3"'],
    ];
    return answer(s, "206 Partial Content", fields, OBJECT.subarray(0, PART_BYTES));
  }
  if (p === "/s3/echo") return s3Echo(s, req);
  if (p === "/postgrest") {
    // PostgREST (and Supabase's REST API) put Content-Range on every read, 200 included.
    const rows = JSON.stringify([
      { id: 1, name: "one" },
      { id: 2, name: "two" },
    ]);
    return answer(
      s,
      "200 OK",
      [
        ["Content-Type", "application/json; charset=utf-8"],
        ["Range-Unit", "items"],
        ["Content-Range", "0-1/*"],
      ],
      rows,
    );
  }
  if (p === "/grpc-h1") {
    const body = polyglotBody(`you sent ${auth}`);
    const ct: [string, string] = ["Content-Type", "application/grpc"];
    switch (req.url.searchParams.get("answer")) {
      case "connection-hides":
        return answer(s, "200 OK", [ct, ["Content-Encoding", "deflate"], ["Connection", "content-encoding"]], body);
      case "split-lines":
        return answer(s, "200 OK", [ct, ["Content-Encoding", "identity"], ["Content-Encoding", "deflate"]], body);
    }
  }
  if (p === "/plain") {
    const kind = req.url.searchParams.get("kind");
    return answer(s, "200 OK", [["Content-Type", kind === "binary" ? "application/octet-stream" : "text/plain; charset=utf-8"]], plainBody(kind ?? ""));
  }
  answer(s, "404 Not Found", []);
}

/** Bodies that must come through byte for byte when nothing is echoed. */
export function plainBody(kind: string): Buffer {
  if (kind === "binary") return Buffer.from(Array.from({ length: 150_000 }, (_, i) => (i * 131 + (i >> 9)) & 255));
  // Text full of what the scanner decodes (escapes, entities, invisible characters), none spelling a value.
  const line = `%41%zz &amp; &#65; &#x41 \\u0041 \\x41 \\"q\\" a\u00adb c\u200bd Tr\u00e8s bien ${"0123456789abcdef".repeat(3)}\n`;
  return Buffer.from(line.repeat(2000), "utf8");
}

function parseHead(text: string, port: number): Omit<RawRequest, "body"> {
  const [line, ...lines] = text.split("\r\n");
  const [method = "", path = "/"] = line!.split(" ");
  const headers: [string, string][] = lines.map((l) => [l.slice(0, l.indexOf(":")).trim().toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]);
  return {
    method,
    path,
    url: new URL(path, "https://raw.test"),
    headers,
    get: (n) => headers.find(([k]) => k === n)?.[1],
    all: (n) => headers.filter(([k]) => k === n).map(([, v]) => v),
    port,
  };
}

export interface RawUpstream {
  readonly ports: number[];
  close(): Promise<void>;
}

/** The raw HTTP/1.1 bin on `count` ports (one request per connection: every answer says close). */
export async function startRawUpstream(pki: TestPki, count = 2): Promise<RawUpstream> {
  const servers: Server[] = [];
  const ports: number[] = [];
  for (let i = 0; i < count; i++) {
    let port = 0;
    const server = createTlsServer({ cert: pki.certPem, key: pki.keyPem, ALPNProtocols: ["http/1.1"] }, (s) => {
      s.on("error", () => {});
      let buf = Buffer.alloc(0);
      let done = false;
      s.on("data", (d: Buffer) => {
        if (done) return;
        buf = Buffer.concat([buf, d]);
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const h = parseHead(buf.subarray(0, end).toString("latin1"), port);
        const rest = buf.subarray(end + 4);
        const length = Number(h.get("content-length") ?? 0);
        let body: Buffer;
        if (/chunked/i.test(h.get("transfer-encoding") ?? "")) {
          const t = rest.indexOf("0\r\n\r\n");
          if (t < 0) return;
          body = Buffer.alloc(0); // no route reads a chunked body
        } else {
          if (rest.length < length) return;
          body = rest.subarray(0, length);
        }
        done = true;
        if (h.method === "HEAD") heads.add(s);
        received.push({ method: h.method, path: h.path, headers: h.headers, protocol: "http/1.1", port });
        void rawRoute(s, { ...h, body }).catch(() => s.destroy());
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
    servers.push(server);
    ports.push(port);
  }
  return {
    ports,
    async close() {
      for (const l of live) l.destroy();
      await Promise.all(servers.map((sv) => new Promise<void>((resolve) => sv.close(() => resolve()))));
    },
  };
}

// ---- the HTTP/2-only server ----

const b64 = (bytes: Uint8Array | string) => Buffer.from(bytes).toString("base64");

function h2Route(stream: ServerHttp2Stream, h: IncomingHttpHeaders): void {
  const url = new URL(String(h[":path"] ?? "/"), "https://h2.test");
  const auth = String(h.authorization ?? "");
  const slot = url.searchParams.get("slot") ?? "default";
  const trailing = (fields: Record<string, string | number | string[]>, body: Buffer, trailers: Record<string, string | string[]>) => {
    stream.respond({ ":status": 200, ...fields }, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers(trailers));
    stream.end(body);
  };
  const grpc = { "content-type": "application/grpc" };
  const p = url.pathname;
  if (p === "/store") {
    slots.set(slot, auth);
    stream.respond({ ":status": 200, "content-type": "application/json" });
    return void stream.end('{"stored":true}');
  }
  if (p === "/replay") {
    const value = slots.get(slot) ?? "";
    return trailing({ "content-type": "application/json" }, Buffer.from(JSON.stringify({ ok: true })), { "x-previous": value });
  }
  if (p === "/grpc-replay") {
    const value = slots.get(slot) ?? "";
    const reply = echoReply(`previous ${value}`);
    if (url.searchParams.get("enc") === "gzip") return trailing({ ...grpc, "grpc-encoding": "gzip" }, lpm(1, gzipSync(reply)), { "grpc-status": "0" });
    return trailing(grpc, lpm(0, reply), { "grpc-status": "0" });
  }
  if (p === "/file") {
    const body = fileBody(auth);
    const list = h.range === undefined ? undefined : ranges(String(h.range), body.length);
    if (list?.length === 1) {
      const [a, b] = list[0]!;
      stream.respond({ ":status": 206, "content-type": "text/plain", "content-range": `bytes ${a}-${b}/${body.length}` });
      return void stream.end(body.subarray(a, b + 1));
    }
    stream.respond({ ":status": 200, "content-type": "text/plain", "accept-ranges": "bytes" });
    return void stream.end(body);
  }
  if (p === "/hostile206") {
    // A piece of the echo nobody asked for, as 206.
    const body = fileBody(auth);
    stream.respond({ ":status": 206, "content-type": "text/plain", "content-range": `bytes 81-100/${body.length}` });
    return void stream.end(body.subarray(81, 101));
  }
  if (p === "/s3/object.bin") {
    const list = h.range === undefined ? undefined : ranges(String(h.range), OBJECT.length);
    if (list?.length === 1) {
      const [a, b] = list[0]!;
      stream.respond({ ":status": 206, "content-type": "application/octet-stream", "content-range": `bytes ${a}-${b}/${OBJECT.length}` });
      return void stream.end(OBJECT.subarray(a, b + 1));
    }
    stream.respond({ ":status": 200, "content-type": "application/octet-stream" });
    return void stream.end(OBJECT);
  }
  if (p === "/bin-variants") {
    const value = Buffer.from(auth);
    const pieces = (n: number) => Array.from({ length: Math.ceil(value.length / n) }, (_, i) => value.subarray(i * n, i * n + n));
    switch (String(h["x-answer"] ?? "")) {
      case "whitespace": {
        const t = b64(value);
        return trailing({ ...grpc, "x-echo-bin": `${t.slice(0, 12)} ${t.slice(12)}` }, lpm(0, Buffer.alloc(0)), { "grpc-status": "0" });
      }
      case "bad-padding":
        return trailing({ ...grpc, "x-echo-bin": `${b64(value).replace(/=+$/, "")}===` }, lpm(0, Buffer.alloc(0)), { "grpc-status": "0" });
      case "urlsafe": {
        // base64url, with a "-" or "_" forced in front so the text is not standard base64.
        return trailing({ ...grpc, "x-echo-bin": `-_${Buffer.from(value).toString("base64url")}` }, lpm(0, Buffer.alloc(0)), { "grpc-status": "0" });
      }
      case "lines":
        // The value in 8-byte pieces (10 base64 characters each, fewer than any 12-character window), one -bin field line each (grpc-js hands the caller each piece).
        return trailing({ ...grpc, "x-split-bin": pieces(8).map(b64) }, lpm(0, Buffer.alloc(0)), { "grpc-status": "0" });
      case "commas":
        return trailing({ ...grpc, "x-split-bin": pieces(8).map(b64).join(",") }, lpm(0, Buffer.alloc(0)), { "grpc-status": "0" });
      case "head-trailer": {
        const ps = pieces(8).map(b64);
        const half = Math.ceil(ps.length / 2);
        return trailing({ ...grpc, "x-split-bin": ps.slice(0, half).join(",") }, lpm(0, Buffer.alloc(0)), {
          "grpc-status": "0",
          "x-split-bin": ps.slice(half).join(","),
        });
      }
      case "long": {
        const junk = Buffer.alloc(6 * 1024, 0x2a);
        return trailing({ ...grpc, "x-long-bin": b64(Buffer.concat([junk, value, junk])) }, lpm(0, Buffer.alloc(0)), {
          "grpc-status": "0",
          "x-long-bin": b64(Buffer.concat([junk, value])),
        });
      }
    }
  }
  if (p === "/echo.v1.Echo/Unary") {
    const reply = echoReply(`you sent ${auth}`);
    switch (String(h["x-answer"] ?? "")) {
      case "normal":
        return trailing(grpc, lpm(0, echoReply("hello from upstream")), { "grpc-status": "0" });
      case "gzip":
        return trailing({ ...grpc, "grpc-encoding": "gzip" }, lpm(1, gzipSync(reply)), { "grpc-status": "0" });
      case "flag-identity":
        return trailing(grpc, lpm(1, gzipSync(reply)), { "grpc-status": "0" });
      case "no-grpc-content-type":
        // grpc-js reads any content type; the message is compressed by grpc-encoding.
        return trailing({ "content-type": "text/plain", "grpc-encoding": "gzip" }, lpm(1, gzipSync(reply)), { "grpc-status": "0" });
      case "grpcx-content-type":
        return trailing({ "content-type": "application/grpcx", "grpc-encoding": "gzip" }, lpm(1, gzipSync(reply)), { "grpc-status": "0" });
    }
  }
  if (p === "/grpc-web") {
    // gRPC-Web: the same framing, compressed messages by grpc-encoding, trailers as a 0x80 frame.
    const msg = lpm(1, gzipSync(Buffer.from(`you sent ${auth}`)));
    const tr = lpm(0x80, Buffer.from("grpc-status: 0\r\n"));
    stream.respond({ ":status": 200, "content-type": "application/grpc-web+proto", "grpc-encoding": "gzip" });
    return void stream.end(Buffer.concat([msg, tr]));
  }
  if (p === "/connect") {
    // Connect streaming: envelopes, flag 1 compressed by Connect-Content-Encoding, end-stream flag 2.
    const msg = lpm(1, gzipSync(Buffer.from(JSON.stringify({ echoed: auth }))));
    const end = lpm(2, Buffer.from("{}"));
    stream.respond({ ":status": 200, "content-type": "application/connect+json", "connect-content-encoding": "gzip" });
    return void stream.end(Buffer.concat([msg, end]));
  }
  stream.respond({ ":status": 404 });
  stream.end();
}

export interface H2Bin {
  readonly port: number;
  close(): Promise<void>;
}

export async function startH2Bin(pki: TestPki): Promise<H2Bin> {
  let port = 0;
  const server = createSecureServer({ cert: pki.certPem, key: pki.keyPem }).on("stream", (stream: ServerHttp2Stream, h: IncomingHttpHeaders) => {
    stream.on("error", () => {});
    const headers: [string, string][] = Object.entries(h)
      .filter(([k]) => !k.startsWith(":"))
      .flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x] as [string, string]) : [[k, String(v)] as [string, string]]));
    received.push({ method: String(h[":method"]), path: String(h[":path"]), headers, protocol: "h2", port });
    stream.resume();
    stream.on("end", () => h2Route(stream, h));
  });
  server.on("session", (s) => s.on("error", () => {}));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

// ---- the agent's side ----

function base64Core(bytes: Buffer, offset: number): string {
  const padded = Buffer.concat([Buffer.alloc(offset), bytes]);
  const text = padded.toString("base64");
  return text.slice(Math.ceil((offset * 8) / 6), Math.floor(((offset + bytes.length) * 8) / 6));
}

/**
 * Names (never the text) of each run of `run` consecutive characters of `value` found in `text`:
 * raw (ASCII case ignored), and the runs of its base64, base64url (each alignment) and hex forms that
 * stand for `run` bytes of it. Empty: nothing of the value is there.
 */
export function runsOf(value: string, text: string, run = 12): string[] {
  const found = new Set<string>();
  const lower = text.toLowerCase();
  for (let i = 0; i + run <= value.length; i++) if (lower.includes(value.slice(i, i + run).toLowerCase())) found.add(`raw[${i}..${i + run})`);
  const bytes = Buffer.from(value);
  const width = Math.ceil((run * 8) / 6) + 1;
  for (let offset = 0; offset < 3; offset++) {
    const core = base64Core(bytes, offset);
    for (const [name, form] of [
      ["base64", core],
      ["base64url", core.replaceAll("+", "-").replaceAll("/", "_")],
    ] as const) {
      for (let i = 0; i + width <= form.length; i++) if (text.includes(form.slice(i, i + width))) found.add(`${name}@${offset}[${i}..${i + width})`);
    }
  }
  const hex = bytes.toString("hex");
  for (let i = 0; i + 2 * run <= hex.length; i += 2) if (lower.includes(hex.slice(i, i + 2 * run))) found.add(`hex[${i / 2}..${i / 2 + run})`);
  return [...found];
}
