// The leak checker for the echo-forms tests (issue 31 item 5): does anything an agent received reveal a
// credential value in a form a server quotes values in? It decodes every view it can think of (text
// encodings: UTF-8, latin1, UTF-16 either way and alignment, EBCDIC; HTML entities with or without ';',
// JSON/JS/octal escapes, percent-escapes and %uXXXX, quoted-printable, overlong UTF-8, tags, invisible
// characters, NFKC; base64/base64url at every alignment, hex and hex dumps, gzip inside them; all of
// it repeated for nested forms; same-named header lines and list items joined; case) and looks for
// the value and for any 12-character run of it. It says WHAT it found and where, never the value.

import zlib from "node:zlib";

/** Soft hyphen, zero-width and other invisible format characters a value may be interleaved with. */
const INVISIBLE = /[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]/g;
const NAMED: Record<string, string> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  shy: "",
  zwj: "",
  zwnj: "",
  zerowidthspace: "",
  nobreak: "",
  invisibletimes: "",
  invisibleseparator: "",
  invisiblecomma: "",
  applyfunction: "",
  nbsp: "\u00a0",
  lrm: "",
  rlm: "",
  colon: ":",
  sol: "/",
  period: ".",
  lowbar: "_",
  hyphen: "-",
  dash: "-",
  plus: "+",
  equals: "=",
  num: "#",
  percnt: "%",
  comma: ",",
  semi: ";",
  excl: "!",
};
/** Unicode tag characters (invisible). */
const TAGS = /[\u{e0000}-\u{e007f}]/gu;
/** The shortest run of a value that counts as revealing it (what item 5 asks to redact). */
export const RUN = 12;
const MAX_DEPTH = 3;
const MAX_VIEWS = 4000;

function codePoint(n: number): string {
  return Number.isInteger(n) && n >= 0 && n <= 0x10ffff ? String.fromCodePoint(n) : "";
}

/** HTML character references: numeric (decimal/hex, any leading zeros, semicolon optional) and the named ones that matter. */
export function decodeHtml(t: string): string {
  return (
    t
      .replace(/&#[xX]0*([0-9a-fA-F]{1,8});?/g, (_, h: string) => codePoint(parseInt(h, 16)))
      .replace(/&#0*([0-9]{1,9});?/g, (_, d: string) => codePoint(parseInt(d, 10)))
      .replace(/&([a-zA-Z]{2,31});?/g, (m, n: string) => NAMED[n.toLowerCase()] ?? m)
      // Legacy references browsers decode without a semicolon, even before letters ("&shyabc" in text).
      .replace(/&(shy|amp|lt|gt|quot|nbsp)/gi, (_, n: string) => NAMED[n.toLowerCase()]!)
  );
}

/** JSON/JavaScript string escapes, read left to right (so `\\u0073` is a backslash and "u0073", read again next round). */
export function decodeJsonEscapes(t: string): string {
  return t.replace(
    /\\(?:[uU]\{([0-9a-fA-F]{1,6})\}|[uU]([0-9a-fA-F]{4})|[xX]([0-9a-fA-F]{2})|([0-7]{3})|([\s\S]))/g,
    (m, braced?: string, u?: string, x?: string, oct?: string, one?: string) => {
      if (braced) return codePoint(parseInt(braced, 16));
      if (u) return String.fromCharCode(parseInt(u, 16));
      if (x) return String.fromCharCode(parseInt(x, 16));
      if (oct) return String.fromCharCode(parseInt(oct, 8));
      return one !== undefined && "\\/\"'`-".includes(one) ? one : m;
    },
  );
}

/** Percent-escapes (and %uXXXX), each run of bytes read as UTF-8 when it is valid, else as latin1. */
export function decodePercent(t: string): string {
  return t
    .replace(/%[uU]([0-9a-fA-F]{4})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)))
    .replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => {
      const bytes = Buffer.from(run.replace(/%/g, ""), "hex");
      try {
        return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      } catch {
        return foldOverlong(bytes.toString("latin1"));
      }
    });
}

/** Quoted-printable (=XX, upper-case hex as RFC 2045 writes it; soft line breaks dropped). */
function decodeQuotedPrintable(t: string): string {
  return t.replace(/=\r?\n/g, "").replace(/(?:=[0-9A-F]{2})+/g, (run) => {
    const bytes = Buffer.from(run.replace(/=/g, ""), "hex");
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      return foldOverlong(bytes.toString("latin1"));
    }
  });
}

