// HTTP/1.1 wire format, shared by the upstream client and the tunnel: finding and parsing
// message heads, serialising request heads, and chunked transfer coding. Pure functions over bytes;
// strict on purpose, because lenient parsing is where request smuggling starts.

export type HeaderList = [name: string, value: string][];

export interface ResponseHead {
  readonly status: number;
  readonly statusText: string;
  readonly version: "1.0" | "1.1";
  readonly headers: HeaderList;
}

export class WireError extends Error {}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// RFC 9110 §5.5: visible characters, SP, HTAB and obs-text; no other control byte (NUL, CR, LF, \v, \f, DEL...).
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
// A token method, one SP, a target without control bytes or spaces, one SP, the version. Any other byte in the
// target (NUL, CR, LF, HTAB, DEL) is refused, not passed on to an upstream that may read it differently.
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) ([\x21-\x7e\x80-\xff]+) HTTP\/1\.([01])$/;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([\t\x20-\x7e\x80-\xff]*))?$/;

/**
 * Strips optional whitespace, which is SP and HTAB only (RFC 9110 §5.6.3). String.prototype.trim also strips
 * \v, \f, NBSP and Unicode spaces that other parsers keep: with it, "Content-Length: \v5" would read as 5 here
 * and as garbage elsewhere, which is how framing disagreements (request smuggling) start.
 */
export function trimOws(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && isOws(text.charCodeAt(start))) start++;
  while (end > start && isOws(text.charCodeAt(end - 1))) end--;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

