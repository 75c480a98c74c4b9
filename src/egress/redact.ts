// No reveal by echo (architecture.md D15, D22): replaces every occurrence of an injected value, in
// any of the forms servers quote values in, with "[redacted]" in response headers and (decoded)
// response bodies, streaming, including occurrences split across chunk boundaries. The matching is
// done in a decoding view of the bytes (echo-scanner.ts) against the value's forms
// (echo-forms.ts), indexed as 12-byte windows (needle-index.ts), so any 12 consecutive characters
// of a value are redacted too. Compressed bodies are decoded around it by content-coding.ts.

import { REDACTED } from "../secret.ts";
import { echoNeedles } from "./echo-forms.ts";
import { EchoScanner } from "./echo-scanner.ts";
import { buildIndex, combineIndexes, type NeedleIndex } from "./needle-index.ts";

const REPLACEMENT = new TextEncoder().encode(REDACTED);
/** A match still growing is closed once this long, so a body repeating a value cannot make a stream hold it all. */
const MAX_OPEN_MATCH = 64 * 1024;

/**
 * SECRET: the compiled search index for a set of credential values, built once (the plan cache keeps
 * one per host) because deriving every form costs more than scanning a small response. Prints as
 * "[redacted]". Functions below also take plain string arrays (compiled on the spot).
 */
