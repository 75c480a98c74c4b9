// No reveal by echo (DESIGN.md §3.15, §3.22): replaces every occurrence of an injected value, in
// any of the forms servers quote values in, with "[redacted]" in response headers and (decoded)
// response bodies, streaming, including occurrences split across chunk boundaries. The matching is
// done in a decoding view of the bytes (echo-scanner.ts) against the value's forms
// (echo-forms.ts), indexed as 12-byte windows (needle-index.ts), so any 12 consecutive characters
// of a value are redacted too. Compressed bodies are decoded around it by content-coding.ts.

import type { HeaderList } from "./http1.ts";
import { REDACTED } from "../secret.ts";
import { echoNeedles } from "./echo-forms.ts";
import { EchoScanner } from "./echo-scanner.ts";
import { buildIndex, type NeedleIndex } from "./needle-index.ts";

const REPLACEMENT = new TextEncoder().encode(REDACTED);
/** A match still growing is closed once this long, so a body repeating a value cannot make a stream hold it all. */
const MAX_OPEN_MATCH = 64 * 1024;

/**
 * SECRET: the compiled search index for a set of credential values, built once (the plan cache keeps
 * one per host) because deriving every form costs more than scanning a small response. Prints as
 * "[redacted]". Functions below also take plain string arrays (compiled on the spot).
 */
export class Needles {
  /** @internal the windows to look for; null when there is nothing to look for. */
  readonly index: NeedleIndex | null;
  constructor(values: readonly string[]) {
    this.index = buildIndex(echoNeedles(values));
  }
  get empty(): boolean {
    return this.index === null;
  }
  toString() {
    return REDACTED;
  }
  toJSON() {
    return REDACTED;
  }
  [Symbol.for("nodejs.util.inspect.custom")]() {
    return REDACTED;
  }
}

export const NO_NEEDLES = new Needles([]);

export type NeedleSet = Needles | readonly string[];

/** The compiled form (already compiled sets pass through). */
export function compileNeedles(n: NeedleSet): Needles {
  return n instanceof Needles ? n : new Needles(n);
}

export interface RedactOptions {
  /**
   * Replace each matched byte by a filler byte instead of each match by "[redacted]", so offsets
   * do not move (a ranged response cut back to the bytes asked for, ranges.ts).
   */
  readonly preserveLength?: boolean;
}

/** The matched spans [start, end) of a whole byte string, merged, in order. */
function spansOf(bytes: Uint8Array, index: NeedleIndex): number[] {
  const scanner = new EchoScanner(index);
  scanner.feed(bytes, 0);
  scanner.end(bytes.length);
  return scanner.spans;
}

function filler(length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = REPLACEMENT[i % REPLACEMENT.length]!;
  return out;
}

/** Text of `bytes` with each span replaced; `spans` are absolute, `base` is the offset of bytes[0]. */
function replaceSpans(bytes: Uint8Array, base: number, spans: readonly number[], preserveLength: boolean): Uint8Array {
  const parts: Uint8Array[] = [];
  let at = 0;
  for (let i = 0; i < spans.length; i += 2) {
    const s = Math.max(spans[i]! - base, at);
    const e = Math.min(spans[i + 1]! - base, bytes.length);
    if (e <= s) continue;
    parts.push(bytes.subarray(at, s), preserveLength ? filler(e - s) : REPLACEMENT);
    at = e;
  }
  parts.push(bytes.subarray(at));
  return Buffer.concat(parts);
}

/** A whole body with every match replaced; the very same array when nothing was found. */
export function redactWhole(bytes: Uint8Array, needles: NeedleSet, opts: RedactOptions = {}): Uint8Array {
  const index = compileNeedles(needles).index;
  if (!index || bytes.length === 0) return bytes;
  const spans = spansOf(bytes, index);
  return spans.length ? replaceSpans(bytes, 0, spans, opts.preserveLength ?? false) : bytes;
}

/** Header text as the bytes it travelled as: latin1 when it fits (HTTP/1.1 heads are read so), else UTF-8. */
function textBytes(text: string): { bytes: Uint8Array; latin1: boolean } {
  const latin1 = !/[^\x00-\xff]/.test(text);
  return { bytes: new Uint8Array(Buffer.from(text, latin1 ? "latin1" : "utf8")), latin1 };
}

function bytesText(bytes: Uint8Array, latin1: boolean): string {
  return Buffer.from(bytes).toString(latin1 ? "latin1" : "utf8");
}

