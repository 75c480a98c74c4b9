// The pull side of a pushed byte stream, shared by upstream connections (connection.ts) and the
// tunnel's client streams (tunnel/reader.ts): read() resolves with the next chunk, or null once the
// source ended and everything was read; unread() puts bytes back for the next message; the source is
// paused while unread bytes pile up and resumed once they are read down (backpressure).

export interface PullQueue {
  /** From the source: bytes arrived. */
  push(chunk: Uint8Array): void;
  /** From the source: no more bytes will come. */
  end(): void;
  /** From the source: it failed; the first failure is kept and thrown by read() once the queue is empty. */
  fail(err: Error): void;
  read(): Promise<Uint8Array | null>;
  unread(chunk: Uint8Array): void;
  /** Hands back every unread chunk and empties the queue. */
  take(): Uint8Array[];
  /** Bytes received but not read yet. */
  readonly buffered: number;
  readonly ended: boolean;
  readonly failure: Error | undefined;
}

export interface Flow {
  pause(): void;
  resume(): void;
}

const HIGH_WATER = 256 << 10;
const LOW_WATER = 64 << 10;

export function createPullQueue(flow: Flow, marks: { high: number; low: number } = { high: HIGH_WATER, low: LOW_WATER }): PullQueue {
  const queue: Uint8Array[] = [];
  let queued = 0;
  let paused = false;
  let ended = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  return {
    push(chunk) {
      queue.push(chunk);
      queued += chunk.byteLength;
      if (!paused && queued > marks.high) {
        paused = true;
        flow.pause();
      }
      notify();
    },
    end() {
      ended = true;
      notify();
    },
    fail(err) {
      failure ??= err;
      notify();
    },
    async read() {
      while (queue.length === 0) {
        if (failure) throw failure;
        if (ended) return null;
        await new Promise<void>((r) => (wake = r));
      }
      const chunk = queue.shift()!;
      queued -= chunk.byteLength;
      if (paused && queued < marks.low) {
        paused = false;
        flow.resume();
      }
      return chunk;
    },
    unread(chunk) {
      if (chunk.byteLength === 0) return;
      queue.unshift(chunk);
      queued += chunk.byteLength;
    },
    take() {
      queued = 0;
      return queue.splice(0);
    },
    get buffered() {
      return queued;
    },
    get ended() {
      return ended;
    },
    get failure() {
      return failure;
    },
  };
}
