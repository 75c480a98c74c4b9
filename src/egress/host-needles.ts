// Needles follow the host, not the request (DESIGN.md §3.22). Per host:port as the agent addressed
// it, one compiled needle set holds every value any vault's services covering it send or could send
// (the store half, read once per host and change: host-values.ts) and every value this instance sent
// there lately that the store may no longer hold (the recent half: a rotated credential, a minted
// token). So an upstream that keeps what vault A sent and hands it to vault B's agent (a request bin,
// a shared logging API) hands over "[redacted]". A response costs one map lookup; the set is
// compiled once per change, never per request, so the lookup does not grow with the vault count.

import { DatabaseUnavailable } from "../errors.ts";
import type { VaultValues } from "./host-values.ts";
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
 * gathered so one compile drops many, not one compile per value), at most 4,096 values per host with
 * the oldest dropped first, and at most 1,024 hosts with the least recently answered dropped whole
 * (its recent values with it). An upstream replaying a value stored longer ago than that, or after
 * thousands of newer ones, is not caught: the bound keeps memory and compile time finite.
 */
export const RECENT_LIMITS = { ttlMs: 24 * 3_600_000, perHost: 4096, hosts: 1024 };

/** A plan or grant in use keeps its values' recent entries alive: checked again after this long. */
const RECHECK_MS = 3_600_000;
/** While the store is unreachable, a host read before serves what it knows and asks again after this long. */
const RETRY_MS = 1000;
const ALL = -1;
/** Expired values are dropped together, at most once per this fraction of the age limit (1 h of 24 h). */
const EXPIRY_BATCH = 1 / 24;

export interface HostNeedlesOptions {
  /** The store half for a host; `known` holds vaults whose values are still current (not read again). */
  readonly load: (host: string, port: number, known: VaultValues) => Promise<Map<number, readonly string[]>>;
  readonly now: () => number;
  /** How long a read may be trusted (Infinity while announcements of changes arrive): re-read in full after. */
  readonly trustMs: () => number;
  readonly limits?: Partial<typeof RECENT_LIMITS>;
}

export interface HostNeedles {
  /** SECRET: the compiled set for a response from host:port; `sent` (this request's plan and grant) is in it. */
  forResponse(host: string, port: number, sent: readonly Sent[]): Promise<Needles>;
  /** A vault was written: its values move to the recent half and every host reads the store again. */
  invalidate(vaultId: number): void;
  /** Announcements may have been missed: every vault's values move to the recent half, every host re-reads. */
  clear(): void;
  /** SECRET: every value held, for the logger's last-line scrub. */
  values(): Iterable<string>;
}

interface HostEntry {
  /** SECRET: the store half, per vault; a vault's entry is dropped when the vault is written. */
  byVault: Map<number, readonly string[]>;
  /** SECRET: the recent half, value → when last sent; oldest first (a value used again moves to the end). */
  readonly recent: Map<string, number>;
  /** A vault was written since the store half was read. */
  stale: boolean;
  /** When the store half was last read in full (0: never). */
  loadedAt: number;
  /** After a failed read during an outage, not before this. */
  retryAt: number;
  loading: Promise<void> | undefined;
  /** Vaults written while a read ran (ALL: every vault): what the read found for them may be outdated. */
  readonly writtenDuringLoad: Set<number>;
  compiled: Needles | undefined;
  /** SECRET: the values `compiled` holds. */
  members: ReadonlySet<string>;
  /** A value outside `members` was noted: compile before the next answer. */
  dirty: boolean;
  /** Plans and grants found in `members`, and when (cleared whenever the set changes). */
  checked: WeakMap<object, number>;
  /** When the oldest recent value must be gone (the set is compiled again then). */
  expiresAt: number;
  lastUsed: number;
}

