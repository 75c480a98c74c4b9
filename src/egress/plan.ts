// Turns (vault, host, port) into an egress plan: the matching enabled service and the header to
// inject (or, for 'query' and 'path' auth, where the value goes in the URL). Per vault and host, the
// service and its plan, and per vault and key the decrypted credential (as a Secret), live in memory
// and are dropped on every write to that vault (plan-lookup.ts), so the hot path does not touch the
// store, a credential changed by a human is used on the very next request, and no request waits for
// a whole vault to be read (architecture.md D11). The needles a response is scanned for are every
// vault's values, not only the plan's (echo-needles.ts, architecture.md D22).

import { CredentialNotFound, CredentialUnavailable, DatabaseUnavailable, HostNotAllowed, ServiceDisabled } from "../errors.ts";
import { Secret } from "../secret.ts";
import type { CredentialReference, MintedAuthType, PolicyMode, ServiceRow, Store } from "../store/index.ts";
import { formatReference, isMintedAuthType, mintedAuthKeyFields, type MintedAuthFields, type Rules } from "../policy/index.ts";
import type { ReferenceValues } from "./reference-values.ts";
import { storedRules, viewService, type ServiceAuth } from "../workflows/index.ts";
import type { LiveSecrets } from "../log.ts";
import type { Injection } from "./headers.ts";
import { createEchoNeedles, MIN_SHARED, type EchoNeedlesOptions } from "./echo-needles.ts";
import { createPlanLookup, type MatchedService } from "./plan-lookup.ts";
import { createStoredValues } from "./stored-values.ts";
import { createShortValues } from "./short-values.ts";
import { Needles, NO_NEEDLES } from "./redact.ts";
import { isMultiLine, staticSend } from "./service-values.ts";
import type { UrlPlacement } from "./url-credential.ts";
import { ALWAYS_FRESH, type Freshness } from "../store/index.ts";

