// gRPC response bodies on an injected call, and the two framings built on it: gRPC-Web and Connect
// streaming. Each body is a run of length-prefixed messages (one flag byte, a 4-byte big-endian
// length, the message), and a message may be compressed on its own (flag bit 0, in the codec the
// response names: `grpc-encoding`, or `connect-content-encoding` for Connect). A byte-level scan
// would miss an echo inside a compressed message, and a redaction that changes a message's length
// would break the framing the agent's client parses. So each message is read whole, decoded when
// compressed, redacted, and sent on uncompressed with its new length (the flag says so per message,
// which every client accepts). gRPC-Web's trailer frame (flag bit 7) holds the trailers as HTTP/1
// header text, scanned as such (its `-bin` fields decoded); Connect's end-of-stream message (flag
// bit 1) is JSON, scanned like any message. An encoding the broker cannot decode, or a flag bit the
// framing does not define, fails closed, like an unknown Content-Encoding.
//
// Two refusals keep those codecs from hiding an echo elsewhere: a Content-Encoding over a whole
// gRPC body (refuseGrpcContentCoding), and a per-message codec on an answer that is not read as
// messages (refuseUnscannedMessageCoding: a client decodes its messages whatever the Content-Type).

import { inflateSync, gunzipSync } from "node:zlib";
import { PayloadTooLarge, UndecodableResponse } from "../errors.ts";
import { headerOf, joinedHeader } from "./answer.ts";
import { redactBinaryTrailers, type BinaryPart } from "./binary-metadata.ts";
import type { HeaderList } from "../http/index.ts";
import { compileNeedles, redactWhole, type Needles, type NeedleSet } from "./redact.ts";
import { transformBody, type BodyDone } from "./scan-body.ts";

/** The largest message the broker decodes and scans (gRPC's own default limit is 4 MiB). */
export const MAX_GRPC_MESSAGE_BYTES = 64 << 20;

/** How a body is cut into messages: gRPC (HTTP/2), gRPC-Web, Connect streaming. */
export type Framing = "grpc" | "grpc-web" | "connect";

/** Flag bits a framing defines besides compression (bit 0): gRPC-Web's trailer frame, Connect's end of stream. */
const MARK_BITS: Record<Framing, number> = { grpc: 0, "grpc-web": 0x80, connect: 0x02 };
/** The header naming the codec of compressed messages. */
const CODEC_HEADER: Record<Framing, string> = { grpc: "grpc-encoding", "grpc-web": "grpc-encoding", connect: "connect-content-encoding" };
/** Headers naming a per-message codec: only the message scanner undoes them. */
const MESSAGE_CODEC_HEADERS = new Set(["grpc-encoding", "connect-content-encoding"]);

/** `application/grpc`, `application/grpc+proto`, `application/grpc; …`: the one test, on both sides. */
export function isGrpcContentType(value: string | string[] | undefined): boolean {
  return typeof value === "string" && /^application\/grpc(?:[+;]|$)/i.test(value);
}

export function isGrpcResponse(headers: HeaderList): boolean {
  return isGrpcContentType(headerOf(headers, "content-type"));
}

/** The framing a Content-Type names: gRPC, gRPC-Web (binary; `-text` is base64 and not read here), Connect streaming. */
export function framingOf(contentType: string | undefined): Framing | undefined {
  const type = (contentType ?? "").trim();
  if (isGrpcContentType(type)) return "grpc";
  if (/^application\/grpc-web(?:[+;]|$)/i.test(type)) return "grpc-web";
  if (/^application\/connect\+/i.test(type)) return "connect";
  return undefined;
}

/**
 * The framing a scanned answer's body is read in, or undefined for the ordinary scan. gRPC always
 * (a Content-Encoding on it is refused, below); gRPC-Web and Connect only without a Content-Encoding
 * (an HTTP proxy may compress them: the ordinary scan decodes that, and a per-message codec under it
 * is refused by refuseUnscannedMessageCoding).
 */
export function messageFraming(headers: HeaderList): Framing | undefined {
  const framing = framingOf(headerOf(headers, "content-type"));
  return framing === "grpc" || !hasCoding(joinedHeader(headers, "content-encoding")) ? framing : undefined;
}

/** Whether a coding list names anything but identity. */
function hasCoding(value: string | null): boolean {
  return value !== null && !value.split(",").every((c) => /^\s*(identity)?\s*$/i.test(c));
}

/**
 * gRPC compresses message by message (grpc-encoding, decoded below), never the body as a whole. A
 * Content-Encoding on a gRPC response would be undone by an HTTP client reading the body (curl
 * --compressed) but not by the message scan, so a body that is both a valid frame and, say, a
 * raw-deflate stream would carry an echo past it. Anything but identity is refused, as an
 * undecodable body is (the message quotes no upstream text).
 */
export function refuseGrpcContentCoding(headers: HeaderList): void {
  if (!hasCoding(joinedHeader(headers, "content-encoding"))) return;
  throw new UndecodableResponse(
    "the upstream sent a gRPC response with a Content-Encoding (gRPC compresses each message with grpc-encoding instead), which the broker refuses rather than pass on unscanned",
  );
}

/**
 * A scanned answer that is not read as messages (its Content-Type names no framing, or lies:
 * grpc-js decodes messages whatever the Content-Type says) must not carry a per-message codec: its
 * compressed messages would pass the byte scan unread and be inflated by the agent's client. Any
 * `grpc-encoding` or `connect-content-encoding` line (any case) other than identity is refused.
 */
