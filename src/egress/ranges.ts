// Ranged reads on scanned requests (architecture.md D21, issue 31): an agent must not learn any byte of
// a value from ranged responses of an echoing upstream. A scan of a 206 body alone cannot promise
// that: `bytes=81-100` and then `bytes=101-120` each hold half of an echoed value, neither half is a
// match, and the agent joins them (a multipart/byteranges answer splits it the same way). This holds
// for every request whose answer is scanned: every answer once any vault holds a value (architecture.md D22: a
// request bin serves vault A's value to B, whatever B's service). So:
//
// - Every auth type but aws_sigv4 and passthrough: a byte Range (unit "bytes" in any case, or a
//   value the broker cannot read), If-Range (and the old Request-Range some servers still read) are
//   dropped on the way out. The upstream answers 200 with the whole body, which the usual scanner redacts; a 200 is
//   a valid answer to a ranged request, so clients cope. A Range in another unit (`items=0-19`) or
//   PostgREST's unit-less `0-19` (rows, its Range-Unit) is no byte range and passes unchanged:
//   servers that read only byte ranges ignore it, and one that answers it in bytes anyway sends a 206,
//   refused below.
// - aws_sigv4 (S3's ranged GetObject must keep working, and objects are large) and passthrough (its
//   answers are scanned only for other vaults' values, and its downloads resume): a single range is
//   kept but widened by CONTEXT_BYTES on each side before the request is signed. The 206 must cover
//   the widened range (or reach the object's ends); its body is masked without changing its length
//   (each byte of a match becomes a filler byte, so offsets hold), then cut back to exactly the
//   agent's bytes, with Content-Range and Content-Length rewritten. The scanner masks any 12
//   characters of a value, and reads such a window from at most WIDEST_MATCH_BYTES of body (spelt
//   with long references and invisible characters); CONTEXT_BYTES is more, so every window that
//   touches the agent's range lies whole in the widened body and is masked there.
//   Several ranges, or a Range the broker cannot read, are dropped as above; If-Range is kept with a
//   kept Range (the upstream then answers 206 or a whole 200, and both are handled).
// - Fails closed (502 undecodable_response, never upstream text in the message): a partial answer
//   (a 206, multipart/byteranges, or a Content-Range in bytes: PostgREST's `0-1/*` on every 200 is
//   rows, not bytes) to a request sent without Range, S3's part-number reads included (its message
//   says to use Range reads: the broker cannot widen a part); a 206 that does not
//   cover what was asked, or whose body does not match its Content-Range; a ranged body with a
//   Content-Encoding (a compressed stream cannot be decoded from its middle).
//
// Answers that are not scanned (no value stored in any vault, blind tunnels) are not touched.

import { PayloadTooLarge, UndecodableResponse } from "../errors.ts";
import { headerOf, type Answer } from "./answer.ts";
import type { HeaderList } from "../http/index.ts";
import { MAX_DIGITS as MAX_REFERENCE_DIGITS, MAX_IGNORABLE_RUN } from "./echo-syntax.ts";
import { WINDOW } from "./needle-index.ts";
import { createRedactor, redactWhole, type NeedleSet, type Redactor } from "./redact.ts";
import { transformBody, type BodyDone } from "./scan-body.ts";
import { SMALL_BODY_BYTES } from "./upstream-body.ts";

/**
 * The widest run of body bytes the scanner reads as one WINDOW-byte match (echo-scanner.ts): each
 * view byte may be spelt by its longest escape, a reference of MAX_DIGITS digits ("&#x" + 64 digits +
 * ";" or "\u{" + 64 digits + "}": 68 bytes; named references and the rest are shorter), preceded by
 * up to MAX_IGNORABLE_RUN invisible characters it drops, each spelt so too: 12 × 65 × 68 = 53,040.
 */
export const WIDEST_MATCH_BYTES = WINDOW * (MAX_IGNORABLE_RUN + 1) * (MAX_REFERENCE_DIGITS + 4);

/**
 * Context asked for on each side of an aws_sigv4 agent's range: more than the widest match, so
 * every window that touches the agent's bytes lies whole in the widened answer (64 KiB).
 */
