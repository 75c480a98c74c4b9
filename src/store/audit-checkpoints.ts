// The audit log's signing key and its signed checkpoints (migration 24, docs/audit-chain.md): the key's
// public half and its sealed private half (ciphertext only here: crypto/audit-signing.ts seals and opens
// it), the checkpoints with the heads they signed, each vault's checkpoints as a range of an index, and the
// heads that moved since the last checkpoint (what the next one signs).

import type { ReadRows } from "./audit-chain-check.ts";
import type { Db, Sql } from "./db.ts";
import { assertList, fail, parseStoredJson } from "./stored-json.ts";

export interface AuditSigningKeyRow {
  /** 1: the broker's one key (a rotation would add the next id). */
  id: number;
  /** The first 16 hex digits of the SHA-256 of the public key's SPKI DER. */
  keyId: string;
  /** SubjectPublicKeyInfo, PEM. */
  publicKeyPem: string;
  privateNonce: Uint8Array;
  privateCiphertext: Uint8Array;
  createdAt: number;
}

/** One vault's head as a checkpoint signed it. */
export interface CheckpointHeadRow {
  vaultId: number;
  seq: number;
  hash: string;
}

export interface AuditCheckpointRow {
  id: number;
  at: number;
  keyId: string;
  /** Every head the signature covers, sorted by vault id. */
  heads: CheckpointHeadRow[];
  /** base64url, no padding. */
  signature: string;
}

/** A vault whose head moved past the seq its last checkpoint signed. */
export interface MovedHead extends CheckpointHeadRow {
  /** The seq the vault's last checkpoint signed (0: none yet). */
  checkpointSeq: number;
}

const KEY_COLUMNS = `id, key_id AS "keyId", public_key_pem AS "publicKeyPem", private_nonce AS "privateNonce", private_ciphertext AS "privateCiphertext", created_at AS "createdAt"`;
const CHECKPOINT_COLUMNS = `c.id, c.at, c.key_id AS "keyId", c.heads, c.signature`;

/** The instances' number for pg_try_advisory_xact_lock around a checkpoint ("audc"); retention has "audi". */
export const CHECKPOINT_LOCK = 0x61756463;

