// No reveal by echo in header text (architecture.md D22): status lines, header values and names. A
// value split over header lines is found by reading lines together, as an agent could join them:
// every value in the order it came (a value split over lines of different names, side by side),
// and the lines of each name with their list items joined without the commas and blanks between
// them (a value split over lines of one name, wherever the lines sit, or over the items of one
// line, as an HTTP/2 hop folds same-named fields into "a, b").

import type { HeaderList } from "../http/index.ts";
import { compileNeedles, matchSpans, redactWhole, type Needles, type NeedleSet } from "./redact.ts";
import { REDACTED } from "../secret.ts";

/** Header text as the bytes it travelled as: latin1 when it fits (HTTP/1.1 heads are read so), else UTF-8. */
function textBytes(text: string): { bytes: Uint8Array; latin1: boolean } {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 0xff) return { bytes: new Uint8Array(Buffer.from(text, "utf8")), latin1: false };
    bytes[i] = c;
  }
  return { bytes, latin1: true };
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

/** A stretch of one header's value bytes, [from, to). */
interface Piece {
  readonly line: number;
  readonly from: number;
  readonly to: number;
}

/**
 * Every value's bytes side by side in one buffer (the first pass reads them so): line i is
 * bytes[starts[i], starts[i + 1]); `wide` marks the lines beyond latin1, held as UTF-8.
 */
interface Values {
  readonly bytes: Uint8Array;
  readonly starts: Int32Array;
  readonly wide: ReadonlySet<number> | undefined;
}

function joinValues(headers: HeaderList): Values {
  const n = headers.length;
  const starts = new Int32Array(n + 1);
  let utf8: Map<number, Uint8Array> | undefined;
  let total = 0;
  for (let i = 0; i < n; i++) {
    starts[i] = total;
    const v = headers[i]![1];
    if (isLatin1(v)) total += v.length;
    else {
      const b = Buffer.from(v, "utf8");
      (utf8 ??= new Map()).set(i, b);
      total += b.length;
    }
  }
  starts[n] = total;
  const bytes = new Uint8Array(total);
  for (let i = 0; i < n; i++) {
    const wide = utf8?.get(i);
    if (wide) bytes.set(wide, starts[i]);
    else {
      const v = headers[i]![1];
      for (let k = 0, at = starts[i]!; k < v.length; k++) bytes[at++] = v.charCodeAt(k);
    }
  }
  return { bytes, starts, wide: utf8 && new Set(utf8.keys()) };
}

function isLatin1(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0xff) return false;
  return true;
}

/** Each line's matches, in its own offsets; a line's list made only when it has one. */
type Hits = (number[] | undefined)[];

function addHit(hits: Hits, line: number, from: number, to: number): void {
  (hits[line] ??= []).push(from, to);
}

/** The first pass: every value in the order it came, read as one text (a value split over lines of different names). */
function scanValues(values: Values, needles: Needles, hits: Hits): void {
  const spans = matchSpans(values.bytes, needles);
  const { starts } = values;
  for (let s = 0; s < spans.length; s += 2) {
    for (let line = 0; line + 1 < starts.length; line++) {
      const a = Math.max(spans[s]!, starts[line]!);
      const b = Math.min(spans[s + 1]!, starts[line + 1]!);
      if (b > a) addHit(hits, line, a - starts[line]!, b - starts[line]!);
    }
  }
}

/** Scans pieces read as one text; each match is recorded against the lines it covers, in their own offsets. */
function scanJoined(pieces: readonly Piece[], values: Values, needles: Needles, hits: Hits): void {
  const total = pieces.reduce((sum, p) => sum + p.to - p.from, 0);
  if (total === 0) return;
  const joined = new Uint8Array(total);
  const starts: number[] = [];
  let at = 0;
  for (const p of pieces) {
    starts.push(at);
    const base = values.starts[p.line]!;
    for (let k = base + p.from; k < base + p.to; k++) joined[at++] = values.bytes[k]!;
  }
  const spans = matchSpans(joined, needles);
  for (let s = 0; s < spans.length; s += 2) {
    pieces.forEach((p, i) => {
      const a = Math.max(spans[s]!, starts[i]!);
      const b = Math.min(spans[s + 1]!, starts[i]! + p.to - p.from);
      if (b > a) addHit(hits, p.line, p.from + a - starts[i]!, p.from + b - starts[i]!);
    });
  }
}

