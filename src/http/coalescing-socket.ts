// A socket as an HTTP/2 session writes to it: the frames it writes in one tick leave in one write.
// Bun's node:http2 writes every frame on its own, and on a TLS socket every write is a record and
// a syscall; coalescing them made a stream ~40% cheaper (bench/h2.ts). Bytes read pass through a
// hook first (the frame guard), which may stop them. Frames written just before the session
// destroys the socket (a GOAWAY naming a protocol error) still leave: they are ours to flush.

import { Duplex } from "node:stream";

/** `inspect` sees every chunk read; returning false drops it and everything after. */
export function coalescingSocket(inner: Duplex, inspect: (chunk: Buffer) => boolean = () => true): Duplex {
  let pending: Buffer[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (!pending.length || inner.destroyed) return void (pending = []);
    const bytes = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
    pending = [];
    inner.write(bytes);
  };
  const queue = (chunks: Buffer[], done: () => void) => {
    pending.push(...chunks);
    if (!scheduled) {
      scheduled = true;
      process.nextTick(flush);
    }
    // Backpressure: the session hears "written" only once the socket can take more.
    if (inner.writableNeedDrain) inner.once("drain", done);
    else done();
  };
  const outer = new Duplex({
    read: () => void inner.resume(),
    write: (chunk: Buffer, _enc, done) => queue([chunk], () => done()),
    writev: (chunks, done) =>
      queue(
        chunks.map((c) => c.chunk as Buffer),
        () => done(),
      ),
    final(done) {
      flush();
      inner.end();
      done();
    },
    destroy(err, done) {
      flush();
      inner.end();
      setTimeout(() => inner.destroy(), 1_000).unref();
      done(err);
    },
  });
  let stopped = false;
  inner.on("data", (chunk: Buffer) => {
    if (stopped) return;
    if (!inspect(chunk)) return void (stopped = true);
    if (!outer.push(chunk)) inner.pause();
  });
  inner.on("end", () => outer.push(null));
  inner.on("close", () => outer.destroy());
  inner.on("error", () => outer.destroy());
  return outer;
}

/** Waits until a writable stream can take more, or closes; leaves no listener behind either way. */
export function drained(stream: Duplex): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off("drain", done);
      stream.off("close", done);
      resolve();
    };
    stream.on("drain", done);
    stream.on("close", done);
  });
}
