// A socket as an HTTP/2 session writes to it: the frames it queues together leave in one write.
// Bun's node:http2 writes every frame on its own, and on a TLS socket every write is a record and
// a syscall; coalescing them made a stream ~40% cheaper (bench/h2.ts). Bytes read pass through a
// hook first (the agent side's frame guard), which may stop them.

import { Duplex } from "node:stream";

/** `inspect` sees every chunk read; returning false drops it and everything after. */
export function coalescingSocket(inner: Duplex, inspect: (chunk: Buffer) => boolean = () => true): Duplex {
  const writeOut = (bytes: Buffer, done: () => void) => {
    if (inner.write(bytes)) done();
    else inner.once("drain", done);
  };
  const outer = new Duplex({
    read: () => void inner.resume(),
    write: (chunk: Buffer, _enc, done) => writeOut(chunk, () => done()),
    writev: (chunks, done) => writeOut(chunks.length === 1 ? (chunks[0]!.chunk as Buffer) : Buffer.concat(chunks.map((c) => c.chunk as Buffer)), () => done()),
    final(done) {
      inner.end();
      done();
    },
    destroy(err, done) {
      // The session's last words (a GOAWAY naming the error) may still be queued: end, then cut shortly after.
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