export const CONTEXT_BYTES = 64 * 1024;

/** One range of a Range header (RFC 9110 §14.1.2), in bytes. */
export type ByteRange =
  | { readonly kind: "span"; readonly first: number; readonly last: number }
  | { readonly kind: "from"; readonly first: number }
  | { readonly kind: "suffix"; readonly length: number };

/** What the request sent upstream says about ranges, and so what its answer may be. */
export interface RangedRequest {
  /** The agent's own range when the broker kept it (widened); undefined: the request went out without Range. */
  readonly asked?: ByteRange;
  /** The request's header lines as they go upstream (before signing, so SigV4 signs the widened Range). */
  upstreamHeaders(headers: HeaderList): HeaderList;
  /** An S3 part-number read (`?partNumber=`): answered 206 without a Range, refused with its own message. */
  readonly partNumber?: boolean;
}

/** Range headers the broker drops: Request-Range is the pre-standard name older Apache servers still honour. */
/** The request headers that ask for part of a body (Request-Range: an old name some servers still read). */
export const RANGE_HEADERS: ReadonlySet<string> = new Set(["range", "if-range", "request-range"]);
const RANGE_NAME_LENGTHS: ReadonlySet<number> = new Set([...RANGE_HEADERS].map((n) => n.length));
const MAX_DIGITS = 15; // below 2^53: offsets stay exact numbers
const EMPTY = new Uint8Array(0);

const keepAll = (h: HeaderList) => h;
const dropAll = (h: HeaderList) => h.filter(([k]) => !RANGE_HEADERS.has(k.toLowerCase()));
/** Most requests: their Range headers, if any, go as they are (their answers are still checked for partial content). */
const AS_SENT: RangedRequest = { upstreamHeaders: keepAll };
const AS_SENT_PART: RangedRequest = { partNumber: true, upstreamHeaders: keepAll };

/**
 * How a request whose answer is scanned handles the agent's Range (`authType`: the matched service's;
 * `target`: the path and query, for S3's partNumber).
 */
/**
 * The services whose ranged reads are widened rather than dropped: S3 through aws_sigv4, and
 * passthrough services (their answers are scanned for other vaults' values, architecture.md D22, yet nothing of
 * theirs is injected: resumable and parallel downloads keep working).
 */
const WIDENED = new Set(["aws_sigv4", "passthrough"]);

export function planRanges(authType: string, agentHeaders: readonly (readonly [string, string])[], target = ""): RangedRequest {
  const partNumber = /[?&]partNumber=/i.test(target);
  // One pass over the names: every request comes here, and almost none has a range header.
  const values: string[] = [];
  let others = false;
  let requestRange = false;
  for (const [k, v] of agentHeaders) {
    if (!RANGE_NAME_LENGTHS.has(k.length)) continue;
    const name = k.toLowerCase();
    if (name === "range") values.push(v);
    else if (name === "if-range") others = true;
    else if (name === "request-range") others = requestRange = true;
  }
  const asSent = partNumber ? AS_SENT_PART : AS_SENT;
  // No Range at all: nothing to drop or widen.
  if (!values.length && !others) return asSent;
  // Ranges in another unit (PostgREST's rows) go as they are, with their If-Range.
  if (values.length && !values.some(isByteRange) && !requestRange) return asSent;
  const single = WIDENED.has(authType) && values.length === 1 ? parseSingleRange(values[0]!) : undefined;
  if (!single || !masksInPlace()) return { partNumber, upstreamHeaders: dropAll };
  const widened = formatRange(widenRange(single, CONTEXT_BYTES));
  return {
    asked: single,
    partNumber,
    // If-Range stays: a changed object comes back whole (200), which is scanned as any other.
    upstreamHeaders: (h) => [...h.filter(([k]) => !RANGE_HEADERS.has(k.toLowerCase()) || k.toLowerCase() === "if-range"), ["range", widened]],
  };
}

/** A Range token's characters (RFC 9110 §5.6.2). */
const UNIT = /^\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=/;

/**
 * Whether a Range value may be read as bytes: unit "bytes" (any case), or a value the broker cannot
 * read at all. Another unit, or PostgREST's unit-less "first-last" (rows), is not.
 */