function isOws(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

/** Index just past the blank line ending a head, or -1 when it has not arrived yet. */
export function findHeadEnd(buf: Uint8Array, from = 0): number {
  for (let i = Math.max(0, from - 3); i + 3 < buf.length; i++) {
    if (buf[i] === 13 && buf[i + 1] === 10 && buf[i + 2] === 13 && buf[i + 3] === 10) return i + 4;
  }
  return -1;
}

function decodeLatin1(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1");
}

/**
 * The header lines of a head's text from `from` (just past its start line's CRLF), in one pass: one slice
 * per name and value. Rejects obsolete folding and malformed names and values.
 */
function parseHeaderText(text: string, from: number): HeaderList {
  const headers: HeaderList = [];
  for (let at = from; at < text.length; ) {
    let end = text.indexOf("\r\n", at);
    if (end < 0) end = text.length;
    if (end > at) headers.push(parseHeaderLine(text, at, end));
    at = end + 2;
  }
  return headers;
}

/** The line text[start, end) (no CRLF in it) as a header field. */
function parseHeaderLine(text: string, start: number, end: number): [string, string] {
  const first = text.charCodeAt(start);
  if (isOws(first)) throw new WireError("obsolete header line folding");
  const colon = text.indexOf(":", start);
  if (colon <= start || colon >= end) throw new WireError("malformed header line");
  const name = text.slice(start, colon);
  if (!TOKEN.test(name)) throw new WireError("malformed header name");
  let a = colon + 1;
  let b = end;
  while (a < b && isOws(text.charCodeAt(a))) a++;
  while (b > a && isOws(text.charCodeAt(b - 1))) b--;
  const value = text.slice(a, b);
  if (!FIELD_VALUE.test(value)) throw new WireError("malformed header value");
  return [name, value];
}

/** A head's text split at its start line: the line, and where the header lines begin. */
function startLineOf(text: string): { line: string; rest: number } {
  const end = text.indexOf("\r\n");
  return end < 0 ? { line: text, rest: text.length } : { line: text.slice(0, end), rest: end + 2 };
}

export function parseResponseHead(head: Uint8Array): ResponseHead {
  const text = decodeLatin1(head);
  const { line, rest } = startLineOf(text);
  const m = STATUS_LINE.exec(line);
  if (!m) throw new WireError("malformed status line");
  return { version: m[1] === "1" ? "1.1" : "1.0", status: Number(m[2]), statusText: m[3] ?? "", headers: parseHeaderText(text, rest) };
}

/** What no head may carry: CR, LF, NUL, or a character latin1 cannot hold (its low byte could be any of those). */
const UNWRITABLE = /[\r\n\0]|[^\x00-\xff]/;

export function serializeHead(startLine: string, headers: HeaderList): Uint8Array {
  // The head is written as latin1, which keeps only each character's low byte: U+010D U+010A would
  // become CR LF on the wire. So a character above U+00FF is refused here, as CR, LF and NUL are.
  if (UNWRITABLE.test(startLine)) throw new WireError("request line not representable on the wire");
  let text = `${startLine}\r\n`;
  for (const [name, value] of headers) {
    // Headers objects already refuse CR/LF; this guards every other path into the wire.
    if (!TOKEN.test(name) || UNWRITABLE.test(value)) throw new WireError("header not representable on the wire");
    text += `${name}: ${value}\r\n`;
  }
  return Buffer.from(`${text}\r\n`, "latin1");
}

/** The Host header for an upstream: an IPv6 literal in brackets (RFC 9110 §7.2), the port unless it is 443. */
export function hostHeader(host: string, port: number): string {
  const name = host.includes(":") ? `[${host}]` : host;
  return port === 443 ? name : `${name}:${port}`;
}

export function headerValues(headers: readonly (readonly [string, string])[], name: string): string[] {
  const lower = name.toLowerCase();
  const out: string[] = [];
  for (const [n, v] of headers) if (n.length === lower.length && (n === lower || n.toLowerCase() === lower)) out.push(v);
  return out;
}

export type BodyFraming = { kind: "none" } | { kind: "length"; length: number } | { kind: "chunked" } | { kind: "close" };

/** How a response body is delimited (RFC 9112 §6.3). Conflicting or invalid framing is an error. */
export function responseFraming(head: ResponseHead, requestMethod: string): BodyFraming {
  if (requestMethod === "HEAD" || head.status === 204 || head.status === 304 || (head.status >= 100 && head.status < 200)) return { kind: "none" };
  const te = headerValues(head.headers, "transfer-encoding");
  const cl = headerValues(head.headers, "content-length");
  if (te.length > 0) {
    if (cl.length > 0) throw new WireError("both Transfer-Encoding and Content-Length");
    // The broker never sends TE, so an upstream may use no transfer coding but chunked (RFC 9112 §6.1).
    // Accepting `gzip, chunked` would hand the agent compressed bytes with nothing saying so, unscanned.
    const codings = te
      .join(",")
      .split(",")
      .map((s) => trimOws(s).toLowerCase())
      .filter(Boolean);
    if (codings.length !== 1 || codings[0] !== "chunked") throw new WireError("unsupported Transfer-Encoding");
    return { kind: "chunked" };
  }
  if (cl.length > 0) return { kind: "length", length: parseContentLength(cl) };
  return { kind: "close" };
}

/** One Content-Length, or repeats of the same digits; anything else is ambiguous framing. */
export function parseContentLength(values: string[]): number {
  const parts = values.join(",").split(",").map(trimOws);
  const first = parts[0] ?? "";
  if (!/^\d{1,15}$/.test(first) || parts.some((p) => p !== first)) throw new WireError("invalid Content-Length");
  return Number(first);
}

export function encodeChunk(data: Uint8Array): Uint8Array {
  const size = data.byteLength.toString(16);
  // Every byte is written below, so the buffer need not be zeroed first: bulk bodies pass through
  // here chunk by chunk, and zero-filling each one cost as much as the copy.
  const out = Buffer.allocUnsafe(size.length + 2 + data.byteLength + 2);
  const at = out.write(size, 0, "latin1");
  out[at] = 13;
  out[at + 1] = 10;
  out.set(data, at + 2);
  out[out.length - 2] = 13;
  out[out.length - 1] = 10;
  return out;
}

export const LAST_CHUNK = Buffer.from("0\r\n\r\n", "latin1");

/**
 * Incremental chunked decoder. `push` returns body bytes decoded so far; `done` turns true after the
 * last chunk and its trailers, and `rest` holds bytes that belong to the next message.
 */
export function createChunkedDecoder(maxLineBytes = 4096) {
  let state: "size" | "data" | "data-crlf" | "trailers" | "done" = "size";
  let remaining = 0;
  let line = "";
  return {
    get done() {
      return state === "done";
    },
    push(chunk: Uint8Array): { data: Uint8Array[]; rest: Uint8Array } {
      const data: Uint8Array[] = [];
      let i = 0;
      while (i < chunk.length && state !== "done") {
        if (state === "data") {
          const n = Math.min(remaining, chunk.length - i);
          data.push(chunk.subarray(i, i + n));
          i += n;
          remaining -= n;
          if (remaining === 0) state = "data-crlf";
          continue;
        }
        const byte = chunk[i++]!;
        if (byte !== 10) {
          line += String.fromCharCode(byte);
          if (line.length > maxLineBytes) throw new WireError("chunk line too long");
          continue;
        }
        if (!line.endsWith("\r")) throw new WireError("bare LF in chunked body");
        const text = line.slice(0, -1);
        line = "";
        if (state === "size") {
          const m = /^([0-9a-fA-F]{1,12})(;.*)?$/.exec(text);
          if (!m) throw new WireError("invalid chunk size");
          remaining = parseInt(m[1]!, 16);
          state = remaining === 0 ? "trailers" : "data";
        } else if (state === "data-crlf") {
          if (text !== "") throw new WireError("chunk data not followed by CRLF");
          state = "size";
        } else if (text === "") {
          state = "done";
        }
      }
      return { data, rest: chunk.subarray(i) };
    },
  };
}

export interface RequestHead {
  readonly method: string;
  /** As sent: origin-form (/path?q), absolute-form (https://h/p), or authority-form (CONNECT). */
  readonly target: string;
  readonly version: "1.0" | "1.1";
  readonly headers: HeaderList;
}

export function parseRequestHead(head: Uint8Array): RequestHead {
  const text = decodeLatin1(head);
  const { line, rest } = startLineOf(text);
  const m = REQUEST_LINE.exec(line);
  if (!m) throw new WireError("malformed request line");
  return { method: m[1]!, target: m[2]!, version: m[3] === "1" ? "1.1" : "1.0", headers: parseHeaderText(text, rest) };
}

/**
 * How a request body is delimited. Strict (RFC 9112 §6.1-6.3): Content-Length together with
 * Transfer-Encoding, differing lengths, or a coding other than a final `chunked` are refused,
 * since they are how request smuggling works.
 */
export function requestFraming(head: RequestHead): BodyFraming {
  const te = headerValues(head.headers, "transfer-encoding");
  const cl = headerValues(head.headers, "content-length");
  if (te.length > 0) {
    if (cl.length > 0) throw new WireError("both Transfer-Encoding and Content-Length");
    if (head.version === "1.0") throw new WireError("Transfer-Encoding in an HTTP/1.0 request");
    const codings = te
      .join(",")
      .split(",")
      .map((s) => trimOws(s).toLowerCase());
    if (codings.length !== 1 || codings[0] !== "chunked") throw new WireError("unsupported Transfer-Encoding");
    return { kind: "chunked" };
  }
  if (cl.length > 0) {
    const length = parseContentLength(cl);
    return length === 0 ? { kind: "none" } : { kind: "length", length };
  }
  return { kind: "none" };
}
