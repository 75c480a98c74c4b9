// Proposal rows. The approval token is kept as its SHA-256 only. Status changes are guarded by
// the current status in the WHERE clause, so two concurrent approvals cannot both apply.

import type { Sql } from "./db.ts";

export type ProposalStatus = "pending" | "applied" | "rejected" | "expired";

export interface ProposalRow {
  id: number;
  vaultId: number;
  status: ProposalStatus;
  message: string;
  userMessage: string;
  services: string;
  credentials: string;
  createdBy: string;
  /** Filed by a `vault run` session of `createdBy`. */
  viaSession: boolean;
  createdAt: number;
  expiresAt: number;
  approvalTokenHash: string;
  approvalExpiresAt: number;
  decidedAt: number | null;
  decidedBy: number | null;
}

const COLUMNS = `id, vault_id AS "vaultId", status, message, user_message AS "userMessage", services, credentials, created_by AS "createdBy",
  created_at AS "createdAt", expires_at AS "expiresAt", approval_token_hash AS "approvalTokenHash", approval_expires_at AS "approvalExpiresAt",
  decided_at AS "decidedAt", decided_by AS "decidedBy", via_session AS "viaSession"`;

export function proposalRepo(sql: Sql) {
  return {
    async create(p: Omit<ProposalRow, "id" | "status" | "decidedAt" | "decidedBy" | "viaSession"> & { viaSession?: boolean }): Promise<ProposalRow> {
      const row = await sql.get<ProposalRow>(
        `INSERT INTO proposals (vault_id, status, message, user_message, services, credentials, created_by, created_at, expires_at, approval_token_hash, approval_expires_at, via_session)
         VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
        [
          p.vaultId,
          p.message,
          p.userMessage,
          p.services,
          p.credentials,
          p.createdBy,
          p.createdAt,
          p.expiresAt,
          p.approvalTokenHash,
          p.approvalExpiresAt,
          p.viaSession ? 1 : 0,
        ],
      );
      return normalise(row!);
    },
    async byId(id: number): Promise<ProposalRow | undefined> {
      const row = await sql.get<ProposalRow>(`SELECT ${COLUMNS} FROM proposals WHERE id = ?`, [id]);
      return row && normalise(row);
    },
    async list(vaultId: number, status: ProposalStatus | null, limit: number): Promise<ProposalRow[]> {
      const rows = await sql.all<ProposalRow>(
        `SELECT ${COLUMNS} FROM proposals WHERE vault_id = ? AND (CAST(? AS TEXT) IS NULL OR status = ?) ORDER BY id DESC LIMIT ?`,
        [vaultId, status, status, limit],
      );
      return rows.map(normalise);
    },
    async countPending(vaultId: number): Promise<number> {
      const row = await sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM proposals WHERE vault_id = ? AND status = 'pending'", [vaultId]);
      return Number(row?.n ?? 0);
    },
    /** Moves a pending proposal to `status`; false when it was no longer pending. */
    async decide(id: number, status: "applied" | "rejected", userId: number, at: number): Promise<boolean> {
      return (
        (await sql.run("UPDATE proposals SET status = ?, decided_at = ?, decided_by = ? WHERE id = ? AND status = 'pending'", [status, at, userId, id])) === 1
      );
    },
    /** Replaces the approval token of a pending proposal (the old link stops working); false when no longer pending. */
    async renewApprovalToken(id: number, hash: string, expiresAt: number): Promise<boolean> {
      return (
        (await sql.run("UPDATE proposals SET approval_token_hash = ?, approval_expires_at = ? WHERE id = ? AND status = 'pending'", [hash, expiresAt, id])) ===
        1
      );
    },
    /** Expires every pending proposal past its time; returns how many. */
    async expire(now: number): Promise<number> {
      return sql.run("UPDATE proposals SET status = 'expired', decided_at = ? WHERE status = 'pending' AND expires_at <= ?", [now, now]);
    },
    /** As expire, returning the rows it expired (so each is announced once, by the instance that expired it). */
    async expireReturning(now: number): Promise<ProposalRow[]> {
      const rows = await sql.all<ProposalRow>(
        `UPDATE proposals SET status = 'expired', decided_at = ? WHERE status = 'pending' AND expires_at <= ? RETURNING ${COLUMNS}`,
        [now, now],
      );
      return rows.map(normalise);
    },
  };
}

export type ProposalRepo = ReturnType<typeof proposalRepo>;

function normalise(r: ProposalRow): ProposalRow {
  const n = (v: number | null) => (v === null ? null : Number(v));
  return {
    ...r,
    id: Number(r.id),
    vaultId: Number(r.vaultId),
    viaSession: Boolean(Number(r.viaSession)),
    createdAt: Number(r.createdAt),
    expiresAt: Number(r.expiresAt),
    approvalExpiresAt: Number(r.approvalExpiresAt),
    decidedAt: n(r.decidedAt),
    decidedBy: n(r.decidedBy),
  };
}
