// The secret stores' live side (issue 36, architecture.md D24): the connections as stored, each with its
// client (built on first use from its settings and its opened secrets, with an upstream pool of its own
// so its CA and the network guard's verdict belong to it alone), and the one resolver that keeps every
// reference's value in memory. It answers the egress side (a vault's reference → its value, never for a
// vault the connection is not shared with) and the domain (status, read now, a connection changed).
// Connections are re-read when one changes here or another instance announces a change, and every value
// read through a changed connection is dropped, so the next request reads it afresh through the new settings.

import { rootCertificates } from "node:tls";
import { CredentialUnavailable } from "../errors.ts";
import { Secret } from "../secret.ts";
import type { Logger } from "../log.ts";
import { openStoreSecrets } from "../crypto/index.ts";
import { formatReference, pathAllowed } from "../policy/index.ts";
import type { CredentialReference, Freshness, SecretStoreConnectionRow, SecretStoreSettings, Store } from "../store/index.ts";
import { createUpstream, type NetPolicy, type ReferenceValues, type Resolver, type Upstream } from "../egress/index.ts";
import type { ReferenceStatus, SecretStoreRuntime } from "../identity/index.ts";
import {
  createAwsSecretsClient,
  createAzureKeyVaultClient,
  createGoogleSecretsClient,
  createReferenceResolver,
  createVaultKvClient,
  SecretStoreError,
  type SecretStoreClient,
  type StoreHttpDeps,
} from "../secret-stores/index.ts";

/** How often the resolver's sweep runs: values are read again within a second of falling due. */
const SWEEP_MS = 1_000;
/** A person's "read it now" (a check, a reference saved) reads a value at most this often. */
const READ_NOW_EVERY_MS = 5_000;
/** A reference an upstream refused is read again at most this often, however many 401s follow. */
const REFUSED_EVERY_MS = 10_000;

export interface RegistryDeps {
  readonly store: Store;
  readonly dataKey: CryptoKey;
  readonly freshness: Freshness;
  readonly now: () => number;
  readonly log: Logger;
  /** The network guard and DNS, as every upstream dial uses them (read at dial time). */
  readonly policy: () => NetPolicy;
  readonly resolver: () => Resolver;
  /** The roots upstream TLS trusts (undefined: the runtime's defaults); a connection's own CA is added to them. */
  readonly roots: string[] | undefined;
  readonly upstreamTimeoutMs: number;
  /** BROKER_SECRET_STORE_TOKEN_FILES: a connection's JWT or Kubernetes sign-in reads only these (checked again at use). */
  readonly tokenFiles: readonly string[];
  /** A vault's plans were built on a value that changed, stopped or ran out. */
  readonly invalidateVault: (vaultId: number) => void;
  /** SECRET: values read and what was sent to read them: echo needles and the logger's scrub. */
  readonly noteSent: (values: readonly Secret[]) => void;
  readonly onRead?: (connection: string, outcome: "ok" | "failed") => void;
}

export interface SecretStoreRegistry extends ReferenceValues, SecretStoreRuntime {
  /** Another instance announced a change to connections or shares. */
  announced(): void;
  /** SECRET: every value held, for the logger's scrub. */
  readonly secrets: { values(): Iterable<string> };
  stop(): void;
}

interface Loaded {
  readonly at: number;
  readonly rows: Map<string, SecretStoreConnectionRow>;
  /** connection id → the vaults it is shared with, and the path prefixes each may read (null: any) */
  readonly shares: Map<number, Map<number, readonly string[] | null>>;
}

interface Built {
  readonly row: SecretStoreConnectionRow;
  /** SECRET: the connection's opened auth secrets (the logger's scrub), once opened. */
  opened: readonly Secret[];
  readonly client: Promise<SecretStoreClient>;
  readonly upstream: Upstream;
}

