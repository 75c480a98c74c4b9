// Writing HTTP/1.1 responses onto a tunnel stream: the egress core's answer (plain values, no Web
// Response per request) or a broker error envelope. Streams the body with backpressure; chunked unless the length is known.

import type { Duplex } from "node:stream";
import { toErrorResponse } from "../errors.ts";
import type { Logger } from "../log.ts";
import { encodeChunk, LAST_CHUNK, serializeHead, type HeaderList } from "../http/index.ts";
import { answerOf, SMALL_BODY_BYTES, wholeBody, type Answer } from "../egress/index.ts";
import { writeAll } from "./reader.ts";

const STATUS_TEXT: Record<number, string> = {
  200: "OK",
  400: "Bad Request",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  407: "Proxy Authentication Required",
  413: "Payload Too Large",
  414: "URI Too Long",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

export interface WriteOptions {
  /** HEAD requests get the head only. */
  readonly headOnly?: boolean;
  /** Adds `Connection: close`. */
  readonly close?: boolean;
}

/** Writes an upstream's answer, or a broker-made Response (an error envelope), as HTTP/1.1. */
export async function writeResponse(stream: Duplex, reply: Answer | Response, opts: WriteOptions = {}): Promise<void> {
  const res = reply instanceof Response ? answerOf(reply) : reply;
  const headers: HeaderList = [];
  let length: string | undefined;
  for (const [name, value] of res.headers) {
    if (name === "content-length") length ??= value;
    else if (name !== "transfer-encoding" && name !== "connection") headers.push([name, value]);
  }
  const body = res.body;
  const bodyless = opts.headOnly || res.status === 204 || res.status === 304;
  if (length === undefined && body instanceof Uint8Array) length = String(body.byteLength);
  const chunked = !bodyless && body !== null && length === undefined;
  if (length !== undefined) headers.push(["content-length", length]);
  else if (chunked) headers.push(["transfer-encoding", "chunked"]);
  else if (!bodyless) headers.push(["content-length", "0"]);
  if (opts.close) headers.push(["connection", "close"]);
  const text = res.statusText || STATUS_TEXT[res.status] || "Status";
  const head = serializeHead(`HTTP/1.1 ${res.status} ${text}`, headers);
  if (bodyless || !body) {
    await writeAll(stream, head);
    if (body && !(body instanceof Uint8Array)) await body.cancel().catch(() => {});
    return;
  }
  if (body instanceof Uint8Array || Number(length) <= SMALL_BODY_BYTES) {
    // A small body is already in memory (see egress/upstream.ts): one write for head and body.
    await writeAll(stream, Buffer.concat([head, await wholeBody(body)]));
    return;
  }
  await writeStreamedBody(stream, head, body, chunked);
}

async function writeStreamedBody(stream: Duplex, head: Uint8Array, body: ReadableStream<Uint8Array>, chunked: boolean): Promise<void> {
  const reader = body.getReader();
  try {
    // With a known length, the head travels with the first piece of body: on a TLS stream every
    // write is a record, so fewer writes cost less. A streamed body (SSE) gets its head at once.
    let pending: Uint8Array[] = [head];
    if (chunked) {
      await writeAll(stream, head);
      pending = [];
    }
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (chunked && value.byteLength >= 16 * 1024) {
        // A large piece goes out as size line, data, CRLF: no copy of the data (bulk bodies stay flat).
        await writeAll(stream, `${value.byteLength.toString(16)}\r\n`);
        await writeAll(stream, value);
        await writeAll(stream, "\r\n");
        continue;
      }
      if (value.byteLength) pending.push(chunked ? encodeChunk(value) : value);
      if (pending.length > 1 || pending[0] !== head) {
        await writeAll(stream, pending.length === 1 ? pending[0]! : Buffer.concat(pending));
        pending = [];
      }
    }
    if (chunked) pending.push(LAST_CHUNK);
    if (pending.length) await writeAll(stream, pending.length === 1 ? pending[0]! : Buffer.concat(pending));
  } catch (err) {
    // A body that fails mid-way must not look complete: break the connection instead.
    await reader.cancel().catch(() => {});
    stream.destroy();
    throw err;
  }
}

/** The envelope for an error raised by the broker itself, with extra headers if needed. */
export function errorResponse(err: unknown, log: Logger, extraHeaders: Record<string, string> = {}): Response {
  const res = toErrorResponse(err, log);
  for (const [k, v] of Object.entries(extraHeaders)) res.headers.set(k, v);
  return res;
}

export { ProxyAuthRequired } from "../errors.ts";
