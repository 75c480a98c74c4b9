// The decoding view the echo redactor matches in (architecture.md D22): one pass over the body bytes,
// no backtracking, that reads percent-escapes (%XX, %uXXXX), HTML numeric and named references,
// JSON and script escapes (\uXXXX with surrogate pairs, \u{…}, \xHH, octal, \" \\ \/), drops
// invisible characters and folds ASCII case (echo-syntax.ts says which). Each byte of that view
// remembers the span of body bytes it came from, so a match in the view redacts exactly the body
// bytes that spelt it. Needles are matched by a rolling hash over fixed-length windows
// (needle-index.ts), which is what makes "any 12 characters of a value" as cheap as the whole value.
//
// Bounded by design: an escape is at most MAX_TOKEN bytes (a numeric reference 64 digits), and at
// most 64 invisible characters in a row are dropped (the 65th is read as ordinary bytes), so what a
// stream holds back stays small whatever the upstream sends.
//
// This byte-by-byte reading (`step` and what it calls) defines the view; what an escape decodes to
// goes into it through EchoCodePoints (echo-code-points.ts: UTF-8, surrogate pairs, invisible
// characters), and the view's bytes are matched by EchoMatcher (echo-matcher.ts). EchoScanner
// (echo-scanner.ts) adds fast paths for long chunks that end in the same state.

import { CLASS, HEX, isLetter, MAX_DIGITS, MAX_NAME, MAX_TOKEN, resolveName, SIMPLE_ESCAPES } from "./echo-syntax.ts";
import { EchoCodePoints } from "./echo-code-points.ts";
import { FOLD, type NeedleIndex } from "./needle-index.ts";

const enum Esc {
  None,
  Pct,
  Amp,
  AmpHash,
  AmpDec,
  AmpHex,
  AmpName,
  Bsl,
  BslU,
  BslX,
  PctU,
  BslBrace,
  BslOct,
}

/**
 * Feeds body bytes (absolute offsets), records the body spans that spelt a needle, and says how far
 * the body is settled (no later byte can extend a match into it). Without an index it collects the
 * view itself (how needles are put in the same form as the bodies they are matched in).
 */
export class EchoView extends EchoCodePoints {
  // escape being read
  protected esc = Esc.None;
  protected readonly token = new Uint8Array(MAX_TOKEN);
  protected tokenLen = 0;
  protected tokenStart = 0;
  protected num = 0;
  protected digits = 0;

  /**
   * `perByte` turns every fast path off (each byte through the slow path): tests compare both.
   * `source`, when given, is read again before each chunk: a set whose index was rebuilt (values
   * joined it that did not fit in place) is followed from there on.
   */
  constructor(
    index: NeedleIndex | null,
    protected readonly perByte = false,
    source?: { readonly index: NeedleIndex | null },
  ) {
    super(index, source);
  }

  /**
   * Starts over on a new body with `index`, as a new scanner would (headers are scanned a few short
   * texts at a time: reusing one scanner spares its allocations).
   */
  reset(index: NeedleIndex): void {
    this.resetMatching(index);
    this.esc = Esc.None;
    this.tokenLen = this.num = this.digits = 0;
    this.highSurrogate = -1;
    this.heldLen = 0;
    this.ignorableRun = 0;
  }

  /** Reads `bytes`, the body bytes from absolute offset `at` on: plain runs through the exact loop, the rest byte by byte. */
  feed(bytes: Uint8Array, at: number): void {
    const n = bytes.length;
    this.followSource();
    if (!this.index || this.perByte) {
      for (let i = 0; i < n; i++) this.step(bytes[i]!, at + i);
      return;
    }
    for (let i = 0; i < n; ) {
      if (this.clean) {
        let j = i;
        while (j < n && CLASS[bytes[j]!] === 0) j++;
        if (j > i) {
          this.exactRun(bytes, i, j, at);
          i = j;
          continue;
        }
      }
      this.step(bytes[i]!, at + i);
      i++;
    }
  }

  /** No escape, possibly invisible character or high surrogate pending: the next byte starts afresh. */
  protected get clean(): boolean {
    return this.esc === Esc.None && this.heldLen === 0 && this.highSurrogate < 0;
  }

  /** The body has ended at absolute offset `end`: what was pending is read as text. */
  end(end: number): void {
    while (this.esc !== Esc.None) this.abandonToken(end);
    this.flushSurrogate();
    this.releaseHeld();
    this.closeOpen();
    void end;
  }

  /**
   * The first body offset a later byte could still affect: nothing before it will be matched or
   * merged again. `end` is how far the body has been fed.
   */
  settled(end: number): number {
    let at = end;
    if (this.esc !== Esc.None) at = Math.min(at, this.tokenStart);
    if (this.highSurrogate >= 0) at = Math.min(at, this.highStart);
    if (this.heldLen) at = Math.min(at, this.heldStart[0]!);
    return this.settledMatching(at);
  }

