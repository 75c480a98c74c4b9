// Decode → redact → encode for compressed responses: every coding and stacks of them, needles
// split across compressed chunks of any size, flushes that keep streams immediate, and the ways a
// hostile upstream can try to get unscanned bytes through (unknown codings, corrupt or truncated
// bodies, decompression bombs), which must all fail closed.

import { describe, expect, test } from "bun:test";
import zlib from "node:zlib";
import { UndecodableResponse } from "../../../src/errors.ts";
import { createBodyRecoder, decodeWhole, encodeWhole, MAX_DECODED_PIECE_BYTES, parseCodings, type Coding } from "../../../src/egress/content-coding.ts";
import { createRedactor, redactWhole } from "../../../src/egress/redact.ts";

const SECRET = "sk-live-0123456789abcdef";
const plain = Buffer.from(`head ${SECRET} middle ${"x".repeat(5000)} ${SECRET}${SECRET} tail ${SECRET.slice(0, 10)}`);
const expected = plain.toString().split(SECRET).join("[redacted]");

function encode(codings: readonly string[], bytes: Buffer, raw = false): Buffer {
  let out = bytes;
  for (const c of codings) {
    if (c === "gzip") out = zlib.gzipSync(out);
    else if (c === "deflate") out = raw ? zlib.deflateRawSync(out) : zlib.deflateSync(out);
    else if (c === "br") out = zlib.brotliCompressSync(out);
    else if (c === "zstd") out = zlib.zstdCompressSync(out);
  }
  return out;
}

function decode(codings: readonly string[], bytes: Uint8Array): Buffer {
  let out = Buffer.from(bytes);
  for (const c of [...codings].reverse()) {
    if (c === "gzip") out = zlib.gunzipSync(out);
    else if (c === "deflate") out = out[0] === 0x78 ? zlib.inflateSync(out) : zlib.inflateRawSync(out);
    else if (c === "br") out = zlib.brotliDecompressSync(out);
    else if (c === "zstd") out = zlib.zstdDecompressSync(out);
  }
  return out;
}

async function recodeInPieces(codings: Coding[], wire: Buffer, piece: number): Promise<Buffer> {
  const recoder = createBodyRecoder(codings, createRedactor([SECRET]));
  const out: Uint8Array[] = [];
  for (let at = 0; at < wire.length; at += piece) out.push(await recoder.push(wire.subarray(at, at + piece)));
  out.push(await recoder.end());
  return Buffer.concat(out);
}

describe("parseCodings", () => {
  test("lists codings in the order applied, with aliases and identity skipped", () => {
    expect(parseCodings(null)).toEqual([]);
    expect(parseCodings("identity")).toEqual([]);
    expect(parseCodings("X-Gzip")).toEqual(["gzip"]);
    expect(parseCodings("deflate, br ,zstd")).toEqual(["deflate", "br", "zstd"]);
  });

  test("refuses what it cannot decode", () => {
    for (const h of ["compress", "x-compress", "sdch", "gzip, pack200-gzip", "aes128gcm"]) expect(() => parseCodings(h)).toThrow(UndecodableResponse);
  });
});

const STACKS: Coding[][] = [["gzip"], ["deflate"], ["br"], ["zstd"], ["gzip", "br"], ["deflate", "zstd", "gzip"]];

describe("streaming recoder", () => {
  for (const codings of STACKS) {
    for (const piece of [1, 7, 64, 100_000]) {
      test(`${codings.join(", ")} in ${piece}-byte pieces`, async () => {
        const out = await recodeInPieces(codings, encode(codings, plain), piece);
        const text = decode(codings, out).toString();
        expect(text).toBe(expected);
        expect(out.includes(Buffer.from(SECRET))).toBe(false);
      });
    }
  }

  test("raw deflate (no zlib wrapper) comes back raw", async () => {
    const out = await recodeInPieces(["deflate"], encode(["deflate"], plain, true), 5);
    expect(out[0]).not.toBe(0x78);
    expect(zlib.inflateRawSync(out).toString()).toBe(expected);
  });

  test("each push is flushed: what a chunk decoded to can be read before the next arrives", async () => {
    const recoder = createBodyRecoder(["gzip"], createRedactor([SECRET]));
    const gz = zlib.createGzip();
    const pieces: Buffer[] = [];
    gz.on("data", (d: Buffer) => pieces.push(d));
    gz.write(`data: one ${SECRET}\n\n`);
    await new Promise<void>((r) => gz.flush(zlib.constants.Z_SYNC_FLUSH, () => r()));
    const first = await recoder.push(Buffer.concat(pieces.splice(0)));
    // A streaming decoder on the agent's side sees the whole first event from the first output alone.
    const agent = zlib.createGunzip();
    const seen: Buffer[] = [];
    agent.on("data", (d: Buffer) => seen.push(d));
    agent.write(first);
    await new Promise<void>((r) => agent.flush(zlib.constants.Z_SYNC_FLUSH, () => r()));
    expect(Buffer.concat(seen).toString()).toBe("data: one [redacted]\n\n");
    recoder.destroy();
  });

  test("a corrupt body rejects, and nothing decoded from it before is unscanned", async () => {
    const recoder = createBodyRecoder(["gzip"], createRedactor([SECRET]));
    await expect(recoder.push(Buffer.from("definitely not gzip"))).rejects.toBeInstanceOf(UndecodableResponse);
  });

  test("a truncated gzip body rejects at the end", async () => {
    const wire = encode(["gzip"], plain);
    const recoder = createBodyRecoder(["gzip"], createRedactor([SECRET]));
    await recoder.push(wire.subarray(0, wire.length - 10));
    await expect(recoder.end()).rejects.toBeInstanceOf(UndecodableResponse);
  });

  test("a decompression bomb is refused once one piece expands past the limit", async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(MAX_DECODED_PIECE_BYTES + 1024 * 1024));
    const recoder = createBodyRecoder(["gzip"], createRedactor([SECRET]));
    await expect(recoder.push(bomb)).rejects.toBeInstanceOf(UndecodableResponse);
    recoder.destroy();
  });

  test("an empty body stays empty", async () => {
    const recoder = createBodyRecoder(["gzip"], createRedactor([SECRET]));
    expect((await recoder.end()).length).toBe(0);
  });
});

describe("whole bodies", () => {
  for (const codings of STACKS) {
    test(`${codings.join(", ")}: decode, redact, encode`, () => {
      const { plain: decoded, forms } = decodeWhole(encode(codings, plain), codings);
      const clean = redactWhole(decoded, [SECRET]);
      expect(decode(codings, encodeWhole(clean, codings, forms)).toString()).toBe(expected);
    });
  }

  test("a clean body is reported unchanged (so the original bytes can go out as they came)", () => {
    const { plain: decoded } = decodeWhole(encode(["gzip"], Buffer.from("nothing here")), ["gzip"]);
    expect(redactWhole(decoded, [SECRET])).toBe(decoded);
  });

  test("corrupt and oversized bodies fail closed", () => {
    expect(() => decodeWhole(Buffer.from("nope"), ["br"])).toThrow(UndecodableResponse);
    expect(() => decodeWhole(zlib.gzipSync(Buffer.alloc(MAX_DECODED_PIECE_BYTES + 1)), ["gzip"])).toThrow(UndecodableResponse);
  });
});
