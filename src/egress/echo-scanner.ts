// The echo scanner: the decoding view of echo-view.ts, read fast. The byte-by-byte reading there
// defines the view; the paths here end in the same state and report the same matches, in the same
// order. Between trigger bytes (those that may start an escape or an invisible character, found by
// native search) the view is the body bytes folded, and such a plain run is sampled a piece at a
// time (plainRun, PieceSampler in needle-index.ts); a trigger that turns out to be text stays in the
// run (plainTrigger); an escape or invisible character wholly in the chunk is read at once
// (readAtOnce). tests/unit/egress/echo-scanner-fast.test.ts checks all of it against the
// byte-by-byte reading.

import { isAscii } from "node:buffer";
import {
  ASCII_TRIGGERS,
  CLASS,
  hasLegacyPrefix,
  HEX,
  ignorable2,
  ignorable3,
  isLetter,
  MAX_DIGITS,
  MAX_IGNORABLE_RUN,
  MAX_NAME,
  mayBeIgnorable3,
  SIMPLE_ESCAPES,
  TRIGGERS,
} from "./echo-syntax.ts";
import { EchoView } from "./echo-view.ts";
import { FOLD, HASH_MUL as MUL, mixHash, PIECE, PIECE_MUL, RING, type NeedleIndex } from "./needle-index.ts";

export { viewOf } from "./echo-view.ts";

/** Below this mean distance between triggers, they are looked for byte by byte (about as costly as an indexOf call). */
const DENSE = 40;
/** From this length on, a plain run is sampled by aligned 32-bit reads (making the view of the buffer costs a little). */
const WORD_RUN = 64;
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
/**
 * Shorter plain runs are read byte by byte (sampling has a cost of its own: two pieces and the
 * hashes at the end). More than WINDOW: a sampled run holds the last `longest` view bytes.
 */
const MIN_SAMPLED = 16;
/** Below this many bytes a chunk is read by EchoView's loop. */
const SHORT_TEXT = 256;

/** The view of echo-view.ts, with fast paths for long chunks. */
export class EchoScanner extends EchoView {
  /** Per trigger byte, where it next occurs in the bytes being fed (-1: not searched yet). */
  private readonly nextTrigger = new Int32Array(TRIGGERS.length);
  /** The mean distance between triggers lately, which picks how the next one is searched for. */
  private meanGap = DENSE;
  /** The buffer of the bytes being fed, as 32-bit words (made for the first long run). */
  private words: Uint32Array | null = null;
  /** How many of TRIGGERS the bytes being fed can hold (ASCII: no lead byte). */
  private triggerCount = TRIGGERS.length;

  override reset(index: NeedleIndex): void {
    super.reset(index);
    this.meanGap = DENSE;
    this.words = null;
  }

  /** Reads `bytes`, the body bytes from absolute offset `at` on. */
  override feed(bytes: Uint8Array, at: number): void {
    const n = bytes.length;
    // Short texts (header values) and the per-byte mode: the fast paths' set-up costs more than it saves.
    if (!this.index || this.perByte || n < SHORT_TEXT) return super.feed(bytes, at);
    this.followSource();
    this.nextTrigger.fill(-1);
    // Lead bytes are searched for only where there can be some.
    this.triggerCount = isAscii(bytes) ? ASCII_TRIGGERS : TRIGGERS.length;
    let i = 0;
    while (i < n) {
      if (this.clean) {
        const end = this.plainEnd(bytes, i);
        if (end > i) {
          this.plainRun(bytes, i, end, at);
          if ((i = end) === n) break;
        }
        const read = this.readAtOnce(bytes, i, at);
        if (read > 0) {
          i += read;
          continue;
        }
      }
      this.step(bytes[i]!, at + i);
      i++;
    }
    this.words = null; // not to keep the chunk's buffer alive
  }

