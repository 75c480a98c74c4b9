// Turns (vault, host, port) into an egress plan: the matching enabled service and the header to
// inject (or, for 'query' and 'path' auth, where the value goes in the URL). Per vault, the compiled
// service table and decrypted credentials (as Secrets) live in memory and are dropped on every
// write to that vault, so the hot path does not touch the store and a credential changed by a
// human is used on the very next request (architecture.md D11). Per host, the needles a response is
// scanned for are every vault's values for that host, not only the plan's (echo-needles.ts, architecture.md D22).

import { CredentialNotFound, DatabaseUnavailable, HostNotAllowed, ServiceDisabled } from "../errors.ts";
import { Secret } from "../secret.ts";
import type { MintedAuthType, ServiceRow, Store } from "../store/index.ts";
import { decryptCredential } from "../crypto/index.ts";
import { hostMatches, isMintedAuthType, mintedAuthKeyFields, parseHostPattern, type HostPattern, type MintedAuthFields, type Rules } from "../policy/index.ts";
import { storedRules, viewService, type ServiceAuth } from "../workflows/index.ts";
import type { LiveSecrets } from "../log.ts";
import type { Injection } from "./headers.ts";
import { createEchoNeedles, MIN_SHARED, type EchoNeedlesOptions } from "./echo-needles.ts";
import { loadStoredValues } from "./stored-values.ts";
import { createShortValues } from "./short-values.ts";
import { Needles, NO_NEEDLES } from "./redact.ts";
import { isMultiLine, staticSend } from "./service-values.ts";
import type { UrlPlacement } from "./url-credential.ts";
import { ALWAYS_FRESH, type Freshness } from "../store/index.ts";

export interface EgressPlan {
  readonly service: { readonly host: string; readonly authType: ServiceRow["authType"] };
  /** The service's allowed methods and paths; absent: everything (see rules.ts for the check). */
  readonly rules?: Rules;
  /** How the service injects (names only), for a proposal hint that keeps it while widening the rules. */
  readonly auth: ServiceAuth;
  readonly injection: Injection | undefined;
  /** SECRET: for 'query' and 'path' auth, the value's place in the URL (applied after the rules check). */
  readonly placement?: UrlPlacement;
  /** Key names involved (for audit); never values. */
  readonly credentialKeys: readonly string[];
  /** SECRET: the values to replace in responses (no reveal by echo), compiled once per service. */
  readonly needles: Needles;
  /** For the minted types: what the minter or signer needs (minted.ts, sigv4.ts). */
  readonly minted?: MintedPlan;
}

/** A service whose credential the broker makes or signs (policy/minted-auth.ts). */
export interface MintedPlan {
  readonly type: MintedAuthType;
  readonly fields: MintedAuthFields;
  /** SECRET: the decrypted inputs by field name (client_secret, refresh_token, private_key…). */
  readonly inputs: ReadonlyMap<string, Secret>;
  /**
   * Identifies the service's settings and inputs (a SHA-256, never a value), apart from a refresh
   * token, which the provider may rotate: any other change starts the minted credential afresh.
   */
  readonly fingerprint: string;
}

interface CompiledService {
  readonly row: ServiceRow;
  readonly pattern: HostPattern;
  /** Built on first use; dropped with the vault's table on any write. */
  planned?: EgressPlan;
}

interface VaultTable {
  readonly exact: Map<string, CompiledService>;
  readonly wildcard: Map<string, CompiledService>;
  readonly credentials: Map<string, Promise<Secret | undefined>>;
}

