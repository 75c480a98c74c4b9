// The HTTP/2 frame guard on its own: fed the bytes an agent would send, in any slicing, it lets a
// well-behaved connection through and names the abuse that crosses each limit.

import { describe, expect, test } from "bun:test";
import { createFrameInspector, FRAME_LIMITS, type FrameLimits } from "../../../src/http/h2-frame-guard.ts";
import { FLAG, FRAME, frame, PREFACE, requestBlock, rstFrame, settingsFrame, windowUpdateFrame } from "../../helpers/h2-frames.ts";

function feed(bytes: Buffer, limits: FrameLimits = FRAME_LIMITS, slice = bytes.byteLength, side: "server" | "client" = "server"): string[] {
  const abuses: string[] = [];
  const inspect = createFrameInspector(limits, (reason) => abuses.push(reason), side);
  for (let at = 0; at < bytes.byteLength; at += slice) inspect(bytes.subarray(at, at + slice));
  return abuses;
}

const request = (id: number, flags = FLAG.END_HEADERS | FLAG.END_STREAM) => frame(FRAME.HEADERS, flags, id, requestBlock("api.example", "/v1"));

describe("a well-behaved connection passes, however the bytes are sliced", () => {
  const normal = Buffer.concat([
    PREFACE,
    settingsFrame([[4, 1 << 20]]),
    windowUpdateFrame(0, 1 << 20),
    ...Array.from({ length: 150 }, (_, i) => request(1 + 2 * i)),
    frame(FRAME.HEADERS, 0, 401, requestBlock("api.example", "/big")),
    ...Array.from({ length: 4 }, (_, i) => frame(FRAME.CONTINUATION, i === 3 ? FLAG.END_HEADERS : 0, 401, Buffer.alloc(16_000, 0x41))),
    frame(FRAME.DATA, FLAG.END_STREAM, 401, Buffer.alloc(5000)),
    ...Array.from({ length: 50 }, (_, i) => rstFrame(1 + 2 * i)),
    windowUpdateFrame(0, 65_536),
  ]);
  for (const slice of [normal.byteLength, 1, 7, 9, 4096]) {
    test(`slices of ${slice} bytes`, () => expect(feed(normal, FRAME_LIMITS, slice)).toEqual([]));
  }
});

describe("each limit names its abuse", () => {
  test("endless empty CONTINUATION frames (CVE-2024-27316 family)", () => {
    const bytes = Buffer.concat([
      PREFACE,
      frame(FRAME.HEADERS, 0, 1, requestBlock("a", "/")),
      ...Array.from({ length: 17 }, () => frame(FRAME.CONTINUATION, 0, 1)),
    ]);
    expect(feed(bytes)).toEqual(["header block too long (CONTINUATION frames)"]);
  });
  test("a header block over the byte bound in few frames", () => {
    const bytes = Buffer.concat([
      PREFACE,
      frame(FRAME.HEADERS, 0, 1, Buffer.alloc(16_000)),
      ...Array.from({ length: 5 }, () => frame(FRAME.CONTINUATION, 0, 1, Buffer.alloc(16_000))),
    ]);
    expect(feed(bytes)).toEqual(["header block too long (CONTINUATION frames)"]);
  });
  test("rapid reset (CVE-2023-44487): more resets than the burst", () => {
    const pairs = Array.from({ length: FRAME_LIMITS.resetBurst + 5 }, (_, i) => [request(1 + 2 * i, FLAG.END_HEADERS), rstFrame(1 + 2 * i)]).flat();
    expect(feed(Buffer.concat([PREFACE, ...pairs]))).toEqual(["too many streams reset (rapid reset)"]);
  });
  test("a WINDOW_UPDATE dribble (1-byte increments)", () => {
    const bytes = Buffer.concat([PREFACE, ...Array.from({ length: FRAME_LIMITS.idleFrameBurst + 5 }, () => windowUpdateFrame(1, 1))]);
    expect(feed(bytes)).toEqual(["too many frames that do no work"]);
  });
  test("PING, SETTINGS and empty DATA floods", () => {
    for (const f of [frame(FRAME.PING, 0, 0, Buffer.alloc(8)), settingsFrame(), frame(FRAME.DATA, 0, 1)]) {
      expect(feed(Buffer.concat([PREFACE, ...Array.from({ length: FRAME_LIMITS.idleFrameBurst + 1 }, () => f)]))).toEqual(["too many frames that do no work"]);
    }
  });
  test("acknowledgements and large window updates are free", () => {
    const acks = Array.from({ length: 5000 }, (_, i) => (i % 2 ? frame(FRAME.PING, FLAG.ACK, 0, Buffer.alloc(8)) : windowUpdateFrame(0, 32_768)));
    expect(feed(Buffer.concat([PREFACE, ...acks]))).toEqual([]);
  });
  test("after the first abuse nothing else is reported", () => {
    const bytes = Buffer.concat([PREFACE, ...Array.from({ length: 3 * FRAME_LIMITS.idleFrameBurst }, () => settingsFrame())]);
    expect(feed(bytes, FRAME_LIMITS, 100)).toHaveLength(1);
  });
  test("a client-side guard (before an upstream's frames) reads frames from the first byte, no preface", () => {
    const flood = Buffer.concat(Array.from({ length: FRAME_LIMITS.idleFrameBurst + 1 }, () => settingsFrame()));
    expect(feed(flood, FRAME_LIMITS, flood.byteLength, "client")).toEqual(["too many frames that do no work"]);
    expect(feed(Buffer.concat([settingsFrame(), frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, Buffer.alloc(30))]), FRAME_LIMITS, 5, "client")).toEqual([]);
  });
});
