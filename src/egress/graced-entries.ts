// One cached store read per key (a host's service, a credential), trusted until its vault is written
// (the caller drops the map), or for a second while announcements from other instances may be missed;
// during a database outage an entry last known current less than the grace period ago keeps serving.
// Never caches a failure: a read that fails without a fallback is asked again by the next request.

import { DatabaseUnavailable } from "../errors.ts";
import type { Freshness } from "../store/index.ts";

export interface GracedEntry<V> {
  readonly value: Promise<V>;
  /** When the store last answered for it (or was last asked, during an outage). */
  readonly checkedAt: number;
  /**
   * When it was last known current: read from the store, or served while announcements vouched for
   * it. The outage grace counts from here, not from the read: an entry trusted for hours is as good
   * as a fresh one up to the moment announcements stop.
   */
  confirmedAt: number;
}

export interface GracedOptions {
  readonly now: () => number;
  readonly freshness: Freshness;
  /** While the database is unreachable, an entry confirmed less than this long ago keeps serving. */
  readonly graceMs: number;
}

/**
 * The entry for `key` in `entries`, read with `load` when absent or no longer trusted. `max` bounds
 * the map (the oldest entry goes first): hosts are the agent's choice, unmatched ones included.
 */
export function readGraced<V>(entries: Map<string, GracedEntry<V>>, key: string, load: () => Promise<V>, opts: GracedOptions, max = Infinity): Promise<V> {
  const trusted = trustedValue(entries, key, opts);
  if (trusted) return trusted;
  const held = entries.get(key);
  const at = opts.now();
  // The store is asked again once per re-validation interval; meanwhile the last answer serves.
  const fallback = held && at - held.confirmedAt < opts.graceMs ? held : undefined;
  const value = load().catch((err) => {
    if (!(fallback && err instanceof DatabaseUnavailable)) {
      if (entries.get(key) === entry) entries.delete(key);
      throw err;
    }
    if (entries.get(key) === entry) entries.set(key, { ...fallback, checkedAt: at });
    return fallback.value;
  });
  const entry: GracedEntry<V> = { value, checkedAt: at, confirmedAt: at };
  entries.delete(key); // re-inserted last: the map's order is the order of reads
  entries.set(key, entry);
  if (entries.size > max) entries.delete(entries.keys().next().value!);
  return value;
}

/** The entry's value when it is held and still trusted (no read needed), else undefined. */
export function trustedValue<V>(entries: Map<string, GracedEntry<V>>, key: string, opts: GracedOptions): Promise<V> | undefined {
  const held = entries.get(key);
  if (!held) return undefined;
  const at = opts.now();
  if (at - held.checkedAt >= opts.freshness.trustMs(Infinity)) return undefined;
  // Only announcements vouch for it: a hit within a second of a failed re-check must not extend the grace.
  if (opts.freshness.listening) held.confirmedAt = at;
  return held.value;
}
