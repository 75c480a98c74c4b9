// The echo scanner as it was before the plain-run fast path (commit 7e98554), kept verbatim (only
// its import path changed) as the oracle that echo-scanner-fast.test.ts checks the fast scanner against.

// The decoding view the echo redactor matches in (architecture.md D22): one pass over the body bytes,
// no backtracking, that reads percent-escapes (%XX), HTML numeric and basic named entities
// (&#NN; &#xHH; &amp; …), JSON and script escapes (\uXXXX with surrogate pairs, \xHH, \" \\ \/),
// drops soft hyphens and zero-width characters, and folds ASCII case. Each byte of that view
// remembers the span of body bytes it came from, so a match in the view redacts exactly the body
// bytes that spelt it. Needles are matched by a rolling hash over fixed-length windows
// (needle-index.ts), which is what makes "any 12 characters of a value" as cheap as the whole value.
import {
  CLASS,
  HEX,
  ignorable2,
  ignorable3,
  isLetter,
  MAX_DIGITS,
  MAX_IGNORABLE_RUN,
  MAX_NAME,
  MAX_TOKEN,
  mayBeIgnorable3,
  resolveName,
  SIMPLE_ESCAPES,
} from "../../../src/egress/echo-syntax.ts";
//
// Bounded by design: an escape is at most 8 bytes (a numeric reference 64 digits), and at most 64 ignorable characters in a row
// are dropped (beyond that they are matched as ordinary bytes), so what a stream holds back stays
// small whatever the upstream sends.

import { HASH_MUL as MUL, mixHash, RING, type NeedleIndex } from "../../../src/egress/needle-index.ts";

const FOLD = new Uint8Array(256).map((_, i) => (i >= 0x41 && i <= 0x5a ? i + 32 : i));

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
export class EchoScanner {
  /** Matched body spans [start, end), closed and merged, in order. */
  readonly spans: number[] = [];
  private openStart = -1;
  private openEnd = -1;
  // the view's last bytes, their body spans, and one rolling hash per window length
  private readonly ring = new Uint8Array(RING);
  private readonly ringStart = new Float64Array(RING);
  private readonly ringEnd = new Float64Array(RING);
  private pos = 0;
  private readonly hashes: Int32Array;
  // escape being read
  private esc = Esc.None;
  private readonly token = new Uint8Array(MAX_TOKEN);
  private tokenLen = 0;
  private tokenStart = 0;
  private num = 0;
  private digits = 0;
  private highSurrogate = -1;
  private highStart = 0;
  // possibly invisible character being read
  private readonly held = new Uint8Array(2);
  private heldLen = 0;
  private readonly heldStart = new Float64Array(2);
  private readonly heldEnd = new Float64Array(2);
  private ignorableRun = 0;
  /** Bytes of the view, when collecting (no index). */
  readonly collected: number[] | undefined;

  constructor(private readonly index: NeedleIndex | null) {
    this.hashes = new Int32Array(index ? index.groups.length : 0);
    if (!index) this.collected = [];
  }

  /** Reads `bytes`, the body bytes from absolute offset `at` on. */
  feed(bytes: Uint8Array, at: number): void {
    const n = bytes.length;
    let i = 0;
    while (i < n) {
      if (this.esc === Esc.None && this.heldLen === 0 && this.highSurrogate < 0 && this.index && this.index.groups.length === 1)
        i = this.plainRun(bytes, i, at);
      if (i < n) this.step(bytes[i]!, at + i++);
    }
  }

  /**
   * The hot loop: plain bytes into the view with one window length, everything in locals. Returns
   * where it stopped (a byte that may start an escape or an invisible character, or the end).
   */
  private plainRun(bytes: Uint8Array, from: number, at: number): number {
    const n = bytes.length;
    const ring = this.ring;
    const group = this.index!.groups[0]!;
    const w = group.width;
    const pow = group.pow;
    const shift = group.shift;
    const bits = group.bits;
    const pos0 = this.pos;
    let h = this.hashes[0]!;
    let i = from;
    // The view is the folded bytes themselves here, so the byte leaving the window is read from the
    // input (from the ring only for the run's first w bytes), and the ring is written only where a
    // window is confirmed and at the run's end.
    for (; i < n; i++) {
      const b = bytes[i]!;
      if (CLASS[b] !== 0) break;
      const v = FOLD[b]!;
      const back = i - from - w;
      // Before the first w bytes of the body the ring slot was never written, so it reads 0, as it must.
      const leaving = back >= 0 ? FOLD[bytes[i - w]!]! : ring[(pos0 + back) & (RING - 1)]!;
      h = (Math.imul(h, MUL) + v - Math.imul(leaving, pow)) | 0;
      const k = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> shift;
      if ((bits[k >>> 3]! & (1 << (k & 7))) !== 0) {
        const pos = pos0 + (i - from) + 1;
        this.backfill(bytes, from, at, pos0, pos);
        if (pos >= w && group.contains(h, ring, pos - 1)) {
          this.pos = pos;
          this.matched(this.ringStart[(pos - w) & (RING - 1)]!, at + i + 1);
        }
      }
    }
    const pos = pos0 + (i - from);
    this.backfill(bytes, from, at, pos0, pos);
    if (i > from) this.ignorableRun = 0;
    this.pos = pos;
    this.hashes[0] = h;
    return i;
  }

