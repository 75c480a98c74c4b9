// A hostile gRPC upstream for the no-reveal tests of issue 31: a raw server over TLS on 127.0.0.1,
// speaking HTTP/2 only (node:http2) or HTTP/1.1 only (node:https, where trailers cannot pass), that
// echoes the request's `authorization` where a scan of the text it sends would not see it. (One server
// for both by ALPN would need node:http2's compatibility listener, which in Bun loses trailers.) It
// answers by the request's `x-answer` header:
//
//   polyglot           one gRPC message that is also a raw-deflate stream inflating to "you sent <auth>",
//                      sent with Content-Encoding: deflate (curl --compressed inflates it)
//   bin                <auth> base64 in -bin header and trailer fields: x-echo-bin padded, x-echo-unpadded-bin
//                      unpadded, x-multi-bin as the second of two comma-separated parts, and in the
//                      trailers grpc-status-details-bin (unpadded) beside grpc-status 0
//   bin-trailers-only  a trailers-only answer (HEADERS with END_STREAM): grpc-status 9 with <auth> in
//                      grpc-status-details-bin
//   bad-bin-header     x-echo-bin holding <auth>'s base64 with "." inserted: not base64, though Node's
//                      lenient decoder (and so grpc-js) reads <auth> out of it
//   bad-bin-trailer    the same value as a trailer, after a normal message, grpc-status 0 (HTTP/2 only)
//
// Every gRPC answer carries one empty message (an EchoReply of defaults) unless it is trailers-only;
// over HTTP/1.1 the answers are the same without their trailers.

import { createSecureServer, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { constants, deflateRawSync } from "node:zlib";
import type { TestPki } from "./pki.ts";

export interface HostileGrpcServer {
  readonly port: number;
  /** Every request's answer kind and authorization, in arrival order. */
  readonly calls: { answer: string; authorization: string; protocol: string }[];
  close(): Promise<void>;
}

/** The message length the 5-byte prefix 00 00 00 ff ff declares, read as gRPC: 65535. */
const POLYGLOT_MESSAGE_BYTES = 0xffff;

/**
 * Bytes that are both one gRPC frame (flag 0, length 65535) and one raw-deflate stream inflating to
 * `text` followed by spaces: the gRPC prefix 00 00 00 ff ff also reads as an empty stored deflate
 * block (BFINAL 0, LEN 0, NLEN ffff), then compressed blocks hold the text, then a final stored block
 * of spaces fills the message to its declared length.
 */
export function polyglotBody(text: string): Buffer {
  const prefix = Buffer.from([0x00, 0x00, 0x00, 0xff, 0xff]);
  const blocks = deflateRawSync(Buffer.from(text), { finishFlush: constants.Z_SYNC_FLUSH }); // not final, byte-aligned
  const fill = POLYGLOT_MESSAGE_BYTES - blocks.byteLength - 5;
  const last = Buffer.alloc(5);
  last[0] = 0x01; // BFINAL 1, stored
  last.writeUInt16LE(fill, 1);
  last.writeUInt16LE(~fill & 0xffff, 3);
  return Buffer.concat([prefix, blocks, last, Buffer.alloc(fill, 0x20)]);
}

/** `value`'s base64 with a "." after every 8 characters: invalid, yet Buffer.from(…, "base64") reads `value`. */
export function lenientBase64(value: string): string {
  return Buffer.from(value)
    .toString("base64")
    .replace(/(.{8})/g, "$1.");
}

const EMPTY_MESSAGE = Buffer.alloc(5);
const b64 = (text: string) => Buffer.from(text).toString("base64");
const unpadded = (text: string) => b64(text).replace(/=+$/, "");

export async function startHostileGrpcServer(opts: { pki: TestPki; protocol: "h2" | "http/1.1" }): Promise<HostileGrpcServer> {
  const calls: HostileGrpcServer["calls"] = [];
  const tls = { cert: opts.pki.certPem, key: opts.pki.keyPem };
  const server =
    opts.protocol === "h2"
      ? createSecureServer(tls).on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
          stream.on("error", () => {});
          stream.resume();
          stream.on("end", () => answer(stream, headers, calls));
        })
      : createHttpsServer(tls, (req, res) => {
          req.resume();
          req.on("end", () => {
            const auth = String(req.headers.authorization ?? "");
            const kind = String(req.headers["x-answer"] ?? "");
            calls.push({ answer: kind, authorization: auth, protocol: "http/1.1" });
            const { head, body } = http1Answer(kind, auth);
            res.writeHead(200, { ...head, "content-length": String(body.byteLength) });
            res.end(body);
          });
        });
  if (opts.protocol === "h2") server.on("session", (s) => s.on("error", () => {}));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function answer(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, calls: HostileGrpcServer["calls"]): void {
  const auth = String(headers.authorization ?? "");
  const kind = String(headers["x-answer"] ?? "");
  calls.push({ answer: kind, authorization: auth, protocol: "h2" });
  const grpc = { ":status": 200, "content-type": "application/grpc" };
  const withTrailers = (head: Record<string, string | number>, body: Buffer, trailers: Record<string, string>) => {
    stream.respond(head, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers(trailers));
    stream.end(body);
  };
  switch (kind) {
    case "polyglot":
      return withTrailers({ ...grpc, "content-encoding": "deflate" }, polyglotBody(`you sent ${auth}`), { "grpc-status": "0" });
    case "bin":
      return withTrailers({ ...grpc, ...binFields(auth) }, EMPTY_MESSAGE, {
        "grpc-status": "0",
        "grpc-status-details-bin": unpadded(auth),
        ...binFields(auth),
      });
    case "bin-trailers-only":
      return void stream.respond({ ...grpc, "grpc-status": "9", "grpc-message": "echo in details", "grpc-status-details-bin": b64(auth) }, { endStream: true });
    case "bad-bin-header":
      return withTrailers({ ...grpc, "x-echo-bin": lenientBase64(auth) }, EMPTY_MESSAGE, { "grpc-status": "0" });
    case "bad-bin-trailer":
      return withTrailers(grpc, EMPTY_MESSAGE, { "grpc-status": "0", "x-note": "kept", "x-echo-bin": lenientBase64(auth) });
    default:
      return void stream.respond({ ":status": 404 }, { endStream: true });
  }
}

/** The -bin fields of the `bin` answer (in the head, and again among the trailers). */
function binFields(auth: string): Record<string, string> {
  return { "x-echo-bin": b64(auth), "x-echo-unpadded-bin": unpadded(auth), "x-multi-bin": `${b64("first")}, ${unpadded(auth)}` };
}

function http1Answer(kind: string, auth: string): { head: Record<string, string>; body: Buffer } {
  const grpc = { "content-type": "application/grpc" };
  switch (kind) {
    case "polyglot":
      return { head: { ...grpc, "content-encoding": "deflate" }, body: polyglotBody(`you sent ${auth}`) };
    case "bin":
      return { head: { ...grpc, ...binFields(auth) }, body: EMPTY_MESSAGE };
    case "bad-bin-header":
      return { head: { ...grpc, "x-echo-bin": lenientBase64(auth) }, body: EMPTY_MESSAGE };
    default:
      return { head: { "content-type": "text/plain" }, body: Buffer.from("unknown answer") };
  }
}
