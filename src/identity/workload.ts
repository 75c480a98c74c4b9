// Workload identity (docs/architecture.md D27): the owner's trusted issuers and their bindings, and the exchange of a
// workload's platform token for a scoped session. Each binding has an agent (`wl-<issuer>-<binding>`) made with it
// and granted the binding's role in its vault: sessions are minted for that agent, so the audit log, rate limits and
// the Agents page name the workload's binding, and revoking the agent stops it; each session keeps the token's
// subject. Never logs, stores or echoes a platform token.

import { Conflict, InvalidGrant, InvalidRequest, NotFound, VaultManaged } from "../errors.ts";
import { ACCESS_TOKEN_TYPE, conditionsHold } from "../policy/index.ts";
import type { ClaimCondition, Repos, VaultRole, VaultRow, WorkloadBindingRow, WorkloadIssuerRow } from "../store/index.ts";
import type { Domain } from "./context.ts";
import type { Principal } from "./principal.ts";
import { mintWorkloadSession, type SessionClient } from "./sessions.ts";
import { hashToken } from "../crypto/index.ts";
import { requireOwner } from "./settings.ts";
import { iso } from "./users.ts";
import { readKeySetDocument } from "./workload-key-set.ts";
import { readTokenIssuer, verifyWorkloadToken, type VerifiedWorkload } from "./workload-token.ts";

/** The agent standing for a binding's workloads. */
export const workloadAgentName = (issuer: string, binding: string) => `wl-${issuer}-${binding}`;

/** An issuer as the owner adds it (read by the contract's WorkloadIssuerInput). */
export interface WorkloadIssuerSpec {
  readonly name: string;
  readonly issuer: string;
  readonly jwks_url?: string;
  readonly jwks?: string;
  readonly audiences: readonly string[];
  readonly clock_skew_seconds: number;
  readonly require_jti: boolean;
}

/** A binding as the owner adds it (read by the contract's WorkloadBindingInput). */
export interface WorkloadBindingSpec {
  readonly name: string;
  readonly conditions: Readonly<Record<string, ClaimCondition>>;
  readonly vault: string;
  readonly role: VaultRole;
  readonly max_session_seconds: number;
}

/** A session shorter than this is not worth minting: the token is about to expire. */
const MIN_SESSION_MS = 10_000;

function viewIssuer(i: WorkloadIssuerRow) {
  return {
    name: i.name,
    issuer: i.issuer,
    jwks_url: i.jwksUrl,
    jwks: i.jwks,
    jwks_kids: i.jwks === null ? null : documentKids(i.jwks),
    audiences: [...i.audiences],
    clock_skew_seconds: i.clockSkewSeconds,
    require_jti: i.requireJti,
    created_at: iso(i.createdAt),
  };
}

/** The key ids of a stored key set (checked when it was given, so it parses). */
function documentKids(jwks: string): string[] {
  const keys = (JSON.parse(jwks) as { keys: { kid?: unknown }[] }).keys;
  return keys.flatMap((k) => (typeof k.kid === "string" ? [k.kid] : []));
}

/** The stored form of an issuer as given: a key set document is checked and kept as its keys' public members only. */
async function issuerFields(input: WorkloadIssuerSpec) {
  const jwks = input.jwks === undefined ? null : (await readKeySetDocument(input.jwks)).document;
  return {
    issuer: input.issuer,
    jwksUrl: input.jwks_url ?? null,
    jwks,
    audiences: input.audiences,
    clockSkewSeconds: input.clock_skew_seconds,
    requireJti: input.require_jti,
  };
}

export async function addWorkloadIssuer(d: Domain, p: Principal, input: WorkloadIssuerSpec) {
  requireOwner(p);
  if (await d.store.workload.issuerByName(input.name)) throw new Conflict(`an issuer named ${input.name} exists already`);
  const row = await d.store.workload.addIssuer({ name: input.name, ...(await issuerFields(input)), createdAt: d.now() });
  return viewIssuer(row);
}

/**
 * Changes a trusted issuer in place (new keys, audiences, skew, the jti rule), keeping its bindings and their agents;
 * sessions already exchanged stay until they expire. The name in the path wins over one in the body.
 */
export async function updateWorkloadIssuer(d: Domain, p: Principal, name: string, input: WorkloadIssuerSpec) {
  requireOwner(p);
  const current = await issuerNamed(d, name);
  if (input.name !== name) throw new InvalidRequest(`the body names issuer ${input.name}, the path ${name}: an issuer cannot be renamed`);
  const row = await d.store.workload.updateIssuer(current.id, await issuerFields(input));
  if (!row) throw new NotFound(`no workload issuer named ${name}`);
  return viewIssuer(row);
}

export async function listWorkloadIssuers(d: Domain, p: Principal) {
  requireOwner(p);
  return { issuers: (await d.store.workload.issuers()).map(viewIssuer) };
}

