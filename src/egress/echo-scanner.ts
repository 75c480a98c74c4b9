// The decoding view the echo redactor matches in (DESIGN.md §3.22): one pass over the body bytes,
// no backtracking, that reads percent-escapes (%XX), HTML numeric and basic named entities
// (&#NN; &#xHH; &amp; …), JSON and script escapes (\uXXXX with surrogate pairs, \xHH, \" \\ \/),
// drops soft hyphens and zero-width characters, and folds ASCII case. Each byte of that view
// remembers the span of body bytes it came from, so a match in the view redacts exactly the body
// bytes that spelt it. Needles are matched by a rolling hash over fixed-length windows
// (needle-index.ts), which is what makes "any 12 characters of a value" as cheap as the whole value.
import { ASCII_TRIGGERS, CLASS, hasLegacyPrefix, HEX, ignorable2, ignorable3, isLetter, MAX_DIGITS, MAX_IGNORABLE_RUN, MAX_NAME, MAX_TOKEN, mayBeIgnorable3, resolveName, SIMPLE_ESCAPES, TRIGGERS } from "./echo-syntax.ts";
//
// Bounded by design: an escape is at most 8 bytes (a numeric reference 64 digits), and at most 64
// invisible characters in a row are dropped (the 65th is read as ordinary bytes), so what a stream
// holds back stays small whatever the upstream sends.
//
// The byte-by-byte reading (`step` and what it calls) defines the view; most bytes take faster
// paths that end in the same state and report the same matches, in the same order. Between
// trigger bytes (those that may start an escape or an invisible character, found by native
// search) the view is the body bytes folded, and such a plain run is sampled a piece at a time
// (plainRun, PieceSampler in needle-index.ts); a trigger that turns out to be text stays in the
// run (plainTrigger); an escape or invisible character wholly in the chunk is read at once
// (readAtOnce). tests/unit/egress/echo-scanner-fast.test.ts checks all of it against the
// byte-by-byte scanner.

