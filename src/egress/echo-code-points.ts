// Code points into the echo view (echo-view.ts reads the escapes, this takes what they decode to):
// a code point as its UTF-8 bytes, each spanning the escape that spelt it; a high surrogate waiting
// for its low half (a lone one reads as U+FFFD); and the invisible characters echo-syntax.ts names,
// held until complete and then dropped. The bytes left go to EchoMatcher (echo-matcher.ts).
//
// Bounded by design: at most 64 invisible characters in a row are dropped (the 65th is read as
// ordinary bytes), so what is held stays small whatever the upstream sends.

import { CLASS, ignorable2, ignorable3, MAX_IGNORABLE_RUN, mayBeIgnorable3 } from "./echo-syntax.ts";
import { EchoMatcher } from "./echo-matcher.ts";
import { FOLD } from "./needle-index.ts";

/** The view's bytes as escapes decode to them: UTF-8 of each code point, invisible characters dropped. */
export class EchoCodePoints extends EchoMatcher {
  // high surrogate waiting for its low half
  protected highSurrogate = -1;
  protected highStart = 0;
  // possibly invisible character being read
  protected readonly held = new Uint8Array(2);
  protected heldLen = 0;
  protected readonly heldStart = new Float64Array(2);
  protected readonly heldEnd = new Float64Array(2);
  protected ignorableRun = 0;

  /** A plain run into the view: it ends any run of invisible characters. */
  protected override exactRun(bytes: Uint8Array, from: number, to: number, at: number): void {
    if (to <= from) return;
    this.ignorableRun = 0;
    super.exactRun(bytes, from, to, at);
  }

  protected flushSurrogate(): void {
    if (this.highSurrogate < 0) return;
    const start = this.highStart;
    this.highSurrogate = -1;
    this.emitCodePoint(0xfffd, start, start + 6);
  }

  /** A code point as its UTF-8 bytes, every one spanning the escape that spelt it. */
  protected emitCodePoint(cp: number, start: number, end: number): void {
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
  protected decodedByteAt(b: number, start: number, end: number): void {
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

  protected hold(b: number, start: number, end: number): void {
    this.held[this.heldLen] = b;
    this.heldStart[this.heldLen] = start;
    this.heldEnd[this.heldLen] = end;
    this.heldLen++;
  }

  /** An invisible character is complete (`b` its last byte): dropped, unless it is one too many in a row. */
  protected dropHeld(b: number, start: number, end: number): void {
    if (++this.ignorableRun > MAX_IGNORABLE_RUN) {
      // Past the limit it is read as ordinary bytes, all of them (what is held could otherwise grow without end).
      this.releaseHeld();
      return this.view(b, start, end);
    }
    this.heldLen = 0;
  }

  protected releaseHeld(): void {
    const n = this.heldLen;
    this.heldLen = 0;
    if (n) this.ignorableRun = 0;
    for (let k = 0; k < n; k++) this.view(this.held[k]!, this.heldStart[k]!, this.heldEnd[k]!);
  }
}