export interface EgressPlan {
  readonly service: { readonly host: string; readonly authType: ServiceRow["authType"] };
  /** The service's allowed methods and paths; absent: everything (see rules.ts for the check). */
  readonly rules?: Rules;
  /** The service's own rules mode (report-mode.ts); absent: its vault's policy mode. */
  readonly rulesMode?: PolicyMode;
  /** How the service injects (names only), for a proposal hint that keeps it while widening the rules. */
  readonly auth: ServiceAuth;
  readonly injection: Injection | undefined;
  /** SECRET: for 'query' and 'path' auth, the value's place in the URL (applied after the rules check). */
  readonly placement?: UrlPlacement;
  /** Key names involved (for audit); never values. */
  readonly credentialKeys: readonly string[];
  /** The references among them, as a person writes them (`conn:path#field`), for audit; never values. */
  readonly credentialRefs?: readonly string[];
  /** Those references' parts: read again when the upstream refuses the request (401 or 403). */
  readonly references?: readonly CredentialReference[];
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

/** The credentials a plan was built from, in the order read. */
interface Used {
  readonly keys: string[];
  /** SECRET: the values `keys` had: the very Secret objects the look-up hands out, compared by identity. */
  readonly inputs: (Secret | undefined)[];
  /** The look-up's promises of them: while each is still the one held (and trusted), the plan stands without a wait. */
  reads: Promise<Secret | undefined>[];
  /** The references among the credentials read (for audit and 401 refreshes). */
  readonly refs: CredentialReference[];
}

/** A plan as built: kept while its credentials read as the same objects, built anew once one was read again. */
interface Planned extends Used {
  readonly plan: EgressPlan;
}

/** Stands for a credential that could not be read: never equal to a value, so the plan is built anew (and fails as it should). */
const FAILED = Symbol("unreadable");

export interface PlanCache {
  plan(vault: { id: number; name: string }, host: string, port: number): Promise<EgressPlan>;
  /**
   * Forget everything cached for a vault (call after any write to it): O(1), whatever the vault's size.
   * `announced`: another instance announced the write (answers then wait for the vault's whole re-read, D22).
   */
  invalidate(vaultId: number, announced?: boolean): void;
  /** Forget every vault's entries (announcements from other instances may have been missed). */
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
  /** An upstream refused a request sent with this plan (401 or 403): its references are read again, once. */
  refused(vaultId: number, plan: EgressPlan): void;
  /** The proposal_hint skeleton for a host (endpoint, auth types, a proposal to edit). */
  hintFor(host: string, port: number): Record<string, unknown>;
}

export interface PlanCacheOptions {
  readonly now?: () => number;
  /** Several instances: an entry is trusted only as long as announcements of changes arrive (store/changes.ts). */
  readonly freshness?: Freshness;
  /** While the database is unreachable, a host's service (and a credential) read less than this long ago keeps serving. */
  readonly outageGraceMs?: number;
  /** Bounds of the per-host memory of values sent (tests); echo-needles.ts has the defaults. */
  readonly recentLimits?: EchoNeedlesOptions["limits"];
  /**
   * The operator's app credentials for a connected account's service (workflows/connect-plan.ts
   * operatorClient), or undefined: its client id and secret come from here, never from a vault.
   */
  readonly operatorClient?: (auth: ServiceAuth) => OperatorClientValues | undefined;
  /** Credentials by reference (app/secret-store-registry.ts); absent: a reference credential cannot be read (502). */
  readonly references?: ReferenceValues;
}

/** SECRET: an instance-wide OAuth app's client id and secret, and how it authenticates at its token endpoint. */
export interface OperatorClientValues {
  readonly clientId: Secret;
  readonly clientSecret: Secret;
  readonly clientAuth: "basic" | "post";
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
  const lookup = createPlanLookup(store, dataKey, { now, freshness, graceMs: grace }, opts.references);
  /** The plan each matched service was last planned with (a new match, after a write or a re-check, plans anew). */
  const planned = new WeakMap<MatchedService, Planned>();
  // SECRET: each plan's values (what it sends), noted into its host's needle set on first use there.
  const planValues = new WeakMap<EgressPlan, readonly string[]>();
  // SECRET: values shorter than MIN_SHARED, per vault and service (short-values.ts); each plan's key there.
  const shortValues = createShortValues(now);
  const serviceKey = new WeakMap<EgressPlan, string>();
  const shortOf = new WeakMap<EgressPlan, readonly string[]>();
  const echoes = createEchoNeedles({
    stored: createStoredValues(store, dataKey, opts.references),
    now,
    trustMs: () => freshness.trustMs(Infinity),
    ...(opts.recentLimits && { limits: opts.recentLimits }),
  });
  /** A credential the service names: missing or undecryptable is the same 502, naming the key. */
  async function requiredCredential(vaultId: number, key: string, used: Used): Promise<Secret> {
    let secret: Secret | undefined;
    try {
      const read = lookup.credential(vaultId, key);
      secret = await read;
      used.keys.push(key);
      used.inputs.push(secret);
      used.reads.push(read);
    } catch (err) {
      // An outage is the store's answer, not the credential's: 503, never a 502 naming the key. A
      // reference that cannot be read says so itself (502 credential_unavailable, naming the reference).
      if (err instanceof DatabaseUnavailable || err instanceof CredentialUnavailable) throw err;
      throw new CredentialNotFound(key, "cannot be decrypted");
    }
    if (!secret) throw new CredentialNotFound(key);
    const reference = lookup.referenceOf(secret);
    if (reference) used.refs.push(reference);
    return secret;
  }

  async function buildPlan(vaultId: number, row: ServiceRow, used: Used): Promise<EgressPlan> {
    const service = { host: row.host, authType: row.authType };
    const rules = storedRules(row);
    const ruled = { auth: viewService(row).auth, ...(rules && { rules }), ...(row.rulesMode && { rulesMode: row.rulesMode }) };
    if (isMintedAuthType(row.authType)) return mintedPlan(vaultId, row, service, ruled, used);
    if (row.authType === "passthrough" || !row.authKey) return { service, ...ruled, injection: undefined, credentialKeys: [], needles: NO_NEEDLES };
    const key = row.authKey;
    const secret = await requiredCredential(vaultId, key, used);
    // Only a PEM key may span lines (workflows/credential-ops.ts), and it has no place in a header or URL.
    if (isMultiLine(secret))
      throw new CredentialNotFound(key, "holds a line break, NUL or a character above U+00FF (a PEM key?), which cannot be sent in a header or URL");
    // The value's sent forms are the search patterns; the logger's last-line scrub gets the same values.
    const { injection, placement, values } = staticSend(row, secret);
    return held(vaultId, values, { service, ...ruled, injection, ...(placement && { placement }), credentialKeys: [key], needles: new Needles(values) }, used);
  }

