// Needles follow the values, not the request (architecture.md D22): every answer the broker scans is
// scanned for every value it sends or could send anywhere, whichever vault, service, session or
// host it belongs to. One compiled set holds every vault's stored values in the forms they travel
// in (the store half: echo-store-half.ts) and every value this instance sent lately that the store
// may no longer hold (the recent half: a rotated credential, a minted token, a value an edit removed).
// So an upstream that keeps what vault A sent and hands it to vault B's agent, on any of its names,
// ports or addresses, or a token endpoint that echoes a client secret to whoever calls it, hands over
// "[redacted]". One set for all hosts, not one per host: a host has many names (another port, its
// IP address, an alias), and the set's cost per byte does not grow with the number of values.
//
// A request costs one look-up, and notes what it sends before it goes; the set is compiled once per
// change, never per request. Values read or noted are added to the compiled set in place
// (Needles.add), a few at a time, so a stream opened before a rotation or a new minted token is
// scanned for them from its next byte on, and a large vault read after an edit never holds the loop.

import { createStoreHalf, yieldToLoop } from "./echo-store-half.ts";
import type { StoredValues } from "./stored-values.ts";
import { Needles } from "./redact.ts";

/** What one request sent: its plan or minted grant (an identity, checked once) and the values in it. */
export interface Sent {
  readonly key: object;
  /** SECRET: search patterns only. */
  values(): readonly string[];
}

/**
 * The recent half's bounds: a value stays 24 h after it was last sent (or, for a value an edit
 * removed from the store, after the edit was read), dropped within the following hour (expiries are
 * gathered so one compile drops many), and at most 65,536 values, the oldest dropped first. An
 * upstream replaying a value stored longer ago than that, or after that many newer ones, is not
 * caught: the bound keeps memory and compile time finite.
 */
export const RECENT_LIMITS = { ttlMs: 24 * 3_600_000, total: 65_536 };

/**
 * Values shorter than this are not shared: one vault's short value (a `"`, a word like "password")
 * would otherwise be redacted from every answer of every vault. A request's own short values are
 * still looked for in its own answer (plan.ts joins them to the shared set); another vault's, of
 * fewer than 12 characters, are not (the README says so).
 */
export const MIN_SHARED = 12;

/** A plan or grant in use keeps its values' recent entries alive: checked again after this long. */
const RECHECK_MS = 3_600_000;
/** Expired values are dropped together, at most once per this fraction of the age limit (1 h of 24 h). */
const EXPIRY_BATCH = 1 / 24;
/** Values read from the store go into the compiled set this many at a time (~0.2 ms each), the loop let go between. */
const ADD_BATCH = 16;

export interface EchoNeedlesOptions {
  /** The store half's source: each vault's values, a page at a time. */
  readonly stored: StoredValues;
  readonly now: () => number;
  /** How long a read may be trusted (Infinity while announcements of changes arrive): re-read in full after. */
  readonly trustMs: () => number;
  readonly limits?: Partial<typeof RECENT_LIMITS>;
}

export interface EchoNeedles {
  /** SECRET: the compiled set an answer is scanned for; `sent` (this request's plan and grant) is in it. */
  forResponse(sent: readonly Sent[]): Promise<Needles>;
  /** A vault was written: it is read again; its values stay in the set meanwhile, and after if sent lately. */
  invalidate(vaultId: number, announced?: boolean): void;
  /** Announcements may have been missed: every vault is read again, every value held meanwhile. */
  clear(): void;
  /** SECRET: values sent outside any answer (a token request): they join the set before the next answer. */
  noteSent(values: readonly string[]): void;
  /** SECRET: every value held, for the logger's last-line scrub. */
  values(): Iterable<string>;
}