/** Overlong UTF-8 for ASCII (C0/C1 xx, E0 80-81 xx), as read byte-wise in latin1 text: what a lenient decoder makes of it. */
function foldOverlong(t: string): string {
  return t
    .replace(/[\xc0\xc1][\x80-\xbf]/g, (m) => String.fromCharCode(((m.charCodeAt(0) & 0x1f) << 6) | (m.charCodeAt(1) & 0x3f)))
    .replace(/\xe0[\x80\x81][\x80-\xbf]/g, (m) => String.fromCharCode(((m.charCodeAt(1) & 0x3f) << 6) | (m.charCodeAt(2) & 0x3f)));
}

/** Every textual unescaping at once, repeated until nothing changes (double escapes, mixed escapes). */
export function unescapeAll(t: string): string {
  let cur = t;
  for (let i = 0; i < 8; i++) {
    const next = decodeQuotedPrintable(decodeHtml(decodeJsonEscapes(decodePercent(foldOverlong(cur)))))
      .replace(/<\/?[a-zA-Z][^<>]{0,64}>|<!--[\s\S]{0,64}?-->/g, "") // tags (<wbr>, <b></b>) and comments, as a browser renders the text
      .replace(/\x1b\[[0-9;]{0,16}[A-Za-z]/g, "") // ANSI escapes, as a terminal shows the text
      .replace(INVISIBLE, "")
      .replace(TAGS, "")
      .replace(/\0/g, "");
    if (next === cur) break;
    cur = next;
  }
  return cur;
}

function utf16(bytes: Buffer, bigEndian: boolean, offset: number): string {
  const b = Buffer.from(bytes.subarray(offset, offset + ((bytes.length - offset) & ~1)));
  if (bigEndian) b.swap16();
  return b.toString("utf16le");
}

/** EBCDIC (code page 037) letters, digits and common punctuation, back to ASCII. */
const FROM_CP037 = new Map<number, string>([
  [0x40, " "],
  [0x4b, "."],
  [0x4e, "+"],
  [0x60, "-"],
  [0x61, "/"],
  [0x6b, ","],
  [0x6d, "_"],
  [0x7a, ":"],
  [0x7e, "="],
  [0x25, "\n"],
]);
for (let i = 0; i < 26; i++) {
  const code = i < 9 ? 0x81 + i : i < 18 ? 0x91 + i - 9 : 0xa2 + i - 18;
  FROM_CP037.set(code, String.fromCharCode(97 + i)).set(code + 0x40, String.fromCharCode(65 + i));
}
for (let i = 0; i < 10; i++) FROM_CP037.set(0xf0 + i, String(i));

/** Text as EBCDIC (code page 037) bytes, for the characters the tests use ("?" for any other). */
export function encodeCp037(text: string): Buffer {
  const to = new Map([...FROM_CP037].map(([b, c]) => [c, b]));
  return Buffer.from([...text].map((c) => to.get(c) ?? 0x6f));
}

/** EBCDIC (code page 037) bytes as text, for the characters the tests use. */
export function decodeCp037(bytes: Buffer): string {
  return [...bytes].map((b) => FROM_CP037.get(b) ?? "\ufffd").join("");
}

/** The ways a byte string may be read as text. */
function textsOf(bytes: Buffer): [string, string][] {
  const out: [string, string][] = [
    ["utf8", bytes.toString("utf8")],
    ["latin1", bytes.toString("latin1")],
    ["cp037", decodeCp037(bytes)],
  ];
  if (bytes.length >= 4) {
    for (const off of [0, 1]) {
      out.push([`utf16le@${off}`, utf16(bytes, false, off)], [`utf16be@${off}`, utf16(bytes, true, off)]);
    }
  }
  return out;
}

/** Header lines ("name: value") of one name, joined without a separator: a value split over several lines. */
function joinedHeaderLines(t: string): string | undefined {
  const groups = new Map<string, string[]>();
  for (const line of t.split(/\r?\n/)) {
    const m = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$/.exec(line);
    if (!m) continue;
    const name = m[1]!.toLowerCase();
    groups.set(name, [...(groups.get(name) ?? []), m[2]!]);
  }
  const joined = [...groups.values()].filter((v) => v.length > 1).map((v) => v.join(""));
  return joined.length ? joined.join("\n") : undefined;
}

/** The starting views of what was received: its text decodings, plus header lines and list items rejoined. */
function baseViews(received: string | Buffer): [string, string][] {
  const out: [string, string][] = [];
  if (typeof received === "string") {
    out.push(["text", received]);
    // A header value read as latin1 that carries UTF-8 (or UTF-16) bytes.
    if (!/[^\x00-\xff]/.test(received)) out.push(...textsOf(Buffer.from(received, "latin1")).map(([d, t]): [string, string] => [`text>bytes>${d}`, t]));
  } else {
    out.push(...textsOf(received));
  }
  const extra: [string, string][] = [];
  for (const [d, t] of out) {
    const joined = joinedHeaderLines(t);
    if (joined) extra.push([`${d}>same-named lines joined`, joined]);
    // Same-named lines folded into one value by the client (", "), or list items meant to be concatenated.
    if (/,/.test(t)) extra.push([`${d}>list separators removed`, t.replace(/,[ \t]*/g, "")]);
    // Line-wrapped encodings (base64 folded every few characters).
    if (/\s/.test(t)) extra.push([`${d}>whitespace removed`, t.replace(/\s+/g, "")]);
  }
  return [...out, ...extra];
}

/** base64/base64url runs decoded from each of the four starting offsets, and hex runs from both. */
function decodedRuns(t: string): [string, Buffer][] {
  const out: [string, Buffer][] = [];
  for (const m of t.matchAll(/[A-Za-z0-9+/_-]{8,}={0,2}/g)) {
    const run = m[0].replace(/=+$/, "");
    const url = /[-_]/.test(run);
    for (let off = 0; off < 4 && run.length - off >= 8; off++) {
      const s = run.slice(off).replace(/-/g, "+").replace(/_/g, "/");
      out.push([`${url ? "base64url" : "base64"}@${off}`, Buffer.from(s.slice(0, s.length - (s.length % 4 === 1 ? 1 : 0)), "base64")]);
    }
  }
  for (const m of t.matchAll(/[0-9a-fA-F]{16,}/g)) {
    for (const off of [0, 1]) out.push([`hex@${off}`, Buffer.from(m[0].slice(off, m[0].length - ((m[0].length - off) % 2)), "hex")]);
  }
  // Hex dumps: byte pairs with separators, 0x prefixes ("73 6b 2d", "736b 2d6c", "0x73,0x6b").
  for (const m of t.matchAll(/(?:(?:0[xX])?[0-9a-fA-F]{2,4}[\s:,.;-]+){6,}(?:0[xX])?[0-9a-fA-F]{2,4}/g)) {
    const digits = m[0].replace(/0[xX]/g, "").replace(/[^0-9a-fA-F]/g, "");
    out.push(["hex dump", Buffer.from(digits.slice(0, digits.length & ~1), "hex")]);
  }
  // A gzip stream inside a decoded blob.
  for (const [how, b] of [...out]) {
    if (b[0] === 0x1f && b[1] === 0x8b) {
      try {
        out.push([`${how}>gunzip`, zlib.gunzipSync(b)]);
      } catch {}
    }
  }
  return out;
}

/**
 * What `received` reveals of `value`: a description of what was found (the whole value before any
 * 12-character run of it) and the view it was decoded in, never the value; null when nothing was.
 */
export function revealed(received: string | Buffer, value: string): string | null {
  if (!value) throw new Error("revealed: empty value");
  const views = viewsOf(received);
  const whole = value.toLowerCase();
  for (const [desc, text] of views) if (text.toLowerCase().includes(whole)) return `the whole value (${whole.length} chars) in view ${desc}`;
  for (let i = 0; i + RUN <= whole.length; i++) {
    const run = whole.slice(i, i + RUN);
    for (const [desc, text] of views) if (text.toLowerCase().includes(run)) return `a ${RUN}-char run of it (chars ${i}..${i + RUN}) in view ${desc}`;
  }
  return null;
}

/** Every view of what was received, depth first through unescaping, breadth first through decoding. */
function viewsOf(received: string | Buffer): [string, string][] {
  const seen = new Map<string, string>();
  const queue: { desc: string; text: string; depth: number }[] = baseViews(received).map(([desc, text]) => ({ desc, text, depth: 0 }));
  while (queue.length && seen.size < MAX_VIEWS) {
    const { desc, text, depth } = queue.shift()!;
    if (seen.has(text)) continue;
    seen.set(text, desc);
    const plain = unescapeAll(text);
    if (plain !== text) queue.unshift({ desc: `${desc}>unescaped`, text: plain, depth });
    // Compatibility forms (fullwidth, mathematical letters) as NFKC folds them.
    const folded = plain.normalize("NFKC");
    if (folded !== plain) queue.unshift({ desc: `${desc}>NFKC`, text: folded, depth });
    if (depth >= MAX_DEPTH) continue;
    for (const [how, bytes] of decodedRuns(text)) {
      if (bytes.length < 4) continue;
      for (const [d, t] of textsOf(bytes)) queue.push({ desc: `${desc}>${how}>${d}`, text: t, depth: depth + 1 });
    }
  }
  return [...seen].map(([text, desc]) => [desc, text]);
}