async function issuerNamed(d: Domain, name: string): Promise<WorkloadIssuerRow> {
  const row = await d.store.workload.issuerByName(name);
  if (!row) throw new NotFound(`no workload issuer named ${name}`);
  return row;
}

/** Removes the issuer, its bindings and their agents (which ends every session they were exchanged for). */
export async function removeWorkloadIssuer(d: Domain, p: Principal, name: string): Promise<void> {
  requireOwner(p);
  const issuer = await issuerNamed(d, name);
  await d.store.transaction(async (tx) => {
    for (const b of await tx.workload.bindings(issuer.id)) if (b.agentId !== null) await tx.agents.remove(b.agentId);
    await tx.workload.removeIssuer(issuer.id);
  });
  d.auth.forget();
}

async function viewBinding(d: Domain, issuer: WorkloadIssuerRow, b: WorkloadBindingRow) {
  const vault = await d.store.vaults.byId(b.vaultId);
  const agent = b.agentId === null ? undefined : await d.store.agents.byId(b.agentId);
  return {
    name: b.name,
    issuer: issuer.name,
    conditions: Object.fromEntries(Object.entries(b.conditions).map(([k, v]) => [k, typeof v === "string" ? v : [...v]])),
    vault: vault?.name ?? "",
    role: b.role as VaultRole,
    max_session_seconds: b.maxSessionSeconds,
    agent: agent?.name ?? null,
    created_at: iso(b.createdAt),
  };
}

export async function addWorkloadBinding(d: Domain, p: Principal, issuerName: string, input: WorkloadBindingSpec) {
  requireOwner(p);
  const issuer = await issuerNamed(d, issuerName);
  const vault = await d.store.vaults.byName(input.vault);
  if (!vault) throw new NotFound(`no vault named ${input.vault}`);
  await requireBindingsUnmanaged(d, vault);
  const row = await d.store.transaction(async (tx) => {
    if ((await tx.workload.bindings(issuer.id)).some((b) => b.name === input.name)) {
      throw new Conflict(`issuer ${issuer.name} has a binding named ${input.name} already`);
    }
    return createBinding(tx, issuer, vault.id, input, p.kind === "user" ? p.userId : null, d.now());
  });
  d.onVaultChange?.(vault.id);
  return viewBinding(d, issuer, row);
}

/** A binding's fields, as a vault file or the API gives them (its vault apart). */
export type BindingFields = Pick<WorkloadBindingSpec, "name" | "conditions" | "role" | "max_session_seconds">;

/**
 * The agent standing for a binding's workloads, made and granted the binding's role in its vault, inside the caller's
 * transaction. Refused when an agent of that name exists (it would be another's, or a revoked binding's leftover).
 */
export async function createBindingAgent(
  tx: Repos,
  issuer: WorkloadIssuerRow,
  binding: string,
  vaultId: number,
  role: VaultRole,
  createdBy: number | null,
  now: number,
) {
  const agentName = workloadAgentName(issuer.name, binding);
  if (await tx.agents.byName(agentName)) throw new Conflict(`an agent named ${agentName} exists already: name the binding otherwise`);
  const agent = await tx.agents.create({ name: agentName, role: "member", createdBy, createdAt: now });
  await tx.access.setGrant(vaultId, agent.id, role, now);
  return agent;
}

/** Adds a binding and its agent inside the caller's transaction (the API's add and `broker apply` alike). */
export async function createBinding(tx: Repos, issuer: WorkloadIssuerRow, vaultId: number, input: BindingFields, createdBy: number | null, now: number) {
  const agent = await createBindingAgent(tx, issuer, input.name, vaultId, input.role, createdBy, now);
  return tx.workload.addBinding({
    issuerId: issuer.id,
    name: input.name,
    conditions: input.conditions,
    vaultId,
    role: input.role,
    maxSessionSeconds: input.max_session_seconds,
    agentId: agent.id,
    createdAt: now,
  });
}

/** A managed vault's bindings are in its file: added, changed and removed only by `broker apply`. */
async function requireBindingsUnmanaged(d: Domain, vault: VaultRow): Promise<void> {
  if ((await d.store.vaultCode.state(vault.id)).managed) throw new VaultManaged(vault.name, " (its workload bindings are in the file)");
}

export async function listWorkloadBindings(d: Domain, p: Principal, issuerName: string) {
  requireOwner(p);
  const issuer = await issuerNamed(d, issuerName);
  const rows = await d.store.workload.bindings(issuer.id);
  return { bindings: await Promise.all(rows.map((b) => viewBinding(d, issuer, b))) };
}

/** Removes the binding and its agent: every session exchanged under it ends at once. */
export async function removeWorkloadBinding(d: Domain, p: Principal, issuerName: string, name: string): Promise<void> {
  requireOwner(p);
  const issuer = await issuerNamed(d, issuerName);
  const target = (await d.store.workload.bindings(issuer.id)).find((b) => b.name === name);
  const vault = target && (await d.store.vaults.byId(target.vaultId));
  if (vault) await requireBindingsUnmanaged(d, vault);
  const removed = await d.store.transaction(async (tx) => {
    const row = await tx.workload.removeBinding(issuer.id, name);
    if (row?.agentId != null) await tx.agents.remove(row.agentId);
    return row;
  });
  if (!removed) throw new NotFound(`issuer ${issuer.name} has no binding named ${name}`);
  d.auth.forget();
  d.onVaultChange?.(removed.vaultId);
}

