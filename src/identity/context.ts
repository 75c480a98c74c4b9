// What every domain operation needs, passed in one object (no module-level singletons).

import type { LoginThrottle, RateLimiter } from "../ratelimit/index.ts";
import type { PriceBook, SecretReference } from "../policy/index.ts";
import type { AuditCheckpointRow, Store } from "../store/index.ts";
import type { HashGate } from "../crypto/index.ts";
import type { KdfParams } from "../crypto/index.ts";
import type { OidcClient } from "./oidc-client.ts";
import type { Authenticator } from "./sessions.ts";
import type { VaultAccessCache } from "./vault-access.ts";
import type { WebhookNotifier } from "./webhook-event.ts";
import type { WorkloadKeys } from "./workload-token.ts";

export interface Domain {
  readonly store: Store;
  /** Non-extractable AES-GCM data key. */
  readonly dataKey: CryptoKey;
  readonly auth: Authenticator;
  /** Bounds concurrent Argon2id work (64 MiB each). */
  readonly hashing: HashGate;
  readonly now: () => number;
  /** Base URL written into invite and approval links. */
  readonly publicUrl: string;
  /** The transparent proxy's address as agents should use it, e.g. http://127.0.0.1:14322. */
  readonly proxyUrl: string;
  /** Argon2id parameters for new user passwords (tests pass cheap ones); production uses KDF_DEFAULTS. */
  readonly passwordKdf?: KdfParams;
  /** Short-lived cache of vault look-ups for the hot path (absent in tests that want every read). */
  readonly vaultAccess?: VaultAccessCache;
  /** Failed sign-ins per account and client address; always present, whatever the rate-limit profile. */
  readonly loginThrottle: LoginThrottle;
  /** Tiered rate limits (absent: unlimited, as in most unit tests). */
  readonly rateLimiter?: RateLimiter;
  /** Identity-provider sign-in; absent when BROKER_OIDC_ISSUER is unset (the feature is off). */
  readonly oidc?: OidcClient;
  /** Called after any write that changes what the proxy hot path caches for a vault. */
  readonly onVaultChange?: (vaultId: number) => void;
  /** Proposal notifications to the vault's webhooks (absent: none are sent, as in most unit tests). */
  readonly webhooks?: WebhookNotifier;
  /**
   * Why the network guard would refuse to dial `ip` on `port`, or undefined when it would dial it: an
   * IP literal is a host a proposal may name only where the guard would reach it (absent: none may).
   */
  readonly guardRefuses?: (ip: string, port: number) => string | undefined;
  /**
   * BROKER_SECRET_STORE_TOKEN_FILES: the platform token files a secret store connection may sign in with
   * (absent or empty: no JWT or Kubernetes sign-in; the broker never reads a file a person names).
   */
  readonly secretStoreTokenFiles?: readonly string[];
  /**
   * The audit signing key this instance loaded and checked at start (its public half): the broker's own
   * verification trusts it, never a key row that appeared in the database since (absent: as stored, in tests).
   */
  readonly auditKey?: { readonly keyId: string; readonly publicKeyPem: string };
  /**
   * The audit checkpoints as this instance makes them: their interval (the export publishes it, so a verifier can
   * tell records no checkpoint signs although they should be), and the last one it made for a vault, remembered
   * in memory for the broker's own verification (absent in tests: neither is checked).
   */
  readonly auditCheckpoints?: {
    readonly everyMs: number;
    lastMade(vaultId: number): AuditCheckpointRow | undefined;
    /** The highest seq of the vault every record up to which must be signed by now (app/audit-head-history.ts). */
    signedThrough(vaultId: number): number | undefined;
  };
  /** The LLM price table in use (issue 38): budgets' money is counted in its currency (absent: the shipped one, USD). */
  readonly prices?: PriceBook;
  /** Trusted workload issuers' key sets (issue 39; absent: POST /v1/sessions/exchange refuses every token). */
  readonly workloadKeys?: WorkloadKeys;
  /** The external secret stores' live side (absent: references are stored but never read, as in most unit tests). */
  readonly secretStores?: SecretStoreRuntime;
}

/** How a reference's last read went: never its value. */
export interface ReferenceStatus {
  /** When the store last answered with the value (epoch ms). */
  readonly lastRefresh?: number;
  /** The version it answered with. */
  readonly version?: string;
  /** The last failure in words; absent after a good read. */
  readonly lastError?: string;
}

/** What the domain asks of the secret stores' runtime (app/secret-store-registry.ts). */
export interface SecretStoreRuntime {
  /** How a vault's reference last read went. */
  status(vaultId: number, reference: SecretReference): ReferenceStatus;
  /** Reads the reference through its connection now; resolves when the read is done, whatever its outcome. */
  readNow(vaultId: number, reference: SecretReference): Promise<void>;
  /** A connection was created, changed, shared, unshared or removed: what is held for it is dropped. */
  connectionChanged(): void;
}
