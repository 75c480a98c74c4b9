// Protocol Buffers wire format, written by hand for the OTLP encoder (otlp-protobuf.ts): varints,
// fixed-width numbers, UTF-8 strings and length-delimited messages, appended to one buffer.
//
// One writer per signal, used again for every export: its buffer grows to the largest batch seen (and is
// let go past a bound), so encoding allocates nothing per span or record.
// A nested message's length is not known until its end: `begin` reserves one byte for it, and `end`
// writes it there, moving the message along when the length needs more bytes (only past 127 bytes); an
// item reserves two (`beginItem`), what most spans and records need. The methods used once per field are
// kept small (the rare paths apart) so that the JIT inlines them.

const INITIAL = 64 * 1024;
/** A buffer grown past this by one large batch is not kept for the next. */
const KEEP = 4 * 1024 * 1024;
const TWO_32 = 4294967296;
const MIN_INT64 = -(2 ** 63);
const MAX_INT64 = 2 ** 63;
/** A string of at most this many UTF-16 units takes at most 126 bytes: its length fits one byte. */
const SHORT = 42;

/** Hex digit values by char code (0–9, a–f, A–F); anything else reads as 0. */
const HEX_VALUE = new Uint8Array(128);
for (let i = 0; i < 10; i++) HEX_VALUE[48 + i] = i;
for (let i = 0; i < 6; i++) HEX_VALUE[97 + i] = HEX_VALUE[65 + i] = 10 + i;

export const WIRE = { VARINT: 0, I64: 1, LEN: 2, I32: 5 } as const;

/** A field's tag when it fits one byte (field numbers below 16). */
export function tagByte(field: number, wire: number): number {
  return (field << 3) | wire;
}

const utf8 = new TextEncoder();

export class ProtoWriter {
  buf: Uint8Array;
  pos = 0;
  private view: DataView;

  constructor(size = INITIAL) {
    this.buf = new Uint8Array(size);
    this.view = new DataView(this.buf.buffer);
  }

  /** Starts over (the bytes of the last use are no longer needed). */
  reset(): void {
    if (this.buf.length > KEEP) {
      this.buf = new Uint8Array(INITIAL);
      this.view = new DataView(this.buf.buffer);
    }
    this.pos = 0;
  }

  /** The bytes written since `reset` (a view: valid until the writer is used again). */
  written(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }

  /** Room for `n` more bytes. */
  ensure(n: number): void {
    if (this.pos + n > this.buf.length) this.grow(n);
  }