import { isAscii } from "node:buffer";
import { FOLD, HASH_MUL as MUL, mixHash, PIECE, PIECE_MUL, RING, type NeedleIndex } from "./needle-index.ts";

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
/** Below this many bytes a chunk is read byte by byte. */
const SHORT_TEXT = 256;

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
  private pos = 0;
  private hashes: Int32Array;
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

  /** Per trigger byte, where it next occurs in the bytes being fed (-1: not searched yet). */
  private readonly nextTrigger = new Int32Array(TRIGGERS.length);
  /** The mean distance between triggers lately, which picks how the next one is searched for. */
  private meanGap = DENSE;
  /** The buffer of the bytes being fed, as 32-bit words (made for the first long run). */
  private words: Uint32Array | null = null;
  /** How many of TRIGGERS the bytes being fed can hold (ASCII: no lead byte). */
  private triggerCount = TRIGGERS.length;

  /**
   * `perByte` turns every fast path off (each byte through the slow path): tests compare both.
   * `source`, when given, is read again before each chunk: a set whose index was rebuilt (values
   * joined it that did not fit in place) is followed from there on.
   */
  constructor(
    private index: NeedleIndex | null,
    private readonly perByte = false,
    private readonly source?: { readonly index: NeedleIndex | null },
  ) {
    this.hashes = new Int32Array(index ? index.groups.length : 0);
    if (!index) this.collected = [];
  }

  /**
   * Starts over on a new body with `index`, as a new scanner would (headers are scanned a few short
   * texts at a time: reusing one scanner spares its allocations).
   */
  reset(index: NeedleIndex): void {
    this.index = index;
    if (this.hashes.length !== index.groups.length) this.hashes = new Int32Array(index.groups.length);
    else this.hashes.fill(0);
    this.spans.length = 0;
    this.openStart = this.openEnd = -1;
    this.ring.fill(0); // a window's leaving byte reads 0 before the first `width` bytes
    this.pos = 0;
    this.esc = Esc.None;
    this.tokenLen = this.num = this.digits = 0;
    this.highSurrogate = -1;
    this.heldLen = 0;
    this.ignorableRun = 0;
    this.meanGap = DENSE;
    this.words = null;
  }

  /** Moves to another index mid-body: each window length's hash recomputed over the view's last bytes. */
  private follow(index: NeedleIndex): void {
    this.index = index;
    this.hashes = new Int32Array(index.groups.length);
    index.groups.forEach((group, g) => {
      let h = 0;
      for (let p = this.pos - group.width; p < this.pos; p++) h = (Math.imul(h, MUL) + (p >= 0 ? this.ring[p & (RING - 1)]! : 0)) | 0;
      this.hashes[g] = h;
    });
  }

  /** Reads `bytes`, the body bytes from absolute offset `at` on. */
  feed(bytes: Uint8Array, at: number): void {
    const n = bytes.length;
    const current = this.source?.index;
    if (current && current !== this.index) this.follow(current);
    // Short texts (header values) go byte by byte: the fast paths' set-up costs more than it saves.
    if (!this.index || this.perByte) {
      for (let i = 0; i < n; i++) this.step(bytes[i]!, at + i);
      return;
    }
    if (n < SHORT_TEXT) {
      // Plain runs through the exact loop (no native search, no sampling), the rest byte by byte.
      for (let i = 0; i < n; ) {
        if (this.esc === Esc.None && this.heldLen === 0 && this.highSurrogate < 0) {
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
      return;
    }
    this.nextTrigger.fill(-1);
    // Lead bytes are searched for only where there can be some.
    this.triggerCount = isAscii(bytes) ? ASCII_TRIGGERS : TRIGGERS.length;
    let i = 0;
    while (i < n) {
      if (this.esc === Esc.None && this.heldLen === 0 && this.highSurrogate < 0) {
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
        const x = (bytes[q]! | (bytes[q + 1]! << 8) | (bytes[q + 2]! << 16) | (bytes[q + 3]! << 24)) | 0x20202020;
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

  /** Plain bytes into the view one by one (a short run, or a run's first bytes): `view` inlined. */
  private exactRun(bytes: Uint8Array, from: number, to: number, at: number): void {
    if (to <= from) return;
    this.ignorableRun = 0;
    const groups = this.index!.groups;
    if (groups.length !== 1) {
      for (let i = from; i < to; i++) this.view(FOLD[bytes[i]!]!, at + i, at + i + 1);
      return;
    }
    const group = groups[0]!;
    const { width: w, pow, shift, bits } = group;
    const ring = this.ring;
    const ringStart = this.ringStart;
    let h = this.hashes[0]!;
    let p = this.pos;
    for (let i = from; i < to; i++, p++) {
      const v = FOLD[bytes[i]!]!;
      const slot = p & (RING - 1);
      ring[slot] = v;
      ringStart[slot] = at + i;
      h = (Math.imul(h, MUL) + v - Math.imul(ring[(p - w) & (RING - 1)]!, pow)) | 0;
      if (p + 1 < w) continue;
      const k = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> shift; // mixHash
      if ((bits[k >>> 3]! & (1 << (k & 7))) !== 0 && group.contains(h, ring, p)) this.matched(ringStart[(p - w + 1) & (RING - 1)]!, at + i + 1);
    }
    this.pos = p;
    this.hashes[0] = h;
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
    // The token's other bytes ('#', 'x', letters, digits) start nothing: read again, they go
    // straight to the view, and the token is not written before the loop is done.
    for (let k = 1; k < this.tokenLen; k++) this.feedOne(this.token[k]!, start + k);
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


/** Bytes as the scanner's view reads them: escapes decoded, invisible characters dropped, case folded. */
export function viewOf(bytes: Uint8Array): Uint8Array {
  const s = new EchoScanner(null);
  s.feed(bytes, 0);
  s.end(bytes.length);
  return Uint8Array.from(s.collected!);
}