/** The trusted issuer whose keys verify the token, and the claims they vouch for. */
async function verifyAgainstIssuers(d: Domain, token: string): Promise<VerifiedWorkload> {
  const keys = d.workloadKeys;
  if (!keys) throw new InvalidGrant("workload identity is not enabled on this server");
  const candidates = await d.store.workload.issuersFor(readTokenIssuer(token));
  if (!candidates.length) throw new InvalidGrant("the token's issuer is not trusted here");
  let first: unknown;
  for (const issuer of candidates) {
    try {
      return await verifyWorkloadToken(token, issuer, keys, d.now());
    } catch (err) {
      first ??= err;
    }
  }
  throw first;
}

/**
 * RFC 8693 token exchange: a verified platform token, matched to the first of its issuer's bindings whose conditions
 * all hold, becomes a session for the binding's vault and role, expiring no later than the token and the binding's cap.
 * A token with a `jti` is exchanged once while it is valid. `renewing`: the caller presented its current session (the
 * platform rotated its token while a command runs): when that session is the same workload's (binding and subject),
 * its expiry moves to the new token's instead of a session being minted, and the answer names the same token.
 */
export async function exchangeWorkloadToken(
  d: Domain,
  input: { readonly subject_token: string },
  client?: SessionClient,
  renewing?: { readonly principal: Principal; readonly token: string },
) {
  const verified = await verifyAgainstIssuers(d, input.subject_token);
  const { issuer } = verified;
  const binding = (await d.store.workload.bindings(issuer.id)).find((b) => conditionsHold(verified.claims, b.conditions));
  if (!binding) throw new InvalidGrant(`no binding of issuer ${issuer.name} admits this token's claims`);
  if (binding.agentId === null) throw new InvalidGrant(`the agent of binding ${binding.name} was revoked; add the binding again to admit its workloads`);
  const now = d.now();
  const expiresAt = Math.min(verified.expiresAt, now + binding.maxSessionSeconds * 1000);
  if (expiresAt - now < MIN_SESSION_MS) throw new InvalidGrant("the token expires too soon to be exchanged");
  const role = binding.role as VaultRole;
  const agentId = binding.agentId;
  const renewed = renewing && renewalTarget(renewing.principal, agentId, binding.vaultId);
  const minted = await d.store.transaction(async (tx) => {
    // In the minting transaction: two instances exchanging one token at once cannot both succeed.
    if (verified.jti !== undefined) {
      const until = verified.expiresAt + issuer.clockSkewSeconds * 1000;
      if (!(await tx.workload.claimJti(issuer.issuer, verified.jti, until, now))) throw new InvalidGrant("this token was exchanged already (its jti is used)");
    }
    await tx.workload.pruneJtis(now);
    if (renewed !== undefined) {
      // The same workload (agent, iss and sub) with a rotated platform token: its running session lives on (its holder
      // cannot swap tokens).
      if (!(await tx.sessions.renewWorkload(renewed, { agentId, issuer: issuer.issuer, subject: verified.subject, expiresAt }, now))) {
        throw new InvalidGrant("the session presented is not this workload's live session; exchange without it");
      }
      return { publicId: (await tx.sessions.byTokenHash(hashToken(renewing!.token)))?.publicId ?? "", token: renewing!.token };
    }
    const m = await mintWorkloadSession(
      tx,
      { agentId, vaultId: binding.vaultId, role, expiresAt, subject: verified.subject, issuer: issuer.issuer },
      now,
      client,
    );
    return { publicId: m.row.publicId, token: m.token.reveal() }; // reveal: the new session's token, returned once to the workload
  });
  if (renewed !== undefined) d.auth.forget([hashToken(renewing!.token)]);
  const vault = await d.store.vaults.byId(binding.vaultId);
  return {
    answer: {
      access_token: minted.token,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: "Bearer" as const,
      expires_in: Math.floor((expiresAt - now) / 1000),
      vault: vault?.name ?? "",
      role,
      proxy_port: Number(new URL(d.proxyUrl).port) || null,
    },
    /** For the log line: who signed in, never the token. */
    who: { issuer: issuer.name, binding: binding.name, subject: verified.subject, session: minted.publicId, renewed: renewed !== undefined },
  };
}

/** The session row a renewal moves: the presenting principal must be a scoped session of the binding's agent and vault. */
function renewalTarget(p: Principal, agentId: number, vaultId: number): number {
  if (p.kind === "scoped" && p.agentId === agentId && p.vaultId === vaultId) return p.sessionId;
  throw new InvalidGrant("the session presented is not this workload's live session; exchange without it");
}
