// No reveal by echo in WebSocket frames: the server-to-client frame scanner, fed the way TCP
// delivers bytes (any split), must re-frame every message without the needle and refuse frames it
// cannot scan.

import { describe, expect, test } from "bun:test";
import { createFrameScanner, encodeCloseFrame, WebSocketProtocolError } from "../../../src/egress/websocket-frames.ts";

const SECRET = "sk-live-0123456789abcdef";
const NEEDLES = [SECRET]; // "Bearer <value>" needs no needle of its own: the value's windows find it
const enc = (s: string) => new Uint8Array(Buffer.from(s, "utf8"));

/** A server frame as an upstream would write it (independent of the code under test). */
function frame(opcode: number, payload: Uint8Array | string, opts: { fin?: boolean; rsv?: number; mask?: boolean } = {}): Uint8Array {
  const data = typeof payload === "string" ? enc(payload) : payload;
  const n = data.length;
  const ext = n < 126 ? [] : n < 65536 ? [n >> 8, n & 255] : [0, 0, 0, 0, (n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];
  const len7 = n < 126 ? n : n < 65536 ? 126 : 127;
  const head = [((opts.fin ?? true) ? 0x80 : 0) | ((opts.rsv ?? 0) << 4) | opcode, (opts.mask ? 0x80 : 0) | len7, ...ext];
  const mask = opts.mask ? [1, 2, 3, 4] : [];
  const body = opts.mask ? data.map((b, i) => b ^ mask[i % 4]!) : data;
  return new Uint8Array([...head, ...mask, ...body]);
}

interface Frame {
  fin: boolean;
  opcode: number;
  payload: Buffer;
}

/** Decodes what the agent receives, checking the framing rules a client enforces. */
function decode(bytes: Uint8Array): Frame[] {
  const out: Frame[] = [];
  let i = 0;
  while (i < bytes.length) {
    const b0 = bytes[i]!;
    const b1 = bytes[i + 1]!;
    expect(b0 & 0x70).toBe(0);
    expect(b1 & 0x80).toBe(0); // server frames are never masked
    let len = b1 & 0x7f;
    let at = i + 2;
    if (len === 126) (len = (bytes[at]! << 8) | bytes[at + 1]!), (at += 2);
    else if (len === 127) (len = Number(Buffer.from(bytes.subarray(at, at + 8)).readBigUInt64BE())), (at += 8);
    out.push({ fin: (b0 & 0x80) !== 0, opcode: b0 & 0x0f, payload: Buffer.from(bytes.subarray(at, at + len)) });
    i = at + len;
  }
  expect(i).toBe(bytes.length);
  return out;
}

/** Reassembles data messages (with their opcode) and lists control frames in order. */
function messages(frames: Frame[]): { opcode: number; data: Buffer }[] {
  const out: { opcode: number; data: Buffer }[] = [];
  let current: { opcode: number; parts: Buffer[] } | undefined;
  for (const f of frames) {
    if (f.opcode >= 8) {
      expect(f.fin).toBe(true);
      expect(f.payload.length).toBeLessThanOrEqual(125);
      out.push({ opcode: f.opcode, data: f.payload });
      continue;
    }
    if (f.opcode === 0) expect(current).toBeDefined();
    else expect(current).toBeUndefined();
    current ??= { opcode: f.opcode, parts: [] };
    current.parts.push(f.payload);
    if (f.fin) out.push({ opcode: current.opcode, data: Buffer.concat(current.parts) }), (current = undefined);
  }
  expect(current).toBeUndefined();
  return out;
}

/** Feeds `wire` cut at the given offsets and returns everything the scanner emitted. */
function scan(wire: Uint8Array, cuts: number[] = []): Uint8Array {
  const scanner = createFrameScanner(NEEDLES);
  const out: Uint8Array[] = [];
  let at = 0;
  for (const cut of [...cuts, wire.length]) {
    out.push(scanner.push(wire.subarray(at, cut)));
    at = cut;
  }
  return Buffer.concat(out);
}

const concat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

describe("data messages", () => {
  test("a needle split across two frames of one fragmented message is redacted", () => {
    const wire = concat(frame(1, `before ${SECRET.slice(0, 9)}`, { fin: false }), frame(0, `${SECRET.slice(9)} after`));
    const out = scan(wire);
    expect(Buffer.from(out).includes(SECRET)).toBe(false);
    expect(messages(decode(out))).toEqual([{ opcode: 1, data: Buffer.from("before [redacted] after") }]);
  });

  test("every split of the TCP stream, including inside a frame head and the payload", () => {
    const wire = concat(
      frame(1, `a${SECRET}`, { fin: false }),
      frame(0, `b${SECRET.slice(0, 5)}`, { fin: false }),
      frame(0, `${SECRET.slice(5)}c`),
      frame(2, enc(`x${SECRET}y`)),
    );
    for (let a = 0; a <= wire.length; a++) {
      for (const b of [a + 1, a + 7, wire.length]) {
        const out = scan(wire, b <= wire.length && b > a ? [a, b] : [a]);
        expect(Buffer.from(out).includes(SECRET)).toBe(false);
        expect(messages(decode(out))).toEqual([
          { opcode: 1, data: Buffer.from("a[redacted]b[redacted]c") },
          { opcode: 2, data: Buffer.from("x[redacted]y") },
        ]);
      }
    }
  });

  test("one byte at a time", () => {
    const wire = concat(frame(1, `${SECRET}${SECRET}`, { fin: false }), frame(0, "end"));
    const out = scan(wire, [...Array(wire.length).keys()].slice(1));
    expect(messages(decode(out))).toEqual([{ opcode: 1, data: Buffer.from("[redacted][redacted]end") }]);
  });

  test("16-bit and 64-bit payload lengths", () => {
    for (const size of [300, 70_000]) {
      const text = `${"x".repeat(size / 2)}${SECRET}${"y".repeat(size / 2)}`;
      const wire = frame(1, text);
      expect(wire[1]).toBe(size < 65536 ? 126 : 127);
      const out = scan(
        wire,
        [3, 9, 1000, 40_000].filter((c) => c < wire.length),
      );
      expect(messages(decode(out))).toEqual([{ opcode: 1, data: Buffer.from(text.replace(SECRET, "[redacted]")) }]);
    }
  });

  test("binary messages are scanned as bytes", () => {
    const payload = concat(new Uint8Array([0, 255, 1]), enc(SECRET), new Uint8Array([254, 0]));
    const out = scan(frame(2, payload), [10]);
    expect(messages(decode(out))).toEqual([{ opcode: 2, data: Buffer.concat([Buffer.from([0, 255, 1]), Buffer.from("[redacted]"), Buffer.from([254, 0])]) }]);
  });

  test("messages without the needle come through unchanged, empty ones included", () => {
    const out = scan(concat(frame(1, "hello"), frame(1, ""), frame(2, new Uint8Array([1, 2, 3]))));
    expect(messages(decode(out))).toEqual([
      { opcode: 1, data: Buffer.from("hello") },
      { opcode: 1, data: Buffer.alloc(0) },
      { opcode: 2, data: Buffer.from([1, 2, 3]) },
    ]);
  });

  test("text stays valid UTF-8 around a redaction", () => {
    const text = `héllo ${SECRET} wörld ✓`;
    const out = scan(frame(1, text), [12, 20]);
    const [msg] = messages(decode(out));
    expect(new TextDecoder("utf-8", { fatal: true }).decode(msg!.data)).toBe("héllo [redacted] wörld ✓");
  });
});

describe("control frames", () => {
  test("a ping inside a fragmented message, between the halves of a needle", () => {
    const wire = concat(frame(1, `one ${SECRET.slice(0, 4)}`, { fin: false }), frame(9, `ping ${SECRET}`), frame(0, `${SECRET.slice(4)} two`));
    const out = scan(wire, [5, 20]);
    expect(Buffer.from(out).includes(SECRET)).toBe(false);
    expect(messages(decode(out))).toEqual([
      { opcode: 9, data: Buffer.from("ping [redacted]") },
      { opcode: 1, data: Buffer.from("one [redacted] two") },
    ]);
  });

  test("a close reason quoting the needle is redacted, and dropped when it no longer fits", () => {
    const code = Buffer.from([0x03, 0xe8]);
    const short = scan(frame(8, concat(code, enc(`bad key ${SECRET}`))));
    expect(messages(decode(short))).toEqual([{ opcode: 8, data: Buffer.concat([code, Buffer.from("bad key [redacted]")]) }]);
    // A needle shorter than "[redacted]" makes the reason grow past what a control frame holds.
    const scanner = createFrameScanner(["k3y"]);
    const long = scanner.push(frame(8, concat(code, enc(`${"k3y".repeat(40)}!`))));
    expect(messages(decode(long))).toEqual([{ opcode: 8, data: code }]);
  });

  test("a ping that grows past 125 bytes is cut to 125 without the needle", () => {
    const scanner = createFrameScanner(["k3y"]);
    const [ping] = messages(decode(scanner.push(frame(9, `${"k3y".repeat(41)}!!`))));
    expect(ping!.data.length).toBe(125);
    expect(ping!.data.includes("k3y")).toBe(false);
    expect(ping!.data.toString()).toStartWith("[redacted][redacted]");
  });

  test("bytes after a close frame are dropped", () => {
    const out = scan(concat(frame(8, new Uint8Array([3, 232])), frame(1, SECRET)));
    expect(messages(decode(out))).toEqual([{ opcode: 8, data: Buffer.from([3, 232]) }]);
  });
});

describe("frames the scanner cannot read fail closed", () => {
  const cases: [string, Uint8Array][] = [
    ["a masked server frame", frame(1, SECRET, { mask: true })],
    ["RSV1 (a compressed frame)", frame(1, "compressed", { rsv: 4 })],
    ["RSV2", frame(2, "x", { rsv: 2 })],
    ["a reserved opcode", frame(3, "x")],
    ["a continuation outside a message", frame(0, "x")],
    ["a new message inside a fragmented one", concat(frame(1, "a", { fin: false }), frame(1, "b"))],
    ["a fragmented control frame", frame(9, "x", { fin: false })],
    ["an oversized control frame", frame(9, "x".repeat(126))],
  ];
  for (const [name, wire] of cases) {
    test(name, () => {
      expect(() => scan(wire)).toThrow(WebSocketProtocolError);
    });
  }

  test("RSV1 is refused before any of the frame's payload is emitted", () => {
    const scanner = createFrameScanner(NEEDLES);
    const ok = scanner.push(frame(1, "fine"));
    expect(messages(decode(ok))).toEqual([{ opcode: 1, data: Buffer.from("fine") }]);
    expect(() => scanner.push(frame(1, SECRET, { rsv: 4 }))).toThrow(WebSocketProtocolError);
  });
});

test("the broker's own close frame is well formed and bounded", () => {
  const [f] = decode(encodeCloseFrame(1011, "r".repeat(200)));
  expect(f!.opcode).toBe(8);
  expect(f!.payload.length).toBe(125);
  expect(f!.payload.readUInt16BE(0)).toBe(1011);
});
