// The needles as fixed-length windows, looked up by rolling hash (echo-scanner.ts computes it).
// A needle of WINDOW bytes or more is indexed as all its WINDOW-byte windows, so any 12 consecutive
// bytes of it are found, and a whole echo is found as overlapping windows that merge into one span;
// a shorter needle is indexed whole, in a group of its own length. Per group, a bitmap of hashes
// turns away almost every position at the cost of one array read, and an open-addressed table of
// (hash, window) confirms the rest byte for byte: linear in the body, whatever the number of values.

/** Any run of this many bytes of a needle (in the scanner's view) is redacted. */
export const WINDOW = 12;
/** How many of the view's last bytes the scanner keeps: more than the widest window, a power of two. */
export const RING = 16;
export const HASH_MUL = 0x9e3779b1 | 0;

/** ASCII case folding, as the view applies it to every byte. */
export const FOLD = new Uint8Array(256).map((_, i) => (i >= 0x41 && i <= 0x5a ? i + 32 : i));

/** Spreads a rolling hash's bits before its top bits pick a bitmap bit (a short piece's hash is small). */
export function mixHash(h: number): number {
  return Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
}

/** The rolling hash of a window (as the scanner computes it, byte by byte). */
function windowHash(bytes: Uint8Array, from: number, width: number): number {
  let h = 0;
  for (let i = 0; i < width; i++) h = (Math.imul(h, HASH_MUL) + bytes[from + i]!) | 0;
  return h;
}

/** HASH_MUL^width: what a byte leaving a window of that width takes out of its hash. */
function leavingFactor(width: number): number {
  let p = 1;
  for (let i = 0; i < width; i++) p = Math.imul(p, HASH_MUL);
  return p;
}

/** Windows of room a group keeps beyond what it is built with, at the least. */
const ROOM = 4096;
/** Below this stride (windows shorter than 7 bytes), sampling saves too little: runs are read byte by byte. */
const MIN_STRIDE = 4;

export class WindowGroup {
  readonly pow: number;
  /** MUL^(width - 1 - k) for the window's k-th byte: its hash as a sum, without the chain of products. */
  readonly powers: Int32Array;
  readonly shift: number;
  readonly bits: Uint8Array;
  private readonly slots: Int32Array; // window number + 1, 0 = empty
  private readonly slotHash: Int32Array;
  private readonly mask: number;
  private readonly windows: Uint8Array; // `count` windows of `width` bytes, end to end
  private count = 0;

  constructor(
    readonly width: number,
    /** Windows it can hold: what it is built with, plus room for values added later (NeedleIndex.add). */
    readonly capacity: number,
  ) {
    this.pow = leavingFactor(width);
    this.powers = new Int32Array(width).map((_, k) => leavingFactor(width - 1 - k));
    // 64 bits a window: about one position in 64 is looked up in the table by chance.
    const bitCount = pow2(Math.min(1 << 26, Math.max(1 << 15, capacity * 64)));
    this.shift = 32 - Math.log2(bitCount);
    this.bits = new Uint8Array(bitCount >>> 3);
    const size = pow2(Math.max(16, capacity * 2));
    this.slots = new Int32Array(size);
    this.slotHash = new Int32Array(size);
    this.mask = size - 1;
    this.windows = new Uint8Array(capacity * width);
  }

  /** Whether this many more windows fit in what is left of the capacity. */
  hasRoomFor(windows: number): boolean {
    return this.count + windows <= this.capacity;
  }

  /** Indexes every window of `needle` (a rolling hash: one multiply-add per window, not per byte of it). */
  addAll(needle: Uint8Array): void {
    const w = this.width;
    if (needle.length < w) return;
    let h = windowHash(needle, 0, w);
    for (let from = 0; ; from++) {
      this.add(h, needle, from);
      if (from + w >= needle.length) return;
      h = (Math.imul(h, HASH_MUL) + needle[from + w]! - Math.imul(needle[from]!, this.pow)) | 0;
    }
  }

  private add(h: number, bytes: Uint8Array, from: number): void {
    const w = this.width;
    for (let i = this.home(h); ; i = (i + 1) & this.mask) {
      const s = this.slots[i]!;
      if (s === 0) {
        const at = this.count * w;
        for (let k = 0; k < w; k++) this.windows[at + k] = bytes[from + k]!;
        this.slots[i] = ++this.count;
        this.slotHash[i] = h;
        const k = mixHash(h) >>> this.shift;
        this.bits[k >>> 3]! |= 1 << (k & 7);
        return;
      }
      if (this.slotHash[i] === h && this.sameAt(s - 1, bytes, from)) return; // already indexed
    }
  }

