// Pull-style reading from a Node stream (plain or TLS socket), on the egress core's pull queue:
// read() resolves with the next chunk or null at end; unread() puts bytes back for the next message.
// The stream is paused while unread data piles up, so a slow consumer applies backpressure to the client.

import type { Duplex } from "node:stream";
import { createPullQueue } from "../http/index.ts";

export interface ChunkReader {
  read(): Promise<Uint8Array | null>;
  unread(chunk: Uint8Array): void;
  /** Stops reading and hands back unread bytes (before another layer, such as TLS, takes over the stream). */
  detach(): Uint8Array[];
  readonly ended: boolean;
  /**
   * `work`, with the stream destroyed if it takes longer than `ms` (as withDeadline), on one timer kept for the
   * stream's life: a kept-alive connection re-arms it per request without making and clearing a timer each time.
   */
  within<T>(work: Promise<T>, ms: number): Promise<T>;
}

/** The egress core's pull queue (also behind every upstream connection) over a Node stream. */
export function createChunkReader(stream: Duplex): ChunkReader {
  const incoming = createPullQueue({ pause: () => stream.pause(), resume: () => stream.resume() });
  const watch = createWatchdog(stream);
  const onData = (chunk: Buffer) => incoming.push(chunk);
  const onEnd = () => (incoming.end(), watch.stop());
  const onError = (err: Error) => incoming.fail(err);
  stream.on("data", onData);
  stream.on("end", onEnd);
  stream.on("close", onEnd);
  stream.on("error", onError);
  stream.resume(); // a stream paused by whoever handed it over would otherwise never flow
  return {
    read: () => incoming.read(),
    unread: (chunk) => incoming.unread(chunk),
    within: watch.within,
    detach() {
      watch.stop();
      stream.pause();
      stream.off("data", onData);
      stream.off("end", onEnd);
      stream.off("close", onEnd);
      stream.off("error", onError);
      return incoming.take();
    },
    get ended() {
      return incoming.ended && incoming.buffered === 0;
    },
  };
}

/**
 * Deadlines on one stream, one at a time, over a single timer: arming sets when the stream is cut, and the
 * timer, when it fires, cuts it only if the deadline armed then has passed (else it waits for that one).
 */
function createWatchdog(stream: Duplex) {
  let deadline = 0; // performance.now() past which the stream is destroyed; 0: none armed
  let timer: ReturnType<typeof setTimeout> | undefined;
  let firesAt = 0;
  const fire = () => {
    timer = undefined;
    if (deadline === 0) return;
    const left = deadline - performance.now();
    if (left <= 0) return void stream.destroy();
    schedule(left);
  };
  const schedule = (ms: number) => {
    firesAt = performance.now() + ms;
    timer = setTimeout(fire, ms);
  };
  return {
    async within<T>(work: Promise<T>, ms: number): Promise<T> {
      deadline = performance.now() + ms;
      // A timer already set to fire by then will find this deadline; one set for later is replaced.
      if (timer !== undefined && firesAt > deadline) clearTimeout(timer), (timer = undefined);
      if (timer === undefined) schedule(ms);
      try {
        return await work;
      } finally {
        deadline = 0;
      }
    },
    stop() {
      deadline = 0;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}

export const MAX_REQUEST_LINE = 8 * 1024;

/**
 * Reads one message head (up to and including the blank line); null on a clean end before any byte.
 * One buffer grown by doubling, searched only where new bytes could end the line or the head: a
 * head paced out a few bytes at a time costs linear work, not a copy and a rescan per read.
 */
export async function readHead(reader: ChunkReader, maxBytes: number, findEnd: (b: Uint8Array, from: number) => number): Promise<Uint8Array | null> {
  let buf: Uint8Array = new Uint8Array(0);
  let filled = 0;
  let lineEnd = -1;
  for (;;) {
    if (filled > MAX_REQUEST_LINE && lineEnd < 0) throw new HeadError(414, "request line too long");
    const chunk = await reader.read();
    if (chunk === null) {
      if (filled === 0) return null;
      throw new HeadError(400, "connection closed mid-request");
    }
    const searched = filled;
    if (filled === 0) buf = chunk;
    else {
      if (filled + chunk.byteLength > buf.byteLength) {
        const grown = new Uint8Array(Math.max(filled + chunk.byteLength, 2 * buf.byteLength, 1024));
        grown.set(buf.subarray(0, filled), 0);
        buf = grown;
      }
      buf.set(chunk, filled);
    }
    filled += chunk.byteLength;
    const view = buf.subarray(0, filled);
    if (lineEnd < 0) lineEnd = view.indexOf(10, searched);
    if (lineEnd > MAX_REQUEST_LINE) throw new HeadError(414, "request line too long");
    const end = findEnd(view, searched);
    if (end > maxBytes || (end < 0 && filled > maxBytes)) throw new HeadError(431, "request header fields too large");
    if (end >= 0) {
      reader.unread(view.subarray(end));
      return view.subarray(0, end);
    }
  }
}

export class HeadError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Writes with backpressure: waits for 'drain' when the stream's buffer is full. */
export async function writeAll(stream: Duplex, bytes: Uint8Array | string): Promise<void> {
  if (stream.destroyed) throw new Error("stream closed");
  if (!stream.write(bytes)) {
    await new Promise<void>((resolve, reject) => {
      const done = () => (stream.off("close", closed), resolve());
      const closed = () => (stream.off("drain", done), reject(new Error("stream closed")));
      stream.once("drain", done);
      stream.once("close", closed);
    });
  }
}

/**
 * Bounds how long a peer may take to send a head or finish a handshake (slowloris): when the time
 * runs out the stream is destroyed, which ends any pending read.
 */
export async function withDeadline<T>(work: Promise<T>, ms: number, stream: Duplex): Promise<T> {
  const timer = setTimeout(() => stream.destroy(), ms);
  try {
    return await work;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Waits for the next request on a kept-alive connection: up to `idleMs` for its first byte (an idle
 * pooled connection is normal), then up to `headMs` for the rest of the head (slowloris bound).
 * Null when the peer closed cleanly in between.
 */
export async function readNextHead(
  stream: Duplex,
  reader: ChunkReader,
  opts: { idleMs: number; headMs: number; maxBytes: number },
  findEnd: (b: Uint8Array, from: number) => number,
): Promise<Uint8Array | null> {
  const first = await reader.within(reader.read(), opts.idleMs);
  if (first === null) return null;
  // The usual case: the whole head came in its first chunk, within every bound (readHead's checks, then
  // met at once), so no second deadline is armed for it.
  const end = findEnd(first, 0);
  if (end >= 0 && end <= opts.maxBytes && first.indexOf(10) <= MAX_REQUEST_LINE) {
    reader.unread(first.subarray(end));
    return first.subarray(0, end);
  }
  reader.unread(first);
  return reader.within(readHead(reader, opts.maxBytes, findEnd), opts.headMs);
}
