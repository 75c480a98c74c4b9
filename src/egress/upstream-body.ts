// Moving bodies between the agent's side and an upstream connection: small ones held whole (sent
// with the head, read in one piece, replayable), large ones streamed with backpressure and framing
// (Content-Length, chunked, close-delimited). Part of the upstream client (upstream.ts).

import { InvalidRequest } from "../errors.ts";
import type { Connection } from "./connection.ts";
import { createChunkedDecoder, encodeChunk, LAST_CHUNK, WireError, type BodyFraming, type HeaderList } from "../http/index.ts";

export interface OutboundRequest {
  readonly method: string;
  /** Origin-form target: path and query, exactly as the agent sent them. */
  readonly target: string;
  /** Headers in order, without Host, Content-Length or Transfer-Encoding (framing is ours). */
  readonly headers: HeaderList;
  readonly body: ReadableStream<Uint8Array> | null;
  /** Known body length, or null to send it chunked. */
  readonly bodyLength: number | null;
}

/** Bodies up to this size with a Content-Length are read whole instead of streamed. */
export const SMALL_BODY_BYTES = 64 * 1024;

export async function readExactly(conn: Connection, length: number): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  let at = 0;
  while (at < length) {
    const chunk = await conn.read();
    if (chunk === null) throw new WireError("upstream closed the connection mid-body");
    const take = Math.min(length - at, chunk.byteLength);
    out.set(chunk.subarray(0, take), at);
    at += take;
    if (take < chunk.byteLength) conn.unread(chunk.subarray(take));
  }
  return out;
}

export type HeldRequest = OutboundRequest & { readonly bodyBytes?: Uint8Array };

export async function holdSmallBody(req: OutboundRequest | HeldRequest): Promise<HeldRequest> {
  if ("bodyBytes" in req && req.bodyBytes) return req; // held already
  if (!req.body || req.bodyLength === null || req.bodyLength > SMALL_BODY_BYTES) return req;
  const bytes = new Uint8Array(await new Response(req.body).arrayBuffer());
  // A body shorter or longer than declared must not be sent under that Content-Length.
  if (bytes.byteLength !== req.bodyLength) throw new InvalidRequest("the request body does not match its Content-Length");
  return { ...req, bodyBytes: bytes };
}

const LARGE_CHUNK = 16 * 1024;
const CRLF = Buffer.from("\r\n", "latin1");

export async function pumpBody(conn: Connection, body: ReadableStream<Uint8Array>, chunked: boolean): Promise<void> {
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (value.byteLength === 0) continue;
    if (chunked && value.byteLength >= LARGE_CHUNK) {
      // Size line, data, CRLF as three writes: copying a large piece behind its size line cost more
      // than the two small extra TLS records (bulk uploads).
      await conn.write(Buffer.from(`${value.byteLength.toString(16)}\r\n`, "latin1"));
      await conn.write(value);
      await conn.write(CRLF);
    } else await conn.write(chunked ? encodeChunk(value) : value);
  }
  if (chunked) await conn.write(LAST_CHUNK);
}

/** The response body as a stream; `finish(true)` runs once after a complete body, `finish(false)` on error or cancel. */
export function bodyStream(conn: Connection, framing: BodyFraming, finish: (complete: boolean) => Promise<void>): ReadableStream<Uint8Array> | null {
  if (framing.kind === "none" || (framing.kind === "length" && framing.length === 0)) {
    void finish(true);
    return null;
  }
  let remaining = framing.kind === "length" ? framing.length : Infinity;
  const decoder = framing.kind === "chunked" ? createChunkedDecoder() : undefined;
  let finished = false;
  const end = (complete: boolean) => {
    if (finished) return;
    finished = true;
    void finish(complete);
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        for (;;) {
          const chunk = await conn.read();
          if (chunk === null) {
            if (framing.kind === "close") {
              ctrl.close();
              return end(false);
            }
            throw new WireError("upstream closed the connection mid-body");
          }
          if (decoder) {
            const { data, rest } = decoder.push(chunk);
            for (const d of data) ctrl.enqueue(d.slice());
            if (decoder.done) {
              conn.unread(rest);
              ctrl.close();
              return end(rest.byteLength === 0);
            }
            if (data.length) return;
            continue;
          }
          if (framing.kind === "length") {
            const take = Math.min(remaining, chunk.byteLength);
            ctrl.enqueue(chunk.subarray(0, take));
            remaining -= take;
            if (remaining === 0) {
              if (take < chunk.byteLength) conn.unread(chunk.subarray(take));
              ctrl.close();
              return end(take === chunk.byteLength);
            }
            return;
          }
          ctrl.enqueue(chunk);
          return;
        }
      } catch (err) {
        ctrl.error(err);
        end(false);
      }
    },
    cancel() {
      end(false);
    },
  });
}
