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

/** Scans pieces read as one text; each match is recorded against the lines it covers, in their own offsets. */
function scanJoined(pieces: readonly Piece[], values: readonly Uint8Array[], needles: Needles, hits: number[][]): void {
  const total = pieces.reduce((sum, p) => sum + p.to - p.from, 0);
  if (total === 0) return;
  const joined = new Uint8Array(total);
  const starts: number[] = [];
  let at = 0;
  for (const p of pieces) {
    starts.push(at);
    const v = values[p.line]!;
    for (let k = p.from; k < p.to; k++) joined[at++] = v[k]!;
  }
  const spans = matchSpans(joined, needles);
  for (let s = 0; s < spans.length; s += 2) {
    pieces.forEach((p, i) => {
      const a = Math.max(spans[s]!, starts[i]!);
      const b = Math.min(spans[s + 1]!, starts[i]! + p.to - p.from);
      if (b > a) hits[p.line]!.push(p.from + a - starts[i]!, p.from + b - starts[i]!);
    });
  }
}

/** The list items of a value: split at commas, the blanks around them left out. */
function listItems(line: number, bytes: Uint8Array): Piece[] {
  const out: Piece[] = [];
  let from = 0;
  for (let i = 0; i <= bytes.length; i++) {
    if (i < bytes.length && bytes[i] !== 0x2c) continue;
    let a = from;
    let b = i;
    while (a < b && (bytes[a] === 0x20 || bytes[a] === 0x09)) a++;
    while (b > a && (bytes[b - 1] === 0x20 || bytes[b - 1] === 0x09)) b--;
    if (b > a) out.push({ line, from: a, to: b });
    from = i + 1;
  }
  return out;
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
  const encoded = headers.map(([, v]) => textBytes(v));
  const values = encoded.map((e) => e.bytes);
  const hits: number[][] = headers.map(() => []);
  scanJoined(
    values.map((v, line) => ({ line, from: 0, to: v.length })),
    values,
    n,
    hits,
  );
  // Per name, only where reading the lines together differs from the pass above: several lines, or list items.
  const byName = new Map<string, number[]>();
  headers.forEach(([k], line) => {
    const name = k.toLowerCase();
    const lines = byName.get(name);
    if (lines) lines.push(line);
    else byName.set(name, [line]);
  });
  for (const lines of byName.values()) {
    if (lines.length === 1 && !values[lines[0]!]!.includes(0x2c)) continue;
    scanJoined(
      lines.flatMap((line) => listItems(line, values[line]!)),
      values,
      n,
      hits,
    );
  }
  const namesEcho = echoingNames(headers, n);
  if (!hits.some((h) => h.length) && !namesEcho.size) return headers; // the usual case: nothing to copy
  const out: HeaderList = [];
  headers.forEach(([k, v], i) => {
    if (namesEcho.has(i)) return;
    out.push([k, hits[i]!.length ? bytesText(replaceHits(values[i]!, hits[i]!), encoded[i]!.latin1) : v]);
  });
  return out;
}

/** The lines whose name holds a match, all names read in one pass (a newline between them: no value holds one). */
function echoingNames(headers: HeaderList, needles: Needles): Set<number> {
  const text = Buffer.from(headers.map(([k]) => k).join("\n"), "latin1");
  const spans = matchSpans(new Uint8Array(text), needles);
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
