// Content codings of responses to injected requests (architecture.md D15): the body is decoded so the
// redactor can scan the plain bytes, then encoded again in the same codings, in the same order, so
// the agent gets the Content-Encoding it was sent. Streaming keeps server-sent events immediate:
// every upstream chunk is decoded, redacted, encoded and flushed before the next one is read.
// A coding the broker cannot decode fails closed: no unscanned byte ever reaches the agent.

import zlib from "node:zlib";
import { UndecodableResponse } from "../errors.ts";
import type { Redactor } from "./redact.ts";

export type Coding = "gzip" | "deflate" | "br" | "zstd";

const ALIASES: Record<string, Coding> = { gzip: "gzip", "x-gzip": "gzip", deflate: "deflate", br: "br", zstd: "zstd" };
const EMPTY = new Uint8Array(0);
const C = zlib.constants;

/**
 * Decoded bytes allowed from one upstream chunk (or one small body): a bound on what a
 * decompression bomb can make the broker hold. Real bodies stay far below it (gzip's ratio tops
 * out near 1:1000, so a 64 KiB piece is at most ~64 MiB).
 */
export const MAX_DECODED_PIECE_BYTES = 64 * 1024 * 1024;

// Fast settings: the body is re-encoded on the request path, so speed matters more than size.
const GZIP_OPTIONS = { level: 4 };
const BROTLI_OPTIONS = { params: { [C.BROTLI_PARAM_QUALITY]: 4 } };
const ZSTD_OPTIONS = { params: { [C.ZSTD_c_compressionLevel]: 3 } };
// Streams flush on every write, so each upstream chunk comes out whole (server-sent events stay immediate).
const Z_FLUSH = { flush: C.Z_SYNC_FLUSH };
const BR_FLUSH = { flush: C.BROTLI_OPERATION_FLUSH };
const ZSTD_FLUSH = { flush: C.ZSTD_e_flush };

/**
 * The codings of a Content-Encoding header in the order they were applied ([] for none or
 * identity). Throws UndecodableResponse for a coding the broker cannot decode.
 */
export function parseCodings(header: string | null): Coding[] {
  if (!header) return [];
  const out: Coding[] = [];
  for (const raw of header.split(",")) {
    const name = raw.trim().toLowerCase();
    if (name === "" || name === "identity") continue;
    const coding = ALIASES[name];
    // The coding's name is not quoted: it is upstream text, and the broker's own messages never echo it.
    if (!coding)
      throw new UndecodableResponse(
        "the upstream answered with a Content-Encoding the broker cannot decode, so the response could not be checked for echoed credentials",
      );
    out.push(coding);
  }
  return out;
}

/** Whether a deflate body carries the zlib wrapper (RFC 1950) or is raw deflate, as some servers send. */
interface DeflateForm {
  zlibWrapped: boolean | undefined;
}

function isZlibHeader(b0: number, b1: number): boolean {
  return (b0 & 0x0f) === 8 && b0 >> 4 <= 7 && ((b0 << 8) | b1) % 31 === 0;
}

// ---- whole bodies (small, already in memory) ----

/** Decodes a whole body (outermost coding first); the forms found are needed to encode it back. */
export function decodeWhole(bytes: Uint8Array, codings: readonly Coding[]): { plain: Uint8Array; forms: DeflateForm[] } {
  const forms = codings.map((): DeflateForm => ({ zlibWrapped: undefined }));
  let out: Uint8Array = bytes;
  try {
    for (let i = codings.length - 1; i >= 0; i--) out = decodeSync(codings[i]!, out, forms[i]!);
  } catch {
    throw new UndecodableResponse("the upstream's compressed response could not be decoded, so it could not be checked for echoed credentials");
  }
  return { plain: out, forms };
}

export function encodeWhole(plain: Uint8Array, codings: readonly Coding[], forms: readonly DeflateForm[]): Uint8Array {
  let out: Uint8Array = plain;
  codings.forEach((coding, i) => (out = encodeSync(coding, out, forms[i]!)));
  return out;
}