export function createSecretStoreRegistry(deps: RegistryDeps): SecretStoreRegistry {
  let loaded: Loaded | undefined;
  /** Set when connections changed: the next load reads them again, and compares with `loaded` to drop what changed. */
  let stale = true;
  let loading: Promise<Loaded> | undefined;
  const built = new Map<string, Built>();
  /** Resolved clients by connection, for the resolver's synchronous look-up. */
  const clients = new Map<string, SecretStoreClient>();
  /** Which vaults used each reference (by its resolver key): they are told when its value changes. */
  const users = new Map<string, Set<number>>();
  const refusedAt = new Map<string, number>();
  const keyOf = (r: CredentialReference) => JSON.stringify([r.connection, r.path, r.field ?? null, r.version ?? null]);

  const resolver = createReferenceResolver(
    (connection) => {
      const c = clients.get(connection);
      if (!c) throw new SecretStoreError(`the connection ${connection} was removed or changed`, "unreachable");
      return c;
    },
    {
      now: deps.now,
      sweepMs: SWEEP_MS,
      timing: (connection) => {
        const row = loaded?.rows.get(connection);
        return row ? { refreshMs: row.refreshSeconds * 1000, graceMs: row.graceSeconds * 1000 } : { refreshMs: 300_000, graceMs: 0 };
      },
      onChange: (ref) => {
        for (const vaultId of users.get(keyOf(ref)) ?? []) deps.invalidateVault(vaultId);
      },
      onValues: (values) => deps.noteSent(values),
      ...(deps.onRead && { onRead: deps.onRead }),
    },
  );
  const sweeper = setInterval(() => resolver.sweep(), SWEEP_MS);
  sweeper.unref?.();

  async function load(): Promise<Loaded> {
    const trusted = loaded && !stale && deps.now() - loaded.at < deps.freshness.trustMs(Infinity);
    if (trusted) return loaded!;
    loading ??= (async () => {
      try {
        stale = false; // a change announced while this read runs marks it stale again, and the next load reads again
        const rows = new Map((await deps.store.secretStores.list()).map((r) => [r.name, r]));
        const shares = new Map<number, Map<number, readonly string[] | null>>();
        for (const s of await deps.store.secretStores.shares()) {
          let set = shares.get(s.connectionId);
          if (!set) shares.set(s.connectionId, (set = new Map()));
          set.set(s.vaultId, s.pathPrefixes);
        }
        const previous = loaded;
        loaded = { at: deps.now(), rows, shares };
        // A connection changed, removed or re-shared: its client and every value read through it go.
        for (const [name, b] of built) {
          const row = rows.get(name);
          if (row && sameConnection(row, b.row) && sameShares(previous, loaded, row.id)) continue;
          drop(name);
        }
        return loaded;
      } finally {
        loading = undefined;
      }
    })();
    return loading;
  }

  function drop(name: string): void {
    const b = built.get(name);
    built.delete(name);
    clients.delete(name);
    b?.upstream.close();
    resolver.forget(name);
  }

  /** The connection's client, built once from its row (its secrets opened only here). */
  function clientOf(row: SecretStoreConnectionRow): Promise<SecretStoreClient> {
    const have = built.get(row.name);
    if (have && sameConnection(have.row, row)) return have.client;
    if (have) drop(row.name);
    const settings = JSON.parse(row.settings) as SecretStoreSettings;
    const tokenFile = (settings.auth as { token_file?: string }).token_file;
    // The domain checked it when the connection was saved; the operator may have narrowed the list since.
    if (tokenFile !== undefined && (row.vaultId !== null || !deps.tokenFiles.includes(tokenFile)))
      return Promise.reject(new Error("the connection's token file is not in BROKER_SECRET_STORE_TOKEN_FILES"));
    const upstream = createUpstream({
      ...(rootsFor(deps.roots, settings) && { ca: rootsFor(deps.roots, settings) }),
      connectTimeoutMs: Math.min(10_000, deps.upstreamTimeoutMs),
      idleTimeoutSeconds: Math.ceil(Math.min(30_000, deps.upstreamTimeoutMs) / 1000),
      maxIdlePerOrigin: 2,
    });
    const http: StoreHttpDeps = {
      upstream,
      get policy() {
        return deps.policy();
      },
      get resolver() {
        return deps.resolver();
      },
    };
    const client = openStoreSecrets(deps.dataKey, row.name, row.kind, { nonce: row.secretsNonce, ciphertext: row.secretsCiphertext }).then((secrets) => {
      const c = clientFor(http, settings, secrets);
      const mine = built.get(row.name);
      if (mine?.client === client) {
        clients.set(row.name, c);
        // The store's own credentials are credentials too: echo needles and scrubbed from every log line.
        mine.opened = secretParts(secrets);
        deps.noteSent(mine.opened);
      }
      return c;
    });
    built.set(row.name, { row, client, upstream, opened: [] });
    return client;
  }

  /** The connection a vault's reference reads through, ready; or why the vault may not use it (502). */
  async function ready(vaultId: number, ref: CredentialReference): Promise<void> {
    const l = await load();
    const row = l.rows.get(ref.connection);
    if (!row || !usableBy(l, row, vaultId, ref.path))
      throw new CredentialUnavailable(formatReference(ref), `this vault may not read ${ref.path} through a secret store connection named ${ref.connection}`);
    let set = users.get(keyOf(ref));
    if (!set) users.set(keyOf(ref), (set = new Set()));
    set.add(vaultId);
    try {
      await clientOf(row);
    } catch {
      throw new CredentialUnavailable(formatReference(ref), `the connection ${ref.connection}'s sealed settings cannot be opened`);
    }
  }

  /**
   * Connections changed: read them again, keeping what is held for those that did not change (the last
   * snapshot stays until the new one lands, so an unrelated change costs no value its grace). A change
   * that arrives while a read runs is read again after it.
   */
  function reloadSoon(onError: (err: unknown) => void): void {
    stale = true;
    const again = (): Promise<unknown> => (loading ? loading.then(() => (stale ? load() : undefined)) : load());
    void again().catch(onError);
  }

  async function resolve(vaultId: number, ref: CredentialReference): Promise<Secret> {
    await ready(vaultId, ref);
    return resolver.resolve(ref);
  }

  return {
    resolve,
    held(vaultId, ref) {
      const l = loaded;
      if (!l || stale) void load().catch(() => {});
      if (!l) return undefined;
      const row = l.rows.get(ref.connection);
      if (!row || !usableBy(l, row, vaultId, ref.path)) return undefined;
      const value = resolver.peek(ref);
      // None yet: a read starts, and its value joins the needles through noteSent when it lands.
      if (!value && resolver.state(ref).lastRefresh === undefined) void resolve(vaultId, ref).catch(() => {});
      return value;
    },
    refused(vaultId, refs) {
      const at = deps.now();
      for (const ref of refs) {
        const key = keyOf(ref);
        if (at - (refusedAt.get(key) ?? -Infinity) < REFUSED_EVERY_MS) continue;
        refusedAt.set(key, at);
        void ready(vaultId, ref)
          .then(() => resolver.refreshNow(ref))
          .catch(() => {});
      }
    },
    status(vaultId, ref): ReferenceStatus {
      // A vault that may no longer read the path (a share narrowed or withdrawn) learns nothing of others' reads.
      const l = loaded;
      const row = l?.rows.get(ref.connection);
      if (l && (!row || !usableBy(l, row, vaultId, ref.path))) return { lastError: `this vault may not read ${ref.path} through ${ref.connection}` };
      const s = resolver.state(ref);
      return {
        ...(s.lastRefresh !== undefined && { lastRefresh: s.lastRefresh }),
        ...(s.version !== undefined && { version: s.version }),
        ...(s.lastError !== undefined && { lastError: s.lastError }),
      };
    },
    async readNow(vaultId, ref) {
      try {
        await ready(vaultId, ref);
        // Asked again and again (a check, a form saved twice): a value read moments ago is not read again.
        const last = resolver.state(ref).lastRefresh;
        if (last !== undefined && deps.now() - last < READ_NOW_EVERY_MS) return;
        await resolver.refreshNow(ref);
      } catch (err) {
        deps.log.debug("secret_store_read_refused", { reference: formatReference(ref), err });
      }
    },
    connectionChanged() {
      reloadSoon((err) => deps.log.warn("secret_store_reload_failed", { err }));
    },
    announced() {
      reloadSoon(() => {});
    },
    secrets: {
      *values() {
        for (const v of resolver.values()) yield v.reveal(); // reveal: the logger's scrub patterns only
        for (const c of clients.values()) for (const v of c.sentValues()) yield v.reveal();
        for (const b of built.values()) for (const v of b.opened) yield v.reveal();
      },
    },
    stop() {
      clearInterval(sweeper);
      for (const name of [...built.keys()]) drop(name);
    },
  };
}