/** One line of text (a status line's reason phrase, an error message) with every match replaced. */
export function redactText(text: string, needles: NeedleSet): string {
  const n = compileNeedles(needles);
  if (n.empty || text === "") return text;
  const { bytes, latin1 } = textBytes(text);
  const out = redactWhole(bytes, n);
  return out === bytes ? text : bytesText(out, latin1);
}

/**
 * Headers with every match replaced in their values, the values read as one text in the order they
 * came (so a value split over several lines, of one name or of several, is found); a header whose
 * name holds a match is dropped (a name cannot carry "[redacted]").
 */
export function redactHeaders(headers: HeaderList, needles: NeedleSet): HeaderList {
  const n = compileNeedles(needles);
  if (n.empty || headers.length === 0) return headers;
  const index = n.index!;
  const encoded = headers.map(([, v]) => textBytes(v));
  const starts: number[] = [];
  let total = 0;
  for (const e of encoded) starts.push(total), (total += e.bytes.length);
  const joined = new Uint8Array(total);
  encoded.forEach((e, i) => joined.set(e.bytes, starts[i]!));
  const spans = spansOf(joined, index);
  const namesEcho = headers.map(([k]) => spansOf(new Uint8Array(Buffer.from(k, "latin1")), index).length > 0);
  if (spans.length === 0 && !namesEcho.includes(true)) return headers; // the usual case: nothing to copy
  const out: HeaderList = [];
  headers.forEach(([k, v], i) => {
    if (namesEcho[i]) return;
    const { bytes, latin1 } = encoded[i]!;
    const replaced = replaceSpans(bytes, starts[i]!, spans, false);
    out.push([k, replaced.length === bytes.length && Buffer.from(replaced).equals(bytes) ? v : bytesText(replaced, latin1)]);
  });
  return out;
}

export interface Redactor {
  /** Bytes safe to emit now (what a later byte could still make part of a match is held back). */
  push(chunk: Uint8Array): Uint8Array;
  /** What was held back, at the end of the body. */
  flush(): Uint8Array;
}

/** Stateful replacement of each match across chunk boundaries. */
export function createRedactor(needles: NeedleSet, opts: RedactOptions = {}): Redactor {
  const index = compileNeedles(needles).index;
  const preserveLength = opts.preserveLength ?? false;
  if (!index) return { push: (c) => c, flush: () => new Uint8Array(0) };
  const scanner = new EchoScanner(index);
  let held: Uint8Array = new Uint8Array(0); // body bytes from offset `heldAt` on, not yet emitted
  let heldAt = 0;
  let fed = 0;
  /** Emits the held bytes before `upTo` (absolute), spans replaced, and drops what they cover. */
  const emit = (upTo: number): Uint8Array => {
    const spans = scanner.spans;
    let done = 0; // spans wholly emitted
    let cut = upTo;
    for (; done < spans.length; done += 2) {
      if (spans[done]! >= upTo) break;
      cut = Math.max(cut, spans[done + 1]!); // a span that started is replaced whole
    }
    const closed = spans.splice(0, done);
    const take = Math.max(0, Math.min(cut, heldAt + held.length) - heldAt);
    const out = closed.length ? replaceSpans(held.subarray(0, take), heldAt, closed, preserveLength) : held.subarray(0, take);
    held = held.subarray(take);
    heldAt += take;
    if (cut > heldAt) {
      // bytes of a replaced span not received yet cannot be, since spans end at fed bytes
      heldAt = cut;
    }
    return out;
  };
  return {
    push(chunk) {
      if (chunk.length === 0) return chunk;
      scanner.feed(chunk, fed);
      fed += chunk.length;
      held = held.length ? Buffer.concat([held, chunk]) : chunk;
      if (scanner.openLength > MAX_OPEN_MATCH) scanner.closeOpen();
      const out = emit(scanner.settled(fed));
      held = held.slice(); // the few bytes held back, not the whole chunk they came in
      return out;
    },
    flush() {
      scanner.end(fed);
      const out = emit(fed);
      held = new Uint8Array(0);
      return out;
    },
  };
}

/** A stream transform replacing each match. */
export function createRedactingStream(needles: NeedleSet, opts: RedactOptions = {}): TransformStream<Uint8Array, Uint8Array> {
  const redactor = createRedactor(needles, opts);
  return new TransformStream({
    transform(chunk, ctrl) {
      const out = redactor.push(chunk);
      if (out.length) ctrl.enqueue(out);
    },
    flush(ctrl) {
      const rest = redactor.flush();
      if (rest.length) ctrl.enqueue(rest);
    },
  });
}