  private grow(n: number): void {
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.pos + n));
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  /** One byte: a tag of a field below 16 (tagByte). */
  byte(b: number): void {
    this.ensure(1);
    this.buf[this.pos++] = b;
  }

  tag(field: number, wire: number): void {
    this.varint32((field << 3) | wire);
  }

  /** An unsigned varint below 2^32. */
  varint32(v: number): void {
    this.ensure(5);
    const buf = this.buf;
    let p = this.pos;
    v >>>= 0;
    while (v > 0x7f) {
      buf[p++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[p++] = v;
    this.pos = p;
  }

  /** An int64 varint: any integer from -2^63 to 2^63 - 1 (negative ones take ten bytes, as protobuf says). */
  int64(v: number): void {
    if (v >= 0 && v < TWO_32) this.varint32(v);
    else this.int64Wide(v);
  }

  private int64Wide(v: number): void {
    // Two 32-bit halves of the two's complement (exact: v is an integer a double holds exactly).
    const hiSigned = Math.floor(v / TWO_32);
    let lo = v - hiSigned * TWO_32;
    let hi = hiSigned >>> 0;
    this.ensure(10);
    const buf = this.buf;
    let p = this.pos;
    while (hi !== 0 || lo > 0x7f) {
      buf[p++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    buf[p++] = lo;
    this.pos = p;
  }

  fixed32(v: number): void {
    this.ensure(4);
    this.view.setUint32(this.pos, v >>> 0, true);
    this.pos += 4;
  }

  fixed64(lo: number, hi: number): void {
    this.ensure(8);
    this.view.setUint32(this.pos, lo >>> 0, true);
    this.view.setUint32(this.pos + 4, hi >>> 0, true);
    this.pos += 8;
  }

  /** A time in milliseconds since the epoch (fractions kept to the nanosecond) as fixed64 nanoseconds. */
  fixed64Nanos(ms: number): void {
    if (!(ms > 0)) return this.fixed64(0, 0);
    let whole = Math.floor(ms);
    let sub = Math.round((ms - whole) * 1e6);
    if (sub >= 1e6) {
      whole += 1;
      sub -= 1e6;
    }
    // whole * 1e6 + sub overflows a double's 53 bits: built from 16-bit halves of `whole` instead.
    const hi16 = Math.floor(whole / 65536);
    const a = (whole - hi16 * 65536) * 1e6 + sub;
    const b = hi16 * 1e6;
    const bLo = b % 65536;
    const t = a + bLo * 65536;
    const lo = t % TWO_32;
    this.fixed64(lo, (b - bLo) / 65536 + (t - lo) / TWO_32);
  }

  double(v: number): void {
    this.ensure(8);
    this.view.setFloat64(this.pos, v, true);
    this.pos += 8;
  }

  /**
   * Starts an item (a span or record as its repeated field): its one-byte tag and two bytes for its
   * length, what most items take (128 bytes to 16 KiB), so that `endItem` seldom moves it.
   */
  beginItem(tag: number): number {
    this.ensure(3);
    this.buf[this.pos] = tag;
    this.pos += 3;
    return this.pos;
  }

  endItem(mark: number): void {
    const body = mark;
    const len = this.pos - body;
    if (len >= 0x80 && len < 0x4000) {
      this.buf[body - 2] = (len & 0x7f) | 0x80;
      this.buf[body - 1] = len >>> 7;
    } else if (len < 0x80) {
      // One length byte: the item moves back by one.
      this.buf[body - 2] = len;
      this.buf.copyWithin(body - 1, body, this.pos);
      this.pos--;
    } else this.endLong(mark - 2, len, 2);
  }

  /** Reserves a nested message's length byte; the message follows, then `end(mark)`. */
  begin(): number {
    this.ensure(1);
    return this.pos++;
  }

  end(mark: number): void {
    const at = mark;
    const len = this.pos - at - 1;
    if (len < 0x80) this.buf[at] = len;
    else this.endLong(mark, len, 1);
  }

  /** A length longer than the byte reserved for it at `mark` (two for an item): the message moves along to make room. */
  private endLong(mark: number, len: number, reserved = 1): void {
    const extra = varintSize(len) - reserved;
    this.ensure(extra);
    const at = mark;
    this.buf.copyWithin(at + reserved + extra, at + reserved, this.pos);
    const p = this.pos + extra;
    this.pos = at;
    this.varint32(len);
    this.pos = p;
  }

  /** A one-byte tag (tagByte) and a string field, in UTF-8 (lone surrogates become U+FFFD, as TextEncoder does). */
  stringField(tag: number, s: string): void {
    if (s.length > SHORT) {
      this.byte(tag);
      this.longString(s);
      return;
    }
    this.ensure(2 + 3 * s.length);
    this.buf[this.pos] = tag;
    this.pos = putShort(this.buf, this.pos + 1, s);
  }

  private longString(s: string): void {
    const n = s.length;
    // Three bytes per UTF-16 unit at most (a surrogate pair's four bytes are two units).
    this.ensure(3 * n + 5);
    const mark = this.begin();
    if (n > 256) this.pos += utf8.encodeInto(s, this.buf.subarray(this.pos, this.pos + 3 * n)).written;
    else this.pos = putUtf8(this.buf, this.pos, s, 0);
    this.end(mark);
  }

  /** Length-delimited bytes. */
  bytes(b: Uint8Array): void {
    this.varint32(b.length);
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /** A one-byte tag and a W3C id given in hex (32 or 16 digits), as the bytes it spells. */
  hexField(tag: number, hex: string): void {
    const n = hex.length >> 1;
    this.ensure(n + 2);
    const buf = this.buf;
    let p = this.pos;
    buf[p++] = tag;
    buf[p++] = n;
    for (let i = 0; i < n; i++) buf[p++] = (HEX_VALUE[hex.charCodeAt(2 * i) & 0x7f]! << 4) | HEX_VALUE[hex.charCodeAt(2 * i + 1) & 0x7f]!;
    this.pos = p;
  }
}

/** A string of at most SHORT units, length and UTF-8, at `p` (room assured); the position after it. */
export function putShort(buf: Uint8Array, p: number, s: string): number {
  const at = p++;
  const n = s.length;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) {
      p = putUtf8(buf, p, s, i);
      break;
    }
    buf[p++] = c;
  }
  buf[at] = p - at - 1;
  return p;
}

/** UTF-8 of `s` from unit `i` on, at `p` (room assured: three bytes a unit); the position after it. */
function putUtf8(buf: Uint8Array, p: number, s: string, i: number): number {
  const n = s.length;
  for (; i < n; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) buf[p++] = c;
    else if (c < 0x800) {
      buf[p++] = 0xc0 | (c >> 6);
      buf[p++] = 0x80 | (c & 0x3f);
    } else {
      if (c >= 0xd800 && c <= 0xdfff) {
        const next = i + 1 < n ? s.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
          i++;
          buf[p++] = 0xf0 | (c >> 18);
          buf[p++] = 0x80 | ((c >> 12) & 0x3f);
          buf[p++] = 0x80 | ((c >> 6) & 0x3f);
          buf[p++] = 0x80 | (c & 0x3f);
          continue;
        }
        c = 0xfffd; // a lone surrogate
      }
      buf[p++] = 0xe0 | (c >> 12);
      buf[p++] = 0x80 | ((c >> 6) & 0x3f);
      buf[p++] = 0x80 | (c & 0x3f);
    }
  }
  return p;
}

/** Bytes a varint of `v` (below 2^32) takes. */
export function varintSize(v: number): number {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
}

/** Whether a number travels as int64 (an integer in its range) rather than as a double. */
export function isInt64(v: number): boolean {
  return Number.isInteger(v) && v >= MIN_INT64 && v < MAX_INT64;
}