/** The same connection as stored: compared by what it says, not by when it was written (two writes can share a millisecond). */
function sameConnection(a: SecretStoreConnectionRow, b: SecretStoreConnectionRow): boolean {
  return (
    a.id === b.id &&
    a.settings === b.settings &&
    a.refreshSeconds === b.refreshSeconds &&
    a.graceSeconds === b.graceSeconds &&
    Buffer.from(a.secretsCiphertext).equals(Buffer.from(b.secretsCiphertext))
  );
}

function sameShares(a: Loaded | undefined, b: Loaded, id: number): boolean {
  const x = a?.shares.get(id) ?? new Map<number, readonly string[] | null>();
  const y = b.shares.get(id) ?? new Map<number, readonly string[] | null>();
  return x.size === y.size && [...x].every(([vault, prefixes]) => y.has(vault) && JSON.stringify(y.get(vault)) === JSON.stringify(prefixes));
}

/** A vault may read `path` through the connection: its own, or an owner's shared with it (within the share's paths). */
function usableBy(l: Loaded, row: SecretStoreConnectionRow, vaultId: number, path: string): boolean {
  if (row.vaultId !== null) return row.vaultId === vaultId;
  const share = l.shares.get(row.id);
  return share !== undefined && share.has(vaultId) && pathAllowed(share.get(vaultId)!, path);
}