  /** Whether the window ending at view position `p` (its bytes in `ring`) is indexed. */
  contains(h: number, ring: Uint8Array, p: number): boolean {
    const w = this.width;
    const mask = ring.length - 1;
    for (let i = this.home(h); ; i = (i + 1) & this.mask) {
      const s = this.slots[i]!;
      if (s === 0) return false;
      if (this.slotHash[i] !== h) continue;
      const at = (s - 1) * w;
      let k = 0;
      while (k < w && this.windows[at + k] === ring[(p - w + 1 + k) & mask]) k++;
      if (k === w) return true;
    }
  }

  /**
   * Whether the window of body bytes `bytes[from, from + width)`, folded, is indexed (`h` its
   * rolling hash): `contains` for a plain run, whose view is the folded bytes themselves.
   */
  containsFolded(h: number, bytes: Uint8Array, from: number): boolean {
    const w = this.width;
    for (let i = this.home(h); ; i = (i + 1) & this.mask) {
      const s = this.slots[i]!;
      if (s === 0) return false;
      if (this.slotHash[i] !== h) continue;
      const at = (s - 1) * w;
      let k = 0;
      while (k < w && this.windows[at + k] === FOLD[bytes[from + k]!]) k++;
      if (k === w) return true;
    }
  }

  private home(h: number): number {
    return (Math.imul(h, 0x85ebca6b) >>> 7) & this.mask;
  }

  private sameAt(n: number, bytes: Uint8Array, from: number): boolean {
    const at = n * this.width;
    for (let k = 0; k < this.width; k++) if (this.windows[at + k] !== bytes[from + k]) return false;
    return true;
  }
}

export interface NeedleIndex {
  /** One group per window length, the WINDOW group first. */
  readonly groups: readonly WindowGroup[];
  /** The widest window: how far back a match can start. */
  readonly longest: number;
  /** The narrowest window. */
  readonly shortest: number;
  /**
   * The length of the longest tail of the view (its last `pos` bytes in `ring`), shorter than the
   * widest window, that is part of some needle: what a later byte could turn into a match.
   */
  partTail(ring: Uint8Array, pos: number): number;
  /** The filter that lets the scanner sample plain runs; null when a window is too short for it. */
  readonly sampler: PieceSampler | null;
  /**
   * Adds needles in place (scanners already reading see them from their next byte on); false, with
   * nothing added, when one needs a window length the index lacks or there is no room left: then
   * build a new index.
   */
  add(needles: readonly Uint8Array[]): boolean;
}

/** The length of the pieces a PieceSampler indexes (one 32-bit read). */
export const PIECE = 4;
export const PIECE_MUL = 0x2c1b3c6d | 0;

/**
 * For the scanner's plain runs (echo-scanner.ts): a bitmap of every PIECE-byte piece of every
 * needle, each byte ORed with 0x20, hashed as a little-endian 32-bit number. A window of w bytes
 * wholly in a run has pieces starting at w - PIECE + 1 consecutive positions of the run, at least
 * `stride` of them (that number for the narrowest window, at most 8): so reading the run's pieces
 * at positions at most `stride` apart reads one piece of every window, and every piece of a
 * needle's window is a needle's piece. Only around a piece found in the bitmap are windows hashed
 * and looked up. OR 0x20 folds an ASCII letter's case in one instruction whether the byte was folded
 * already (a needle, the view) or not (a body byte); other bytes it merges in pairs (0x0a with
 * 0x2a, ...), which only adds false positives, and the exact lookup turns those away.
 */
export class PieceSampler {
  readonly bits: Uint8Array;
  readonly shift: number;
  constructor(
    needles: readonly Uint8Array[],
    readonly stride: number,
  ) {
    const total = needles.reduce((sum, n) => sum + n.length, 0);
    // 64 bits a piece: about one sampled position in 64 hashes windows by chance.
    const bitCount = pow2(Math.min(1 << 23, Math.max(1 << 16, total * 64)));
    this.shift = 32 - Math.log2(bitCount);
    this.bits = new Uint8Array(bitCount >>> 3);
    for (const n of needles) this.add(n);
  }

  /** Sets the bits of `n`'s pieces (a bitmap past its size only turns away fewer positions). */
  add(n: Uint8Array): void {
    for (let i = 0; i + PIECE <= n.length; i++) {
      const x = n[i]! | (n[i + 1]! << 8) | (n[i + 2]! << 16) | (n[i + 3]! << 24) | 0x20202020;
      const k = Math.imul(x, PIECE_MUL) >>> this.shift;
      this.bits[k >>> 3]! |= 1 << (k & 7);
    }
  }
}

/**
 * Per length L below the widest window, a bitmap of the hashes of every L-byte piece of every needle.
 * A false positive only holds a few bytes back until the next chunk, so no table confirms it.
 */
class PieceFilter {
  private readonly bits: Uint8Array[] = [];
  private readonly shifts: number[] = [];
  constructor(
    needles: readonly Uint8Array[],
    readonly longest: number,
  ) {
    const total = needles.reduce((sum, n) => sum + n.length, 0);
    const bitCount = pow2(Math.min(1 << 26, Math.max(1 << 12, total * 16)));
    for (let len = 1; len < longest; len++) {
      this.bits[len] = new Uint8Array(bitCount >>> 3);
      this.shifts[len] = 32 - Math.log2(bitCount);
    }
    for (const n of needles) this.add(n);
  }

