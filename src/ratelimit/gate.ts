// In-flight gates: a counter with a ceiling. Used for the GLOBAL in-flight ceiling and reusable for any small
// concurrency cap (Argon2id hashing, architecture.md D16). Never queues: a full gate refuses at once.

export interface Gate {
  /** A release function when a slot is free, undefined at the ceiling. Releasing twice frees one slot only. */
  acquire(): (() => void) | undefined;
  /** Slots currently held. */
  inFlight(): number;
  /** A lower ceiling refuses new entries until enough holders release; holders are never cut off. */
  setCeiling(ceiling: number): void;
}

export function createGate(ceiling: number): Gate {
  let max = ceiling;
  let held = 0;
  return {
    acquire() {
      if (held >= max) return undefined;
      held++;
      let released = false;
      // Idempotent: a tunnel may release on both "close" and "error", which must not free a second slot.
      return () => {
        if (released) return;
        released = true;
        held--;
      };
    },
    inFlight: () => held,
    setCeiling(next) {
      max = next;
    },
  };
}