export class Needles {
  #index: NeedleIndex | null;
  constructor(values: readonly string[]) {
    this.#index = buildIndex(echoNeedles(values));
  }
  /** @internal the windows to look for; null when there is nothing to look for. Scanners re-read it on every chunk. */
  get index(): NeedleIndex | null {
    return this.#index;
  }
  get empty(): boolean {
    return this.index === null;
  }
  /**
   * Adds values in place, so scanners already reading (a stream opened before) look for them from
   * their next byte on; false, with nothing added, when the index cannot take them (then replace).
   */
  add(values: readonly string[]): boolean {
    return this.#index !== null && this.#index.add(echoNeedles(values));
  }
  /** Builds the index anew from `values`; scanners already reading move to it at their next chunk. */
  replace(values: readonly string[]): void {
    this.#index = buildIndex(echoNeedles(values));
  }
  /**
   * SECRET: these needles and `own` together, for one request's answer: the shared set with a
   * request's own short values (which are not shared: see echo-needles.ts). Follows this set's
   * index as it changes.
   */
  with(own: Needles): Needles {
    if (own.empty) return this;
    const combined = Object.create(Needles.prototype) as Needles;
    let from: NeedleIndex | null | undefined;
    let made: NeedleIndex | null = null;
    Object.defineProperty(combined, "index", {
      get: () => {
        if (this.index !== from) (from = this.index), (made = combineIndexes(from, own.index));
        return made;
      },
    });
    return combined;
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
  /**
   * The body is UTF-16 text (its declared charset): each match is replaced on whole code units by
   * "[redacted]" in UTF-16, so the text after it still decodes. "bom": the byte order its first two
   * bytes name, big-endian without one.
   */
  readonly utf16?: "le" | "be" | "bom";
}

/** The matched spans [start, end) of a whole byte string, closed and merged, in order (none: []). */
export function matchSpans(bytes: Uint8Array, needles: Needles): number[] {
  return needles.index && bytes.length ? spansOf(bytes, needles.index) : [];
}

/** The matched spans [start, end) of a whole byte string, merged, in order. */
function spansOf(bytes: Uint8Array, index: NeedleIndex): number[] {
  // One scanner for every whole text: this runs to the end synchronously, so nothing else uses it meanwhile.
  const scanner = (wholeScanner ??= new EchoScanner(index));
  scanner.reset(index);
  scanner.feed(bytes, 0);
  scanner.end(bytes.length);
  return scanner.spans.slice();
}

let wholeScanner: EchoScanner | undefined;

function filler(length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = REPLACEMENT[i % REPLACEMENT.length]!;
  return out;
}

/** A whole body with every match replaced; the very same array when nothing was found. */
export function redactWhole(bytes: Uint8Array, needles: NeedleSet, opts: RedactOptions = {}): Uint8Array {
  const n = compileNeedles(needles);
  if (!n.index || bytes.length === 0) return bytes;
  if (spansOf(bytes, n.index).length === 0) return bytes;
  const r = createRedactor(n, opts);
  const head = r.push(bytes);
  const tail = r.flush();
  return tail.length ? Buffer.concat([head, tail]) : head;
}

export interface Redactor {
  /** Bytes safe to emit now (what a later byte could still make part of a match is held back). */
  push(chunk: Uint8Array): Uint8Array;
  /** What was held back, at the end of the body. */
  flush(): Uint8Array;
}

interface Replacement {
  /** Bytes on which output is cut: 2 for UTF-16. */
  readonly unit: number;
  /** The span a match covers once aligned to whole code units (`first`: the body's first bytes). */
  align(start: number, end: number, first: Uint8Array): [number, number];
  bytes(length: number, first: Uint8Array): Uint8Array;
}

/**
 * What a match is replaced with, and on which byte boundaries. In UTF-16 a match may begin or end
 * in the middle of a code unit (the other byte order's form, one byte off, matches too): it is
 * widened or narrowed to the units whose character bytes it holds (the low byte first in
 * little-endian, the high byte first in big-endian).
 */
function replacementFor(opts: RedactOptions): Replacement {
  if (opts.preserveLength) return { unit: 1, align: (s, e) => [s, e], bytes: (length) => filler(length) };
  if (!opts.utf16) return { unit: 1, align: (s, e) => [s, e], bytes: () => REPLACEMENT };
  const le = Buffer.from(REDACTED, "utf16le");
  const be = Buffer.from(le).swap16();
  const order = opts.utf16;
  // "bom": the byte order the body's first two bytes name (FF FE: little-endian), else big-endian (RFC 2781).
  const little = (first: Uint8Array) => order === "le" || (order === "bom" && first[0] === 0xff && first[1] === 0xfe);
  const up = (n: number) => n + (n % 2);
  const down = (n: number) => n - (n % 2);
  return {
    unit: 2,
    align: (s, e, first) => (little(first) ? [up(s), up(e)] : [down(s), down(e)]),
    bytes: (_, first) => (little(first) ? le : be),
  };
}

/** Stateful replacement of each match across chunk boundaries. */
export function createRedactor(needles: NeedleSet, opts: RedactOptions = {}): Redactor {
  const compiled = compileNeedles(needles);
  const index = compiled.index;
  if (!index) return { push: (c) => c, flush: () => new Uint8Array(0) };
  const replacement = replacementFor(opts);
  const unit = replacement.unit;
  const scanner = new EchoScanner(index, false, compiled); // follows the set as values join it
  let first: Uint8Array = new Uint8Array(0); // the body's first bytes (a UTF-16 byte order mark)
  let buf: Uint8Array = new Uint8Array(0); // body bytes from offset `bufAt` up to `fed`
  let bufAt = 0;
  let fed = 0;
  let emitted = 0; // every body byte before this offset has been answered for (may pass `fed`: a code unit's rest to swallow)
  const plain = (from: number, to: number, parts: Uint8Array[]) => {
    const a = Math.max(from, bufAt) - bufAt;
    const b = Math.min(to, fed) - bufAt;
    if (b > a) parts.push(buf.subarray(a, b));
  };
  /** Answers for the body up to `upTo` (absolute): plain bytes as they are, each span that began before it replaced whole. */
  const produce = (upTo: number): Uint8Array => {
    const spans = scanner.spans;
    const parts: Uint8Array[] = [];
    let done = 0;
    for (; done < spans.length && spans[done]! < upTo; done += 2) {
      const [aligned, end] = replacement.align(spans[done]!, spans[done + 1]!, first);
      const start = Math.max(emitted, aligned);
      if (end <= start) continue;
      plain(emitted, start, parts);
      parts.push(replacement.bytes(end - start, first));
      emitted = end;
    }
    spans.splice(0, done);
    const to = upTo - (upTo % unit);
    if (to > emitted) {
      plain(emitted, to, parts);
      emitted = to;
    }
    // Keep only what is not answered for yet (a copy: not the whole chunk it came in).
    if (emitted >= fed) (buf = new Uint8Array(0)), (bufAt = fed);
    else if (emitted > bufAt) (buf = buf.slice(emitted - bufAt)), (bufAt = emitted);
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  };
  return {
    push(chunk) {
      if (chunk.length === 0) return chunk;
      if (first.length < 2) first = Buffer.concat([first, chunk.subarray(0, 2 - first.length)]);
      scanner.feed(chunk, fed);
      if (buf.length === 0) (buf = chunk), (bufAt = fed);
      else buf = Buffer.concat([buf, chunk]);
      fed += chunk.length;
      if (scanner.openLength > MAX_OPEN_MATCH) scanner.closeOpen();
      return produce(scanner.settled(fed));
    },
    flush() {
      scanner.end(fed);
      const out = produce(fed + unit - 1); // a last odd byte of UTF-16 text goes out too
      buf = new Uint8Array(0);
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