  /** Sets the bits of every piece of `n` shorter than the widest window. */
  add(n: Uint8Array): void {
    for (let len = 1; len < this.longest && len <= n.length; len++) {
      const bits = this.bits[len]!;
      const shift = this.shifts[len]!;
      const leaving = leavingFactor(len);
      let h = windowHash(n, 0, len);
      for (let from = 0; ; from++) {
        const k = mixHash(h) >>> shift;
        bits[k >>> 3]! |= 1 << (k & 7);
        if (from + len >= n.length) break;
        h = (Math.imul(h, HASH_MUL) + n[from + len]! - Math.imul(n[from]!, leaving)) | 0;
      }
    }
  }

  longestTail(ring: Uint8Array, pos: number): number {
    const mask = ring.length - 1;
    let h = 0;
    let best = 0;
    // Hash the tail from its last byte backwards: h = sum of byte * MUL^(distance from the end).
    let mul = 1;
    for (let len = 1; len < this.longest && len <= pos; len++) {
      h = (h + Math.imul(ring[(pos - len) & mask]!, mul)) | 0;
      mul = Math.imul(mul, HASH_MUL);
      const k = mixHash(h) >>> this.shifts[len]!;
      if (this.bits[len]![k >>> 3]! & (1 << (k & 7))) best = len;
      else break; // a tail that is no piece has no longer tail that is one
    }
    return best;
  }
}

/** Indexes needles already in the scanner's view (viewOf); empty ones are skipped. */
export function buildIndex(needles: readonly Uint8Array[]): NeedleIndex | null {
  const byWidth = new Map<number, Uint8Array[]>();
  for (const n of needles) {
    if (n.length === 0) continue;
    const w = Math.min(n.length, WINDOW);
    const list = byWidth.get(w) ?? [];
    list.push(n);
    byWidth.set(w, list);
  }
  if (byWidth.size === 0) return null;
  const groups: WindowGroup[] = [];
  for (const w of [...byWidth.keys()].sort((a, b) => b - a)) {
    if (w >= RING) throw new Error("window wider than the scanner's ring");
    const list = byWidth.get(w)!;
    const windows = list.reduce((sum, n) => sum + n.length - w + 1, 0);
    // Room for about as many windows again, so values noted later are added in place, not rebuilt.
    const group = new WindowGroup(w, windows + Math.max(windows, ROOM));
    for (const n of list) group.addAll(n);
    groups.push(group);
  }
  const longest = groups[0]!.width;
  const nonEmpty = needles.filter((n) => n.length > 0);
  const pieces = new PieceFilter(nonEmpty, longest);
  // Every needle is at least as long as the narrowest window, so each window's pieces are its needle's.
  const stride = Math.min(8, groups[groups.length - 1]!.width - PIECE + 1);
  const sampler = stride >= MIN_STRIDE ? new PieceSampler(nonEmpty, stride) : null;
  const add = (more: readonly Uint8Array[]): boolean => {
    const added = more.filter((n) => n.length > 0);
    const groupOf = (n: Uint8Array) => groups.find((g) => g.width === Math.min(n.length, WINDOW));
    const wanted = new Map<WindowGroup | undefined, number>();
    for (const n of added) wanted.set(groupOf(n), (wanted.get(groupOf(n)) ?? 0) + n.length - Math.min(n.length, WINDOW) + 1);
    for (const [group, windows] of wanted) if (!group || !group.hasRoomFor(windows)) return false;
    for (const n of added) {
      groupOf(n)!.addAll(n);
      pieces.add(n);
      sampler?.add(n);
    }
    return true;
  };
  return { groups, longest, shortest: groups[groups.length - 1]!.width, partTail: (ring, pos) => pieces.longestTail(ring, pos), sampler, add };
}

function pow2(n: number): number {
  return 2 ** Math.ceil(Math.log2(n));
}

/**
 * Two indexes read as one (a shared set and one request's own short values): every group of both
 * (the scanner hashes each), the widest reach of either, no sampling (the narrow windows of short
 * values leave it little to skip). Adding goes to the shared one.
 */
export function combineIndexes(shared: NeedleIndex | null, own: NeedleIndex | null): NeedleIndex | null {
  if (!shared || !own) return shared ?? own;
  const groups = [...shared.groups, ...own.groups].sort((a, b) => b.width - a.width);
  return {
    groups,
    longest: groups[0]!.width,
    shortest: groups[groups.length - 1]!.width,
    partTail: (ring, pos) => Math.max(shared.partTail(ring, pos), own.partTail(ring, pos)),
    sampler: null,
    add: (more) => shared.add(more),
  };
}