  /** Keeps a plan's values for the logger's scrub and its host's needle set; names the references it read. */
  function held(vaultId: number, values: readonly string[], built: EgressPlan, used: Used): EgressPlan {
    const plan = used.refs.length ? { ...built, credentialRefs: used.refs.map((r) => formatReference(r)), references: [...used.refs] } : built;
    const set = lookup.live(vaultId);
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
  async function mintedPlan(
    vaultId: number,
    row: ServiceRow,
    service: EgressPlan["service"],
    ruled: Pick<EgressPlan, "auth" | "rules" | "rulesMode">,
    used: Used,
  ): Promise<EgressPlan> {
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
      inputs.set(field, await requiredCredential(vaultId, key, used));
      keys.push(key);
    }
    // reveal: search patterns and a one-way fingerprint only
    const values = [...inputs.values()].map((v) => v.reveal());
    const fingerprinted = [...inputs].filter(([field]) => field !== "refresh_token").map(([field, v]) => [field, v.reveal()]);
    const fingerprint = new Bun.CryptoHasher("sha256").update(JSON.stringify([vaultId, row.host, type, fields, fingerprinted])).digest("hex");
    return held(
      vaultId,
      values,
      {
        service,
        ...ruled,
        injection: undefined,
        credentialKeys: keys,
        needles: new Needles(values),
        minted: { type, fields, inputs, fingerprint },
      },
      used,
    );
  }

  /** The plan last built for this match, while every credential it read still reads the same; else built anew. */
  function planFor(vaultId: number, svc: MatchedService): EgressPlan | Promise<EgressPlan> {
    // The common case, synchronous: each credential entry it read is still the one held.
    const last = planned.get(svc);
    if (last && last.keys.every((k, i) => lookup.heldCredential(vaultId, k) === last.reads[i])) return last.plan;
    return replan(vaultId, svc, last);
  }

  async function replan(vaultId: number, svc: MatchedService, last: Planned | undefined): Promise<EgressPlan> {
    if (last) {
      // Read again (a re-check, or the fallback during an outage): the same values keep the same plan.
      const reads = last.keys.map((k) => lookup.credential(vaultId, k));
      const current = await Promise.all(reads.map((r) => r.catch(() => FAILED)));
      if (current.every((v, i) => v === last.inputs[i])) {
        last.reads = reads;
        return last.plan;
      }
    }
    const used: Used = { keys: [], inputs: [], reads: [], refs: [] };
    const plan = await buildPlan(vaultId, svc.row, used);
    planned.set(svc, { plan, ...used });
    return plan;
  }

  return {
    async plan(vault, host, port) {
      const svc = await lookup.service(vault.id, host, port);
      // Never passed in report mode (report-mode.ts): with no service there is no credential to add and no host the
      // broker was told to send to, so /proxy (and a request sent to the proxy without CONNECT) would only make it an
      // open relay. The tunnel's unmatched-host policy is decided at CONNECT (connect-decision.ts).
      if (!svc) throw new HostNotAllowed(port === 443 ? host : `${host}:${port}`, vault.name, proposalHint(host, port));
      if (!svc.row.enabled) throw new ServiceDisabled(svc.row.host);
      return planFor(vault.id, svc);
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
    invalidate(vaultId, announced) {
      lookup.drop(vaultId);
      echoes.invalidate(vaultId, announced);
    },
    clear() {
      lookup.clear();
      echoes.clear();
    },
    hintFor: proposalHint,
    refused(vaultId, plan) {
      if (plan.references?.length) opts.references?.refused(vaultId, plan.references);
    },
    secrets: {
      *values() {
        yield* lookup.liveValues();
        yield* echoes.values();
      },
    },
    async has(vault, host, port) {
      return (await lookup.service(vault.id, host, port)) !== undefined;
    },
  };
}