function decodeSync(coding: Coding, bytes: Uint8Array, form: DeflateForm): Uint8Array {
  const opts = { maxOutputLength: MAX_DECODED_PIECE_BYTES };
  switch (coding) {
    case "gzip":
      return zlib.gunzipSync(bytes, opts);
    case "br":
      return zlib.brotliDecompressSync(bytes, opts);
    case "zstd":
      return zlib.zstdDecompressSync(bytes, opts);
    case "deflate":
      form.zlibWrapped = bytes.length >= 2 && isZlibHeader(bytes[0]!, bytes[1]!);
      return form.zlibWrapped ? zlib.inflateSync(bytes, opts) : zlib.inflateRawSync(bytes, opts);
  }
}

function encodeSync(coding: Coding, bytes: Uint8Array, form: DeflateForm): Uint8Array {
  switch (coding) {
    case "gzip":
      return zlib.gzipSync(bytes, GZIP_OPTIONS);
    case "br":
      return zlib.brotliCompressSync(bytes, BROTLI_OPTIONS);
    case "zstd":
      return zlib.zstdCompressSync(bytes, ZSTD_OPTIONS);
    case "deflate":
      return form.zlibWrapped === false ? zlib.deflateRawSync(bytes, GZIP_OPTIONS) : zlib.deflateSync(bytes, GZIP_OPTIONS);
  }
}

// ---- streams ----

/** One zlib stream driven chunk by chunk: each push returns everything it produced, flushed. */
interface Stage {
  push(chunk: Uint8Array): Promise<Uint8Array>;
  /** Ends the stream, returning its last bytes; a decoder rejects a truncated body. */
  end(): Promise<Uint8Array>;
  destroy(): void;
}

/** A zlib stream (compressor or decompressor); `flush` takes the coding's own flush kind. */
type ZlibStream =
  | zlib.Gzip
  | zlib.Gunzip
  | zlib.Deflate
  | zlib.Inflate
  | zlib.DeflateRaw
  | zlib.InflateRaw
  | zlib.BrotliCompress
  | zlib.BrotliDecompress
  | zlib.ZstdCompress
  | zlib.ZstdDecompress;

function createStage(open: (first: Uint8Array) => ZlibStream, maxOutput: number): Stage {
  let z: ZlibStream | undefined;
  let out: Buffer[] = [];
  let outBytes = 0;
  let failure: Error | undefined;
  let rejectPending: ((e: Error) => void) | undefined;
  const fail = (e: Error) => {
    failure ??= e;
    rejectPending?.(failure);
  };
  const start = (first: Uint8Array) => {
    const s = open(first);
    s.on("data", (b: Buffer) => {
      outBytes += b.byteLength;
      if (maxOutput && outBytes > maxOutput) {
        fail(new UndecodableResponse("the upstream's compressed response expands beyond the broker's decoding limit"));
        s.destroy();
      } else out.push(b);
    });
    s.on("error", fail);
    return s;
  };
  const take = (): Uint8Array => {
    const r = out.length === 0 ? EMPTY : out.length === 1 ? out[0]! : Buffer.concat(out);
    out = [];
    outBytes = 0;
    return r;
  };
  // The write callback runs after every byte the write produced was emitted (flowing mode).
  const settle = (drive: (done: () => void) => void) =>
    failure
      ? Promise.reject(failure)
      : new Promise<Uint8Array>((resolve, reject) => {
          rejectPending = reject;
          drive(() => {
            rejectPending = undefined;
            if (failure) reject(failure);
            else resolve(take());
          });
        });
  return {
    push(chunk) {
      const s = (z ??= start(chunk));
      // Every write runs with the stream's flush kind (set at creation): one round trip per chunk.
      return settle((done) => s.write(chunk, () => done()));
    },
    end() {
      const s = (z ??= start(EMPTY));
      return settle((done) => {
        s.once("end", done);
        s.end();
      });
    },
    destroy() {
      z?.destroy();
    },
  };
}

function createDecoder(coding: Coding, form: DeflateForm): Stage {
  const max = MAX_DECODED_PIECE_BYTES;
  switch (coding) {
    case "gzip":
      return createStage(() => zlib.createGunzip(Z_FLUSH), max);
    case "br":
      return createStage(() => zlib.createBrotliDecompress(BR_FLUSH), max);
    case "zstd":
      return createStage(() => zlib.createZstdDecompress(ZSTD_FLUSH), max);
    case "deflate":
      return createSniffingInflate(form);
  }
}

