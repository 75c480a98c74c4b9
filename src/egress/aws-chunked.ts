// S3's aws-chunked content encoding, which AWS SDKs use for streamed uploads: the body decoded to its
// plain bytes (the chunks' signatures, made with the agent's placeholder key, dropped), and the headers
// that described the encoding taken away, so the decoded body goes out with a plain length (sigv4.ts).

import { InvalidRequest } from "../errors.ts";
import { WireError, type HeaderList } from "../http/index.ts";

/** The headers without what described aws-chunked: the body now goes out plain, with its decoded length. */
export function withoutAwsChunked(headers: HeaderList): HeaderList {
  const out: HeaderList = [];
  for (const [k, v] of headers) {
    const lower = k.toLowerCase();
    // The trailer (a checksum) is not forwarded: the decoded body is sent with a plain Content-Length.
    if (lower === "x-amz-decoded-content-length" || lower === "x-amz-trailer") continue;
    if (lower === "content-encoding") {
      const rest = v
        .split(",")
        .map((c) => c.trim())
        .filter((c) => c && c.toLowerCase() !== "aws-chunked");
      if (rest.length) out.push([k, rest.join(", ")]);
      continue;
    }
    out.push([k, v]);
  }
  return out;
}

/**
 * aws-chunked (`hex-size;chunk-signature=…\r\n data \r\n`, ending with a zero-size chunk and optional
 * trailer lines) to the plain bytes, checked against the declared decoded length.
 */
export function decodeAwsChunked(source: ReadableStream<Uint8Array>, expected: number): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  let buf: Uint8Array = new Uint8Array(0);
  let left = 0; // data bytes left in the current chunk
  let state: "size" | "data" | "crlf" | "trailer" | "done" = "size";
  let total = 0;
  const more = async (): Promise<boolean> => {
    const { done, value } = await reader.read();
    if (done) return false;
    buf = buf.byteLength ? Buffer.concat([buf, value]) : value;
    return true;
  };
  const line = (): string | undefined => {
    const at = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).indexOf("\r\n");
    if (at < 0) {
      if (buf.byteLength > 4096) throw new WireError("aws-chunked: a chunk header is too long");
      return undefined;
    }
    const text = Buffer.from(buf.subarray(0, at)).toString("latin1");
    buf = buf.subarray(at + 2);
    return text;
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        for (;;) {
          if (state === "size") {
            const l = line();
            if (l === undefined) {
              if (!(await more())) throw new WireError("aws-chunked: the body ended mid-chunk");
              continue;
            }
            const size = /^([0-9a-fA-F]{1,16})(;.*)?$/.exec(l);
            if (!size) throw new WireError("aws-chunked: malformed chunk header");
            left = parseInt(size[1]!, 16);
            state = left === 0 ? "trailer" : "data";
            continue;
          }
          if (state === "data") {
            if (buf.byteLength === 0 && !(await more())) throw new WireError("aws-chunked: the body ended mid-chunk");
            const take = Math.min(left, buf.byteLength);
            const piece = buf.subarray(0, take);
            buf = buf.subarray(take);
            left -= take;
            total += take;
            if (total > expected) throw new WireError("aws-chunked: more data than x-amz-decoded-content-length");
            if (left === 0) state = "crlf";
            if (piece.byteLength) return ctrl.enqueue(piece);
            continue;
          }
          if (state === "crlf") {
            if (buf.byteLength < 2 && !(await more())) throw new WireError("aws-chunked: the body ended mid-chunk");
            if (buf.byteLength < 2) continue;
            if (buf[0] !== 13 || buf[1] !== 10) throw new WireError("aws-chunked: a chunk does not end with CRLF");
            buf = buf.subarray(2);
            state = "size";
            continue;
          }
          if (state === "trailer") {
            const l = line();
            if (l === undefined) {
              if (!(await more())) {
                state = "done";
                continue;
              }
              continue;
            }
            if (l === "") state = "done";
            continue;
          }
          if (total !== expected) throw new WireError("aws-chunked: the data does not match x-amz-decoded-content-length");
          return ctrl.close();
        }
      } catch (err) {
        await reader.cancel().catch(() => {});
        ctrl.error(err instanceof WireError ? new InvalidRequest(err.message) : err);
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}