export function refuseUnscannedMessageCoding(headers: HeaderList): void {
  const codecs = headers.filter(([k]) => MESSAGE_CODEC_HEADERS.has(k.toLowerCase())).map(([, v]) => v);
  if (!codecs.length || !hasCoding(codecs.join(","))) return;
  throw new UndecodableResponse(
    "the upstream compressed its messages (grpc-encoding or connect-content-encoding) in a response the broker does not read as gRPC, gRPC-Web or Connect messages, which it refuses rather than pass on unscanned",
  );
}

export interface MessageOptions {
  /** gRPC unless said otherwise. */
  readonly framing?: Framing;
  /** `-bin` fields of the response head, scanned joined with a gRPC-Web trailer frame's. */
  readonly head?: readonly BinaryPart[];
}

/** Message by message: push() returns the messages completed so far, redacted and re-framed. */
export function createGrpcRedactor(needles: NeedleSet, encoding: string | undefined, opts: MessageOptions = {}) {
  const compiled = compileNeedles(needles);
  const decode = decoderFor(encoding);
  const framing = opts.framing ?? "grpc";
  const known = 0x01 | MARK_BITS[framing];
  let head: Uint8Array = new Uint8Array(0);
  let pieces: Uint8Array[] = [];
  let have = 0;
  let need = -1; // the current message's length, once its 5-byte prefix is complete
  let flag = 0;

  const finish = (message: Uint8Array): Uint8Array => {
    let plain = message;
    if (flag & 0x01) {
      if (!decode) throw new UndecodableResponse(`the upstream compressed a ${framing} message with a codec the broker cannot decode to scan`);
      plain = decode(message);
    }
    const out = framing === "grpc-web" && flag & 0x80 ? redactTrailerFrame(plain, compiled, opts.head ?? []) : redactWhole(plain, compiled);
    const framed = new Uint8Array(5 + out.byteLength);
    framed[0] = flag & ~0x01; // sent uncompressed, its other bits kept
    new DataView(framed.buffer).setUint32(1, out.byteLength);
    framed.set(out, 5);
    return framed;
  };

  return {
    push(chunk: Uint8Array): Uint8Array[] {
      const done: Uint8Array[] = [];
      let at = 0;
      while (at < chunk.byteLength) {
        if (need < 0) {
          const take = Math.min(5 - head.byteLength, chunk.byteLength - at);
          head = concat([head, chunk.subarray(at, at + take)]);
          at += take;
          if (head.byteLength < 5) break;
          if (head[0]! & ~known) throw new UndecodableResponse("the upstream sent a gRPC message with an unknown flag");
          flag = head[0]!;
          need = new DataView(head.buffer, head.byteOffset).getUint32(1);
          if (need > MAX_GRPC_MESSAGE_BYTES) throw new PayloadTooLarge(`a gRPC message exceeded the ${MAX_GRPC_MESSAGE_BYTES} bytes the broker scans`);
          head = new Uint8Array(0);
        }
        const take = Math.min(need - have, chunk.byteLength - at);
        if (take > 0) pieces.push(chunk.subarray(at, at + take));
        have += take;
        at += take;
        if (have === need) {
          done.push(finish(concat(pieces)));
          pieces = [];
          have = 0;
          need = -1;
        }
      }
      return done;
    },
    end(): void {
      if (need >= 0 || head.byteLength) throw new UndecodableResponse("the upstream's gRPC body ended inside a message");
    },
  };
}

/**
 * A gRPC-Web trailer frame: header lines ("grpc-status: 0\r\n…") a client reads as trailers. Scanned
 * as text, then, when it holds `-bin` fields, as trailer fields (binary-metadata.ts: decoded, joined
 * with the head's; one that does not decode is dropped and the status made INTERNAL).
 */
function redactTrailerFrame(bytes: Uint8Array, needles: Needles, head: readonly BinaryPart[]): Uint8Array {
  const text = redactWhole(bytes, needles);
  const lines = Buffer.from(text)
    .toString("latin1")
    .split(/\r?\n/)
    .filter((l) => l.trim() !== "");
  const fields: HeaderList = [];
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon <= 0) return text; // not header text: scanned as text only
    fields.push([line.slice(0, colon).trim(), line.slice(colon + 1).trim()]);
  }
  const scanned = redactBinaryTrailers(fields, needles, true, head);
  if (scanned === fields || (scanned.length === fields.length && scanned.every(([k, v], i) => k === fields[i]![0] && v === fields[i]![1]))) return text;
  return Buffer.from(scanned.map(([k, v]) => `${k}: ${v}\r\n`).join(""), "latin1");
}

function decoderFor(encoding: string | undefined): ((bytes: Uint8Array) => Uint8Array) | undefined {
  const opts = { maxOutputLength: MAX_GRPC_MESSAGE_BYTES };
  switch ((encoding ?? "identity").trim().toLowerCase()) {
    case "gzip":
      return (b) => gunzipSync(b, opts);
    case "deflate":
      return (b) => inflateSync(b, opts);
    default:
      return undefined; // identity never sets the flag; snappy, br, zstd and the rest are not decoded
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  return parts.length === 1 ? parts[0]! : parts.length === 0 ? EMPTY : Buffer.concat(parts);
}

const EMPTY = new Uint8Array(0);

/**
 * The body as a stream of redacted messages in `framing`, decoded with the codec the response head
 * names; fails (never truncates silently) on a bad or oversized one.
 */
export function grpcScanStream(
  source: ReadableStream<Uint8Array>,
  needles: NeedleSet,
  headers: HeaderList,
  framing: Framing,
  maxBytes: number,
  done: BodyDone,
  head: readonly BinaryPart[] = [],
): ReadableStream<Uint8Array> {
  const redactor = createGrpcRedactor(needles, joinedHeader(headers, CODEC_HEADER[framing]) ?? undefined, { framing, head });
  return transformBody(source, { push: (chunk) => concat(redactor.push(chunk)), end: () => (redactor.end(), undefined) }, maxBytes, done);
}
