// Invite rows: agent invites (av_inv_) and vault invites for humans (av_uinv_). Only the token's
// SHA-256 is kept. `used_at` burns an invite; it is set in the same transaction that redeems it.

import type { Sql } from "./db.ts";
import type { VaultRole } from "./access.ts";

export type InviteKind = "agent" | "vault";

export interface InviteRow {
  id: number;
  publicId: string;
  tokenHash: string;
  kind: InviteKind;
  vaultId: number;
  role: VaultRole;
  email: string | null;
  agentName: string | null;
  agentTokenTtlMs: number | null;
  createdBy: number | null;
  createdAt: number;
  expiresAt: number;
  usedAt: number | null;
}

const COLUMNS = `id, public_id AS "publicId", token_hash AS "tokenHash", kind, vault_id AS "vaultId", role, email, agent_name AS "agentName",
  agent_token_ttl_ms AS "agentTokenTtlMs", created_by AS "createdBy", created_at AS "createdAt", expires_at AS "expiresAt", used_at AS "usedAt"`;

export function inviteRepo(sql: Sql) {
  return {
    async create(i: Omit<InviteRow, "id" | "usedAt">): Promise<InviteRow> {
      const row = await sql.get<InviteRow>(
        `INSERT INTO invites (public_id, token_hash, kind, vault_id, role, email, agent_name, agent_token_ttl_ms, created_by, created_at, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
        [i.publicId, i.tokenHash, i.kind, i.vaultId, i.role, i.email, i.agentName, i.agentTokenTtlMs, i.createdBy, i.createdAt, i.expiresAt],
      );
      return normalise(row!);
    },
    async byTokenHash(hash: string): Promise<InviteRow | undefined> {
      const row = await sql.get<InviteRow>(`SELECT ${COLUMNS} FROM invites WHERE token_hash = ?`, [hash]);
      return row && normalise(row);
    },
    async pending(vaultId: number, kind: InviteKind, now: number): Promise<InviteRow[]> {
      const rows = await sql.all<InviteRow>(
        `SELECT ${COLUMNS} FROM invites WHERE vault_id = ? AND kind = ? AND used_at IS NULL AND expires_at > ? ORDER BY created_at, id`,
        [vaultId, kind, now],
      );
      return rows.map(normalise);
    },
    async countPending(vaultId: number, kind: InviteKind, now: number): Promise<number> {
      const row = await sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM invites WHERE vault_id = ? AND kind = ? AND used_at IS NULL AND expires_at > ?", [
        vaultId,
        kind,
        now,
      ]);
      return Number(row?.n ?? 0);
    },
    async pendingAgentName(name: string, now: number): Promise<boolean> {
      const row = await sql.get<{ n: number }>(
        "SELECT COUNT(*) AS n FROM invites WHERE kind = 'agent' AND agent_name = ? AND used_at IS NULL AND expires_at > ?",
        [name, now],
      );
      return Number(row?.n ?? 0) > 0;
    },
    /** Burns the invite if it is still unused and unexpired; false means someone else got there first. */
    async burn(id: number, now: number): Promise<boolean> {
      return (await sql.run("UPDATE invites SET used_at = ? WHERE id = ? AND used_at IS NULL AND expires_at > ?", [now, id, now])) === 1;
    },
    /** Forgets invites used or expired before `before` (they can never be redeemed again). */
    async prune(before: number): Promise<number> {
      return sql.run("DELETE FROM invites WHERE (used_at IS NOT NULL AND used_at < ?) OR expires_at < ?", [before, before]);
    },
    async remove(vaultId: number, kind: InviteKind, publicId: string): Promise<boolean> {
      return (await sql.run("DELETE FROM invites WHERE vault_id = ? AND kind = ? AND public_id = ? AND used_at IS NULL", [vaultId, kind, publicId])) === 1;
    },
  };
}

export type InviteRepo = ReturnType<typeof inviteRepo>;

function normalise(r: InviteRow): InviteRow {
  const n = (v: number | null) => (v === null ? null : Number(v));
  return {
    ...r,
    id: Number(r.id),
    vaultId: Number(r.vaultId),
    agentTokenTtlMs: n(r.agentTokenTtlMs),
    createdBy: n(r.createdBy),
    createdAt: Number(r.createdAt),
    expiresAt: Number(r.expiresAt),
    usedAt: n(r.usedAt),
  };
}
