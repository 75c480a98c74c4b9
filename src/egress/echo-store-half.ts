// The store half of the echo needles (echo-needles.ts, architecture.md D22): per vault, what its
// services send, as last read. A write marks its vault to be read again; the read runs in the
// background a page at a time (stored-values.ts), letting the event loop go between pages, and hands
// each page's values to the set as it goes. An answer waits for the first read of all (fail closed),
// and afterwards at most for one page of a read: the rest of a large vault joins while answers flow.
// A value leaves this half only into the recent half (it may have been sent until now).

import type { StoredValues } from "./stored-values.ts";

export interface StoreHalfOptions {
  readonly stored: StoredValues;
  readonly now: () => number;
  /** How long a read of every vault may be trusted (Infinity while announcements of changes arrive). */
  readonly trustMs: () => number;
  /** Shorter values are not kept (echo-needles.ts MIN_SHARED). */
  readonly minLength: number;
  /** SECRET: values read that the set may not hold yet; resolves once they are in it. */
  admit(values: readonly string[]): Promise<void>;
  /** SECRET: values a vault's services no longer send: they join the recent half. */
  leave(values: readonly string[], at: number): void;
}

export interface StoreHalf {
  /**
   * A vault was written: read it again. `announced`: the write was another instance's (or may have been):
   * answers then wait until the whole vault is read, since that instance may already have sent a new value
   * this one has never seen. A write made here needs no such wait: whatever this instance sends joins the
   * set before it goes (echo-needles.ts `note`).
   */
  invalidate(vaultId: number, announced?: boolean): void;
  /** Announcements may have been missed: read every vault again, answers waiting until it is done. */
  clear(): void;
  /**
   * Starts a read when one is due (or joins the one running); resolves when an answer has waited
   * enough: until every vault was read once, else until the read's first page. Rejects when there
   * is nothing read to serve (fail closed); once read, a failed read leaves the last values serving.
   */
  settle(): Promise<void> | undefined;
  /** Whether `value` is among the values read (or being read). */
  has(value: string): boolean;
  /** SECRET: every value read. */
  values(): Iterable<string>;
}

/** After a failed read (the store unreachable), the half read before serves and is read again after this long. */
const RETRY_MS = 1000;
/**
 * A vault of more than one page written here again is read again at most this often: edits every 250 ms of a
 * 10,000-service vault made four whole reads a second, and every other vault's answers paid for them
 * (bench/noisy-neighbour.ts). Nothing this instance sends waits for it (it is noted before it goes); a value it
 * could send but has not joins within this long. Announced changes are never held back.
 */
const REREAD_EVERY_MS = 1000;

interface Waiter {
  resolve(): void;
  reject(err: unknown): void;
}

