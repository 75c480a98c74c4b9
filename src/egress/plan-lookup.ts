// What a plan is made of, read one entry at a time (architecture.md D11): per vault, the service for
// each host and port asked for (one indexed read of the two stored texts that can match it) and each
// credential it names (decrypted once). A write to a vault drops the vault's entries at once, whatever
// their number; nothing here reads a whole vault, so a plan costs the same in a vault of 10,000
// services as in one of a single service. Never logs a value.

import type { Secret } from "../secret.ts";
import type { CredentialReference, ServiceRow, Store } from "../store/index.ts";
import { CredentialUnavailable } from "../errors.ts";
import { formatReference } from "../policy/index.ts";
import type { ReferenceValues } from "./reference-values.ts";
import { decryptCredential } from "../crypto/index.ts";
import { coveringPatternTexts, hostMatches, parseHostPattern, type HostPattern } from "../policy/index.ts";
import { readGraced, trustedValue, type GracedEntry, type GracedOptions } from "./graced-entries.ts";

/** Hosts remembered per vault, matched or not (an agent chooses them): the oldest read goes first beyond this. */
const MAX_HOSTS = 8192;

export interface MatchedService {
  readonly row: ServiceRow;
  readonly pattern: HostPattern;
}

interface VaultEntries {
  readonly hosts: Map<string, GracedEntry<MatchedService | undefined>>;
  readonly credentials: Map<string, GracedEntry<Secret | undefined>>;
  /** SECRET: every value handed out for the logger's scrub (raw and header forms). */
  readonly live: Set<string>;
}

export interface PlanLookup {
  /** The service that serves `host` on `port` in the vault (disabled ones too), or undefined. */
  service(vaultId: number, host: string, port: number): Promise<MatchedService | undefined>;
  /** The reference a value handed out by `credential` was read through, if it was. */
  referenceOf(value: Secret): CredentialReference | undefined;
  /** SECRET: the credential's value; undefined when the vault has no such key. Rejects when it cannot be decrypted or resolved. */
  credential(vaultId: number, key: string): Promise<Secret | undefined>;
  /** What `credential` would hand out now without reading: the same promise while its entry is trusted, else undefined. */
  heldCredential(vaultId: number, key: string): Promise<Secret | undefined> | undefined;
  /** SECRET: the vault's values handed out, kept for the logger's scrub until the vault is written. */
  live(vaultId: number): Set<string>;
  /** Forget a vault's entries (after any write to it): O(1), the vault's size does not matter. */
  drop(vaultId: number): void;
  clear(): void;
  /** SECRET: every vault's values handed out. */
  liveValues(): Iterable<string>;
}

export function createPlanLookup(store: Store, dataKey: CryptoKey, opts: GracedOptions, references?: ReferenceValues): PlanLookup {
  const vaults = new Map<number, VaultEntries>();
  const entries = (vaultId: number): VaultEntries => {
    let v = vaults.get(vaultId);
    if (!v) vaults.set(vaultId, (v = { hosts: new Map(), credentials: new Map(), live: new Set() }));
    return v;
  };

  /** Which reference a resolved value came from (the resolver hands out one Secret per value read). */
  const referenceOf = new WeakMap<Secret, CredentialReference>();
  return {
    referenceOf: (value) => referenceOf.get(value),
    service(vaultId, host, port) {
      return readGraced(entries(vaultId).hosts, `${host}:${port}`, () => matchHost(store, vaultId, host, port), opts, MAX_HOSTS);
    },
    credential(vaultId, key) {
      return readGraced(
        entries(vaultId).credentials,
        key,
        async () => {
          const row = await store.credentials.get(vaultId, key);
          if (!row) return undefined;
          if (!row.reference) return decryptCredential(dataKey, row);
          // A reference's value comes from its store's runtime; without one (unit tests) it cannot be read.
          if (!references) throw new CredentialUnavailable(formatReference(row.reference), "this broker reads no secret stores");
          const value = await references.resolve(vaultId, row.reference);
          referenceOf.set(value, row.reference);
          return value;
        },
        opts,
      );
    },
    heldCredential(vaultId, key) {
      const v = vaults.get(vaultId);
      return v && trustedValue(v.credentials, key, opts);
    },
    live: (vaultId) => entries(vaultId).live,
    drop(vaultId) {
      vaults.delete(vaultId);
    },
    clear() {
      vaults.clear();
    },
    *liveValues() {
      for (const v of vaults.values()) yield* v.live;
    },
  };
}

/**
 * The host's own service, else a one-level wildcard over its parent (architecture.md D14). A row stored
 * before a host rule tightened (e.g. `*.github.io`, a public-suffix wildcard) matches nothing: its hosts
 * are refused like any host without a service, and the rest of the vault works.
 */
async function matchHost(store: Store, vaultId: number, host: string, port: number): Promise<MatchedService | undefined> {
  const texts = coveringPatternTexts(host, port);
  let wild: MatchedService | undefined;
  for (const row of await store.services.forHost(vaultId, texts.exact, texts.wildcard)) {
    let pattern: HostPattern;
    try {
      pattern = parseHostPattern(row.host, { allowIp: true });
    } catch {
      continue;
    }
    if (!hostMatches(pattern, host, port)) continue;
    if (!pattern.wildcard) return { row, pattern };
    wild = { row, pattern };
  }
  return wild;
}
