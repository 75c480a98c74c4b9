// The matching half of the echo view (echo-view.ts decodes, this matches): each view byte goes into a
// ring of the last RING bytes with the body offset it came from, one rolling hash per window length
// is looked up in the index (needle-index.ts), and overlapping matches merge into body spans. It
// also says how much of the body a later byte could still join to a match (settledMatching), and
// follows a needle set whose index is rebuilt mid-body.

import { FOLD, HASH_MUL as MUL, mixHash, RING, type NeedleIndex } from "./needle-index.ts";

export class EchoMatcher {
  /** Matched body spans [start, end), closed and merged, in order. */
  readonly spans: number[] = [];
  protected openStart = -1;
  protected openEnd = -1;
  // the view's last bytes, their body spans, and one rolling hash per window length
  protected readonly ring = new Uint8Array(RING);
  protected readonly ringStart = new Float64Array(RING);
  protected pos = 0;
  protected hashes: Int32Array;
  /** Bytes of the view, when collecting (no index). */
  readonly collected: number[] | undefined;

  constructor(
    protected index: NeedleIndex | null,
    protected readonly source?: { readonly index: NeedleIndex | null },
  ) {
    this.hashes = new Int32Array(index ? index.groups.length : 0);
    if (!index) this.collected = [];
  }

  /** Starts matching a new body with `index`, as a new matcher would. */
  protected resetMatching(index: NeedleIndex): void {
    this.index = index;
    const hashes = this.hashes;
    if (hashes.length !== index.groups.length) this.hashes = new Int32Array(index.groups.length);
    else for (let g = 0; g < hashes.length; g++) hashes[g] = 0;
    this.spans.length = 0;
    this.openStart = this.openEnd = -1;
    // A window's leaving byte reads 0 before the first `width` bytes. (Loops, not fill(): a short text
    // is scanned in about the time a native call takes, and headers are scanned several at a time.)
    const ring = this.ring;
    for (let k = 0; k < ring.length; k++) ring[k] = 0;
    this.pos = 0;
  }

  /** Moves to another index mid-body: each window length's hash recomputed over the view's last bytes. */
  protected follow(index: NeedleIndex): void {
    this.index = index;
    this.hashes = new Int32Array(index.groups.length);
    index.groups.forEach((group, g) => {
      let h = 0;
      for (let p = this.pos - group.width; p < this.pos; p++) h = (Math.imul(h, MUL) + (p >= 0 ? this.ring[p & (RING - 1)]! : 0)) | 0;
      this.hashes[g] = h;
    });
  }

  /** A source whose index was rebuilt is followed from the next chunk on. */
  protected followSource(): void {
    const current = this.source?.index;
    if (current && current !== this.index) this.follow(current);
  }

  /** Plain bytes into the view one by one (a short run, or a run's first bytes): `view` inlined. */
  protected exactRun(bytes: Uint8Array, from: number, to: number, at: number): void {
    if (to <= from) return;
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

  /**
   * `at`, or earlier where a later view byte could still begin a match or grow the open one: only
   * a tail of the view that is part of some needle can begin a later match (a stream whose last
   * bytes are not, an SSE event's blank line, is emitted whole, at once).
   */
  protected settledMatching(at: number): number {
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

  /** One view byte, spelt by body bytes [start, end): into the ring, each window length hashed and looked up. */
  protected view(v: number, start: number, end: number): void {
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

  protected matched(start: number, end: number): void {
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