  /** Writes the ring for the last view positions (up to `pos`) of a plain run that began at `pos0`. */
  private backfill(bytes: Uint8Array, from: number, at: number, pos0: number, pos: number): void {
    for (let q = Math.max(pos0, pos - this.index!.longest); q < pos; q++) {
      const slot = q & (RING - 1);
      const idx = from + (q - pos0);
      this.ring[slot] = FOLD[bytes[idx]!]!;
      this.ringStart[slot] = at + idx;
      this.ringEnd[slot] = at + idx + 1;
    }
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
    // Only a tail of the view that is part of some needle can begin a later match: a stream whose
    // last bytes are not (an SSE event's blank line) is emitted whole, at once.
    const tail = this.index ? this.index.partTail(this.ring, this.pos) : 0;
    if (tail > 0) at = Math.min(at, this.ringStart[(this.pos - tail) & (RING - 1)]!);
    if (this.openStart >= 0) {
      // A match may still grow while a later window could start inside it.
      if (this.openEnd > at) at = Math.min(at, this.openStart);
      else this.closeOpen();
    }
    return at;
  }

  /** Closes the match being grown (a stream that must bound what it holds back). */
  closeOpen(): void {
    if (this.openStart < 0) return;
    const s = this.spans;
    if (s.length && s[s.length - 1]! > this.openStart) s[s.length - 1] = Math.max(s[s.length - 1]!, this.openEnd);
    else s.push(this.openStart, this.openEnd);
    this.openStart = this.openEnd = -1;
  }

  /** Length of the match being grown, 0 when none. */
  get openLength(): number {
    return this.openStart < 0 ? 0 : this.openEnd - this.openStart;
  }

  // ---- the slow path: escapes, invisible characters ----

