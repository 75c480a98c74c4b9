// Argon2id costs 64 MiB and tens of milliseconds per call: run at most a few at once and queue a
// bounded number more; beyond that, refuse (503) instead of exhausting memory (architecture.md D16).

import { Unavailable } from "../errors.ts";

export interface HashGate {
  run<T>(work: () => Promise<T>): Promise<T>;
}

export function createHashGate(opts: { concurrency: number; queue: number }): HashGate {
  let active = 0;
  const waiting: (() => void)[] = [];
  return {
    async run(work) {
      if (active >= opts.concurrency) {
        if (waiting.length >= opts.queue) throw new Unavailable("too many password checks in progress; retry shortly");
        await new Promise<void>((resolve) => waiting.push(resolve));
      } else {
        active++;
      }
      try {
        return await work();
      } finally {
        const next = waiting.shift();
        if (next)
          next(); // hand our slot straight to the next waiter
        else active--;
      }
    },
  };
}