export function createStoreHalf(opts: StoreHalfOptions): StoreHalf {
  /** SECRET: per vault, what its services send, as last read. */
  const byVault = new Map<number, ReadonlySet<string>>();
  /** SECRET: the vault being read, so far (handed to the set already, not yet in byVault). */
  let reading: ReadonlySet<string> | undefined;
  /** Vaults written since they were last read. */
  const pending = new Set<number>();
  /** Every vault is to be read: never read yet, or announcements may have been missed. */
  let everyVault = true;
  let loadedAt = 0; // when the last read of every vault began (0: none has finished)
  let retryAt = 0;
  let running = false;
  /** A write (or a clear) that no answer has yet waited a page of reading for. */
  let owed = false;
  /** Answers waiting: released after the next page read (or, never read in full, after the first read of all). */
  let waiters: Waiter[] = [];
  /** When each vault of more than one page was last read whole (for REREAD_EVERY_MS). */
  const readLarge = new Map<number, number>();
  let wake: ReturnType<typeof setTimeout> | undefined;
  /** Vaults another instance wrote that are not yet read whole since: answers wait for them (D22). */
  const announced = new Set<number>();
  /** Announcements were missed (clear): answers wait until every vault is read whole again. */
  let missedAnnouncements = false;

  function due(at: number): boolean {
    if (at < retryAt) return false;
    if (at - loadedAt >= opts.trustMs()) everyVault = owed = true;
    return everyVault || [...pending].some((id) => !heldBack(id, at));
  }

  function release(err?: unknown): void {
    const waiting = waiters;
    waiters = [];
    for (const w of waiting) err === undefined ? w.resolve() : w.reject(err);
  }

  /** A page was read: once every vault has been read, the answers waiting have waited enough. */
  function afterPage(): void {
    if (loadedAt === 0 || announced.size > 0 || missedAnnouncements) return;
    owed = false;
    release();
  }

  /** `written`: read because it was written here (what REREAD_EVERY_MS spaces out), not in a pass over every vault. */
  async function readVault(vaultId: number, written: boolean): Promise<void> {
    const values = new Set<string>();
    reading = values;
    let pages = 0;
    try {
      let after: string | undefined = "";
      while (after !== undefined) {
        pages++;
        const page = await opts.stored.page(vaultId, after);
        const fresh: string[] = [];
        for (const v of page.values) {
          if (v.length < opts.minLength || values.has(v)) continue;
          values.add(v);
          if (!byVault.get(vaultId)?.has(v)) fresh.push(v);
        }
        await opts.admit(fresh);
        afterPage();
        after = page.next;
        // After every page, the last one too: a pass over many small vaults must not run as one task.
        await yieldToLoop();
      }
    } finally {
      reading = undefined;
    }
    // Read whole since it was announced, unless announced again meanwhile (then it is pending and read again).
    if (!pending.has(vaultId)) announced.delete(vaultId);
    if (written && pages > 1) readLarge.set(vaultId, opts.now());
    else readLarge.delete(vaultId);
    const before = byVault.get(vaultId);
    if (values.size) byVault.set(vaultId, values);
    else byVault.delete(vaultId);
    const gone: string[] = [];
    for (const v of before ?? []) if (!values.has(v)) gone.push(v);
    if (gone.length) opts.leave(gone, opts.now());
  }

  /** Reads until nothing is due: vaults written during a read are read again after it. */
  async function readDue(): Promise<void> {
    while (everyVault || [...pending].some((id) => !heldBack(id, opts.now()))) {
      const at = opts.now();
      const all = everyVault;
      everyVault = false;
      const ids = [...pending].filter((id) => !heldBack(id, at));
      for (const id of ids) pending.delete(id);
      try {
        const written = new Set(ids);
        if (all) for (const id of new Set([...(await opts.stored.vaults()), ...byVault.keys()])) ids.push(id);
        // A vault written during its read is pending again, and read again by the next pass.
        for (const id of new Set(ids)) await readVault(id, written.has(id) && !announced.has(id));
      } catch (err) {
        // Read again next time: what this pass had not finished (a vault read twice costs nothing more).
        if (all) everyVault = true;
        for (const id of ids) pending.add(id);
        // Given up for now (the store unreachable): the answers held for these go on with what is known.
        announced.clear();
        missedAnnouncements = false;
        throw err;
      }
      if (all) {
        loadedAt = at;
        missedAnnouncements = false;
        afterPage(); // the first read of all, done: the answers held for it go on
      }
    }
    running = false; // at once: a write from here on starts a read of its own
    if (pending.size > 0) wakeForHeldBack();
  }

  /** A large vault written here, read whole less than REREAD_EVERY_MS ago: its next read waits (never an announced one). */
  function heldBack(id: number, at: number): boolean {
    const last = readLarge.get(id);
    return last !== undefined && !announced.has(id) && at - last < REREAD_EVERY_MS;
  }

  /** Starts the read of the vaults held back once their time has come, whether or not an answer asks. */
  function wakeForHeldBack(): void {
    if (wake) return;
    const at = opts.now();
    const when = Math.min(...[...pending].map((id) => (readLarge.get(id) ?? at) + REREAD_EVERY_MS));
    wake = setTimeout(
      () => {
        wake = undefined;
        if (!running && due(opts.now())) start();
      },
      Math.max(0, when - at),
    );
    wake.unref?.();
  }

  function start(): void {
    running = true;
    readDue().then(
      () => release(),
      (err: unknown) => {
        running = false;
        // Never read in full: fail closed. Afterwards a failed read (the store unreachable, a row it
        // cannot read) leaves the last values serving, with the recent ones, and is tried again shortly.
        if (loadedAt === 0) return release(err);
        retryAt = opts.now() + RETRY_MS;
        release();
      },
    );
  }

  return {
    invalidate(vaultId, heard) {
      pending.add(vaultId);
      if (heard) announced.add(vaultId);
      else if (heldBack(vaultId, opts.now())) wakeForHeldBack(); // read when its time comes, asked or not
      retryAt = 0;
      owed = true;
    },
    clear() {
      everyVault = owed = missedAnnouncements = true;
      retryAt = 0;
    },
    settle() {
      if (due(opts.now()) && !running) start();
      if (!running || (loadedAt > 0 && !owed)) return undefined;
      return new Promise<void>((resolve, reject) => waiters.push({ resolve, reject }));
    },
    has(value) {
      if (reading?.has(value)) return true;
      for (const values of byVault.values()) if (values.has(value)) return true;
      return false;
    },
    *values() {
      for (const values of byVault.values()) yield* values;
      if (reading) yield* reading;
    },
  };
}

/** Lets timers, sockets and other requests run before the next page (setImmediate: after I/O). */
export function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
