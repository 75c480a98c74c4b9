// Needles follow the values, not the request (architecture.md D22): every answer the broker scans is
// scanned for every value it sends or could send anywhere, whichever vault, service, session or
// host it belongs to. One compiled set holds every vault's stored values in the forms they travel
// in (the store half, read once per change: stored-values.ts) and every value this instance sent
// lately that the store may no longer hold (the recent half: a rotated credential, a minted token).
// So an upstream that keeps what vault A sent and hands it to vault B's agent, on any of its names,
// ports or addresses, or a token endpoint that echoes a client secret to whoever calls it, hands over
// "[redacted]". One set for all hosts, not one per host: a host has many names (another port, its
// IP address, an alias), and the set's cost per byte does not grow with the number of values.
//
// A request costs one look-up; the set is compiled once per change, never per request. A value
// noted while streams are open is added to the compiled set in place (Needles.add), so a stream
// opened before a rotation or a new minted token is scanned for it from its next byte on.

import { DatabaseUnavailable } from "../errors.ts";
import type { VaultValues } from "./stored-values.ts";
import { Needles } from "./redact.ts";

/** What one request sent: its plan or minted grant (an identity, checked once) and the values in it. */
export interface Sent {
  readonly key: object;
  /** SECRET: search patterns only. */
  values(): readonly string[];
}

/**
 * The recent half's bounds: a value stays 24 h after it was last sent (or, for a vault's stored
 * values, after that vault was last written), dropped within the following hour (expiries are
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
/** While the store is unreachable, a set read before serves what it knows and asks again after this long. */
const RETRY_MS = 1000;
const ALL = -1;
/** Expired values are dropped together, at most once per this fraction of the age limit (1 h of 24 h). */
const EXPIRY_BATCH = 1 / 24;

export interface EchoNeedlesOptions {
  /** The store half; `known` holds vaults whose values are still current (not read again). */
  readonly load: (known: VaultValues) => Promise<Map<number, readonly string[]>>;
  readonly now: () => number;
  /** How long a read may be trusted (Infinity while announcements of changes arrive): re-read in full after. */
  readonly trustMs: () => number;
  readonly limits?: Partial<typeof RECENT_LIMITS>;
}

export interface EchoNeedles {
  /** SECRET: the compiled set an answer is scanned for; `sent` (this request's plan and grant) is in it. */
  forResponse(sent: readonly Sent[]): Promise<Needles>;
  /** A vault was written: its values move to the recent half and the store is read again. */
  invalidate(vaultId: number): void;
  /** Announcements may have been missed: every vault's values move to the recent half, the store is read again. */
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
  /** SECRET: the store half, per vault; a vault's entry is dropped when the vault is written. */
  let byVault = new Map<number, readonly string[]>();
  /** SECRET: the recent half, value → when last sent; oldest first (a value used again moves to the end). */
  const recent = new Map<string, number>();
  /** A vault was written since the store half was read. */
  let stale = true;
  let loadedAt = 0; // when the store half was last read in full (0: never)
  let retryAt = 0; // after a failed read during an outage, not before this
  let loading: Promise<void> | undefined;
  /** Vaults written while a read ran (ALL: every vault): what the read found for them may be outdated. */
  const writtenDuringLoad = new Set<number>();
  let compiled: Needles | undefined;
  /** SECRET: the values `compiled` holds. */
  let members = new Set<string>();
  /** A value outside `members` was noted: compile before the next answer. */
  let dirty = true;
  /** Plans and grants found in `members`, and when (cleared whenever the set is built anew). */
  let checked = new WeakMap<object, number>();
  /** When the oldest recent value must be gone (the set is compiled again then). */
  let expiresAt = Infinity;

  function remember(value: string, at: number): void {
    if (value.length < MIN_SHARED) return;
    recent.delete(value);
    recent.set(value, at);
    if (!members.has(value)) dirty = true;
    expiresAt = Math.min(expiresAt, dropBy(at));
    // Oldest first out; a dropped value stays in the compiled set until it is built anew (over-redaction only).
    while (recent.size > limits.total) recent.delete(recent.keys().next().value!);
  }

