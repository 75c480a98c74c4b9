// Each vault's audit hash chain (migration 23, docs/audit-chain.md): its head, the last record written
// (locked by the writer for its transaction, so two instances writing the same vault at once take turns
// and never fork the chain), and its anchor, the last record retention removed (where verification starts).

import { HEAD_SET, lockHead } from "./audit-batch.ts";
import type { Sql } from "./db.ts";

export interface AuditChainRow {
  vaultId: number;
  headSeq: number;
  headHash: string;
  anchorSeq: number;
  anchorHash: string;
  /** Retention's signature of the anchor (migration 25): when it moved, by which key; null at the genesis (and for anchors moved before). */
  anchorAt: number | null;
  anchorKeyId: string | null;
  anchorSignature: string | null;
}

const COLUMNS = `vault_id AS "vaultId", head_seq AS "headSeq", head_hash AS "headHash", anchor_seq AS "anchorSeq", anchor_hash AS "anchorHash", anchor_at AS "anchorAt", anchor_key_id AS "anchorKeyId", anchor_signature AS "anchorSignature"`;

export function auditChainRepo(sql: Sql) {
  return {
    /**
     * The vault's head, its row locked until the transaction ends (created at the genesis when the vault has
     * none yet): PostgreSQL holds a second writer of the same vault until the first commits; SQLite's writers
     * take turns anyway.
     */
    async lockHead(vaultId: number): Promise<{ seq: number; hash: string }> {
      return lockHead(sql, vaultId);
    },
    async setHead(vaultId: number, seq: number, hash: string): Promise<void> {
      await sql.run(HEAD_SET, [seq, hash, vaultId]);
    },
    async get(vaultId: number): Promise<AuditChainRow | undefined> {
      const row = await sql.get<AuditChainRow>(`SELECT ${COLUMNS} FROM audit_chains WHERE vault_id = ?`, [vaultId]);
      return row && normalise(row);
    },
    /** Every vault's chain (checkpoints sign every head). */
    async list(): Promise<AuditChainRow[]> {
      return (await sql.all<AuditChainRow>(`SELECT ${COLUMNS} FROM audit_chains ORDER BY vault_id`)).map(normalise);
    },
  };
}

export type AuditChainRepo = ReturnType<typeof auditChainRepo>;

function normalise(r: AuditChainRow): AuditChainRow {
  return {
    vaultId: Number(r.vaultId),
    headSeq: Number(r.headSeq),
    headHash: r.headHash,
    anchorSeq: Number(r.anchorSeq),
    anchorHash: r.anchorHash,
    anchorAt: r.anchorAt == null ? null : Number(r.anchorAt),
    anchorKeyId: r.anchorKeyId ?? null,
    anchorSignature: r.anchorSignature ?? null,
  };
}