export function createEchoNeedles(opts: EchoNeedlesOptions): EchoNeedles {
  const limits = { ...RECENT_LIMITS, ...opts.limits };
  /** When a value sent at `t` is dropped at the latest: its age limit, plus the wait that gathers expiries. */
  const dropBy = (t: number) => t + limits.ttlMs * (1 + EXPIRY_BATCH);
  /** SECRET: the recent half, value → when last sent; oldest first (a value used again moves to the end). */
  const recent = new Map<string, number>();
  let compiled: Needles | undefined;
  /** SECRET: the values `compiled` holds, or is about to (`adds`). */
  let members = new Set<string>();
  /** SECRET: members not yet in `compiled`. */
  let adds: string[] = [];
  /** A value left both halves: the set is built anew at the next compile. */
  let removed = false;
  /** Plans and grants found in `members`, and when (cleared whenever the set is built anew). */
  let checked = new WeakMap<object, number>();
  /** When the oldest recent value must be gone (the set is compiled again then). */
  let expiresAt = Infinity;

  const stored = createStoreHalf({
    stored: opts.stored,
    now: opts.now,
    trustMs: opts.trustMs,
    minLength: MIN_SHARED,
    async admit(values) {
      for (let i = 0; i < values.length; i += ADD_BATCH) {
        if (i > 0) await yieldToLoop();
        for (const v of values.slice(i, i + ADD_BATCH)) admit(v);
        flush();
      }
    },
    leave(values, at) {
      for (const v of values) remember(v, at);
    },
  });

  function admit(value: string): void {
    if (members.has(value)) return;
    members.add(value);
    adds.push(value);
  }

  /** Additions into the compiled set in place, so open streams see them at once; when it has no room, built anew. */
  function flush(): void {
    if (!compiled || adds.length === 0) return;
    if (!compiled.add(adds)) rebuild();
    adds = [];
  }

  function rebuild(): void {
    const next = new Set<string>([...stored.values(), ...recent.keys()]);
    // Built anew in the same object: streams already open move to the new index at their next chunk.
    if (compiled) compiled.replace([...next]);
    else compiled = new Needles([...next]);
    members = next;
    adds = [];
    removed = false;
    checked = new WeakMap();
  }

  function remember(value: string, at: number): void {
    if (value.length < MIN_SHARED) return;
    recent.delete(value);
    recent.set(value, at);
    admit(value);
    expiresAt = Math.min(expiresAt, dropBy(at));
    // Oldest first out; a dropped value stays in the compiled set until it is built anew (over-redaction only).
    while (recent.size > limits.total) dropRecent(recent.keys().next().value!);
  }

  function dropRecent(value: string): void {
    recent.delete(value);
    if (!stored.has(value)) removed = true;
  }

  /** This request's values are always among the needles; a known plan or grant costs one WeakMap look-up. */
  function note(s: Sent, at: number): void {
    const checkedAt = checked.get(s.key);
    if (checkedAt !== undefined && at - checkedAt < RECHECK_MS) return;
    checked.set(s.key, at);
    for (const v of s.values()) if (v.length >= MIN_SHARED && (recent.has(v) || !members.has(v))) remember(v, at);
  }

  function compile(at: number): Needles {
    for (const [v, t] of recent) {
      if (t + limits.ttlMs > at) break;
      dropRecent(v);
    }
    const first = recent.values().next();
    expiresAt = first.done ? Infinity : dropBy(first.value);
    if (!compiled || removed) rebuild();
    else flush();
    return compiled!;
  }

  function answer(sent: readonly Sent[]): Needles {
    const at = opts.now();
    for (const s of sent) note(s, at);
    const set = adds.length > 0 || removed || !compiled || at >= expiresAt ? compile(at) : compiled;
    // Compiling may have cleared the checks: this request's values are in the set, so mark them found.
    for (const s of sent) checked.set(s.key, at);
    return set;
  }

  return {
    forResponse(sent) {
      // Noted before any wait: what this request sends is looked for in every answer from now on.
      const at = opts.now();
      for (const s of sent) note(s, at);
      const waiting = stored.settle();
      return waiting ? waiting.then(() => answer(sent)) : Promise.resolve(answer(sent));
    },
    noteSent(values) {
      const at = opts.now();
      for (const v of values) if (v.length >= MIN_SHARED && (recent.has(v) || !members.has(v))) remember(v, at);
      // Into the compiled set now, not at the next answer: streams already open look for them at once.
      if (compiled && (adds.length > 0 || removed)) compile(at);
    },
    invalidate(vaultId, announced) {
      stored.invalidate(vaultId, announced);
    },
    clear() {
      stored.clear();
    },
    *values() {
      // No copies made (this runs for every log line); a value in both halves comes twice, which a scrub does not mind.
      yield* stored.values();
      yield* recent.keys();
    },
  };
}