export interface PlanCache {
  plan(vault: { id: number; name: string }, host: string, port: number): Promise<EgressPlan>;
  /** Forget everything cached for a vault (call after any write to it). */
  invalidate(vaultId: number): void;
  /** Forget every vault's table (announcements from other instances may have been missed). */
  clear(): void;
  /** Whether a host has a service in the vault (for the tunnel's unmatched-host decision). */
  has(vault: { id: number }, host: string, port: number): Promise<boolean>;
  /**
   * SECRET: the needles every answer is scanned for (architecture.md D22): what every vault's services
   * send or could send, anywhere, and what was sent lately (rotated values, minted tokens); `plan`,
   * and `grant` when minted, are what this request sent.
   */
  responseNeedles(plan: EgressPlan, grant?: { readonly token: { readonly value: Secret }; readonly sent?: readonly Secret[] }): Promise<Needles>;
  /** SECRET: values sent outside an answer (a token request's JWT or client authentication): echo needles from now on. */
  noteSent(values: readonly Secret[]): void;
  /** The values currently cached (every vault's echo needles too), for the logger's last-line scrub (defence in depth). */
  readonly secrets: LiveSecrets;
  /** The proposal_hint skeleton for a host (endpoint, auth types, a proposal to edit). */
  hintFor(host: string, port: number): Record<string, unknown>;
}

export interface PlanCacheOptions {
  readonly now?: () => number;
  /** Several instances: a table is trusted only as long as announcements of changes arrive (store/changes.ts). */
  readonly freshness?: Freshness;
  /** While the database is unreachable, a table loaded less than this long ago keeps serving. */
  readonly outageGraceMs?: number;
  /** Bounds of the per-host memory of values sent (tests); echo-needles.ts has the defaults. */
  readonly recentLimits?: EchoNeedlesOptions["limits"];
  /**
   * The operator's app credentials for a connected account's service (workflows/connect-plan.ts
   * operatorClient), or undefined: its client id and secret come from here, never from a vault.
   */
  readonly operatorClient?: (auth: ServiceAuth) => OperatorClientValues | undefined;
}

/** SECRET: an instance-wide OAuth app's client id and secret, and how it authenticates at its token endpoint. */
export interface OperatorClientValues {
  readonly clientId: Secret;
  readonly clientSecret: Secret;
  readonly clientAuth: "basic" | "post";
}

interface LoadedTable {
  readonly table: Promise<VaultTable>;
  /** When the store last confirmed it (or was last asked, during an outage). */
  readonly checkedAt: number;
  /**
   * When it was last known current: read from the store, or served while announcements vouched for
   * it. The outage grace counts from here, not from the read: a table trusted for hours is as good
   * as a fresh one up to the moment announcements stop.
   */
  confirmedAt: number;
}

const NONE: readonly string[] = [];

