// The echo scanner's fast paths (plain runs found by native search and sampled by needle pieces,
// triggers read as text by lookahead, whole escapes and invisible characters read at once) change
// no output: on thousands of random bodies mixing plain text, escapes of every kind, well-formed
// and not, invisible characters, binary bytes and embedded forms of the values, fed in random
// chunkings, the scanner reports the same spans, settled offsets and open match, and is left in
// the same state (view length, last view bytes and their offsets, hashes, pending escape or
// character), after every chunk as the scanner before them (kept verbatim in
// echo-scanner-reference.ts) and as itself with the fast paths off.

import { describe, expect, test } from "bun:test";
import { EchoScanner, viewOf } from "../../../src/egress/echo-scanner.ts";
import { Needles, createRedactor, redactWhole } from "../../../src/egress/redact.ts";
import { EchoScanner as ReferenceScanner, viewOf as referenceViewOf } from "./echo-scanner-reference.ts";

/** mulberry32, so a failure reproduces from its seed. */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const enc = (s: string) => new Uint8Array(Buffer.from(s, "utf8"));
const hex2 = (b: number, upper: boolean) => b.toString(16).padStart(2, "0")[upper ? "toUpperCase" : "toLowerCase"]();

const VALUES = [
  "sk-live-4eC39HqLyjWDarjtT1zdp7dc9Fz2",
  "tok_9f8e7d6c5b4a",
  'p@ss/wörd+"x"=ÿ &amp;%41\\u0041',
  "hunter2", // a group of its own width (7)
  "abcdefghi", // 9
  "xyz", // too short for sampling: every run byte by byte
  "AKIAIOSFODNN7EXAMPLE",
  "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
];

/** The needle sets the bodies are scanned for: with and without short values (other groups, no sampler). */
const SETS = [[VALUES[0]!], [VALUES[1]!, VALUES[2]!], [VALUES[3]!, VALUES[0]!], [VALUES[4]!, VALUES[6]!, VALUES[7]!], [VALUES[5]!, VALUES[0]!], VALUES].map(
  (values) => ({ values, needles: new Needles(values) }),
);

