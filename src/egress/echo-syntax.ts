// What the echo scanner's view (echo-scanner.ts) reads as escapes and as invisible characters: the
// byte tables and the named references, in one place for the scanner's fast and slow paths alike.
// Adding a form here changes what every path reads (tests/unit/egress/echo-scanner-fast.test.ts
// checks the paths agree).

/** The bytes of an escape kept to be read again as text: "&" and the longest reference name. */
export const MAX_TOKEN = 24;
/** A numeric reference's digits, leading zeros included. */
export const MAX_DIGITS = 64;
/** Invisible characters dropped in a row; the next one is read as ordinary bytes. */
export const MAX_IGNORABLE_RUN = 64;
/** The longest reference name read (NegativeVeryThinSpace). */
export const MAX_NAME = 21;

/** The lead bytes (UTF-8) of the invisible characters below. */
const IGNORABLE_LEADS = [0xc2, 0xcd, 0xd8, 0xe1, 0xe2, 0xe3, 0xef];

/** What a body byte starts: 0 plain, 1 '%', 2 '&', 3 '\\', 4 the lead byte of a possibly invisible character. */
export const CLASS = new Uint8Array(256);
CLASS[0x25] = 1;
CLASS[0x26] = 2;
CLASS[0x5c] = 3;
for (const lead of IGNORABLE_LEADS) CLASS[lead] = 4;
/** The bytes of CLASS other than 0, the ASCII ones first. */
export const TRIGGERS = [0x25, 0x26, 0x5c, ...IGNORABLE_LEADS];
export const ASCII_TRIGGERS = 3;

export const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 10; i++) HEX[0x30 + i] = i;
for (let i = 0; i < 6; i++) HEX[0x41 + i] = HEX[0x61 + i] = 10 + i;

/** What the byte after a '\\' stands for (\\" \\n ...), -1 when it makes no such escape. */
export const SIMPLE_ESCAPES = new Int16Array(256).fill(-1);
for (const [b, v] of [
  [0x22, 0x22],
  [0x5c, 0x5c],
  [0x2f, 0x2f],
  [0x27, 0x27],
  [0x62, 0x08],
  [0x66, 0x0c],
  [0x6e, 0x0a],
  [0x72, 0x0d],
  [0x74, 0x09],
] as const)
  SIMPLE_ESCAPES[b] = v;

/**
 * HTML named references a server may spell a value's characters with: the ASCII punctuation that
 * tokens hold, and the invisible characters (read, then dropped like their UTF-8 selves).
 */
const NAMED = new Map<string, number>(
  Object.entries({
    amp: 0x26,
    AMP: 0x26,
    lt: 0x3c,
    LT: 0x3c,
    gt: 0x3e,
    GT: 0x3e,
    quot: 0x22,
    QUOT: 0x22,
    apos: 0x27,
    excl: 0x21,
    num: 0x23,
    dollar: 0x24,
    percnt: 0x25,
    lpar: 0x28,
    rpar: 0x29,
    ast: 0x2a,
    midast: 0x2a,
    plus: 0x2b,
    comma: 0x2c,
    period: 0x2e,
    sol: 0x2f,
    colon: 0x3a,
    semi: 0x3b,
    equals: 0x3d,
    quest: 0x3f,
    commat: 0x40,
    lsqb: 0x5b,
    lbrack: 0x5b,
    bsol: 0x5c,
    rsqb: 0x5d,
    rbrack: 0x5d,
    Hat: 0x5e,
    lowbar: 0x5f,
    UnderBar: 0x5f,
    grave: 0x60,
    DiacriticalGrave: 0x60,
    lcub: 0x7b,
    lbrace: 0x7b,
    verbar: 0x7c,
    vert: 0x7c,
    VerticalLine: 0x7c,
    rcub: 0x7d,
    rbrace: 0x7d,
    nbsp: 0xa0,
    shy: 0xad,
    ZeroWidthSpace: 0x200b,
    NegativeVeryThinSpace: 0x200b,
    NegativeThinSpace: 0x200b,
    NegativeMediumSpace: 0x200b,
    NegativeThickSpace: 0x200b,
    zwnj: 0x200c,
    zwj: 0x200d,
    lrm: 0x200e,
    rlm: 0x200f,
    NoBreak: 0x2060,
    ApplyFunction: 0x2061,
    af: 0x2061,
    InvisibleTimes: 0x2062,
    it: 0x2062,
    InvisibleComma: 0x2063,
    ic: 0x2063,
  }),
);
/** The names browsers also read without their ';', even with letters after them ("&shyk" is U+00AD, "k"). */
const LEGACY = ["AMP", "amp", "GT", "gt", "LT", "lt", "QUOT", "quot", "nbsp", "shy"];