/** A deflate decoder that picks the zlib or raw form from the first two bytes it sees. */
function createSniffingInflate(form: DeflateForm): Stage {
  let held: Uint8Array = EMPTY;
  const stage = createStage((first) => {
    form.zlibWrapped = first.length >= 2 && isZlibHeader(first[0]!, first[1]!);
    return form.zlibWrapped ? zlib.createInflate(Z_FLUSH) : zlib.createInflateRaw(Z_FLUSH);
  }, MAX_DECODED_PIECE_BYTES);
  let started = false;
  return {
    push(chunk) {
      if (started) return stage.push(chunk);
      held = held.length ? Buffer.concat([held, chunk]) : chunk;
      if (held.length < 2) return Promise.resolve(EMPTY);
      started = true;
      return stage.push(held);
    },
    async end() {
      if (!started && held.length) {
        started = true;
        const head = await stage.push(held);
        return Buffer.concat([head, await stage.end()]);
      }
      return stage.end();
    },
    destroy: () => stage.destroy(),
  };
}

function createEncoder(coding: Coding, form: DeflateForm): Stage {
  switch (coding) {
    case "gzip":
      return createStage(() => zlib.createGzip({ ...GZIP_OPTIONS, ...Z_FLUSH }), 0);
    case "br":
      return createStage(() => zlib.createBrotliCompress({ ...BROTLI_OPTIONS, ...BR_FLUSH }), 0);
    case "zstd":
      return createStage(() => zlib.createZstdCompress({ ...ZSTD_OPTIONS, ...ZSTD_FLUSH }), 0);
    case "deflate":
      return createStage(
        () => (form.zlibWrapped === false ? zlib.createDeflateRaw({ ...GZIP_OPTIONS, ...Z_FLUSH }) : zlib.createDeflate({ ...GZIP_OPTIONS, ...Z_FLUSH })),
        0,
      );
  }
}

/** Decode → redact → encode, one upstream chunk at a time. */
export interface BodyRecoder {
  push(chunk: Uint8Array): Promise<Uint8Array>;
  /** The rest of the body once the upstream's ended; rejects if its encoding was truncated or corrupt. */
  end(): Promise<Uint8Array>;
  destroy(): void;
}

export function createBodyRecoder(codings: readonly Coding[], redactor: Redactor): BodyRecoder {
  const forms = codings.map((): DeflateForm => ({ zlibWrapped: undefined }));
  const decoders = codings.map((c, i) => createDecoder(c, forms[i]!)).reverse(); // outermost first
  const encoders = codings.map((c, i) => createEncoder(c, forms[i]!));
  let sawInput = false;
  const decodeFailed = () => new UndecodableResponse("the upstream's compressed response could not be decoded");
  const destroy = () => {
    for (const s of [...decoders, ...encoders]) s.destroy();
  };
  return {
    async push(chunk) {
      if (chunk.length === 0) return EMPTY;
      sawInput = true;
      const plain = await pushThrough(decoders, chunk).catch((e) => Promise.reject(e instanceof UndecodableResponse ? e : decodeFailed()));
      const clean = plain.length ? redactor.push(plain) : EMPTY;
      return clean.length ? pushThrough(encoders, clean) : EMPTY;
    },
    async end() {
      if (!sawInput) return EMPTY; // an empty body stays empty
      try {
        const tail = await endThrough(decoders, EMPTY).catch((e) => Promise.reject(e instanceof UndecodableResponse ? e : decodeFailed()));
        const cleanTail = concat(tail.length ? redactor.push(tail) : EMPTY, redactor.flush());
        return await endThrough(encoders, cleanTail);
      } finally {
        destroy(); // native zlib memory goes back now, not whenever the collector gets to it
      }
    },
    destroy,
  };
}

async function pushThrough(stages: readonly Stage[], bytes: Uint8Array): Promise<Uint8Array> {
  let b = bytes;
  for (const s of stages) {
    if (b.length === 0) return EMPTY;
    b = await s.push(b);
  }
  return b;
}

/** Ends every stage in order, feeding each one's last bytes into the next. */
async function endThrough(stages: readonly Stage[], first: Uint8Array): Promise<Uint8Array> {
  let b = first;
  for (const s of stages) b = concat(b.length ? await s.push(b) : EMPTY, await s.end());
  return b;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  return a.length === 0 ? b : b.length === 0 ? a : Buffer.concat([a, b]);
}
