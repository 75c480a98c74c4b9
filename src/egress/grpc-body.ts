// gRPC response bodies on an injected call. A gRPC body is a run of length-prefixed messages (one
// flag byte, a 4-byte big-endian length, the message), and a message may be compressed on its own
// (flag 1, in the `grpc-encoding` the response names). A byte-level scan would miss an echo inside a
// compressed message, and a redaction that changes a message's length would break the framing the
// agent's client parses. So each message is read whole, decoded when compressed, redacted, and sent
// on uncompressed with its new length (the flag says so per message, which every gRPC client
// accepts). An encoding the broker cannot decode fails closed, like an unknown Content-Encoding.
// A Content-Encoding over the whole body is refused (refuseGrpcContentCoding says why).

import { inflateSync, gunzipSync } from "node:zlib";
import { PayloadTooLarge, UndecodableResponse } from "../errors.ts";
import { joinedHeader } from "./answer.ts";
import type { HeaderList } from "./http1.ts";
import { compileNeedles, redactWhole, type NeedleSet } from "./redact.ts";
import { transformBody, type BodyDone } from "./scan-body.ts";

/** The largest message the broker decodes and scans (gRPC's own default limit is 4 MiB). */
export const MAX_GRPC_MESSAGE_BYTES = 64 << 20;

/** `application/grpc`, `application/grpc+proto`, `application/grpc; …`: the one test, on both sides. */
export function isGrpcContentType(value: string | string[] | undefined): boolean {
  return typeof value === "string" && /^application\/grpc(?:[+;]|$)/i.test(value);
}

export function isGrpcResponse(headers: HeaderList): boolean {
  return isGrpcContentType(headers.find(([name]) => name === "content-type")?.[1]);
}

/**
 * gRPC compresses message by message (grpc-encoding, decoded below), never the body as a whole. A
 * Content-Encoding on a gRPC response would be undone by an HTTP client reading the body (curl
 * --compressed) but not by the message scan, so a body that is both a valid frame and, say, a
 * raw-deflate stream would carry an echo past it. Anything but identity is refused, as an
 * undecodable body is (the message quotes no upstream text).
 */
export function refuseGrpcContentCoding(headers: HeaderList): void {
  const value = joinedHeader(headers, "content-encoding");
  if (value === null || value.split(",").every((c) => /^\s*(identity)?\s*$/i.test(c))) return;
  throw new UndecodableResponse("the upstream sent a gRPC response with a Content-Encoding (gRPC compresses each message with grpc-encoding instead), which the broker refuses rather than pass on unscanned");
}

/** Message by message: push() returns the messages completed so far, redacted and re-framed. */
export function createGrpcRedactor(needles: NeedleSet, encoding: string | undefined) {
  const compiled = compileNeedles(needles);
  const decode = decoderFor(encoding);
  let head: Uint8Array = new Uint8Array(0);
  let pieces: Uint8Array[] = [];
  let have = 0;
  let need = -1; // the current message's length, once its 5-byte prefix is complete
  let compressed = false;

  const finish = (message: Uint8Array): Uint8Array => {
    let plain = message;
    if (compressed) {
      if (!decode) throw new UndecodableResponse(`the upstream compressed a gRPC message with grpc-encoding "${encoding ?? ""}", which the broker cannot decode to scan`);
      plain = decode(message);
    }
    const out = redactWhole(plain, compiled);
    const framed = new Uint8Array(5 + out.byteLength);
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
          if (head[0]! > 1) throw new UndecodableResponse("the upstream sent a gRPC message with an unknown flag");
          compressed = head[0] === 1;
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

function decoderFor(encoding: string | undefined): ((bytes: Uint8Array) => Uint8Array) | undefined {
  const opts = { maxOutputLength: MAX_GRPC_MESSAGE_BYTES };
  switch ((encoding ?? "identity").trim().toLowerCase()) {
    case "gzip":
      return (b) => gunzipSync(b, opts);
    case "deflate":
      return (b) => inflateSync(b, opts);
    default:
      return undefined; // identity never sets the flag; snappy and the rest are not decoded
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  return parts.length === 1 ? parts[0]! : parts.length === 0 ? EMPTY : Buffer.concat(parts);
}

const EMPTY = new Uint8Array(0);

/** The body as a stream of redacted messages; fails (never truncates silently) on a bad or oversized one. */
export function grpcScanStream(source: ReadableStream<Uint8Array>, needles: NeedleSet, encoding: string | undefined, maxBytes: number, done: BodyDone): ReadableStream<Uint8Array> {
  const redactor = createGrpcRedactor(needles, encoding);
  return transformBody(source, { push: (chunk) => concat(redactor.push(chunk)), end: () => (redactor.end(), undefined) }, maxBytes, done);
}