export function createPlanCache(
  store: Store,
  dataKey: CryptoKey,
  proposalHint: (host: string, port: number) => Record<string, unknown>,
  opts: PlanCacheOptions = {},
): PlanCache {
  const now = opts.now ?? Date.now;
  const freshness = opts.freshness ?? ALWAYS_FRESH;
  const grace = opts.outageGraceMs ?? 0;
  const tables = new Map<number, LoadedTable>();
  // SECRET: per vault, every value handed out for scrubbing (raw and header forms); dropped with the vault's table.
  const live = new Map<number, Set<string>>();
  // SECRET: each plan's values (what it sends), noted into its host's needle set on first use there.
  const planValues = new WeakMap<EgressPlan, readonly string[]>();
  // SECRET: values shorter than MIN_SHARED, per vault and service (short-values.ts); each plan's key there.
  const shortValues = createShortValues(now);
  const serviceKey = new WeakMap<EgressPlan, string>();
  const shortOf = new WeakMap<EgressPlan, readonly string[]>();
  const echoes = createEchoNeedles({
    load: (known) => loadStoredValues(store, dataKey, known),
    now,
    trustMs: () => freshness.trustMs(Infinity),
    ...(opts.recentLimits && { limits: opts.recentLimits }),
  });

  function table(vaultId: number): Promise<VaultTable> {
    const held = tables.get(vaultId);
    const at = now();
    // Trusted until a write drops it, unless announcements from other instances may be missed.
    if (held && at - held.checkedAt < freshness.trustMs(Infinity)) {
      // Only announcements vouch for it: a hit within a second of a failed re-check must not extend the grace.
      if (freshness.listening) held.confirmedAt = at;
      return held.table;
    }
    // During a database outage the last table keeps serving within the grace period; the store is
    // asked again once per re-validation interval.
    const fallback = held && at - held.confirmedAt < grace ? held : undefined;
    const loading = compile(store, vaultId).catch((err) => {
      if (!(fallback && err instanceof DatabaseUnavailable)) {
        if (tables.get(vaultId) === entry) tables.delete(vaultId);
        throw err;
      }
      if (tables.get(vaultId) === entry) tables.set(vaultId, { ...fallback, checkedAt: at });
      return fallback.table;
    });
    const entry: LoadedTable = { table: loading, checkedAt: at, confirmedAt: at };
    tables.set(vaultId, entry);
    return loading;
  }

  async function find(vaultId: number, host: string, port: number): Promise<CompiledService | undefined> {
    const t = await table(vaultId);
    const exact = t.exact.get(`${host}:${port}`);
    if (exact) return exact;
    const dot = host.indexOf(".");
    const wild = dot > 0 ? t.wildcard.get(`${host.slice(dot + 1)}:${port}`) : undefined;
    return wild && hostMatches(wild.pattern, host, port) ? wild : undefined;
  }

  async function credential(vaultId: number, key: string): Promise<Secret | undefined> {
    const t = await table(vaultId);
    let c = t.credentials.get(key);
    if (!c) {
      c = (async () => {
        const row = await store.credentials.get(vaultId, key);
        return row ? decryptCredential(dataKey, row) : undefined;
      })();
      t.credentials.set(key, c);
      c.catch(() => t.credentials.delete(key));
    }
    return c;
  }

  /** A credential the service names: missing or undecryptable is the same 502, naming the key. */
  async function requiredCredential(vaultId: number, key: string): Promise<Secret> {
    let secret: Secret | undefined;
    try {
      secret = await credential(vaultId, key);
    } catch {
      throw new CredentialNotFound(key, "cannot be decrypted");
    }
    if (!secret) throw new CredentialNotFound(key);
    return secret;
  }

  async function buildPlan(vaultId: number, row: ServiceRow): Promise<EgressPlan> {
    const service = { host: row.host, authType: row.authType };
    const rules = storedRules(row);
    const ruled = { auth: viewService(row).auth, ...(rules && { rules }) };
    if (isMintedAuthType(row.authType)) return mintedPlan(vaultId, row, service, ruled);
    if (row.authType === "passthrough" || !row.authKey) return { service, ...ruled, injection: undefined, credentialKeys: [], needles: NO_NEEDLES };
    const key = row.authKey;
    const secret = await requiredCredential(vaultId, key);
    // Only a PEM key may span lines (workflows/credential-ops.ts), and it has no place in a header or URL.
    if (isMultiLine(secret)) throw new CredentialNotFound(key, "is a multi-line value (a PEM key), which cannot be sent in a header or URL");
    // The value's sent forms are the search patterns; the logger's last-line scrub gets the same values.
    const { injection, placement, values } = staticSend(row, secret);
    return held(vaultId, values, { service, ...ruled, injection, ...(placement && { placement }), credentialKeys: [key], needles: new Needles(values) });
  }

  /** Keeps a plan's values for the logger's scrub and its host's needle set. */
  function held(vaultId: number, values: readonly string[], plan: EgressPlan): EgressPlan {
    let set = live.get(vaultId);
    if (!set) live.set(vaultId, (set = new Set()));
    for (const v of values) set.add(v);
    planValues.set(plan, values);
    serviceKey.set(plan, `${vaultId}\0${plan.service.host}`);
    shortOf.set(
      plan,
      values.filter((v) => v.length < MIN_SHARED),
    );
    return plan;
  }

  /**
   * Decrypts every input a minted type names; no injection here, the minter or signer adds it per request.
   * A connected account's client id and secret are the operator's app's (opts.operatorClient), not the vault's.
   */
  async function mintedPlan(vaultId: number, row: ServiceRow, service: EgressPlan["service"], ruled: Pick<EgressPlan, "auth" | "rules">): Promise<EgressPlan> {
    const type = row.authType as MintedAuthType;
    const client = opts.operatorClient?.(ruled.auth);
    const fields: MintedAuthFields = client ? { ...ruled.auth, client_auth: client.clientAuth } : ruled.auth;
    const inputs = new Map<string, Secret>();
    const keys: string[] = [];
    for (const [field, key] of mintedAuthKeyFields(type, fields)) {
      const operators = field === "client_id" ? client?.clientId : field === "client_secret" ? client?.clientSecret : undefined;
      if (operators) {
        inputs.set(field, operators);
        continue;
      }
      inputs.set(field, await requiredCredential(vaultId, key));
      keys.push(key);
    }
    // reveal: search patterns and a one-way fingerprint only
    const values = [...inputs.values()].map((v) => v.reveal());
    const fingerprinted = [...inputs].filter(([field]) => field !== "refresh_token").map(([field, v]) => [field, v.reveal()]);
    const fingerprint = new Bun.CryptoHasher("sha256").update(JSON.stringify([vaultId, row.host, type, fields, fingerprinted])).digest("hex");
    return held(vaultId, values, {
      service,
      ...ruled,
      injection: undefined,
      credentialKeys: keys,
      needles: new Needles(values),
      minted: { type, fields, inputs, fingerprint },
    });
  }

  return {
    async plan(vault, host, port) {
      const svc = await find(vault.id, host, port);
      if (!svc) throw new HostNotAllowed(port === 443 ? host : `${host}:${port}`, vault.name, proposalHint(host, port));
      if (!svc.row.enabled) throw new ServiceDisabled(svc.row.host);
      return (svc.planned ??= await buildPlan(vault.id, svc.row));
    },
    responseNeedles(plan, grant) {
      const sent = { key: plan, values: () => planValues.get(plan) ?? [] };
      // reveal: search patterns only. The minted token joins the recent values when granted, and so
      // does what was sent to obtain it (minted.ts Grant.sent: an app JWT, a refresh token, the client authentication).
      const granted = grant ? [grant.token.value, ...(grant.sent ?? [])].map((s) => s.reveal()) : NONE;
      const shared = echoes.forResponse(grant ? [sent, { key: grant, values: () => granted }] : [sent]);
      // Values too short to be shared (echo-needles.ts MIN_SHARED) join this service's own answers' set.
      const short = [...(shortOf.get(plan) ?? NONE), ...granted.filter((v) => v.length < MIN_SHARED)];
      const own = shortValues.forAnswer(serviceKey.get(plan) ?? "", short);
      return shared.then((n) => n.with(own));
    },
    noteSent(values) {
      echoes.noteSent(values.map((v) => v.reveal())); // reveal: search patterns only
    },
    invalidate(vaultId) {
      tables.delete(vaultId);
      live.delete(vaultId);
      echoes.invalidate(vaultId);
    },
    clear() {
      tables.clear();
      live.clear();
      echoes.clear();
    },
    hintFor: proposalHint,
    secrets: {
      *values() {
        for (const set of live.values()) yield* set;
        yield* echoes.values();
      },
    },
    async has(vault, host, port) {
      return (await find(vault.id, host, port)) !== undefined;
    },
  };
}

async function compile(store: Store, vaultId: number): Promise<VaultTable> {
  const exact = new Map<string, CompiledService>();
  const wildcard = new Map<string, CompiledService>();
  for (const row of await store.services.list(vaultId)) {
    // A row stored before a host rule tightened (e.g. `*.github.io`, a public-suffix wildcard) matches
    // nothing: its hosts are refused like any host without a service, and the rest of the vault works.
    let pattern: HostPattern;
    try {
      pattern = parseHostPattern(row.host, { allowIp: true });
    } catch {
      continue;
    }
    (pattern.wildcard ? wildcard : exact).set(`${pattern.name}:${pattern.port}`, { row, pattern });
  }
  return { exact, wildcard, credentials: new Map() };
}