export function auditCheckpointRepo(sql: Sql) {
  return {
    /** The signing key (the newest, should there ever be several), or none before the first start. */
    async signingKey(): Promise<AuditSigningKeyRow | undefined> {
      const row = await sql.get<AuditSigningKeyRow>(`SELECT ${KEY_COLUMNS} FROM audit_signing_keys ORDER BY id DESC LIMIT 1`);
      return (
        row && {
          ...row,
          id: Number(row.id),
          privateNonce: new Uint8Array(row.privateNonce),
          privateCiphertext: new Uint8Array(row.privateCiphertext),
          createdAt: Number(row.createdAt),
        }
      );
    },
    /**
     * Stores key 1 unless a key 1 exists: of two instances starting at once, the first insert wins and the
     * other changes nothing (each then reads the key back with signingKey()). Says whether this one won.
     */
    async insertSigningKey(r: Omit<AuditSigningKeyRow, "id">): Promise<boolean> {
      const row = await sql.get<{ id: number }>(
        `INSERT INTO audit_signing_keys (id, key_id, public_key_pem, private_nonce, private_ciphertext, created_at) VALUES (1, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO NOTHING RETURNING id`,
        [r.keyId, r.publicKeyPem, r.privateNonce, r.privateCiphertext, r.createdAt],
      );
      return row !== undefined;
    },
    /** Vaults whose head moved since their last checkpoint, by vault id. */
    async movedHeads(): Promise<MovedHead[]> {
      const rows = await sql.all<MovedHead>(
        `SELECT vault_id AS "vaultId", head_seq AS seq, head_hash AS hash, checkpoint_seq AS "checkpointSeq"
         FROM audit_chains WHERE head_seq <> checkpoint_seq ORDER BY vault_id`,
      );
      return rows.map((r) => ({ vaultId: Number(r.vaultId), seq: Number(r.seq), hash: r.hash, checkpointSeq: Number(r.checkpointSeq) }));
    },
    /** The newest checkpoint's time, or none yet. */
    async lastAt(): Promise<number | undefined> {
      const row = await sql.get<{ at: number }>("SELECT at FROM audit_checkpoints ORDER BY id DESC LIMIT 1");
      return row ? Number(row.at) : undefined;
    },
    /**
     * Writes a checkpoint of `heads` (sorted here by vault id) signed by `sign`, which is given the id the row
     * got (the signature covers it), and moves each vault's checkpoint mark to the seq signed. Run it inside
     * a transaction: the row is never seen unsigned. Marks are moved in vault order, as the audit writer
     * locks heads, so the two never wait on each other in a circle.
     */
    async insert(at: number, keyId: string, heads: readonly CheckpointHeadRow[], sign: (id: number) => Promise<string>): Promise<AuditCheckpointRow> {
      const sorted = [...heads].sort((a, b) => a.vaultId - b.vaultId).map((h) => ({ vaultId: h.vaultId, seq: h.seq, hash: h.hash }));
      const inserted = await sql.get<{ id: number }>("INSERT INTO audit_checkpoints (at, key_id, heads, signature) VALUES (?, ?, ?, '') RETURNING id", [
        at,
        keyId,
        JSON.stringify(sorted.map((h) => [h.vaultId, h.seq, h.hash])),
      ]);
      const id = Number(inserted!.id);
      const signature = await sign(id);
      await sql.run("UPDATE audit_checkpoints SET signature = ? WHERE id = ?", [signature, id]);
      for (const h of sorted) {
        await sql.run("INSERT INTO audit_checkpoint_vaults (vault_id, checkpoint_id, seq, hash) VALUES (?, ?, ?, ?)", [h.vaultId, id, h.seq, h.hash]);
        await sql.run("UPDATE audit_chains SET checkpoint_seq = ? WHERE vault_id = ?", [h.seq, h.vaultId]);
      }
      return { id, at, keyId, heads: sorted, signature };
    },
    /** The newest checkpoint's id that covers `vaultId` (0: none); an index seek. */
    async newestIdFor(vaultId: number): Promise<number> {
      const row = await sql.get<{ id: number | null }>("SELECT MAX(checkpoint_id) AS id FROM audit_checkpoint_vaults WHERE vault_id = ?", [vaultId]);
      return row?.id == null ? 0 : Number(row.id);
    },
    /** The checkpoints that cover `vaultId`, oldest first, with ids above `afterId`. */
    async listForVault(vaultId: number, afterId: number, limit: number): Promise<AuditCheckpointRow[]> {
      const rows = await sql.all<Omit<AuditCheckpointRow, "heads"> & { heads: string }>(
        `SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoint_vaults v JOIN audit_checkpoints c ON c.id = v.checkpoint_id
         WHERE v.vault_id = ? AND v.checkpoint_id > ? ORDER BY v.checkpoint_id LIMIT ?`,
        [vaultId, afterId, limit],
      );
      return rows.map(readCheckpoint);
    },
    /** Every checkpoint, oldest first, with ids above `afterId` (tests, tools). */
    async list(afterId: number, limit: number): Promise<AuditCheckpointRow[]> {
      const rows = await sql.all<Omit<AuditCheckpointRow, "heads"> & { heads: string }>(
        `SELECT ${CHECKPOINT_COLUMNS} FROM audit_checkpoints c WHERE c.id > ? ORDER BY c.id LIMIT ?`,
        [afterId, limit],
      );
      return rows.map(readCheckpoint);
    },
    /**
     * Removes up to `limit` of the oldest checkpoints made before `before` (ms), with their vault rows (the
     * foreign key cascades); returns how many.
     */
    async deleteOlderThan(before: number, limit: number): Promise<number> {
      const ids = await sql.all<{ id: number }>("SELECT id FROM audit_checkpoints WHERE at < ? ORDER BY id LIMIT ?", [before, limit]);
      if (ids.length === 0) return 0;
      const last = Number(ids[ids.length - 1]!.id);
      return sql.run("DELETE FROM audit_checkpoints WHERE id <= ? AND at < ?", [last, before]);
    },
  };
}

