// A hostile upstream for the no-reveal tests: it echoes the Authorization it received in a
// response header and in the body, in any Content-Encoding (stacked too), whole or streamed in
// small pieces, and tries to forge X-Broker-Error and set a cookie. Plus the client-side decoding
// the tests use to read exactly what an agent would.

import type { IncomingMessage, ServerResponse } from "node:http";
import zlib from "node:zlib";

export const CODINGS = ["identity", "gzip", "x-gzip", "deflate", "deflate-raw", "br", "zstd", "gzip, br", "deflate, zstd"] as const;
export type CodingCase = (typeof CODINGS)[number];

/** Random, poorly compressible filler so large bodies stay large once compressed. */
export function filler(bytes: number): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(Math.ceil((bytes * 3) / 4))))
    .toString("base64")
    .slice(0, bytes);
}

const FILLER_A = filler(300);
const FILLER_B = filler(100_000);

/** The plain body the upstream sends for an echoed header value (what the agent must read, redacted). */
export function echoBody(echoed: string, size: "small" | "large"): string {
  return size === "small" ? `{"you_sent":"${echoed}","n":1}` : `${FILLER_A}|${echoed}|${FILLER_B}|${echoed}|${FILLER_A}`;
}

function wireName(c: CodingCase): string {
  return c === "deflate-raw" ? "deflate" : c;
}

function encodeOne(name: string, bytes: Buffer, raw: boolean): Buffer {
  switch (name) {
    case "gzip":
    case "x-gzip":
      return zlib.gzipSync(bytes);
    case "deflate":
      return raw ? zlib.deflateRawSync(bytes) : zlib.deflateSync(bytes);
    case "br":
      return zlib.brotliCompressSync(bytes);
    case "zstd":
      return zlib.zstdCompressSync(bytes);
    default:
      return bytes;
  }
}

function decodeOne(name: string, bytes: Buffer): Buffer {
  switch (name) {
    case "gzip":
    case "x-gzip":
      return zlib.gunzipSync(bytes);
    case "deflate":
      return bytes[0] === 0x78 ? zlib.inflateSync(bytes) : zlib.inflateRawSync(bytes);
    case "br":
      return zlib.brotliDecompressSync(bytes);
    case "zstd":
      return zlib.zstdDecompressSync(bytes);
    default:
      return bytes;
  }
}

export function encodeAs(c: CodingCase, plain: Buffer): Buffer {
  return wireName(c)
    .split(",")
    .map((s) => s.trim())
    .reduce((b, name) => encodeOne(name, b, c === "deflate-raw"), plain);
}

/** Decodes a body as the agent received it, by its Content-Encoding header (applied order, decoded in reverse). */
export function decodeAs(contentEncoding: string | null, bytes: Buffer): Buffer {
  const names = (contentEncoding ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s && s !== "identity");
  return names.reduceRight((b, name) => decodeOne(name, b), bytes);
}

let release: (() => void) | undefined;

/**
 * GET /echo?enc=<coding>&size=small|large: the Authorization echoed in `x-echo` and the body.
 * Small bodies carry Content-Length; large ones are chunked and written in pieces of a few bytes
 * around each echo, so the value is split across upstream chunks. /sse?enc=gzip sends one event,
 * then waits for GET /release before the second. /raw?enc=<anything>&body=<text> sends the body
 * unencoded under whatever Content-Encoding it is told (unknown or corrupt encodings). /reason
 * echoes it in the status line's reason phrase. /trick?kind=… tries to get it past the scan (TRICKS).
 */
export function echoHandler(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? "/", "https://upstream.test");
  const auth = String(req.headers.authorization ?? "");
  const enc = (url.searchParams.get("enc") ?? "identity") as CodingCase;
  res.setHeader("x-echo", `you sent ${auth}`);
  res.setHeader("x-broker-error", "forged_by_upstream");
  res.setHeader("set-cookie", ["sid=abc123; Path=/; HttpOnly", "theme=dark; Expires=Wed, 21 Oct 2026 07:28:00 GMT"]);
  if (enc !== "identity") res.setHeader("content-encoding", wireName(enc));
  if (url.pathname === "/release") {
    release?.();
    return void res.end("released");
  }
  if (url.pathname === "/reason") {
    res.statusCode = 418;
    res.statusMessage = `Echo ${auth}`;
    return void res.end("teapot");
  }
  if (url.pathname === "/trick") return trick(url.searchParams.get("kind") ?? "", auth, res);
  if (url.pathname === "/raw") {
    res.setHeader("content-encoding", url.searchParams.get("enc") ?? "");
    return void res.end(url.searchParams.get("body") ?? "");
  }
  if (url.pathname === "/sse") return streamEvents(res, auth, enc);
  const size = url.searchParams.get("size") === "large" ? "large" : "small";
  const wire = encodeAs(enc, Buffer.from(echoBody(auth, size)));
  if (size === "small") {
    res.setHeader("content-length", wire.byteLength);
    return void res.end(wire);
  }
  void writeInPieces(res, wire);
}