  /**
   * In a clean state, an escape or an invisible character wholly in this chunk (with the byte that
   * ends it, when that is not part of it), read at once: its code point goes through decodedByteAt
   * as the slow path would send it after reading it byte by byte, spanning the same bytes, so the
   * state after it is the slow path's; the states the slow path passes through on the way are not
   * observed inside a chunk (only `settled` and `end`, between chunks, see them). Returns
   * how many bytes it read, 0 when `bytes[i]` is left to the slow path (a \u high surrogate, what
   * turns out not to be an escape, a sequence cut by the chunk's end, the invisible character
   * beyond MAX_IGNORABLE_RUN).
   */
  private readAtOnce(bytes: Uint8Array, i: number, at: number): number {
    const n = bytes.length;
    const b = bytes[i]!;
    if (i + 2 >= n) return 0; // every escape takes three bytes or more with what ends it
    const b1 = bytes[i + 1]!;
    if (CLASS[b] === 4) {
      // Held, then dropped: only the count of invisible characters in a row changes.
      const len = ignorable2(b, b1) ? 2 : mayBeIgnorable3(b, b1) && ignorable3(b, b1, bytes[i + 2]!) ? 3 : 0;
      if (len === 0 || this.ignorableRun >= MAX_IGNORABLE_RUN) return 0;
      this.ignorableRun++;
      return len;
    }
    if (b === 0x25) {
      const hi = HEX[b1]!;
      const lo = HEX[bytes[i + 2]!]!;
      if (hi < 0 || lo < 0) return 0;
      this.decodedByteAt((hi << 4) | lo, at + i, at + i + 3);
      return 3;
    }
    if (b === 0x5c) {
      const simple = SIMPLE_ESCAPES[b1]!;
      if (simple >= 0) {
        this.decodedByteAt(simple, at + i, at + i + 2);
        return 2;
      }
      if (b1 !== 0x75 && b1 !== 0x78) return 0;
      const len = b1 === 0x75 ? 6 : 4; // \uXXXX, \xHH
      if (i + len > n) return 0;
      let unit = 0;
      for (let k = i + 2; k < i + len; k++) {
        const d = HEX[bytes[k]!]!;
        if (d < 0) return 0;
        unit = unit * 16 + d;
      }
      if (unit >= 0xd800 && unit <= 0xdbff) return 0; // may pair with a low surrogate next
      this.emitCodePoint(unit >= 0xdc00 && unit <= 0xdfff ? 0xfffd : unit, at + i, at + i + len);
      return len;
    }
    if (b !== 0x26) return 0;
    if (b1 === 0x23) {
      // &#DDD; &#xHHH; and without the ';' (then the byte ending the digits is not part of it)
      let j = i + 2;
      let base = 10;
      if (bytes[j] === 0x78 || bytes[j] === 0x58) (base = 16), j++;
      let num = 0;
      let digits = 0;
      for (; j < n && digits < MAX_DIGITS; j++, digits++) {
        const d = HEX[bytes[j]!]!;
        if (d < 0 || d >= base) break;
        num = Math.min(num * base + d, 0x110000);
      }
      if (j >= n || digits === 0) return 0;
      const cp = num > 0x10ffff || num === 0 ? 0xfffd : num;
      const end = bytes[j] === 0x3b ? j + 1 : j;
      this.emitCodePoint(cp, at + i, at + end);
      return end - i;
    }
    return 0; // &name: read by the slow path (resolveName), which knows the legacy names read without ';'
  }

