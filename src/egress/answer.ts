// An upstream's answer as the egress core hands it on: status, header lines and a body that is
// either whole (a small API response, most of them) or a stream. Plain values instead of a Web
// Response: the tunnel writes it to the agent as it is, with no Headers object or body wrapper per
// request; /proxy turns it into a Response once, at its own edge.

import { UpstreamUnreachable } from "../errors.ts";
import type { HeaderList } from "../http/index.ts";

export interface Answer {
  readonly status: number;
  readonly statusText: string;
  /** Lower-case names, in the upstream's order; framing headers other than Content-Length removed. */
  readonly headers: HeaderList;
  readonly body: Uint8Array | ReadableStream<Uint8Array> | null;
  /**
   * HTTP/2 only: the trailer fields, settled once the body has ended (empty when there were none or
   * the body broke). HTTP/1.1 answers have none: the HTTP/1.1 client drops chunked trailers.
   */
  readonly trailers?: Promise<HeaderList>;
}

/** The first value of a header (names compared lower-case). */
export function headerOf(headers: HeaderList, lowerName: string): string | undefined {
  for (const [k, v] of headers) if (k === lowerName) return v;
  return undefined;
}

/** Every value of a list-valued header joined as one (Content-Encoding may come in several lines). */
export function joinedHeader(headers: HeaderList, lowerName: string): string | null {
  const values = headers.filter(([k]) => k === lowerName).map(([, v]) => v);
  return values.length ? values.join(", ") : null;
}

/** The same header lines with `lowerName` set to one value (or removed when value is undefined). */
export function withHeader(headers: HeaderList, lowerName: string, value: string | undefined): HeaderList {
  const out: HeaderList = headers.filter(([k]) => k !== lowerName);
  if (value !== undefined) out.push([lowerName, value]);
  return out;
}

export function toWebResponse(a: Answer): Response {
  return new Response(a.body as BodyInit | null, { status: a.status, statusText: a.statusText, headers: new Headers(a.headers as [string, string][]) });
}

/** A Response the broker built itself (an error envelope) in the same shape. */
export function answerOf(res: Response): Answer {
  const headers: HeaderList = [];
  res.headers.forEach((v, k) => headers.push([k, v]));
  return { status: res.status, statusText: res.statusText, headers, body: res.body };
}

/** A body as one buffer (a stream is read to its end). */
export async function wholeBody(body: Answer["body"]): Promise<Uint8Array> {
  if (body === null) return new Uint8Array(0);
  if (body instanceof Uint8Array) return body;
  return new Uint8Array(await new Response(body).arrayBuffer());
}

/**
 * A streamed body that declared its length (at most a small body's), read whole and never held
 * beyond that length: more bytes than declared, or fewer before the end, is an upstream protocol
 * error (502), and the rest of the stream is let go.
 */
export async function declaredBody(body: ReadableStream<Uint8Array>, length: number): Promise<Uint8Array> {
  const reader = body.getReader();
  const fail = async (why: string): Promise<never> => {
    await reader.cancel().catch(() => {});
    throw new UpstreamUnreachable(`the upstream sent a body ${why} its Content-Length`);
  };
  if (!Number.isSafeInteger(length) || length < 0) return fail("with an invalid");
  const out = new Uint8Array(length);
  let at = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (value.byteLength > length - at) return fail("longer than");
    out.set(value, at);
    at += value.byteLength;
  }
  return at === length ? out : fail("shorter than");
}