type Rnd = () => number;
const pick = <T>(rnd: Rnd, xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
const int = (rnd: Rnd, n: number) => Math.floor(rnd() * n);

const PLAIN = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 {}[]":,.-_/+=?!\n\t*#;xX';
const INVISIBLE = [
  "\u00ad",
  "\u034f",
  "\u061c",
  "\u115f",
  "\u1160",
  "\u17b4",
  "\u180b",
  "\u180e",
  "\u200b",
  "\u200c",
  "\u200d",
  "\u200e",
  "\u200f",
  "\u202a",
  "\u202e",
  "\u2060",
  "\u2061",
  "\u2064",
  "\u2066",
  "\u206f",
  "\u3164",
  "\ufe00",
  "\ufe0f",
  "\ufeff",
  "\uffa0",
  "&shy;",
  "&shy",
  "&ZeroWidthSpace;",
  "&zwnj;",
  "&NoBreak;",
  "&NegativeVeryThinSpace;",
];
// UTF-8 that starts like an invisible character and is not one (lead bytes 0xC2 0xCD 0xE1 0xE2 0xEF).
const NEAR_INVISIBLE = [
  "\u00a0",
  "\u00e9",
  "\u0350",
  "\u061b",
  "\u115e",
  "\u17b6",
  "\u1800",
  "\u2019",
  "\u201c",
  "\u2029",
  "\u2065",
  "\u2070",
  "\u3165",
  "\ufe10",
  "\ufeee",
  "\uffa1",
  "\uff21",
  "€",
  "…",
  "ö",
];
const MALFORMED = [
  // percent and numeric references, cut short or out of range
  "%",
  "%4",
  "%zz",
  "%g1",
  "&",
  "&#",
  "&#;",
  "&#x;",
  "&#xg",
  "&#0;",
  "&#1114112;",
  "&#x110000;",
  "&#" + "0".repeat(70) + "65;",
  // names: unknown, unended, of the wrong case, one letter too many
  "&bogus;",
  "&amp",
  "&ampx;",
  "&QUOT",
  "&Amp;",
  "&quota;",
  "&QUOTA;",
  "&aposa;",
  "&ltt;",
  "&l;",
  "&abcdefg;",
  // legacy names without ';' (read as a prefix), long names, one letter past the longest
  "&shyk",
  "&ampamp;",
  "&nbspx",
  "&lowbar;",
  "&period;",
  "&colon;",
  "&ZeroWidthSpac;",
  "&NegativeVeryThinSpacex;",
  "&" + "a".repeat(30) + ";",
  "&shy" + "b".repeat(30),
  // backslash escapes: unknown, cut short, surrogates alone and in pairs
  "\\",
  "\\q",
  "\\u",
  "\\x",
  "\\u12",
  "\\u12g4",
  "\\x4",
  "\\xzz",
  "\\ud83d",
  "\\ud83dx",
  "\\ude00",
  "\\ud83d\\ude00",
  "\\ud83d\\u0041",
  "\\ud83d%41",
  "\\ud83d\\n",
  // %uXXXX (surrogate pairs too), \u{...}, octal: well-formed, cut short, without their end
  "%u0073",
  "%U004B",
  "%uD83D%uDE00",
  "%uD83D\\uDE00",
  "\\uD83D%uDE00",
  "%u",
  "%u12",
  "%u12g4",
  "%uzz",
  "\\u{73}",
  "\\u{1F600}",
  "\\u{0000000000041}",
  "\\u{D83D}\\u{DE00}",
  "\\u{}",
  "\\u{41",
  "\\u{41x",
  "\\u{110000}",
  "\\u{" + "0".repeat(70) + "41}",
  "\\163",
  "\\053",
  "\\377",
  "\\0",
  "\\08",
  "\\4",
  "\\39",
  "\\1234",
  // invisible characters spelt by escapes
  "%C2%AD",
  "%e2%80%8b",
  "%C2\u00ad",
  "&#173;&#173;",
];

/** Lead bytes of invisible characters whose other bytes come escaped (the view decodes, then drops). */
const RAW = [
  [0xc2, ..."%AD"],
  [0xc2, ..."%ad%41"],
  [0xe2, ..."%80%8B"],
  [0xe2, 0x80, ..."%8b"],
  [0xe2, ..."%80", 0x8b],
  [0xef, ..."\\u00bb", 0xbf],
  [0xcd, ..."&#143;"],
  [0xc2, ..."&#xad"],
  [0xe1, 0xa0, ..."%8E"],
  [0xc2, 0xc2, 0xad],
  [0xe2, 0x80, 0x80],
].map((parts) => Uint8Array.from(parts.map((p) => (typeof p === "string" ? p.charCodeAt(0) : p))));

function plain(rnd: Rnd, len: number): string {
  let s = "";
  for (let i = 0; i < len; i++) s += PLAIN[int(rnd, PLAIN.length)];
  return s;
}

/** One character as one of the escapes the view reads (or as itself). */
function escaped(rnd: Rnd, ch: string): string {
  const cp = ch.codePointAt(0)!;
  const bytes = [...Buffer.from(ch, "utf8")];
  switch (int(rnd, 9)) {
    case 0:
      return bytes.map((b) => `%${hex2(b, rnd() < 0.5)}`).join("");
    case 1:
      return `&#${"0".repeat(int(rnd, 3))}${cp};`;
    case 2:
      return `&#${rnd() < 0.5 ? "x" : "X"}${cp.toString(16)}${rnd() < 0.7 ? ";" : ""}`;
    case 3: {
      const units = ch.length === 2 ? [ch.charCodeAt(0), ch.charCodeAt(1)] : [cp];
      return units.map((u) => `\\u${u.toString(16).padStart(4, "0")}`).join("");
    }
    case 4:
      return cp < 0x100 ? `\\x${hex2(cp, rnd() < 0.5)}` : ch;
    case 5: {
      const named: Record<string, string[]> = {
        "&": ["&amp;", "&AMP;", "&amp"],
        "<": ["&lt;", "&lt"],
        ">": ["&gt;"],
        '"': ["&quot;", '\\"'],
        "'": ["&apos;", "\\'"],
        "/": ["\\/", "&sol;"],
        "\\": ["\\\\", "&bsol;"],
        "\n": ["\\n"],
        _: ["&lowbar;", "&UnderBar;"],
        ".": ["&period;"],
        "-": ["&#45;"],
        ":": ["&colon;"],
        "+": ["&plus;"],
        "=": ["&equals;"],
      };
      return named[ch] ? pick(rnd, named[ch]!) : ch;
    }
    case 6:
      return rnd() < 0.5 ? ch.toUpperCase() : ch.toLowerCase();
    default:
      return ch;
  }
}

/** A form of a value as a body might carry it, or a piece of one. */
function form(rnd: Rnd, value: string): string {
  let v = value;
  const r = rnd();
  if (r < 0.15)
    v = value.slice(int(rnd, value.length), value.length); // a tail
  else if (r < 0.3) {
    const start = int(rnd, value.length);
    v = value.slice(start, start + 10 + int(rnd, 5)); // about 12 characters: near misses and hits
  }
  switch (int(rnd, 9)) {
    case 0:
      return [...v].map((c) => escaped(rnd, c)).join("");
    case 1: {
      const chars = [...v];
      return chars.map((c) => (rnd() < 0.3 ? c + pick(rnd, INVISIBLE).repeat(1 + int(rnd, 2)) : c)).join("");
    }
    case 2:
      return Buffer.from(v).toString(rnd() < 0.5 ? "base64" : "base64url");
    case 3:
      return Buffer.from(v).toString("hex");
    case 4:
      return [...v].map((c) => (rnd() < 0.5 ? c.toUpperCase() : c.toLowerCase())).join("");
    case 5: // a few characters escaped: plain runs of every length between them
      return [...v].map((c) => (rnd() < 0.12 ? escaped(rnd, c) : rnd() < 0.05 ? c + pick(rnd, INVISIBLE) : c)).join("");
    default:
      return v;
  }
}

function body(rnd: Rnd, values: readonly string[]): Uint8Array {
  const parts: Uint8Array[] = [];
  const segments = 1 + int(rnd, 14);
  for (let s = 0; s < segments; s++) {
    const r = rnd();
    if (r < 0.25) parts.push(enc(plain(rnd, int(rnd, rnd() < 0.2 ? 400 : 60))));
    else if (r < 0.5) parts.push(enc(plain(rnd, int(rnd, 40)) + form(rnd, pick(rnd, values)) + plain(rnd, int(rnd, 40))));
    else if (r < 0.6) parts.push(enc(pick(rnd, MALFORMED)));
    else if (r < 0.67) parts.push(enc(escaped(rnd, pick(rnd, [..."aZ%&\\/<>\"'\n", "é", "€", "😀", "\u00ad"]))));
    else if (r < 0.74) parts.push(enc(rnd() < 0.1 ? pick(rnd, INVISIBLE).repeat(60 + int(rnd, 20)) : pick(rnd, INVISIBLE)));
    else if (r < 0.77) parts.push(enc(pick(rnd, NEAR_INVISIBLE)));
    else if (r < 0.8) parts.push(pick(rnd, RAW));
    else if (r < 0.9) {
      const bin = new Uint8Array(int(rnd, 120));
      const dense = rnd() < 0.5; // triggers and lead bytes often, or uniform bytes
      for (let i = 0; i < bin.length; i++)
        bin[i] = dense && rnd() < 0.3 ? pick(rnd, [0x25, 0x26, 0x5c, 0xc2, 0xcd, 0xe1, 0xe2, 0xef, 0x80, 0xad, 0xbb, 0xbf, 0x3b, 0x23]) : int(rnd, 256);
      parts.push(bin);
    } else parts.push(enc(pick(rnd, values).repeat(1 + int(rnd, 4))));
  }
  return Buffer.concat(parts);
}

function cuts(rnd: Rnd, length: number): number[] {
  const r = rnd();
  if (r < 0.1) return Array.from({ length }, (_, i) => i); // a byte at a time
  if (r < 0.3) return [];
  return Array.from({ length: 1 + int(rnd, 10) }, () => int(rnd, length + 1)).sort((a, b) => a - b);
}

interface Scanner {
  feed(bytes: Uint8Array, at: number): void;
  end(end: number): void;
  settled(end: number): number;
  closeOpen(): void;
  readonly openLength: number;
  readonly spans: number[];
}

/** The state the next bytes are read in (private fields, the same in both classes). */
interface Internals {
  pos: number;
  ring: Uint8Array;
  ringStart: Float64Array;
  hashes: Int32Array;
  ignorableRun: number;
  esc: number;
  heldLen: number;
  highSurrogate: number;
}

/** The view's length, its last bytes (as far back as anything reads) and the rest of the state. */
function state(scanner: Scanner, longest: number): string {
  const s = scanner as unknown as Internals;
  const last: string[] = [];
  for (let q = Math.max(0, s.pos - longest); q < s.pos; q++) last.push(`${s.ring[q & 15]}@${s.ringStart[q & 15]}`);
  return `pos ${s.pos} view ${last.join(" ")} hashes ${[...s.hashes]} ignorable ${s.ignorableRun} esc ${s.esc} held ${s.heldLen} high ${s.highSurrogate}`;
}

/** Everything a redactor reads from a scanner, and the state it is left in, after every chunk. */
function trace(scanner: Scanner, bytes: Uint8Array, at: number[], closeAbove: number, longest: number): string[] {
  const out: string[] = [];
  let fed = 0;
  for (const c of [...at, bytes.length]) {
    if (c < fed) continue;
    scanner.feed(bytes.subarray(fed, c), fed);
    fed = c;
    out.push(state(scanner, longest));
    out.push(`open ${scanner.openLength}`);
    if (scanner.openLength > closeAbove) scanner.closeOpen();
    out.push(`settled ${scanner.settled(fed)} spans ${scanner.spans.join(",")}`);
  }
  scanner.end(fed);
  out.push(`end spans ${scanner.spans.join(",")}`);
  return out;
}

describe("the fast scanner reads as the byte-by-byte one", () => {
  test("random bodies, random chunkings, every needle set", () => {
    const rnd = prng(0x5ca22e7);
    let withSpans = 0;
    for (let round = 0; round < 4000; round++) {
      const { values, needles } = SETS[round % SETS.length]!;
      const index = needles.index!;
      const bytes = body(rnd, values);
      const at = cuts(rnd, bytes.length);
      const closeAbove = rnd() < 0.2 ? 24 + int(rnd, 40) : Infinity;
      const expected = trace(new ReferenceScanner(index), bytes, at, closeAbove, index.longest);
      const label = `round ${round}: ${Buffer.from(bytes).toString("base64")} cuts ${at}`;
      expect(trace(new EchoScanner(index), bytes, at, closeAbove, index.longest), label).toEqual(expected);
      expect(trace(new EchoScanner(index, true), bytes, at, closeAbove, index.longest), label).toEqual(expected);
      if (expected[expected.length - 1] !== "end spans ") withSpans++;
    }
    expect(withSpans).toBeGreaterThan(1000); // the bodies do hold echoes
  }, 60_000);

  test("long plain runs with values at every offset from the sampling grid", () => {
    const rnd = prng(42);
    for (const { values, needles } of SETS) {
      const index = needles.index!;
      for (const value of values) {
        for (let offset = 0; offset < 20; offset++) {
          for (const piece of [value, value.slice(0, 12), value.slice(1, 12), value.slice(-12), value.toUpperCase()]) {
            const bytes = enc(plain(rnd, offset) + piece + plain(rnd, int(rnd, 40)) + "%20" + plain(rnd, 30) + piece + plain(rnd, offset));
            const at = cuts(rnd, bytes.length);
            expect(trace(new EchoScanner(index), bytes, at, Infinity, index.longest)).toEqual(
              trace(new ReferenceScanner(index), bytes, at, Infinity, index.longest),
            );
          }
        }
      }
    }
  });

  test("the view (needles' own form) is unchanged", () => {
    const rnd = prng(7);
    for (let round = 0; round < 1000; round++) {
      const bytes = body(rnd, VALUES);
      expect(Buffer.from(viewOf(bytes)).equals(Buffer.from(referenceViewOf(bytes)))).toBe(true);
    }
  });

  test("the redactor: streamed in any chunking as whole", () => {
    const rnd = prng(99);
    for (let round = 0; round < 500; round++) {
      const { values, needles } = SETS[round % SETS.length]!;
      const bytes = body(rnd, values);
      const r = createRedactor(needles);
      const parts: Uint8Array[] = [];
      let fed = 0;
      for (const c of [...cuts(rnd, bytes.length), bytes.length]) {
        if (c < fed) continue;
        parts.push(r.push(bytes.slice(fed, c)));
        fed = c;
      }
      parts.push(r.flush());
      expect(Buffer.concat(parts).equals(Buffer.from(redactWhole(bytes, needles)))).toBe(true);
    }
  });
});
