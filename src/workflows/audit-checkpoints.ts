// The audit log's signed checkpoints as readers see them (docs/audit-chain.md, Checkpoints): the public key,
// and a vault's checkpoints, each with that vault's head and every head the signature covers (a checkpoint
// signs the heads of all the vaults that moved together, so checking the signature needs them all; they are
// vault ids, seqs and hashes, never a name or anything a record holds).

import type { AuditPublicKey } from "../crypto/index.ts";
import { InvalidRequest, NotFound } from "../errors.ts";
import type { Domain, OpenVault } from "../identity/index.ts";
import { iso, requireInVault } from "../identity/index.ts";
import type { AuditCheckpointRow, CheckpointHeadRow } from "../store/index.ts";

export const CHECKPOINT_PAGE_MAX = 1000;

export interface CheckpointHeadBody {
  vault_id: number;
  seq: number;
  hash: string;
}

export interface AuditCheckpointView {
  id: number;
  at: number;
  key_id: string;
  heads: CheckpointHeadBody[];
  signed_heads: CheckpointHeadBody[];
  signature: string;
}

export interface AuditCheckpointPageView {
  checkpoints: AuditCheckpointView[];
  next_after_id: number | null;
}

export interface AuditPublicKeyView {
  key_id: string;
  public_key_pem: string;
  created_at: string;
}

const headView = (h: CheckpointHeadRow): CheckpointHeadBody => ({ vault_id: h.vaultId, seq: h.seq, hash: h.hash });

/** A checkpoint as `vaultId`'s readers get it. */
export function viewCheckpoint(c: AuditCheckpointRow, vaultId: number): AuditCheckpointView {
  return {
    id: c.id,
    at: c.at,
    key_id: c.keyId,
    heads: c.heads.filter((h) => h.vaultId === vaultId).map(headView),
    signed_heads: c.heads.map(headView),
    signature: c.signature,
  };
}

/** The vault's checkpoints, oldest first, after `afterId` (readers of the vault's logs). */
export async function listAuditCheckpoints(d: Domain, open: OpenVault, q: { afterId?: number | undefined; limit: number }): Promise<AuditCheckpointPageView> {
  requireInVault(open, "read_logs");
  if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > CHECKPOINT_PAGE_MAX)
    throw new InvalidRequest(`limit must be 1 to ${CHECKPOINT_PAGE_MAX}`, "limit");
  const rows = await d.store.auditCheckpoints.listForVault(open.vault.id, q.afterId ?? 0, q.limit);
  const last = rows.at(-1);
  return { checkpoints: rows.map((c) => viewCheckpoint(c, open.vault.id)), next_after_id: rows.length === q.limit && last ? last.id : null };
}

/**
 * The signing key's public half: the one this instance loaded and checked at start when given, else as
 * stored (an API without a running checkpointer, in tests). 404 before the first start made one.
 */
export async function auditPublicKey(d: Domain, loaded?: AuditPublicKey): Promise<AuditPublicKeyView> {
  const key = loaded ?? (await d.store.auditCheckpoints.signingKey());
  if (!key) throw new NotFound("this broker has no audit signing key yet (it is made on the server's first start)");
  return { key_id: key.keyId, public_key_pem: key.publicKeyPem, created_at: iso(key.createdAt) };
}