  /**
   * Where the run of plain bytes from `i` on ends, in a clean state (no escape, held byte or high
   * surrogate pending): each byte is one view byte, itself folded. Besides CLASS 0 bytes, a trigger
   * byte is plain when the bytes after it in this chunk already show that the slow path would read
   * it as text (plainTrigger): a '%' not followed by two hex digits, a lead byte starting no
   * invisible character, which in binary bodies is nearly every trigger.
   */
  private plainEnd(bytes: Uint8Array, i: number): number {
    const n = bytes.length;
    for (;;) {
      let t: number;
      if (this.meanGap < DENSE) {
        // Triggers close together (binary data): a byte loop costs less than a native call each.
        const limit = Math.min(n, i + 4 * DENSE);
        for (t = i; t < limit && CLASS[bytes[t]!] === 0; t++);
        if (t === limit && t < n) t = this.runEnd(bytes, t);
      } else t = this.runEnd(bytes, i);
      this.meanGap += (t - i - this.meanGap) / 8;
      if (t === n || !plainTrigger(bytes, t)) return t;
      i = t + 1;
    }
  }

  /**
   * Where the run of CLASS 0 bytes from `i` on ends: the nearest trigger byte. Each trigger's
   * next position in `bytes` is found by the native indexOf (memchr) and kept until passed, so a
   * body is searched once per trigger byte value and occurrence, not byte by byte.
   */
  private runEnd(bytes: Uint8Array, i: number): number {
    const next = this.nextTrigger;
    let end = bytes.length;
    for (let t = 0; t < this.triggerCount; t++) {
      let q = next[t]!;
      if (q < i) {
        q = bytes.indexOf(TRIGGERS[t]!, i);
        next[t] = q = q < 0 ? bytes.length : q;
      }
      if (q < end) end = q;
    }
    return end;
  }

  /**
   * Plain bytes `bytes[from, to)` into the view, which here is those bytes folded, one view byte per
   * body byte. A window wholly in the run holds a needle piece at a sampled position (PieceSampler),
   * so only around a sampled piece that is some needle's are windows hashed and looked up. The
   * windows that begin before the run (in the ring) and end in its first `longest - 1` bytes are
   * read byte by byte, unless a test of two pieces rules them all out. Windows are looked up in
   * order of their ends, each end once, so `matched` sees the same windows in the same order as it
   * would byte by byte.
   */
  private plainRun(bytes: Uint8Array, from: number, to: number, at: number): void {
    const index = this.index!;
    const sampler = index.sampler;
    const wmax = index.longest;
    const len = to - from;
    if (sampler === null || len < MIN_SAMPLED) return this.exactRun(bytes, from, to, at);
    const { bits, shift, stride } = sampler;
    const pos0 = this.pos;
    this.ignorableRun = 0;
    // Windows ending (run-relative, exclusive) at or before `checked` are done with.
    let checked: number;
    if (this.crossingMayMatch(bytes, from)) {
      this.exactRun(bytes, from, from + wmax - 1, at);
      checked = wmax - 1;
    } else checked = index.shortest - 1; // a window ending before its width began before the run

    if (len >= WORD_RUN && LITTLE_ENDIAN) {
      // A long run is sampled at the positions 4- or 8-aligned in its buffer, read as one aligned
      // 32-bit word (the piece's bytes in little-endian order, as PieceSampler hashes them): any
      // `stride` consecutive positions still hold a sampled one.
      const words = (this.words ??= new Uint32Array(bytes.buffer, 0, bytes.buffer.byteLength >>> 2));
      const base = bytes.byteOffset + from; // the run's first byte in the buffer
      const step = stride >= 8 ? 2 : 1;
      const first = ((base + 4 * step - 1) >>> 2) & ~(step - 1); // the first aligned word at or after base
      for (let w = first, last = (base + len - PIECE) >>> 2; w <= last; w += step) {
        const k = Math.imul(words[w]! | 0x20202020, PIECE_MUL) >>> shift;
        if ((bits[k >>> 3]! & (1 << (k & 7))) !== 0) checked = this.around(bytes, from, (w << 2) - base, len, checked, at);
      }
    } else {
      for (let p = 0; p + PIECE <= len; p += stride) {
        const q = from + p;
        const x = bytes[q]! | (bytes[q + 1]! << 8) | (bytes[q + 2]! << 16) | (bytes[q + 3]! << 24) | 0x20202020;
        const k = Math.imul(x, PIECE_MUL) >>> shift;
        if ((bits[k >>> 3]! & (1 << (k & 7))) !== 0) checked = this.around(bytes, from, p, len, checked, at);
      }
    }

    // Leave the state as byte by byte would: the ring needs only the last `longest` view bytes (a
    // window, or partTail, reads no further back), and each window's rolling hash is a function of
    // its bytes alone, here a sum of independent products (the rolling chain costs more).
    const pos = pos0 + len;
    const ring = this.ring;
    const ringStart = this.ringStart;
    for (let q = pos - wmax; q < pos; q++) {
      const idx = from + (q - pos0);
      ring[q & (RING - 1)] = FOLD[bytes[idx]!]!;
      ringStart[q & (RING - 1)] = at + idx;
    }
    const groups = index.groups;
    for (let g = 0; g < groups.length; g++) {
      const { width: w, powers } = groups[g]!;
      let h = 0;
      for (let k = 0; k < w; k++) h = (h + Math.imul(ring[(pos - w + k) & (RING - 1)]!, powers[k]!)) | 0;
      this.hashes[g] = h;
    }
    this.pos = pos;
  }