  /** This request's values are always among the needles; a known plan or grant costs one WeakMap look-up. */
  function note(s: Sent, at: number): void {
    const checkedAt = checked.get(s.key);
    if (checkedAt !== undefined && at - checkedAt < RECHECK_MS) return;
    checked.set(s.key, at);
    for (const v of s.values()) if (v.length >= MIN_SHARED && (recent.has(v) || !members.has(v))) remember(v, at);
  }

  /** The store half of vault `id` (or of all) leaves for the recent half: it may have been sent until now. */
  function forget(id: number | undefined, at: number): void {
    for (const [vaultId, values] of byVault) {
      if (id !== undefined && vaultId !== id) continue;
      for (const v of values) if (v) remember(v, at);
      byVault.delete(vaultId);
    }
    stale = true;
    retryAt = 0;
    if (loading) writtenDuringLoad.add(id ?? ALL);
  }

  async function reload(): Promise<void> {
    const at = opts.now();
    if (at - loadedAt >= opts.trustMs()) forget(undefined, at);
    stale = false; // a write during the read sets it again
    writtenDuringLoad.clear();
    try {
      const loaded = await opts.load(new Map(byVault));
      // Read again on the next answer: their values moved to the recent half meanwhile.
      if (writtenDuringLoad.has(ALL)) loaded.clear();
      for (const id of writtenDuringLoad) loaded.delete(id);
      byVault = loaded;
      loadedAt = at;
      dirty = true;
    } catch (err) {
      stale = true;
      // The store is unreachable: a set read before serves its last values (and the recent ones); one never read fails closed.
      if (!(err instanceof DatabaseUnavailable && loadedAt > 0)) throw err;
      retryAt = at + RETRY_MS;
    }
  }

  function compile(at: number): Needles {
    let dropped = false;
    for (const [v, t] of recent) {
      if (t + limits.ttlMs > at) break;
      recent.delete(v);
      dropped = true;
    }
    const first = recent.values().next();
    expiresAt = first.done ? Infinity : dropBy(first.value);
    const next = new Set<string>();
    for (const values of byVault.values()) for (const v of values) if (v.length >= MIN_SHARED) next.add(v);
    for (const v of recent.keys()) next.add(v);
    const added = [...next].filter((v) => !members.has(v));
    const removed = dropped || [...members].some((v) => !next.has(v));
    // Only additions: into the compiled set in place, so open streams see them at once. Otherwise (or
    // when it has no room) its index is built anew.
    if (!compiled) compiled = new Needles([...next]);
    else if (removed || (added.length > 0 && !compiled.add(added))) {
      // Built anew in the same object: streams already open move to the new index at their next chunk.
      compiled.replace([...next]);
      checked = new WeakMap();
    }
    members = next;
    dirty = false;
    return compiled;
  }

  async function refresh(sent: readonly Sent[]): Promise<Needles> {
    // Twice at most: a write that landed while an earlier read ran is read too, and endless writes cannot hold an answer.
    for (let i = 0; i < 2 && mustLoad(opts.now()); i++) await (loading ??= reload().finally(() => (loading = undefined)));
    const at = opts.now();
    for (const s of sent) note(s, at);
    const set = dirty || !compiled || at >= expiresAt ? compile(at) : compiled;
    // Compiling may have cleared the checks: this request's values are in the set, so mark them found.
    for (const s of sent) checked.set(s.key, at);
    return set;
  }

  function mustLoad(at: number): boolean {
    return at >= retryAt && (stale || at - loadedAt >= opts.trustMs());
  }

  return {
    forResponse(sent) {
      const at = opts.now();
      for (const s of sent) note(s, at);
      if (compiled && !dirty && at < expiresAt && !mustLoad(at)) return Promise.resolve(compiled);
      return refresh(sent);
    },
    noteSent(values) {
      const at = opts.now();
      for (const v of values) if (v.length >= MIN_SHARED && (recent.has(v) || !members.has(v))) remember(v, at);
      // Into the compiled set now, not at the next answer: streams already open look for them at once.
      if (compiled && dirty) compile(at);
    },
    invalidate(vaultId) {
      forget(vaultId, opts.now());
    },
    clear() {
      forget(undefined, opts.now());
    },
    *values() {
      // No copies made (this runs for every log line); a value in both halves comes twice, which a scrub does not mind.
      for (const values of byVault.values()) yield* values;
      yield* recent.keys();
    },
  };
}