/** The roots for a connection: the broker's, plus the connection's own CA where it has one. */
function rootsFor(roots: string[] | undefined, settings: SecretStoreSettings): string[] | undefined {
  if (settings.kind !== "vault" || !settings.ca_pem) return roots;
  const own = settings.ca_pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return [...(roots ?? rootCertificates), ...own];
}

/** The kind's client from its stored settings and opened secrets. */
function clientFor(http: StoreHttpDeps, s: SecretStoreSettings, secrets: Record<string, Secret>): SecretStoreClient {
  const secret = (name: string) => secrets[name] ?? new Secret("");
  switch (s.kind) {
    case "vault": {
      const a = s.auth;
      const auth =
        a.method === "token"
          ? { kind: "token" as const, token: secret("token") }
          : a.method === "approle"
            ? { kind: "approle" as const, roleId: secret("role_id"), secretId: secret("secret_id"), ...(a.mount && { mount: a.mount }) }
            : { kind: "jwt" as const, role: a.role, tokenFile: a.token_file, mount: a.mount ?? a.method };
      return createVaultKvClient(http, { address: s.address, ...(s.namespace && { namespace: s.namespace }), ...(s.mount && { mount: s.mount }), auth });
    }
    case "aws":
      return createAwsSecretsClient(http, {
        region: s.region,
        ...(s.endpoint && { endpoint: s.endpoint }),
        ...(s.sts_endpoint && { stsEndpoint: s.sts_endpoint }),
        auth:
          s.auth.method === "keys"
            ? {
                kind: "keys",
                accessKeyId: secret("access_key_id"),
                secretAccessKey: secret("secret_access_key"),
                ...(secrets.session_token && { sessionToken: secrets.session_token }),
              }
            : { kind: "environment" },
      });
    case "google":
      return createGoogleSecretsClient(http, { project: s.project, serviceAccountKey: secret("key"), ...(s.endpoint && { endpoint: s.endpoint }) });
    case "azure":
      return createAzureKeyVaultClient(http, {
        vaultUrl: s.vault_url,
        tenant: s.auth.tenant,
        clientId: s.auth.client_id,
        clientSecret: secret("client_secret"),
        ...(s.authority && { authority: s.authority }),
      });
  }
}

/** SECRET: each auth secret, and the private key inside a service-account key file (an echo may carry it alone). */
function secretParts(secrets: Record<string, Secret>): Secret[] {
  const out = Object.values(secrets);
  const key = secrets.key;
  if (key) {
    try {
      const parsed = JSON.parse(key.reveal()) as { private_key?: unknown }; // reveal: its private key becomes a needle too
      if (typeof parsed.private_key === "string") out.push(new Secret(parsed.private_key));
    } catch {}
  }
  return out;
}
