// The per-session cache of vault grants the proxy hot path reads (architecture.md D11): what a grant is
// and the cache itself. Holds vault rows and roles only, never a credential; imports no domain operation.

import type { VaultRole, VaultRow } from "../store/index.ts";
import { ALWAYS_FRESH, type Freshness } from "../store/index.ts";

/** A vault and the role a principal holds in it (what the access cache keeps per session). */
export interface VaultGrant {
  readonly vault: VaultRow;
  readonly role: VaultRole;
}

export interface VaultAccessCache {
  get(sessionId: number, vault: string): VaultGrant | undefined;
  /**
   * Resolves and caches a grant; concurrent requests for the same one share the read, and a read in
   * flight when the cache is cleared (a change was announced) is used once but not kept.
   */
  load(sessionId: number, vault: string, resolve: () => Promise<VaultGrant>): Promise<VaultGrant>;
  /** A grant past its trust but within the outage grace period, for when the database is unreachable. */
  recent(sessionId: number, vault: string): VaultGrant | undefined;
  set(sessionId: number, vault: string, grant: VaultGrant): void;
  /** The name of a vault by id, for scoped sessions that carry only the id. */
  nameOf(vaultId: number): string | undefined;
  clear(): void;
}

/**
 * Remembers successful vault look-ups per session for a few seconds, so proxied requests do not
 * read the store (architecture.md D11). Only grants are cached, never refusals; every write that
 * could narrow access (vault changes, deletions, revocations) clears it.
 */
export function createVaultAccessCache(opts: {
  now: () => number;
  ttlMs?: number;
  max?: number;
  freshness?: Freshness;
  outageGraceMs?: number;
}): VaultAccessCache {
  const entries = new Map<string, { grant: VaultGrant; at: number }>();
  const names = new Map<number, string>();
  const ttl = opts.ttlMs ?? 5_000;
  const max = opts.max ?? 10_000;
  const freshness = opts.freshness ?? ALWAYS_FRESH;
  const within = (sessionId: number, vault: string, ms: number) => {
    const e = entries.get(`${sessionId}|${vault}`);
    return e && opts.now() - e.at < ms ? e.grant : undefined;
  };
  const loading = new Map<string, Promise<VaultGrant>>();
  let generation = 0;
  const set = (sessionId: number, vault: string, grant: VaultGrant) => {
    entries.set(`${sessionId}|${vault}`, { grant, at: opts.now() });
    names.set(grant.vault.id, grant.vault.name);
    if (entries.size > max) entries.delete(entries.keys().next().value!);
    if (names.size > max) names.delete(names.keys().next().value!);
  };
  return {
    get: (sessionId, vault) => within(sessionId, vault, freshness.trustMs(ttl)),
    load(sessionId, vault, resolve) {
      const key = `${sessionId}|${vault}`;
      const pending = loading.get(key);
      if (pending) return pending;
      const asOf = generation;
      const started = resolve()
        .then((grant) => {
          if (asOf === generation) set(sessionId, vault, grant);
          return grant;
        })
        .finally(() => {
          if (loading.get(key) === started) loading.delete(key);
        });
      loading.set(key, started);
      return started;
    },
    recent: (sessionId, vault) => within(sessionId, vault, opts.outageGraceMs ?? 0),
    set,
    nameOf(vaultId) {
      return names.get(vaultId);
    },
    clear() {
      generation++;
      loading.clear();
      entries.clear();
      names.clear();
    },
  };
}
