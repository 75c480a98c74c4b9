// One signal's way to the collector, off the request path: items wait in a bounded queue and leave in
// batches, one export at a time. A collector that stops answering costs one attempt per pause (the pause
// doubles up to a bound), never one per request; a failed batch stays first in line, so a short outage
// loses nothing. What cannot wait is dropped and counted: past the queue's bound, a batch the collector
// refuses for good (a 4xx other than 429: it would never take it), and whatever is left when the
// shutdown grace runs out. The SDK's batch processors do the batching too, but without the pause, and
// they report drops only to a global diagnostic logger: this queue tells ours.

export interface ExportQueueOptions<T> {
  /** One export of a batch; rejects when the collector did not take it (after the transport's own retries). */
  readonly send: (batch: T[]) => Promise<void>;
  /** Items held at most; beyond it new items are dropped and counted. */
  readonly maxQueued: number;
  readonly maxBatch: number;
  /** How long a partial batch waits for company before it leaves. */
  readonly delayMs: number;
  /** The longest pause after failed exports (the first is `minBackoffMs`, then doubling). */
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** A refusal that retrying cannot change (the batch is dropped rather than retried). */
  readonly isPermanent?: (err: unknown) => boolean;
  /** Told once per failure run (the first failure after a success), and when exports succeed again. */
  readonly onFailing: (err: unknown) => void;
  readonly onRecovered: () => void;
  /** Items dropped since the last report, told after each export attempt (never once per item). */
  readonly onDropped: (count: number, reason: "queue full" | "refused by the collector" | "shutdown") => void;
}

export interface ExportQueue<T> {
  push(item: T): void;
  readonly queued: number;
  /** Items dropped since start (every reason). */
  readonly droppedTotal: number;
  /** Sends what is queued within `graceMs` (a failing collector is tried again within it); the rest is dropped. */
  stop(graceMs: number): Promise<void>;
}

export function createExportQueue<T>(opts: ExportQueueOptions<T>): ExportQueue<T> {
  const minBackoff = opts.minBackoffMs ?? 1000;
  const maxBackoff = opts.maxBackoffMs ?? 30_000;
  let queue: T[] = [];
  /** The batch delay's timer, or the pause's after a failure (`pausing`). */
  let timer: ReturnType<typeof setTimeout> | undefined;
  let pausing = false;
  let running: Promise<void> | undefined;
  let backoff = 0;
  let failing = false;
  let stopped = false;
  let overflow = 0;
  /** Moves on when shutdown drops the queue, so an export still under way then removes nothing from it. */
  let generation = 0;
  let droppedTotal = 0;

  function drop(count: number, reason: Parameters<ExportQueueOptions<T>["onDropped"]>[1]): void {
    droppedTotal += count;
    opts.onDropped(count, reason);
  }

  /** Items turned away at the bound are told together, after the export that was under way. */
  function reportOverflow(): void {
    if (overflow === 0) return;
    const n = overflow;
    overflow = 0;
    drop(n, "queue full");
  }

  /** Exports the head batch; false when it failed and should be tried again later. */
  async function sendHead(): Promise<boolean> {
    const batch = queue.slice(0, opts.maxBatch);
    const from = generation;
    // The batch leaves the queue once the collector has answered (unless shutdown gave up on the queue meanwhile).
    const settle = () => {
      if (generation === from) queue = queue.slice(batch.length);
    };
    try {
      await opts.send(batch);
    } catch (err) {
      if (!opts.isPermanent?.(err)) {
        if (!failing) opts.onFailing(err);
        failing = true;
        return false;
      }
      settle();
      drop(batch.length, "refused by the collector");
      backoff = 0;
      return true;
    }
    settle();
    if (failing) opts.onRecovered();
    failing = false;
    backoff = 0;
    return true;
  }

  async function run(): Promise<void> {
    timer = undefined;
    // Full batches leave back to back; a partial one waits for its delay again, so a busy broker sends
    // few large exports (each costs a request and an encoder's set-up) rather than many small ones.
    for (let first = true; !stopped && (first ? queue.length > 0 : queue.length >= opts.maxBatch); first = false) {
      const sent = await sendHead();
      reportOverflow();
      if (!sent) {
        backoff = Math.min(backoff ? backoff * 2 : minBackoff, maxBackoff);
        pausing = true;
        timer = unref(
          setTimeout(() => {
            pausing = false;
            start();
          }, backoff),
        );
        return;
      }
    }
  }

  function start(): void {
    running = run().finally(() => {
      running = undefined;
      if (queue.length && !pausing) schedule(); // what arrived meanwhile: its own delay, or at once when a batch is full
    });
  }

  function schedule(): void {
    if (running || pausing || stopped) return; // a run under way (or the pause's end) picks the new item up
    if (queue.length >= opts.maxBatch) {
      // A full batch does not wait for the delay.
      if (timer) clearTimeout(timer);
      start();
    } else timer ??= unref(setTimeout(start, opts.delayMs));
  }

  return {
    push(item) {
      if (stopped || queue.length >= opts.maxQueued) {
        overflow++;
        if (!running && !timer) reportOverflow(); // nothing under way will report it
        return;
      }
      queue.push(item);
      schedule();
    },
    get queued() {
      return queue.length;
    },
    get droppedTotal() {
      return droppedTotal + overflow;
    },
    async stop(graceMs) {
      stopped = true;
      const deadline = Date.now() + graceMs;
      if (timer) clearTimeout(timer);
      timer = undefined;
      pausing = false;
      const left = () => Math.max(0, deadline - Date.now());
      // The run under way ends after its current export (it sees `stopped`); the rest is sent here.
      if (running) await within(running, left());
      let pause = minBackoff;
      while (queue.length && left() > 0) {
        const sent = await within(sendHead(), left());
        if (sent === false) {
          await Bun.sleep(Math.min(pause, left()));
          pause = Math.min(pause * 2, maxBackoff);
        }
      }
      reportOverflow();
      if (queue.length) drop(queue.length, "shutdown");
      queue = [];
      generation++;
    },
  };
}

/** The promise's value, or undefined once `ms` have passed (an export cannot be cancelled; it is left to finish). */
function within<V>(p: Promise<V>, ms: number): Promise<V | undefined> {
  let t: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    t = setTimeout(() => resolve(undefined), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(t));
}

/** Timers of the export never keep the process alive: shutdown sends what is left on purpose. */
function unref(t: ReturnType<typeof setTimeout>): ReturnType<typeof setTimeout> {
  (t as { unref?: () => void }).unref?.();
  return t;
}
