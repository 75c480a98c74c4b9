// Vault invites for humans (av_uinv_, 48 h, at most 50 pending per vault) and agent invites
// (av_inv_, 15 min, single use, at most 10 pending per vault). Tokens are shown once; only their
// hash is stored. Redemption happens in agents.ts (agents) and acceptVaultInvite (humans). Only
// people invite people: an agent could accept its own invite and hold a human login. Requests arrive
// read by the contract's schemas; the role ceiling (never above your own) is decided here.

import { Conflict, InvalidRequest, NotFound, PermissionDenied, VaultManaged } from "../errors.ts";
import type { InviteKind, InviteRow, Repos, VaultRole } from "../store/index.ts";
import type { Domain } from "./context.ts";
import { LIMITS } from "../policy/index.ts";
import { roleRank, type Principal } from "./principal.ts";
import { mintPublicId, mintToken, hashToken } from "../crypto/index.ts";
import { assertEmailDomainAllowed } from "./settings.ts";
import { type Credentials, iso, publicUser, registerUser } from "./users.ts";
import type { SessionClient } from "./sessions.ts";
import { requireInVault, requireUnmanaged, type OpenVault } from "./vaults.ts";

/** An invite for a person: only `email` may accept it (any address when null); `role` defaults to member. */
export interface VaultInviteRequest {
  email?: string | null;
  role?: VaultRole | null;
}

/** An invite for an agent: its name (generated when absent), role (default proxy) and token lifetime (null: none). */
export interface AgentInviteRequest {
  name?: string | null;
  role?: VaultRole | null;
  token_ttl_seconds?: number | null;
}

const MANAGED_INVITE = " (an invite is taken only for an agent or a person its file names, with the role the file gives them)";

/** The role an invite grants: `fallback` when none is asked for, never above the inviter's own. */
function grantedRole(asked: VaultRole | null | undefined, fallback: VaultRole, ceiling: VaultRole): VaultRole {
  if (asked === undefined || asked === null) return fallback;
  if (roleRank(asked) > roleRank(ceiling)) throw new PermissionDenied(`you cannot grant a role above your own (${ceiling})`);
  return asked;
}

async function assertRoom(tx: Repos, vaultId: number, kind: InviteKind, now: number) {
  const cap = kind === "agent" ? LIMITS.pendingAgentInvitesPerVault : LIMITS.pendingVaultInvitesPerVault;
  if ((await tx.invites.countPending(vaultId, kind, now)) >= cap) {
    throw new Conflict(`this vault already has ${cap} pending ${kind} invites; revoke some or wait for them to expire`);
  }
}

function creatorId(p: Principal): number | null {
  return p.kind === "user" ? p.userId : null;
}

export async function createVaultInvite(d: Domain, p: Principal, open: OpenVault, input: VaultInviteRequest) {
  requireInVault(open, "invite_people");
  const email = input.email ?? null;
  const role = grantedRole(input.role, "member", open.role);
  // A vault kept as code takes only the people its file names, with the role it gives them (they join by invite).
  await requireUnmanaged(d, open, { member: email, role }, MANAGED_INVITE);
  const minted = mintToken("vaultInvite");
  const row = await d.store.transaction(async (tx) => {
    const now = d.now();
    await assertRoom(tx, open.vault.id, "vault", now);
    return tx.invites.create({
      publicId: mintPublicId("inv_"),
      tokenHash: minted.hash,
      kind: "vault",
      vaultId: open.vault.id,
      role,
      email,
      agentName: null,
      agentTokenTtlMs: null,
      createdBy: creatorId(p),
      createdAt: now,
      expiresAt: now + LIMITS.vaultInviteTtlMs,
    });
  });
  const token = minted.token.reveal(); // reveal: an invite token is returned to its creator once
  return { id: row.publicId, token, invite_url: `${d.publicUrl}/v1/vault-invites/${token}/accept`, email, role, expires_at: iso(row.expiresAt) };
}

