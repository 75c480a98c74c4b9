// Session rows for every bearer token that authenticates a principal. Only the token's SHA-256
// is stored; `public_id` is what listings and revocation use, so a token never has to be shown again.

import type { Sql } from "./db.ts";

export type SessionKind = "user" | "scoped" | "agent";

export interface SessionRow {
  id: number;
  publicId: string;
  tokenHash: string;
  kind: SessionKind;
  userId: number | null;
  vaultId: number | null;
  role: string | null;
  createdAt: number;
  expiresAt: number | null;
  lastSeenAt: number;
  revokedAt: number | null;
}

const COLUMNS = `id, public_id AS publicId, token_hash AS tokenHash, kind, user_id AS userId, vault_id AS vaultId, role,
  created_at AS createdAt, expires_at AS expiresAt, last_seen_at AS lastSeenAt, revoked_at AS revokedAt`;

export function sessionRepo(sql: Sql) {
  return {
    async create(s: Omit<SessionRow, "id" | "revokedAt">): Promise<SessionRow> {
      const row = await sql.get<SessionRow>(
        `INSERT INTO sessions (public_id, token_hash, kind, user_id, vault_id, role, created_at, expires_at, last_seen_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
        [s.publicId, s.tokenHash, s.kind, s.userId, s.vaultId, s.role, s.createdAt, s.expiresAt, s.lastSeenAt],
      );
      return normalise(row!);
    },
    async byTokenHash(hash: string): Promise<SessionRow | undefined> {
      const row = await sql.get<SessionRow>(`SELECT ${COLUMNS} FROM sessions WHERE token_hash = ?`, [hash]);
      return row && normalise(row);
    },
    async listForUser(userId: number): Promise<SessionRow[]> {
      return (await sql.all<SessionRow>(`SELECT ${COLUMNS} FROM sessions WHERE user_id = ? AND revoked_at IS NULL ORDER BY created_at`, [userId])).map(normalise);
    },
    async touch(id: number, at: number): Promise<void> {
      await sql.run("UPDATE sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?", [at, id, at]);
    },
    async revoke(publicId: string, at: number): Promise<boolean> {
      return (await sql.run("UPDATE sessions SET revoked_at = ? WHERE public_id = ? AND revoked_at IS NULL", [at, publicId])) === 1;
    },
    async revokeAllForUser(userId: number, at: number): Promise<number> {
      return sql.run("UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL", [at, userId]);
    },
  };
}

export type SessionRepo = ReturnType<typeof sessionRepo>;

function normalise(r: SessionRow): SessionRow {
  const n = (v: number | null) => (v === null ? null : Number(v));
  return { ...r, id: Number(r.id), userId: n(r.userId), vaultId: n(r.vaultId), createdAt: Number(r.createdAt), expiresAt: n(r.expiresAt), lastSeenAt: Number(r.lastSeenAt), revokedAt: n(r.revokedAt) };
}
