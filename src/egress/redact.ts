// No reveal by echo (DESIGN.md §3.15): replaces every occurrence of injected secret values with
// "[redacted]" in response headers and in (decoded) response bodies, streaming, including
// occurrences split across chunk boundaries (the last needle-length - 1 bytes are held back).
// Compressed bodies are decoded around it by content-coding.ts.

import type { HeaderList } from "./http1.ts";
import { REDACTED } from "../secret.ts";
import { echoForms } from "./echo-forms.ts";

const REPLACEMENT = new TextEncoder().encode(REDACTED);

/**
 * SECRET: the search patterns for a set of credential values, built once (the plan cache keeps one
 * per service) because deriving every echo form costs more than scanning a small response. Prints
 * as "[redacted]". Functions below also take plain string arrays (compiled on the spot).
 */
export class Needles {
  /** Header and status-line text: each echo form, also as its latin1 mis-decoding, longest first. */
  readonly text: readonly string[];
  /** `text` lower-cased, for header names (which arrive lower-cased). */
  readonly lowered: readonly string[];
  /** Body bytes: each form in UTF-8 and, with latin1 characters, as the latin1 bytes a header carried. */
  readonly bytes: readonly Uint8Array[];
  constructor(values: readonly string[]) {
    const forms = echoForms(values);
    this.text = [...new Set(forms.flatMap((f) => [f, Buffer.from(f, "utf8").toString("latin1")]))];
    this.lowered = this.text.map((f) => f.toLowerCase());
    const bytes = new Map<string, Uint8Array>();
    for (const f of forms) {
      const encodings = /[\x80-\xff]/.test(f) && !/[^\x00-\xff]/.test(f) ? [Buffer.from(f, "utf8"), Buffer.from(f, "latin1")] : [Buffer.from(f, "utf8")];
      for (const b of encodings) bytes.set(b.toString("hex"), b);
    }
    this.bytes = [...bytes.values()];
  }
  get empty(): boolean {
    return this.bytes.length === 0;
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

function replaceText(text: string, forms: readonly string[]): string {
  let out = text;
  for (const f of forms) if (out.includes(f)) out = out.split(f).join(REDACTED);
  return out;
}

/** One line of text (a status line's reason phrase, an error message) with every needle replaced. */
export function redactText(text: string, needles: NeedleSet): string {
  const n = compileNeedles(needles);
  return n.empty ? text : replaceText(text, n.text);
}

/**
 * Headers with every needle replaced in their values; a header whose name holds one is dropped
 * (a name cannot carry "[redacted]", and names arrive lower-cased, so they are compared that way).
 */
export function redactHeaders(headers: HeaderList, needles: NeedleSet): HeaderList {
  const n = compileNeedles(needles);
  if (n.empty) return headers;
  const nameEchoes = (k: string) => {
    const lower = k.toLowerCase();
    return n.lowered.some((f) => lower.includes(f));
  };
  const echoed = headers.some(([k, v]) => n.text.some((f) => v.includes(f)) || nameEchoes(k));
  if (!echoed) return headers; // the usual case: nothing to copy
  const out: HeaderList = [];
  for (const [k, v] of headers) if (!nameEchoes(k)) out.push([k, replaceText(v, n.text)]);
  return out;
}

function indexOf(hay: Uint8Array, needle: Uint8Array, from: number): number {
  const first = needle[0]!;
  for (let i = hay.indexOf(first, from); i !== -1 && i + needle.length <= hay.length; i = hay.indexOf(first, i + 1)) {
    let j = 1;
    while (j < needle.length && hay[i + j] === needle[j]) j++;
    if (j === needle.length) return i;
  }
  return -1;
}

function replaceAll(buf: Uint8Array, needles: readonly Uint8Array[]): Uint8Array {
  let out = buf;
  for (const needle of needles) {
    let at = indexOf(out, needle, 0);
    if (at === -1) continue;
    const parts: Uint8Array[] = [];
    let start = 0;
    while (at !== -1) {
      parts.push(out.subarray(start, at), REPLACEMENT);
      start = at + needle.length;
      at = indexOf(out, needle, start);
    }
    parts.push(out.subarray(start));
    out = Buffer.concat(parts);
  }
  return out;
}

/** Length of the longest tail of `buf` that is the start of some needle (what the next chunk may complete). */
function partialNeedleTail(buf: Uint8Array, needles: readonly Uint8Array[]): number {
  let best = 0;
  for (const n of needles) {
    for (let len = Math.min(n.length - 1, buf.length); len > best; len--) {
      let j = 0;
      const start = buf.length - len;
      while (j < len && buf[start + j] === n[j]) j++;
      if (j === len) {
        best = len;
        break;
      }
    }
  }
  return best;
}

/** A whole body with every needle replaced; the very same array when nothing was found. */
export function redactWhole(bytes: Uint8Array, needles: NeedleSet): Uint8Array {
  return replaceAll(bytes, compileNeedles(needles).bytes);
}

export interface Redactor {
  /** Bytes safe to emit now (a possible needle prefix at the end is held back). */
  push(chunk: Uint8Array): Uint8Array;
  /** What was held back, at the end of the body. */
  flush(): Uint8Array;
}

/** Stateful replacement of each needle across chunk boundaries; needles must be non-empty. */
export function createRedactor(needles: NeedleSet): Redactor {
  const encoded = compileNeedles(needles).bytes;
  let carry: Uint8Array = new Uint8Array(0);
  return {
    push(chunk) {
      const joined = carry.length ? Buffer.concat([carry, chunk]) : chunk;
      const replaced = replaceAll(joined, encoded);
      // Hold back only a tail that could be the start of a needle completed by the next chunk, so
      // streams (server-sent events) are not delayed. Whole needles were replaced already.
      const cut = replaced.length - partialNeedleTail(replaced, encoded);
      carry = replaced.slice(cut);
      return replaced.subarray(0, cut);
    },
    flush() {
      const rest = carry.length ? replaceAll(carry, encoded) : carry;
      carry = new Uint8Array(0);
      return rest;
    },
  };
}

/** A stream transform replacing each needle; needles must be non-empty. */
export function createRedactingStream(needles: NeedleSet): TransformStream<Uint8Array, Uint8Array> {
  const redactor = createRedactor(needles);
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