  /**
   * Whether a window that begins before the plain run at `from` and ends in it may match. Such a
   * window holds the view byte before the run (position e = pos - 1) and the run's first: if it
   * begins at e - 3 or before, it holds the piece [e - 3, e], else (7 bytes wide at least, as the
   * sampler's windows are) the piece [e, e + 3]. When neither is a needle piece, none can match.
   */
  private crossingMayMatch(bytes: Uint8Array, from: number): boolean {
    const e = this.pos - 1;
    if (e < 0) return false; // the body starts here
    const { bits, shift } = this.index!.sampler!;
    const ring = this.ring;
    const m = RING - 1;
    const after = ring[e & m]! | (bytes[from]! << 8) | (bytes[from + 1]! << 16) | (bytes[from + 2]! << 24);
    let k = Math.imul(after | 0x20202020, PIECE_MUL) >>> shift;
    if ((bits[k >>> 3]! & (1 << (k & 7))) !== 0) return true;
    if (e < 3) return false; // a window begins at 0 or later
    const before = ring[(e - 3) & m]! | (ring[(e - 2) & m]! << 8) | (ring[(e - 1) & m]! << 16) | (ring[e & m]! << 24);
    k = Math.imul(before | 0x20202020, PIECE_MUL) >>> shift;
    return (bits[k >>> 3]! & (1 << (k & 7))) !== 0;
  }

  /**
   * The piece at run-relative `p` is some needle's: looks up the windows holding it, which end at
   * p + PIECE .. p + width, but for those up to `checked`, looked up already (around an earlier
   * piece, or in the head). Returns how far windows are now looked up.
   */
  private around(bytes: Uint8Array, from: number, p: number, len: number, checked: number, at: number): number {
    const hi = Math.min(p + this.index!.longest, len);
    const lo = Math.max(checked + 1, p + PIECE);
    if (lo > hi) return checked;
    this.lookUp(bytes, from, lo, hi, at);
    return hi;
  }

