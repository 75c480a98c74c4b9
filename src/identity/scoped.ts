// Scoped sessions (POST /v1/sessions): bound to one vault, TTL 5 minutes to 7 days (default 24 h),
// with a role no higher than the minter's own. Used by `broker vault run`. The request arrives read
// by the contract's schema (its name, role and TTL within their ranges); who may mint what is decided here.

import { NotFound, PermissionDenied } from "../errors.ts";
import type { SessionMinter, SessionRow, VaultRole } from "../store/index.ts";
import type { Domain } from "./context.ts";
import { LIMITS } from "../policy/index.ts";
import { roleRank, type Principal } from "./principal.ts";
import { isLive, mintScopedSession, type SessionClient } from "./sessions.ts";
import { checkPageLimit, cutPage } from "./page.ts";
import { iso } from "./users.ts";
import { openVault, roleIn } from "./vaults.ts";

/** What a minter asks for: the vault, a role (default: their own), a lifetime in seconds (default 24 h). */
export interface ScopedSessionRequest {
  vault: string;
  role?: VaultRole | null;
  ttl_seconds?: number | null;
  /** `vault run --contain`: the audit log marks every request made with the session. */
  contained?: boolean;
}

export async function createScopedSession(d: Domain, p: Principal, input: ScopedSessionRequest, xVault?: string, client?: SessionClient) {
  if (p.kind === "scoped") throw new PermissionDenied("a scoped session cannot mint further sessions");
  const name = input.vault;
  const open = await openVault(d, p, name, "read", p.kind === "agent" ? (xVault ?? name) : xVault);
  let role = open.role;
  if (input.role !== undefined && input.role !== null) {
    if (roleRank(input.role) > roleRank(open.role)) throw new PermissionDenied(`you cannot mint a session above your own role (${open.role})`);
    role = input.role;
  }
  let ttlMs: number = input.ttl_seconds == null ? LIMITS.scopedSessionDefaultMs : input.ttl_seconds * 1000;
  const contained = input.contained === true;
  const owner = p.kind === "user" ? { userId: p.userId, agentId: null } : { userId: null, agentId: p.agentId };
  // A scoped session never outlives the token that minted it (no extending an expiring agent token).
  if (p.expiresAt !== null) ttlMs = Math.min(ttlMs, p.expiresAt - d.now());
  const minted = await d.store.transaction((tx) => mintScopedSession(tx, owner, open.vault.id, role, ttlMs, d.now(), contained, client));
  return {
    id: minted.row.publicId,
    token: minted.token.reveal(), // reveal: the new session's token, returned once to its minter
    vault: open.vault.name,
    role,
    expires_at: iso(minted.row.expiresAt!),
    contained,
    /** Port of the transparent proxy listener (for HTTPS_PROXY, on the host the client already uses). */
    proxy_port: Number(new URL(d.proxyUrl).port) || null,
  };
}

function mintedBy(p: Principal, row: { userId: number | null; agentId: number | null }): boolean {
  return (p.kind === "user" && row.userId === p.userId) || (p.kind === "agent" && row.agentId === p.agentId);
}

/**
 * A page of the vault's active scoped sessions in creation order after `after`: all of them for its admins
 * (people and agents), else those the caller minted; a scoped session sees only itself.
 * `vaultName` as the caller read it (the route, from ?vault= or X-Vault, by the contract's VaultName).
 */
export async function listScopedSessions(d: Domain, p: Principal, vaultName: string, xVault: string | undefined, q: { limit: number; after?: number }) {
  const open = await openVault(d, p, vaultName, "read", xVault);
  checkPageLimit(q.limit);
  const now = d.now();
  const after = q.after ?? 0;
  let rows: SessionRow[];
  if (p.kind === "scoped") {
    const own = await d.store.sessions.byPublicId(p.sessionPublicId);
    rows = own && own.id > after && isLive(own, now, now) ? [own] : [];
  } else {
    const mintedBy: SessionMinter | undefined = open.role === "admin" ? undefined : p.kind === "user" ? { userId: p.userId } : { agentId: p.agentId };
    rows = await d.store.sessions.activeScopedForVault(open.vault.id, now, after, q.limit + 1, mintedBy);
  }
  const page = cutPage(rows, q.limit, (r) => String(r.id));
  const sessions = page.rows.map((r) => ({
    id: r.publicId,
    vault: open.vault.name,
    role: r.role,
    created_at: iso(r.createdAt),
    expires_at: r.expiresAt === null ? null : iso(r.expiresAt),
    contained: r.contained,
  }));
  return { sessions, next_cursor: page.next_cursor };
}

export async function revokeScopedSession(d: Domain, p: Principal, publicId: string): Promise<void> {
  const row = await d.store.sessions.byPublicId(publicId);
  if (!row || row.kind !== "scoped" || row.revokedAt !== null) throw new NotFound("no such session");
  let allowed = mintedBy(p, row) || row.id === p.sessionId;
  if (!allowed && p.kind !== "scoped" && row.vaultId !== null) {
    const vault = await d.store.vaults.byId(row.vaultId);
    allowed = vault !== undefined && (await roleIn(d.store, p, vault)) === "admin";
  }
  if (!allowed) throw new NotFound("no such session");
  await d.store.sessions.revoke(row.id, d.now());
  d.auth.forget([row.tokenHash]);
}