export function isByteRange(value: string): boolean {
  const unit = UNIT.exec(value)?.[1];
  if (unit !== undefined) return unit.toLowerCase() === "bytes";
  return !/^\s*\d{1,15}\s*-\s*\d{0,15}\s*$/.test(value);
}

/**
 * Whether an answer is partial content the agent could join with another: a 206, a
 * multipart/byteranges body, or a Content-Range in bytes (case-insensitive). A Content-Range in
 * another unit or none (PostgREST and Supabase put `0-1/*`, rows, on every 200) is not.
 */
export function isPartialAnswer(status: number, headers: HeaderList): boolean {
  if (status === 206) return true;
  if (/^\s*multipart\/byteranges\b/i.test(headerOf(headers, "content-type") ?? "")) return true;
  return headers.some(([k, v]) => k.toLowerCase() === "content-range" && /^\s*bytes(?![!#$%&'*+.^_`|~0-9A-Za-z-])/i.test(v));
}

/** A `bytes=` Range naming exactly one range; undefined for several, another unit or anything malformed. */
export function parseSingleRange(value: string): ByteRange | undefined {
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(value);
  if (!m) return undefined;
  const [, a = "", b = ""] = m;
  if (a.length > MAX_DIGITS || b.length > MAX_DIGITS) return undefined;
  if (a === "") return b === "" ? undefined : { kind: "suffix", length: Number(b) };
  if (b === "") return { kind: "from", first: Number(a) };
  const first = Number(a);
  const last = Number(b);
  return first <= last ? { kind: "span", first, last } : undefined;
}

/** The range with `k` more bytes on each side (never before byte 0). */
export function widenRange(r: ByteRange, k: number): ByteRange {
  switch (r.kind) {
    case "span":
      return { kind: "span", first: Math.max(0, r.first - k), last: r.last + k };
    case "from":
      return { kind: "from", first: Math.max(0, r.first - k) };
    case "suffix":
      return { kind: "suffix", length: r.length + k };
  }
}

export function formatRange(r: ByteRange): string {
  return r.kind === "span" ? `bytes=${r.first}-${r.last}` : r.kind === "from" ? `bytes=${r.first}-` : `bytes=-${r.length}`;
}

export interface ContentRange {
  readonly first: number;
  readonly last: number;
  /** The representation's length; undefined for "*" (unknown). */
  readonly total: number | undefined;
}

/** A 206's `Content-Range: bytes first-last/total`; undefined when malformed or inconsistent. */
export function parseContentRange(value: string): ContentRange | undefined {
  const m = /^\s*bytes\s+(\d{1,15})-(\d{1,15})\/(\d{1,15}|\*)\s*$/i.exec(value);
  if (!m) return undefined;
  const first = Number(m[1]);
  const last = Number(m[2]);
  const total = m[3] === "*" ? undefined : Number(m[3]);
  if (first > last || (total !== undefined && last >= total)) return undefined;
  return { first, last, total };
}

/** Where the agent's bytes sit in a widened 206 body, or that its range lies beyond the object. */
export type Cut =
  | { readonly satisfiable: true; readonly skip: number; readonly length: number; readonly bodyLength: number; readonly contentRange: string }
  | { readonly satisfiable: false; readonly contentRange: string };

/**
 * The cut of a widened 206 back to the agent's range. Throws UndecodableResponse when the answer
 * does not hold `k` bytes of context on each side of it (short of the object's ends): an echo at the
 * edge could then be only partly there, and so not recognised.
 */
export function planCut(asked: ByteRange, got: ContentRange, k: number): Cut {
  const total = got.total;
  if (total === undefined) throw notCovered();
  let first: number;
  let last = total - 1;
  if (asked.kind === "suffix") {
    if (asked.length === 0 || total === 0) return { satisfiable: false, contentRange: `bytes */${total}` };
    first = Math.max(0, total - asked.length);
  } else {
    // The widened range can reach an object that the agent's own range starts after.
    if (asked.first >= total) return { satisfiable: false, contentRange: `bytes */${total}` };
    first = asked.first;
    if (asked.kind === "span") last = Math.min(asked.last, total - 1);
  }
  if (got.first > Math.max(0, first - k) || got.last < Math.min(total - 1, last + k)) throw notCovered();
  return {
    satisfiable: true,
    skip: first - got.first,
    length: last - first + 1,
    bodyLength: got.last - got.first + 1,
    contentRange: `bytes ${first}-${last}/${total}`,
  };
}

/**
 * The widened body masked and cut: bytes in, the agent's bytes out. The redactor must keep the
 * length (each matched byte becomes a filler byte); a body longer or shorter than its Content-Range,
 * or masking that moved bytes, fails.
 */
export function maskAndCut(
  cut: { skip: number; length: number; bodyLength: number },
  redactor: Redactor,
): { push(chunk: Uint8Array): Uint8Array; end(): Uint8Array } {
  let read = 0; // widened-body bytes in
  let masked = 0; // widened-body bytes out of the redactor (its offset of the next byte)
  const keep = (bytes: Uint8Array): Uint8Array => {
    const at = masked;
    masked += bytes.byteLength;
    if (masked > read) throw notMatching();
    const from = Math.max(cut.skip, at);
    const to = Math.min(cut.skip + cut.length, masked);
    return to > from ? bytes.subarray(from - at, to - at) : EMPTY;
  };
  return {
    push(chunk) {
      read += chunk.byteLength;
      if (read > cut.bodyLength) throw notMatching();
      return keep(redactor.push(chunk));
    },
    end() {
      const rest = keep(redactor.flush());
      if (read !== cut.bodyLength || masked !== read) throw notMatching();
      return rest;
    },
  };
}

/**
 * Checks an answer against what was asked. Undefined: an ordinary answer, scanned as usual. Else the
 * answer to hand on (the agent's range cut from a widened 206, or a 416 for a range past the end).
 * Throws UndecodableResponse (the body cancelled) for a partial answer the broker cannot check.
 */
export async function answerRange(ranged: RangedRequest, res: Answer, needles: NeedleSet, maxBytes: number, done: BodyDone): Promise<Answer | undefined> {
  if (!isPartialAnswer(res.status, res.headers)) return undefined;
  const contentRange = res.headers.filter(([k]) => k === "content-range").map(([, v]) => v);
  const multipart = /^\s*multipart\/byteranges\b/i.test(headerOf(res.headers, "content-type") ?? "");
  // A 416 to a kept range ("bytes */total") holds no byte of the representation.
  if (ranged.asked && res.status === 416 && !multipart) return undefined;
  try {
    if (!ranged.asked && ranged.partNumber) throw new UndecodableResponse(PART_NUMBER_REFUSAL);
    if (!ranged.asked || res.status !== 206 || multipart)
      throw new UndecodableResponse(
        "the upstream answered with a partial response the broker did not ask for, so it could not be checked for echoed credentials",
      );
    const encoding = res.headers.filter(([k]) => k === "content-encoding").flatMap(([, v]) => v.split(","));
    if (encoding.some((c) => c.trim() !== "" && c.trim().toLowerCase() !== "identity")) {
      throw new UndecodableResponse(
        "the upstream's ranged response is compressed, and a compressed range cannot be decoded to be checked for echoed credentials",
      );
    }
    const got = contentRange.length === 1 ? parseContentRange(contentRange[0]!) : undefined;
    if (!got) throw notCovered();
    const declared = headerOf(res.headers, "content-length");
    if (declared !== undefined && res.body !== null && Number(declared) !== got.last - got.first + 1) throw notMatching();
    const cut = planCut(ranged.asked, got, CONTEXT_BYTES);
    let headers = res.headers.filter(([k]) => k !== "content-range" && k !== "content-length");
    if (!cut.satisfiable) {
      await cancel(res.body);
      done(0, null);
      headers = headers.filter(([k]) => k !== "content-type" && k !== "etag" && k !== "last-modified");
      return {
        ...res,
        status: 416,
        statusText: "Range Not Satisfiable",
        headers: [...headers, ["content-range", cut.contentRange], ["content-length", "0"]],
        body: new Uint8Array(0),
      };
    }
    headers = [...headers, ["content-range", cut.contentRange], ["content-length", String(cut.length)]];
    if (res.body === null) {
      if (declared === "0") throw notMatching(); // a 206 holds at least one byte: only a HEAD answer has none here
      done(0, null);
      return { ...res, headers, body: null }; // HEAD: the head describes the agent's range too
    }
    const step = maskAndCut(cut, createRedactor(needles, { preserveLength: true }));
    if (res.body instanceof Uint8Array) {
      if (maxBytes && res.body.byteLength > maxBytes) throw new PayloadTooLarge(`response body exceeded the broker's limit of ${maxBytes} bytes`);
      const head = step.push(res.body);
      const tail = step.end();
      done(res.body.byteLength, null);
      return { ...res, headers, body: tail.byteLength ? Buffer.concat([head, tail]) : head };
    }
    // A widened answer to a small range (the usual S3 read) is held whole, so the agent's range goes
    // out as one buffer with its Content-Length, as any small body does (/proxy keeps a length only
    // then). The widened body is bounded here (maskAndCut refuses more); a larger one is streamed.
    if (cut.bodyLength <= SMALL_BODY_BYTES + 2 * CONTEXT_BYTES) {
      const { bytes, read } = await cutWhole(res.body, step, maxBytes);
      done(read, null);
      return { ...res, headers, body: bytes };
    }
    return { ...res, headers, body: transformBody(res.body, step, maxBytes, done) };
  } catch (err) {
    await cancel(res.body);
    throw err;
  }
}

/** S3 GetObject/HeadObject with partNumber answer one part as a 206: no Range the broker could widen, so refused, saying what works. */
export const PART_NUMBER_REFUSAL =
  "S3 part-number reads (GetObject or HeadObject with ?partNumber=) are not supported through the broker: the part comes back as a partial response it cannot widen to check for echoed credentials. Read the object with Range requests instead (one range per request), which the broker supports";

/** A (bounded) widened body read, masked and cut whole; a failure throws (the caller cancels and audits it). */
async function cutWhole(
  source: ReadableStream<Uint8Array>,
  step: ReturnType<typeof maskAndCut>,
  maxBytes: number,
): Promise<{ bytes: Uint8Array; read: number }> {
  const reader = source.getReader();
  const parts: Uint8Array[] = [];
  let read = 0;
  try {
    for (;;) {
      const chunk = await reader.read().catch((err: unknown) => {
        // The upstream broke off: the body does not match its Content-Range (no upstream text).
        throw err instanceof UndecodableResponse || err instanceof PayloadTooLarge ? err : notMatching();
      });
      if (chunk.done) break;
      read += chunk.value.byteLength;
      if (maxBytes && read > maxBytes) throw new PayloadTooLarge(`response body exceeded the broker's limit of ${maxBytes} bytes`);
      parts.push(step.push(chunk.value));
    }
    parts.push(step.end());
  } catch (err) {
    await reader.cancel().catch(() => {});
    throw err;
  }
  return { bytes: Buffer.concat(parts), read };
}

let masking: boolean | undefined;

/**
 * Whether the scanner masks in place (same length). Cutting a widened body relies on it; without it
 * (a scanner that writes "[redacted]"), aws_sigv4 Ranges are dropped like any other. Checked once.
 */
function masksInPlace(): boolean {
  if (masking === undefined) {
    const probe = "range-probe-0123456789abcdef";
    const before = new TextEncoder().encode(`..${probe}..`);
    const after = redactWhole(before, [probe], { preserveLength: true });
    masking = after.byteLength === before.byteLength && !Buffer.from(after).includes(probe);
  }
  return masking;
}

async function cancel(body: Answer["body"]): Promise<void> {
  if (body && !(body instanceof Uint8Array)) await body.cancel().catch(() => {});
}

function notCovered(): UndecodableResponse {
  return new UndecodableResponse(
    "the upstream's ranged response does not cover the bytes the broker asked for, so it could not be checked for echoed credentials",
  );
}

function notMatching(): UndecodableResponse {
  return new UndecodableResponse("the upstream's ranged response body does not match its Content-Range, so it could not be checked for echoed credentials");
}