async function writeInPieces(res: ServerResponse, wire: Buffer): Promise<void> {
  // Tiny pieces at the start and the end (where the plain echo sits for identity), large ones between.
  let at = 0;
  while (at < wire.byteLength) {
    const edge = at < 1200 || at > wire.byteLength - 1200;
    const n = edge ? 7 : 16 * 1024;
    res.write(wire.subarray(at, at + n));
    at += n;
    if (edge && at % 49 === 0) await Bun.sleep(1); // let some pieces leave as separate TLS records
  }
  res.end();
}

function streamEvents(res: ServerResponse, auth: string, enc: CodingCase): void {
  res.setHeader("content-type", "text/event-stream");
  res.setHeader("content-encoding", "gzip");
  void enc;
  const gz = zlib.createGzip();
  gz.on("data", (d: Buffer) => res.write(d));
  gz.on("end", () => res.end());
  gz.write(`data: first ${auth}\n\n`);
  gz.flush(zlib.constants.Z_SYNC_FLUSH);
  release = () => {
    release = undefined;
    gz.write(`data: second ${auth}\n\n`);
    gz.end();
  };
}

/** Ways an upstream may hope to slip the echo past a scanner that only reads decoded bodies and header values. */
export const TRICKS = ["connection-hides-encoding", "encoding-split-across-lines", "gzip-file-name", "zstd-trailing-bytes", "header-name"] as const;

function trick(kind: string, auth: string, res: ServerResponse): void {
  const token = auth.replace(/^Bearer /, "");
  const body = Buffer.from(`{"ok":true,"echo":"${auth}"}`);
  let wire: Buffer;
  switch (kind) {
    case "connection-hides-encoding": // a scanner reading the cleaned headers would see no encoding at all
      res.setHeader("connection", "keep-alive, content-encoding");
      res.setHeader("content-encoding", "gzip");
      wire = zlib.gzipSync(body);
      break;
    case "encoding-split-across-lines": // a scanner reading only the first Content-Encoding line would see "identity"
      res.setHeader("content-encoding", ["identity", "gzip"]);
      wire = zlib.gzipSync(body);
      break;
    case "gzip-file-name": {
      // The gzip header's FNAME field: skipped by decoders, kept by a pass-through of the original bytes.
      const gz = zlib.gzipSync(Buffer.from('{"ok":true}'));
      gz[3] = gz[3]! | 0x08;
      wire = Buffer.concat([gz.subarray(0, 10), Buffer.from(`${token}\0`, "latin1"), gz.subarray(10)]);
      res.setHeader("content-encoding", "gzip");
      break;
    }
    case "zstd-trailing-bytes":
      wire = Buffer.concat([zlib.zstdCompressSync(Buffer.from('{"ok":true}')), Buffer.from(token)]);
      res.setHeader("content-encoding", "zstd");
      break;
    case "header-name":
      res.setHeader(`x-${token}`, "1");
      wire = Buffer.from('{"ok":true}');
      break;
    default:
      res.statusCode = 404;
      wire = Buffer.from("unknown trick");
  }
  res.setHeader("content-length", wire.byteLength);
  res.end(wire);
}

/** What an agent reads: the headers, the raw body bytes and the body decoded by its Content-Encoding. */
export async function readAsAgent(res: Response): Promise<{ headers: string; raw: string; plain: string }> {
  const bytes = Buffer.from(await res.arrayBuffer());
  return {
    headers: [...res.headers].join("\n"),
    raw: bytes.toString("latin1"),
    plain: decodeAs(res.headers.get("content-encoding"), bytes).toString("latin1"),
  };
}

/** Reads /sse to its first event, then asks the upstream (`release`) for the second, then reads to the end. */
export async function readEventsAcrossRelease(res: Response, release: () => Promise<Response>): Promise<{ first: string; all: string }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("\n\n")) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const first = text;
  if ((await release()).status !== 200) throw new Error("the upstream did not release the second event");
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return { first, all: text };
}