  private step(b: number, at: number): void {
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
  private start(b: number, at: number): void {
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

  private feedOne(b: number, at: number): void {
    if (this.esc === Esc.None && this.heldLen === 0 && this.highSurrogate < 0 && CLASS[b] === 0) {
      this.view(FOLD[b]!, at, at + 1);
      this.ignorableRun = 0;
    } else this.step(b, at);
  }

  private push(b: number): void {
    this.token[this.tokenLen++] = b;
  }

  private addDigit(d: number, base: number): void {
    this.num = Math.min(this.num * base + d, 0x110000); // beyond U+10FFFF it reads as U+FFFD
    this.digits++;
  }

  /**
   * A reference's letters ended at `b` (at body offset `at`, -1: the body's end): a named reference
   * with its ';', a legacy name read as browsers do without one (its other letters read again), or text.
   */
  private endName(b: number, at: number): void {
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
  private reject(b: number, at: number): void {
    this.flushSurrogate();
    const start = this.tokenStart;
    this.esc = Esc.None;
    this.decodedByteAt(this.token[0]!, start, start + 1);
    if (this.tokenLen > 1) {
      const again = this.token.slice(1, this.tokenLen);
      for (let k = 0; k < again.length; k++) this.feedOne(again[k]!, start + 1 + k);
    }
    this.feedOne(b, at);
  }

  /** At the body's end, a pending escape is text. */
  private abandonToken(end: number): void {
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
  private textToken(): void {
    const again = this.token.slice(1, this.tokenLen);
    const start = this.tokenStart;
    this.esc = Esc.None;
    this.decodedByteAt(this.token[0]!, start, start + 1);
    for (let k = 0; k < again.length; k++) this.feedOne(again[k]!, start + 1 + k);
  }

  private decodedByte(byte: number, end: number): void {
    this.flushSurrogate();
    const start = this.tokenStart;
    this.esc = Esc.None;
    this.decodedByteAt(byte, start, end);
  }

  /** A UTF-16 unit from \uXXXX: surrogate pairs are joined, a lone one reads as U+FFFD. */
  private decodedUnit(unit: number, end: number): void {
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

  private decodedCodePoint(cp: number, end: number, start = this.tokenStart): void {
    this.esc = Esc.None;
    this.flushSurrogate();
    this.emitCodePoint(cp, start, end);
  }

  private flushSurrogate(): void {
    if (this.highSurrogate < 0) return;
    const start = this.highStart;
    this.highSurrogate = -1;
    this.emitCodePoint(0xfffd, start, start + 6);
  }

  /** A code point as its UTF-8 bytes, every one spanning the escape that spelt it. */
  private emitCodePoint(cp: number, start: number, end: number): void {
    if (cp < 0x80) return this.decodedByteAt(cp, start, end);
    if (cp < 0x800) {
      this.decodedByteAt(0xc0 | (cp >> 6), start, end);
    } else if (cp < 0x10000) {
      this.decodedByteAt(0xe0 | (cp >> 12), start, end);
      this.decodedByteAt(0x80 | ((cp >> 6) & 0x3f), start, end);
    } else {
      this.decodedByteAt(0xf0 | (cp >> 18), start, end);
      this.decodedByteAt(0x80 | ((cp >> 12) & 0x3f), start, end);
      this.decodedByteAt(0x80 | ((cp >> 6) & 0x3f), start, end);
    }
    this.decodedByteAt(0x80 | (cp & 0x3f), start, end);
  }

  /** A decoded byte, before invisible characters are dropped. */
  private decodedByteAt(b: number, start: number, end: number): void {
    if (this.heldLen === 0) {
      if (CLASS[b] === 4) return this.hold(b, start, end);
      this.ignorableRun = 0;
      return this.view(FOLD[b]!, start, end);
    }
    const a = this.held[0]!;
    if (this.heldLen === 1) {
      if (ignorable2(a, b)) return this.dropHeld(b, start, end);
      if (mayBeIgnorable3(a, b)) return this.hold(b, start, end);
    } else if (ignorable3(a, this.held[1]!, b)) return this.dropHeld(b, start, end);
    this.releaseHeld();
    this.decodedByteAt(b, start, end);
  }

  private hold(b: number, start: number, end: number): void {
    this.held[this.heldLen] = b;
    this.heldStart[this.heldLen] = start;
    this.heldEnd[this.heldLen] = end;
    this.heldLen++;
  }

  /** An invisible character is complete (`b` its last byte): dropped, unless it is one too many in a row. */
  private dropHeld(b: number, start: number, end: number): void {
    if (++this.ignorableRun > MAX_IGNORABLE_RUN) {
      // Past the limit it is read as ordinary bytes, all of them (what is held could otherwise grow without end).
      this.releaseHeld();
      return this.view(b, start, end);
    }
    this.heldLen = 0;
  }

  private releaseHeld(): void {
    const n = this.heldLen;
    this.heldLen = 0;
    if (n) this.ignorableRun = 0;
    for (let k = 0; k < n; k++) this.view(this.held[k]!, this.heldStart[k]!, this.heldEnd[k]!);
  }

  // ---- the view: windows hashed and looked up ----

  private view(v: number, start: number, end: number): void {
    const p = this.pos++;
    const slot = p & (RING - 1);
    this.ring[slot] = v;
    this.ringStart[slot] = start;
    this.ringEnd[slot] = end;
    const index = this.index;
    if (!index) return void this.collected!.push(v);
    const groups = index.groups;
    for (let g = 0; g < groups.length; g++) {
      const group = groups[g]!;
      const w = group.width;
      const leaving = this.ring[(p - w) & (RING - 1)]!; // 0 before the first w bytes (never written)
      const h = (Math.imul(this.hashes[g]!, MUL) + v - Math.imul(leaving, group.pow)) | 0;
      this.hashes[g] = h;
      if (p + 1 < w) continue;
      const k = mixHash(h) >>> group.shift;
      if ((group.bits[k >>> 3]! & (1 << (k & 7))) === 0) continue;
      if (group.contains(h, this.ring, p)) this.matched(this.ringStart[(p - w + 1) & (RING - 1)]!, end);
    }
  }

  private matched(start: number, end: number): void {
    // Overlapping windows are one echo; two echoes side by side stay two.
    if (this.openStart >= 0 && start < this.openEnd) {
      if (start < this.openStart) this.openStart = start;
      if (end > this.openEnd) this.openEnd = end;
      return;
    }
    this.closeOpen();
    this.openStart = start;
    this.openEnd = end;
  }
}

/** Bytes as the scanner's view reads them: escapes decoded, invisible characters dropped, case folded. */
export function viewOf(bytes: Uint8Array): Uint8Array {
  const s = new EchoScanner(null);
  s.feed(bytes, 0);
  s.end(bytes.length);
  return Uint8Array.from(s.collected!);
}