  // ---- the slow path: escapes, invisible characters ----

  protected step(b: number, at: number): void {
    switch (this.esc) {
      case Esc.None:
        return this.start(b, at);
      case Esc.Pct:
        // %uXXXX: a UTF-16 unit, as JavaScript's escape() and IIS write one.
        if (this.tokenLen === 1 && (b === 0x75 || b === 0x55)) return (this.push(b), void (this.esc = Esc.PctU));
        if (HEX[b]! < 0) return this.reject(b, at);
        this.push(b);
        if (this.tokenLen === 3) return this.decodedByte((HEX[this.token[1]!]! << 4) | HEX[b]!, at + 1);
        return;
      case Esc.Amp:
        if (b === 0x23) return (this.push(b), void (this.esc = Esc.AmpHash));
        if (isLetter(b)) return (this.push(b), void (this.esc = Esc.AmpName));
        return this.reject(b, at);
      case Esc.AmpHash:
        if (b === 0x78 || b === 0x58) return (this.push(b), void (this.esc = Esc.AmpHex));
        if (HEX[b]! >= 0 && b <= 0x39) return ((this.esc = Esc.AmpDec), this.addDigit(HEX[b]!, 10));
        return this.reject(b, at);
      case Esc.AmpDec:
      case Esc.AmpHex: {
        // Digits are counted, not kept (a numeric reference is decoded once it has one): leading
        // zeros, which browsers accept in any number, cannot push it out of reach.
        const base = this.esc === Esc.AmpDec ? 10 : 16;
        const d = HEX[b]!;
        if (d >= 0 && d < base && this.digits < MAX_DIGITS) return this.addDigit(d, base);
        if (this.digits === 0) return this.reject(b, at);
        const cp = this.num > 0x10ffff || this.num === 0 ? 0xfffd : this.num;
        if (b === 0x3b) return this.decodedCodePoint(cp, at + 1);
        // Without its ';' (as browsers still read it): this byte is not part of it.
        this.decodedCodePoint(cp, at);
        return this.feedOne(b, at);
      }
      case Esc.AmpName: {
        if (isLetter(b) && this.tokenLen <= MAX_NAME) return this.push(b);
        return this.endName(b, at);
      }
      case Esc.Bsl:
        if (b === 0x75) return (this.push(b), void (this.esc = Esc.BslU));
        if (b === 0x78) return (this.push(b), void (this.esc = Esc.BslX));
        if (SIMPLE_ESCAPES[b]! >= 0) return this.decodedCodePoint(SIMPLE_ESCAPES[b]!, at + 1);
        if (b >= 0x30 && b <= 0x33) return (this.push(b), (this.num = b - 0x30), void (this.esc = Esc.BslOct));
        return this.reject(b, at);
      case Esc.BslOct:
        // \ooo: a byte in octal (C, PHP, a shell's $'...').
        if (b < 0x30 || b > 0x37) return this.reject(b, at);
        this.push(b);
        this.num = this.num * 8 + (b - 0x30);
        if (this.tokenLen === 4) return this.decodedByte(this.num, at + 1);
        return;
      case Esc.BslBrace: {
        // \u{X...}: a code point (ES2015), any number of leading zeros up to MAX_DIGITS; read
        // without its '}' like a numeric reference without its ';'.
        const d = HEX[b]!;
        if (d >= 0 && this.digits < MAX_DIGITS) return this.addDigit(d, 16);
        if (this.digits === 0) return this.reject(b, at);
        const cp = this.num > 0x10ffff ? 0xfffd : this.num;
        if (b === 0x7d) return cp <= 0xffff ? this.decodedUnit(cp, at + 1) : this.decodedCodePoint(cp, at + 1);
        if (cp <= 0xffff) this.decodedUnit(cp, at);
        else this.decodedCodePoint(cp, at);
        return this.feedOne(b, at);
      }
      case Esc.BslU:
      case Esc.BslX:
      case Esc.PctU: {
        if (this.esc === Esc.BslU && this.tokenLen === 2 && b === 0x7b) return (this.push(b), void (this.esc = Esc.BslBrace));
        if (HEX[b]! < 0) return this.reject(b, at);
        this.push(b);
        this.addDigit(HEX[b]!, 16);
        const want = this.esc === Esc.BslX ? 4 : 6;
        if (this.tokenLen === want) return this.decodedUnit(this.num, at + 1);
        return;
      }
    }
  }

  /** The first byte of something: an escape, an invisible character, or plain. */
  protected start(b: number, at: number): void {
    const c = CLASS[b]!;
    if (c === 1 || c === 2 || c === 3) {
      if (c === 2) this.flushSurrogate(); // a \u or %u after a high surrogate may be its low half
      this.esc = c === 1 ? Esc.Pct : c === 2 ? Esc.Amp : Esc.Bsl;
      this.tokenLen = 0;
      this.tokenStart = at;
      this.num = this.digits = 0;
      this.push(b);
      return;
    }
    this.flushSurrogate();
    this.decodedByteAt(b, at, at + 1);
  }