export type AuditCheckpointRepo = ReturnType<typeof auditCheckpointRepo>;

function readCheckpoint(r: Omit<AuditCheckpointRow, "heads"> & { heads: string }): AuditCheckpointRow {
  const id = Number(r.id);
  const heads = parseStoredJson<[number, number, string][]>("audit_checkpoints", id, "heads", r.heads, (v, at): asserts v is [number, number, string][] => {
    assertList(v, at);
    v.forEach((h, i) => {
      if (!Array.isArray(h) || h.length !== 3 || !Number.isSafeInteger(h[0]) || !Number.isSafeInteger(h[1]) || typeof h[2] !== "string")
        fail(`${at}[${i}]`, "must be [vault_id, seq, hash]");
    });
  });
  return { id, at: Number(r.at), keyId: r.keyId, heads: heads.map(([vaultId, seq, hash]) => ({ vaultId, seq, hash })), signature: r.signature };
}

export interface CheckpointPlan {
  readonly keyId: string;
  readonly now: () => number;
  /**
   * Whether to sign now, given the heads that moved (never empty) and the newest checkpoint's time: asked
   * inside the transaction, after the turn is taken, so what another instance just signed is not signed again.
   */
  readonly due: (moved: readonly MovedHead[], lastAt: number | undefined) => boolean;
  /**
   * The moved heads that may be signed (store/audit-chain-check.ts: each must follow from the last one the broker
   * signed), read inside the turn's transaction; absent: all of them.
   */
  readonly signable?: (read: ReadRows, moved: readonly MovedHead[]) => Promise<readonly MovedHead[]>;
  /** The signature of checkpoint `id` made at `at` over `heads` (sorted by vault id). */
  readonly sign: (id: number, at: number, heads: readonly CheckpointHeadRow[]) => Promise<string>;
  /** Checkpoints made before this (ms) are removed, at most `pruneLimit` a turn that made one; absent: all are kept. */
  readonly pruneBefore?: number;
  readonly pruneLimit?: number;
}

export interface CheckpointTurn {
  /** Another instance was making a checkpoint (PostgreSQL): nothing was done. */
  readonly busy: boolean;
  /** The checkpoint this turn made, if one was due. */
  readonly checkpoint?: AuditCheckpointRow;
  /** Old checkpoints removed. */
  readonly pruned: number;
}

/**
 * One checkpoint turn in one transaction: on PostgreSQL one instance at a time (a try, never a wait: the
 * instance that finds the turn taken leaves it to the other), then, if `plan.due` says so, the heads that
 * moved are signed and stored and their marks moved on; old checkpoints go in the same turn (never the new one).
 */
export async function takeCheckpointTurn(db: Db, plan: CheckpointPlan): Promise<CheckpointTurn> {
  return db.transaction(async (tx): Promise<CheckpointTurn> => {
    if (db.dialect === "postgres") {
      const turn = await tx.get<{ taken: boolean }>("SELECT pg_try_advisory_xact_lock(?) AS taken", [CHECKPOINT_LOCK]);
      if (!turn?.taken) return { busy: true, pruned: 0 };
    }
    const repo = auditCheckpointRepo(tx);
    const moved = await repo.movedHeads();
    if (moved.length === 0 || !plan.due(moved, await repo.lastAt())) return { busy: false, pruned: 0 };
    const signable = plan.signable ? await plan.signable((q, params) => tx.all(q, [...params]), moved) : moved;
    if (signable.length === 0) return { busy: false, pruned: 0 };
    const at = plan.now();
    const heads = signable.map((h) => ({ vaultId: h.vaultId, seq: h.seq, hash: h.hash }));
    const checkpoint = await repo.insert(at, plan.keyId, heads, (id) => plan.sign(id, at, heads));
    // After the insert, and only in a turn that made one: the newest checkpoint always stays, so SQLite (whose
    // ids follow the largest left) never gives a later checkpoint the id of one removed.
    const pruned = plan.pruneBefore === undefined ? 0 : await repo.deleteOlderThan(Math.min(plan.pruneBefore, at), plan.pruneLimit ?? 1000);
    return { busy: false, checkpoint, pruned };
  });
}