/**
 * How the letters of a reference (`letters`, the bytes after '&') resolve when the byte `end`
 * follows them: the code point and how many bytes it takes (its letters, plus 1 for a ';'), or
 * undefined when it is no reference (the '&' is text).
 */
export function resolveName(letters: Uint8Array, end: number): { cp: number; taken: number } | undefined {
  const name = String.fromCharCode(...letters);
  if (end === 0x3b) {
    const cp = NAMED.get(name);
    if (cp !== undefined) return { cp, taken: letters.length + 1 };
  }
  let best: string | undefined;
  for (const legacy of LEGACY) if (name.startsWith(legacy) && (!best || legacy.length > best.length)) best = legacy;
  return best ? { cp: NAMED.get(best)!, taken: best.length } : undefined;
}

/** Whether letters read so far may still become a reference with more letters or a ';' after them. */
export function mayStartName(letters: Uint8Array): boolean {
  return letters.length > 0 && letters.length <= MAX_NAME;
}

/** Whether any legacy name is a prefix of these letters (then '&' and they are not plain text). */
export function hasLegacyPrefix(letters: Uint8Array): boolean {
  const name = String.fromCharCode(...letters);
  return LEGACY.some((l) => name.startsWith(l));
}

export function isLetter(b: number): boolean {
  return (b >= 0x61 && b <= 0x7a) || (b >= 0x41 && b <= 0x5a);
}

/**
 * Invisible characters (UTF-8), dropped from the view: U+00AD soft hyphen, U+034F, U+061C,
 * U+115F-U+1160 and U+3164, U+FFA0 (Hangul fillers), U+17B4-U+17B5, U+180B-U+180F, U+200B-U+200F,
 * U+202A-U+202E and U+2066-U+206F (bidi controls), U+2060-U+2064, U+FE00-U+FE0F (variation
 * selectors), U+FEFF. Two-byte ones:
 */
export function ignorable2(a: number, b: number): boolean {
  return (a === 0xc2 && b === 0xad) || (a === 0xcd && b === 0x8f) || (a === 0xd8 && b === 0x9c);
}

/** Whether a lead and second byte may begin a three-byte invisible character. */
export function mayBeIgnorable3(a: number, b: number): boolean {
  switch (a) {
    case 0xe1:
      return b === 0x85 || b === 0x9e || b === 0xa0;
    case 0xe2:
      return b === 0x80 || b === 0x81;
    case 0xe3:
      return b === 0x85;
    case 0xef:
      return b === 0xb8 || b === 0xbb || b === 0xbe;
    default:
      return false;
  }
}

/** Whether three bytes (with mayBeIgnorable3 true of the first two) spell an invisible character. */
export function ignorable3(a: number, b: number, c: number): boolean {
  if (a === 0xe1) return b === 0x85 ? c === 0x9f || c === 0xa0 : b === 0x9e ? c === 0xb4 || c === 0xb5 : c >= 0x8b && c <= 0x8f;
  if (a === 0xe2) return b === 0x80 ? (c >= 0x8b && c <= 0x8f) || (c >= 0xaa && c <= 0xae) : (c >= 0xa0 && c <= 0xa4) || (c >= 0xa6 && c <= 0xaf);
  if (a === 0xe3) return c === 0xa4;
  return b === 0xb8 ? c >= 0x80 && c <= 0x8f : b === 0xbb ? c === 0xbf : c === 0xa0;
}
