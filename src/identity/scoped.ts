// Scoped sessions (POST /v1/sessions): bound to one vault, TTL 5 minutes to 7 days (default 24 h),
// with a role no higher than the minter's own. Used by `broker vault run`.

import { InvalidRequest, NotFound, PermissionDenied } from "../errors.ts";
import type { Domain } from "./context.ts";
import { LIMITS } from "../policy/index.ts";
import { isVaultRole, roleRank, type Principal } from "./principal.ts";
import { mintScopedSession } from "./sessions.ts";
import { iso } from "./users.ts";
import { openVault, readVaultName, roleIn } from "./vaults.ts";

export async function createScopedSession(d: Domain, p: Principal, input: unknown, xVault?: string) {
  if (p.kind === "scoped") throw new PermissionDenied("a scoped session cannot mint further sessions");
  const body = (input ?? {}) as { vault?: unknown; role?: unknown; ttl_seconds?: unknown; contained?: unknown };
  const name = readVaultName(body.vault);
  const open = await openVault(d, p, name, "read", p.kind === "agent" ? (xVault ?? name) : xVault);
  let role = open.role;
  if (body.role !== undefined && body.role !== null) {
    if (!isVaultRole(body.role)) throw new InvalidRequest("role must be admin, member or proxy", "role");
    if (roleRank(body.role) > roleRank(open.role)) throw new PermissionDenied(`you cannot mint a session above your own role (${open.role})`);
    role = body.role;
  }
  const minS = LIMITS.scopedSessionMinMs / 1000;
  const maxS = LIMITS.scopedSessionMaxMs / 1000;
  let ttlMs: number = LIMITS.scopedSessionDefaultMs;
  if (body.ttl_seconds !== undefined && body.ttl_seconds !== null) {
    const s = body.ttl_seconds;
    if (typeof s !== "number" || !Number.isInteger(s) || s < minS || s > maxS) {
      throw new InvalidRequest(`ttl_seconds must be an integer from ${minS} (5 minutes) to ${maxS} (7 days)`, "ttl_seconds");
    }
    ttlMs = s * 1000;
  }
  if (body.contained !== undefined && typeof body.contained !== "boolean") throw new InvalidRequest("contained must be true or false", "contained");
  const contained = body.contained === true;
  const owner = p.kind === "user" ? { userId: p.userId, agentId: null } : { userId: null, agentId: p.agentId };
  // A scoped session never outlives the token that minted it (no extending an expiring agent token).
  if (p.expiresAt !== null) ttlMs = Math.min(ttlMs, p.expiresAt - d.now());
  const minted = await d.store.transaction((tx) => mintScopedSession(tx, owner, open.vault.id, role, ttlMs, d.now(), contained));
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

export async function listScopedSessions(d: Domain, p: Principal, vaultName: string, xVault?: string) {
  const open = await openVault(d, p, readVaultName(vaultName), "read", xVault);
  const rows = await d.store.sessions.activeScopedForVault(open.vault.id, d.now());
  const visible = open.role === "admin" && p.kind !== "scoped" ? rows : rows.filter((r) => mintedBy(p, r) || r.id === p.sessionId);
  return visible.map((r) => ({
    id: r.publicId,
    vault: open.vault.name,
    role: r.role,
    created_at: iso(r.createdAt),
    expires_at: r.expiresAt === null ? null : iso(r.expiresAt),
    contained: r.contained,
  }));
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