  /**
   * Looks up, for each group, the windows wholly in a plain run ending (run-relative) at lo .. hi,
   * in order (a window ending before its width began before the run: plainRun has ruled it out).
   */
  private lookUp(bytes: Uint8Array, from: number, lo: number, hi: number, at: number): void {
    const groups = this.index!.groups;
    const hashes = this.hashes; // scratch here: plainRun sets them again at the run's end
    for (let g = 0; g < groups.length; g++) {
      const w = groups[g]!.width;
      if (lo >= w) hashes[g] = foldedHash(bytes, from + lo - w, groups[g]!.powers);
    }
    for (let e = lo; ; e++) {
      for (let g = 0; g < groups.length; g++) {
        const group = groups[g]!;
        if (e < group.width) continue;
        const h = hashes[g]!;
        const k = mixHash(h) >>> group.shift;
        if ((group.bits[k >>> 3]! & (1 << (k & 7))) === 0) continue;
        const start = from + e - group.width;
        if (group.containsFolded(h, bytes, start)) this.matched(at + start, at + from + e);
      }
      if (e === hi) return;
      const entering = FOLD[bytes[from + e]!]!;
      for (let g = 0; g < groups.length; g++) {
        const group = groups[g]!;
        const w = group.width;
        if (e >= w) hashes[g] = (Math.imul(hashes[g]!, MUL) + entering - Math.imul(FOLD[bytes[from + e - w]!]!, group.pow)) | 0;
        else if (e + 1 === w) hashes[g] = foldedHash(bytes, from, group.powers);
      }
    }
  }
}

/**
 * Whether the trigger byte `bytes[t]`, read in a clean state, is text: whether the slow path, fed
 * the bytes after it in this chunk, would put it in the view as itself (a '%' not followed by two
 * hex digits is rejected and read as text, its other bytes read again as the plain bytes they are),
 * and would know so by this chunk's end (else what `settled` reports would differ). False when in
 * doubt: the slow path then reads it.
 */
function plainTrigger(bytes: Uint8Array, t: number): boolean {
  const n = bytes.length;
  if (t + 1 >= n) return false;
  const b = bytes[t]!;
  const b1 = bytes[t + 1]!;
  switch (CLASS[b]) {
    case 1: // %XX; %uXXXX is left to the slow path
      if (b1 === 0x75 || b1 === 0x55) return false;
      return HEX[b1]! < 0 || (t + 2 < n && HEX[bytes[t + 2]!]! < 0);
    case 2: {
      // &#...: left to the slow path. &name: text unless it ends in ';' (maybe a named reference)
      // or starts with a legacy name browsers read without one (resolveName).
      if (b1 === 0x23) return false;
      if (!isLetter(b1)) return true;
      let j = t + 1;
      while (j < n && j <= t + MAX_NAME && isLetter(bytes[j]!)) j++;
      if (j === n || bytes[j] === 0x3b) return false;
      return !hasLegacyPrefix(bytes.subarray(t + 1, j));
    }
    case 3: {
      // \uXXXX, \xHH: text at the first non-hex digit; \" \n ...: an escape.
      // \u{...} and \ooo (octal) are left to the slow path.
      if ((b1 >= 0x30 && b1 <= 0x33) || (b1 === 0x75 && (t + 2 >= n || bytes[t + 2] === 0x7b))) return false;
      if (b1 === 0x75 || b1 === 0x78) {
        const digits = b1 === 0x75 ? 4 : 2;
        for (let k = t + 2; k < t + 2 + digits; k++) {
          if (k >= n) return false;
          if (HEX[bytes[k]!]! < 0) return true;
        }
        return false;
      }
      return SIMPLE_ESCAPES[b1]! < 0;
    }
    default: {
      // A lead byte: text unless its next bytes spell an invisible character, or might once an
      // escape among them is decoded.
      if (CLASS[b1] !== 0 && CLASS[b1] !== 4) return false;
      if (ignorable2(b, b1)) return false;
      if (!mayBeIgnorable3(b, b1)) return true;
      if (t + 2 >= n) return false;
      const b2 = bytes[t + 2]!;
      if (CLASS[b2] !== 0 && CLASS[b2] !== 4) return false;
      return !ignorable3(b, b1, b2);
    }
  }
}

/** The rolling hash of the window `bytes[from, from + width)` folded (what `view` would have rolled). */
function foldedHash(bytes: Uint8Array, from: number, powers: Int32Array): number {
  let h = 0;
  for (let k = 0; k < powers.length; k++) h = (h + Math.imul(FOLD[bytes[from + k]!]!, powers[k]!)) | 0;
  return h;
}