/** The list items of a value: split at commas, the blanks around them left out. */
function listItems(line: number, values: Values): Piece[] {
  const { bytes } = values;
  const base = values.starts[line]!;
  const length = values.starts[line + 1]! - base;
  const out: Piece[] = [];
  let from = 0;
  for (let i = 0; i <= length; i++) {
    if (i < length && bytes[base + i] !== 0x2c) continue;
    let a = from;
    let b = i;
    while (a < b && (bytes[base + a] === 0x20 || bytes[base + a] === 0x09)) a++;
    while (b > a && (bytes[base + b - 1] === 0x20 || bytes[base + b - 1] === 0x09)) b--;
    if (b > a) out.push({ line, from: a, to: b });
    from = i + 1;
  }
  return out;
}

/** Whether line `line`'s value holds a comma (a list). */
function holdsComma(values: Values, line: number): boolean {
  for (let k = values.starts[line]!; k < values.starts[line + 1]!; k++) if (values.bytes[k] === 0x2c) return true;
  return false;
}

/** `bytes` with the spans [s, e) of `hits` (unsorted, may overlap) replaced by "[redacted]". */
function replaceHits(bytes: Uint8Array, hits: number[]): Uint8Array {
  const pairs: [number, number][] = [];
  for (let i = 0; i < hits.length; i += 2) pairs.push([hits[i]!, hits[i + 1]!]);
  pairs.sort((x, y) => x[0] - y[0]);
  const parts: Uint8Array[] = [];
  let at = 0;
  const replacement = Buffer.from(REDACTED, "latin1");
  for (let i = 0; i < pairs.length; ) {
    let [s, e] = pairs[i++]!;
    while (i < pairs.length && pairs[i]![0] < e) e = Math.max(e, pairs[i++]![1]);
    parts.push(bytes.subarray(at, s), replacement);
    at = e;
  }
  parts.push(bytes.subarray(at));
  return Buffer.concat(parts);
}

/**
 * Headers with every match replaced in their values (read together as the module comment says); a
 * header whose name holds a match is dropped (a name cannot carry "[redacted]").
 */
export function redactHeaders(headers: HeaderList, needles: NeedleSet): HeaderList {
  const n = compileNeedles(needles);
  if (n.empty || headers.length === 0) return headers;
  const values = joinValues(headers);
  const hits: Hits = [];
  scanValues(values, n, hits);
  // Per name, only where reading the lines together differs from the pass above: several lines, or list items.
  for (const lines of linesByName(headers)) {
    if (lines.length === 1 && !holdsComma(values, lines[0]!)) continue;
    scanJoined(
      lines.flatMap((line) => listItems(line, values)),
      values,
      n,
      hits,
    );
  }
  const namesEcho = echoingNames(headers, n);
  if (hits.length === 0 && !namesEcho.size) return headers; // the usual case: nothing to copy
  const out: HeaderList = [];
  headers.forEach(([k, v], i) => {
    if (namesEcho.has(i)) return;
    const found = hits[i];
    const value = () => values.bytes.slice(values.starts[i], values.starts[i + 1]);
    out.push([k, found ? bytesText(replaceHits(value(), found), !values.wide?.has(i)) : v]);
  });
  return out;
}

/** The lines of each name (compared lower-case), in order: pairwise for a short list, through a map for a long one. */
function linesByName(headers: HeaderList): number[][] {
  const lower = headers.map(([k]) => k.toLowerCase());
  if (lower.length > 16) {
    const byName = new Map<string, number[]>();
    lower.forEach((name, line) => {
      const lines = byName.get(name);
      if (lines) lines.push(line);
      else byName.set(name, [line]);
    });
    return [...byName.values()];
  }
  const out: number[][] = [];
  const taken = new Uint8Array(lower.length);
  for (let i = 0; i < lower.length; i++) {
    if (taken[i]) continue;
    const lines = [i];
    for (let j = i + 1; j < lower.length; j++) if (!taken[j] && lower[j] === lower[i]) (taken[j] = 1), lines.push(j);
    out.push(lines);
  }
  return out;
}

/** The lines whose name holds a match, all names read in one pass (a newline between them: no value holds one). */
function echoingNames(headers: HeaderList, needles: Needles): Set<number> {
  let total = headers.length - 1;
  for (const [k] of headers) total += k.length;
  // As latin1 (each character's low byte), the way the names travel in an HTTP/1.1 head.
  const text = new Uint8Array(total);
  let at = 0;
  for (const [k] of headers) {
    if (at > 0) text[at++] = 10;
    for (let i = 0; i < k.length; i++) text[at++] = k.charCodeAt(i) & 0xff;
  }
  const spans = matchSpans(text, needles);
  const out = new Set<number>();
  if (spans.length === 0) return out;
  let start = 0;
  headers.forEach(([k], i) => {
    const end = start + k.length;
    for (let s = 0; s < spans.length; s += 2) if (spans[s]! < end && spans[s + 1]! > start) out.add(i);
    start = end + 1;
  });
  return out;
}