export function createHostNeedles(opts: HostNeedlesOptions): HostNeedles {
  const limits = { ...RECENT_LIMITS, ...opts.limits };
  /** When a value sent at `t` is dropped at the latest: its age limit, plus the wait that gathers expiries. */
  const dropBy = (t: number) => t + limits.ttlMs * (1 + EXPIRY_BATCH);
  const entries = new Map<string, HostEntry>();

  function entryFor(key: string, at: number): HostEntry {
    let e = entries.get(key);
    if (e) return e;
    if (entries.size >= limits.hosts) evictLeastUsed();
    e = { byVault: new Map(), recent: new Map(), stale: true, loadedAt: 0, retryAt: 0, loading: undefined, writtenDuringLoad: new Set(), compiled: undefined, members: new Set(), dirty: true, checked: new WeakMap(), expiresAt: Infinity, lastUsed: at };
    entries.set(key, e);
    return e;
  }

  function evictLeastUsed(): void {
    let oldest: string | undefined;
    let when = Infinity;
    for (const [k, e] of entries) if (e.lastUsed < when && !e.loading) [oldest, when] = [k, e.lastUsed];
    if (oldest !== undefined) entries.delete(oldest);
  }

  function remember(e: HostEntry, value: string, at: number): void {
    e.recent.delete(value);
    e.recent.set(value, at);
    if (!e.members.has(value)) e.dirty = true;
    e.expiresAt = Math.min(e.expiresAt, dropBy(at));
    // Oldest first out; a dropped value stays in the compiled set until the next compile (over-redaction only).
    while (e.recent.size > limits.perHost) e.recent.delete(e.recent.keys().next().value!);
  }

  /** This request's values are always among the needles; a known plan or grant costs one WeakMap look-up. */
  function note(e: HostEntry, s: Sent, at: number): void {
    const checkedAt = e.checked.get(s.key);
    if (checkedAt !== undefined && at - checkedAt < RECHECK_MS) return;
    e.checked.set(s.key, at);
    for (const v of s.values()) if (v && (e.recent.has(v) || !e.members.has(v))) remember(e, v, at);
  }

  /** The store half of vault `id` (or of all) leaves for the recent half: it may have been sent until now. */
  function forget(e: HostEntry, id: number | undefined, at: number): void {
    for (const [vaultId, values] of e.byVault) {
      if (id !== undefined && vaultId !== id) continue;
      for (const v of values) if (v) remember(e, v, at);
      e.byVault.delete(vaultId);
    }
    e.stale = true;
    e.retryAt = 0;
    if (e.loading) e.writtenDuringLoad.add(id ?? ALL);
  }

  async function reload(e: HostEntry, host: string, port: number): Promise<void> {
    const at = opts.now();
    if (at - e.loadedAt >= opts.trustMs()) forget(e, undefined, at);
    e.stale = false; // a write during the read sets it again
    e.writtenDuringLoad.clear();
    try {
      const loaded = await opts.load(host, port, new Map(e.byVault));
      // Read again on the next answer: their values moved to the recent half meanwhile.
      if (e.writtenDuringLoad.has(ALL)) loaded.clear();
      for (const id of e.writtenDuringLoad) loaded.delete(id);
      e.byVault = loaded;
      e.loadedAt = at;
      e.dirty = true;
    } catch (err) {
      e.stale = true;
      // The store is unreachable: a host read before serves its last values (and the recent ones); one never read fails closed.
      if (!(err instanceof DatabaseUnavailable && e.loadedAt > 0)) throw err;
      e.retryAt = at + RETRY_MS;
    }
  }

  function compile(e: HostEntry, at: number): Needles {
    for (const [v, t] of e.recent) {
      if (t + limits.ttlMs > at) break;
      e.recent.delete(v);
    }
    const first = e.recent.values().next();
    e.expiresAt = first.done ? Infinity : dropBy(first.value);
    const members = new Set<string>();
    for (const values of e.byVault.values()) for (const v of values) if (v) members.add(v);
    for (const v of e.recent.keys()) members.add(v);
    // An unrelated vault's write re-reads the store but changes nothing here: the compiled set stays.
    if (!e.compiled || members.size !== e.members.size || [...members].some((v) => !e.members.has(v))) {
      e.compiled = new Needles([...members]);
      e.checked = new WeakMap();
    }
    e.members = members;
    e.dirty = false;
    return e.compiled;
  }

  async function refresh(e: HostEntry, host: string, port: number, sent: readonly Sent[]): Promise<Needles> {
    // Twice at most: a write that landed while an earlier read ran is read too, and endless writes cannot hold an answer.
    for (let i = 0; i < 2 && mustLoad(e, opts.now()); i++) await (e.loading ??= reload(e, host, port).finally(() => (e.loading = undefined)));
    const at = opts.now();
    for (const s of sent) note(e, s, at);
    const compiled = e.dirty || !e.compiled || at >= e.expiresAt ? compile(e, at) : e.compiled;
    // Compiling cleared the checks: this request's values are in the set, so mark them found.
    for (const s of sent) e.checked.set(s.key, at);
    return compiled;
  }

  function mustLoad(e: HostEntry, at: number): boolean {
    return at >= e.retryAt && (e.stale || at - e.loadedAt >= opts.trustMs());
  }

  return {
    forResponse(host, port, sent) {
      const at = opts.now();
      const e = entryFor(`${host}:${port}`, at);
      e.lastUsed = at;
      for (const s of sent) note(e, s, at);
      if (e.compiled && !e.dirty && at < e.expiresAt && !mustLoad(e, at)) return Promise.resolve(e.compiled);
      return refresh(e, host, port, sent);
    },
    invalidate(vaultId) {
      const at = opts.now();
      for (const e of entries.values()) forget(e, vaultId, at);
    },
    clear() {
      const at = opts.now();
      for (const e of entries.values()) forget(e, undefined, at);
    },
    *values() {
      const seen = new Set<string>();
      for (const e of entries.values()) {
        for (const v of [...[...e.byVault.values()].flat(), ...e.recent.keys()]) {
          if (seen.has(v)) continue;
          seen.add(v);
          yield v;
        }
      }
    },
  };
}