export async function createAgentInvite(d: Domain, p: Principal, open: OpenVault, input: AgentInviteRequest) {
  requireInVault(open, "manage"); // the domain decides, whoever calls (architecture.md §2)
  const role = grantedRole(input.role, "proxy", open.role);
  const ttl = input.token_ttl_seconds ?? null;
  const name =
    input.name ??
    `agent-${mintPublicId("")
      .slice(0, 8)
      .toLowerCase()
      .replace(/[^a-z0-9]/g, "x")}`;
  // A vault kept as code takes only the agents its file names, with the role it gives them.
  await requireUnmanaged(d, open, { agent: name, role }, MANAGED_INVITE);

  const minted = mintToken("agentInvite");
  const row = await d.store.transaction(async (tx) => {
    const now = d.now();
    await assertRoom(tx, open.vault.id, "agent", now);
    if ((await tx.agents.byName(name)) || (await tx.invites.pendingAgentName(name, now)))
      throw new Conflict(`an agent named ${name} already exists or is invited`);
    return tx.invites.create({
      publicId: mintPublicId("inv_"),
      tokenHash: minted.hash,
      kind: "agent",
      vaultId: open.vault.id,
      role,
      email: null,
      agentName: name,
      agentTokenTtlMs: ttl === null ? null : ttl * 1000,
      createdBy: creatorId(p),
      createdAt: now,
      expiresAt: now + LIMITS.agentInviteTtlMs,
    });
  });
  const token = minted.token.reveal(); // reveal: an invite token is returned to its creator once
  return { id: row.publicId, token, invite_url: `${d.publicUrl}/invite/${token}`, name, role, expires_at: iso(row.expiresAt) };
}

export async function listInvites(d: Domain, open: OpenVault, kind: InviteKind) {
  const rows = await d.store.invites.pending(open.vault.id, kind, d.now());
  return rows.map((r) =>
    kind === "agent"
      ? { id: r.publicId, name: r.agentName, role: r.role, expires_at: iso(r.expiresAt) }
      : { id: r.publicId, email: r.email, role: r.role, expires_at: iso(r.expiresAt) },
  );
}

export async function revokeInvite(d: Domain, open: OpenVault, kind: InviteKind, publicId: string): Promise<void> {
  requireInVault(open, "manage");
  if (!(await d.store.invites.remove(open.vault.id, kind, publicId))) throw new NotFound("no such pending invite");
}

/**
 * An invite redeemed in a vault that is managed as code joins only whom its file names, with the role it gives: an
 * invite made before the vault was managed must not add an admin the repository does not know of.
 */
export async function requireDeclaredJoin(tx: Repos, vaultId: number, who: { agent: string } | { member: string }, role: VaultRole): Promise<void> {
  const state = await tx.vaultCode.state(vaultId);
  if (!state.managed) return;
  const d = state.declared;
  if (d && ("agent" in who ? d.agents[who.agent] === role : d.members[who.member] === role)) return;
  const name = (await tx.vaults.byId(vaultId))?.name ?? "this vault";
  throw new VaultManaged(name, "; an invite made before it was managed cannot add whom its file does not name");
}

/** Finds a live invite of `kind` by raw token, or throws the same NotFound for unknown, used and expired. */
export async function findLiveInvite(repos: Repos, rawToken: string, kind: InviteKind, now: number): Promise<InviteRow> {
  const row = await repos.invites.byTokenHash(hashToken(rawToken));
  if (!row || row.kind !== kind || row.usedAt !== null || row.expiresAt <= now) throw new NotFound("invite not found, already used or expired");
  return row;
}

/** A logged-in user joins, or (with credentials) a new member registers and joins, in one transaction. */
export async function acceptVaultInvite(d: Domain, rawToken: string, p: Principal | undefined, creds: Credentials | undefined, client?: SessionClient) {
  const now = d.now();
  const invite = await findLiveInvite(d.store, rawToken, "vault", now);
  const vault = (await d.store.vaults.byId(invite.vaultId))!;
  let role = invite.role;
  const join = async (tx: Repos, userId: number) => {
    await requireDeclaredJoin(tx, invite.vaultId, { member: (await tx.users.byId(userId))?.email ?? "" }, invite.role);
    if (!(await tx.invites.burn(invite.id, d.now()))) throw new NotFound("invite not found, already used or expired");
    const existing = await tx.access.memberRole(invite.vaultId, userId);
    // An invite never lowers a role someone already holds; report the role they end up with.
    if (!existing || roleRank(invite.role) > roleRank(existing)) await tx.access.setMember(invite.vaultId, userId, invite.role, d.now());
    else role = existing;
  };
  if (p) {
    if (p.kind !== "user") throw new PermissionDenied("vault invites are for humans; agents use agent invites");
    if (invite.email && invite.email !== p.email) throw new PermissionDenied("this invite was issued for a different email address");
    if (p.instanceRole !== "owner") await assertEmailDomainAllowed(d.store, p.email);
    await d.store.transaction((tx) => join(tx, p.userId));
    return { vault: vault.name, role };
  }
  if (!creds) throw new InvalidRequest("log in first, or send email and password to register through this invite");
  if (invite.email && invite.email !== creds.email) throw new PermissionDenied("this invite was issued for a different email address");
  const { user, token } = await registerUser(d, creds, (tx, u) => join(tx, u.id), client);
  return { vault: vault.name, role: invite.role, token: token.reveal(), user: publicUser(user) }; // reveal: a new user's first session token
}