  protected feedOne(b: number, at: number): void {
    if (this.esc === Esc.None && this.heldLen === 0 && this.highSurrogate < 0 && CLASS[b] === 0) {
      this.view(FOLD[b]!, at, at + 1);
      this.ignorableRun = 0;
    } else this.step(b, at);
  }

  protected push(b: number): void {
    this.token[this.tokenLen++] = b;
  }

  protected addDigit(d: number, base: number): void {
    this.num = Math.min(this.num * base + d, 0x110000); // beyond U+10FFFF it reads as U+FFFD
    this.digits++;
  }

  /**
   * A reference's letters ended at `b` (at body offset `at`, -1: the body's end): a named reference
   * with its ';', a legacy name read as browsers do without one (its other letters read again), or text.
   */
  protected endName(b: number, at: number): void {
    const r = resolveName(this.token.subarray(1, this.tokenLen), b);
    if (!r) return at < 0 ? this.textToken() : this.reject(b, at);
    const start = this.tokenStart;
    const letters = this.tokenLen - 1;
    if (r.taken > letters) return this.decodedCodePoint(r.cp, at + 1); // the ';' too
    const rest = this.token.slice(1 + r.taken, this.tokenLen);
    this.decodedCodePoint(r.cp, start + 1 + r.taken, start);
    for (let k = 0; k < rest.length; k++) this.feedOne(rest[k]!, start + 1 + r.taken + k);
    if (at >= 0) this.feedOne(b, at);
  }

  /** Not an escape after all: its first byte is text, and the rest (with `b`) is read again. */
  protected reject(b: number, at: number): void {
    this.flushSurrogate();
    const start = this.tokenStart;
    this.esc = Esc.None;
    this.decodedByteAt(this.token[0]!, start, start + 1);
    // The token's other bytes ('#', 'x', letters, digits) start nothing: read again, they go
    // straight to the view, and the token is not written before the loop is done.
    for (let k = 1; k < this.tokenLen; k++) this.feedOne(this.token[k]!, start + k);
    this.feedOne(b, at);
  }

  /** At the body's end, a pending escape is text. */
  protected abandonToken(end: number): void {
    this.flushSurrogate();
    if (this.esc === Esc.AmpName) return this.endName(-1, -1);
    if ((this.esc === Esc.AmpDec || this.esc === Esc.AmpHex) && this.digits > 0) {
      const cp = this.num > 0x10ffff || this.num === 0 ? 0xfffd : this.num;
      return this.decodedCodePoint(cp, end, this.tokenStart);
    }
    if (this.esc === Esc.BslBrace && this.digits > 0) {
      const cp = this.num > 0x10ffff || (this.num >= 0xd800 && this.num <= 0xdfff) ? 0xfffd : this.num;
      return this.decodedCodePoint(cp, end, this.tokenStart);
    }
    this.textToken();
  }

  /** The pending token is text: its first byte in the view, the others read again. */
  protected textToken(): void {
    const again = this.token.slice(1, this.tokenLen);
    const start = this.tokenStart;
    this.esc = Esc.None;
    this.decodedByteAt(this.token[0]!, start, start + 1);
    for (let k = 0; k < again.length; k++) this.feedOne(again[k]!, start + 1 + k);
  }

  protected decodedByte(byte: number, end: number): void {
    this.flushSurrogate();
    const start = this.tokenStart;
    this.esc = Esc.None;
    this.decodedByteAt(byte, start, end);
  }

  /** A UTF-16 unit from \uXXXX: surrogate pairs are joined, a lone one reads as U+FFFD. */
  protected decodedUnit(unit: number, end: number): void {
    const start = this.tokenStart;
    this.esc = Esc.None;
    if (unit >= 0xd800 && unit <= 0xdbff) {
      this.flushSurrogate();
      this.highSurrogate = unit;
      this.highStart = start;
      return;
    }
    if (unit >= 0xdc00 && unit <= 0xdfff && this.highSurrogate >= 0) {
      const cp = 0x10000 + ((this.highSurrogate - 0xd800) << 10) + (unit - 0xdc00);
      const from = this.highStart;
      this.highSurrogate = -1;
      return this.emitCodePoint(cp, from, end);
    }
    this.flushSurrogate();
    this.emitCodePoint(unit >= 0xd800 && unit <= 0xdfff ? 0xfffd : unit, start, end);
  }

  protected decodedCodePoint(cp: number, end: number, start = this.tokenStart): void {
    this.esc = Esc.None;
    this.flushSurrogate();
    this.emitCodePoint(cp, start, end);
  }
}

/** Bytes as the scanner's view reads them: escapes decoded, invisible characters dropped, case folded. */
export function viewOf(bytes: Uint8Array): Uint8Array {
  const s = new EchoView(null);
  s.feed(bytes, 0);
  s.end(bytes.length);
  return Uint8Array.from(s.collected!);
}
