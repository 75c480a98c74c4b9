// What the broker checks before it signs anything about a chain it reads back from the database (docs/audit-chain.md):
// someone with write access to the database could otherwise have it sign their edits. Retention signs the anchor it
// moves only when the records it removes continue the current (signed) anchor, one per seq, each linked to the one
// before and hashing to its contents, and agree with every checkpoint among them; the checkpointer signs a head only
// when the records since the last head it signed lead to it the same way. In the store, because retention runs here
// (on SQLite in its worker thread): node:crypto and the chain's encoding only.

import { verify } from "node:crypto";
import { anchorKeyObjects, anchorSignedBy, movedAnchorParams, type AnchorKey, type AnchorSigning } from "./audit-anchors.ts";
import { AUDIT_CHAIN_GENESIS } from "./audit-chain-genesis.ts";
import { auditRecordHash, checkpointMessage, type ChainedRecord } from "./audit-chain-encoding.ts";
import type { SqlValue } from "./db.ts";

/** Reads rows: the store's async Sql, or the SQLite worker's synchronous connection. */
export type ReadRows = (sql: string, params: readonly SqlValue[]) => Promise<Record<string, unknown>[]> | Record<string, unknown>[];
/** Runs a statement (the same two). */
export type RunStatement = (sql: string, params: readonly SqlValue[]) => unknown;

const SEGMENT = `SELECT id, at, principal, vault, ingress, method, host, path, service, credential_keys AS "credentialKeys",
  credential_refs AS "credentialRefs", status, bytes_in AS "bytesIn", bytes_out AS "bytesOut", duration_ms AS "durationMs", error,
  contained, approved_by AS "approvedBy", chain_seq AS seq, chain_prev AS prev, chain_hash AS hash, llm_model AS "llmModel",
  input_tokens AS "inputTokens", output_tokens AS "outputTokens", total_tokens AS "totalTokens", cost_micros AS "costMicros",
  workload_issuer AS "workloadIssuer", workload_subject AS "workloadSubject" FROM audit_logs`;

/** The statements of the checks (by the primary key or the (vault_id, chain_seq) index). */
export const CHAIN_CHECK_STATEMENTS = {
  /** A vault's chained records within an id range (what a retention batch removes of it). */
  inRange: `${SEGMENT} WHERE vault_id = ? AND id BETWEEN ? AND ? AND chain_seq IS NOT NULL ORDER BY chain_seq, id`,
  /** A vault's records with seq in (from, to], at most `limit`. */
  between: `${SEGMENT} WHERE vault_id = ? AND chain_seq > ? AND chain_seq <= ? ORDER BY chain_seq, id LIMIT ?`,
  anchor: `SELECT anchor_seq AS "seq", anchor_hash AS "hash", anchor_at AS "at", anchor_key_id AS "keyId", anchor_signature AS "signature"
    FROM audit_chains WHERE vault_id = ?`,
  /** The vault's checkpoints that signed a head with seq in (from, to]. */
  checkpointsIn: `SELECT c.id, c.at, c.key_id AS "keyId", c.heads, c.signature, v.seq, v.hash FROM audit_checkpoint_vaults v
    JOIN audit_checkpoints c ON c.id = v.checkpoint_id WHERE v.vault_id = ? AND v.seq > ? AND v.seq <= ? ORDER BY v.checkpoint_id`,
  /** The vault's newest checkpoints, newest first, at most `limit`. */
  lastCheckpoints: `SELECT c.id, c.at, c.key_id AS "keyId", c.heads, c.signature, v.seq, v.hash FROM audit_checkpoint_vaults v
    JOIN audit_checkpoints c ON c.id = v.checkpoint_id WHERE v.vault_id = ? ORDER BY v.checkpoint_id DESC LIMIT ?`,
  /** Within an id range, the first record above its vault's last checkpoint: retention stops before it. */
  firstUnsigned: `SELECT MIN(l.id) AS id FROM audit_logs l JOIN audit_chains c ON c.vault_id = l.vault_id
    WHERE l.id BETWEEN ? AND ? AND l.chain_seq > c.checkpoint_seq`,
} as const;

/** A point of a vault's chain. */
export interface ChainPoint {
  readonly seq: number;
  readonly hash: string;
}

/**
 * Whether `rows` (seq order) continue the chain from `start`: consecutive seqs, one record each, each `prev` the
 * hash before it and each hash its contents'. The last point, or why not.
 */
export function walkSegment(
  vaultId: number,
  start: ChainPoint,
  rows: readonly Record<string, unknown>[],
  seen?: (p: ChainPoint) => void,
): { end: ChainPoint } | { reason: string } {
  let at: ChainPoint = start;
  for (const r of rows) {
    const seq = Number(r.seq);
    const named = `record seq ${seq} (id ${Number(r.id)})`;
    if (seq <= at.seq) return { reason: `${named} is a second record at seq ${seq}, or lies at or below the anchor (seq ${start.seq})` };
    if (seq > at.seq + 1) return { reason: `records seq ${at.seq + 1} to ${seq - 1} are missing` };
    if (r.prev !== at.hash) return { reason: `${named} does not link to the record before it` };
    const hash = auditRecordHash(chainedRow(vaultId, seq, at.hash, r));
    if (hash !== r.hash) return { reason: `${named}: its hash does not match its contents` };
    at = { seq, hash };
    seen?.(at);
  }
  return { end: at };
}

const textOrNull = (v: unknown) => (v == null ? null : String(v));
/** A BIGINT count: text from PostgreSQL, a bigint from the SQLite worker; the hash takes the number the writer hashed. */
const countOrNull = (v: unknown) => (v == null ? null : Number(v));

/** A SEGMENT row as the encoding takes it, at `seq` after `prev`. */
function chainedRow(vaultId: number, seq: number, prev: string, r: Record<string, unknown>): ChainedRecord {
  return {
    vaultId,
    seq,
    prev,
    at: Number(r.at),
    principal: String(r.principal),
    vault: String(r.vault),
    ingress: String(r.ingress),
    method: String(r.method),
    host: String(r.host),
    path: String(r.path),
    service: textOrNull(r.service),
    credentialKeys: String(r.credentialKeys),
    credentialRefs: textOrNull(r.credentialRefs),
    status: Number(r.status),
    bytesIn: Number(r.bytesIn),
    bytesOut: Number(r.bytesOut),
    durationMs: Number(r.durationMs),
    error: textOrNull(r.error),
    contained: Boolean(Number(r.contained)),
    approvedBy: textOrNull(r.approvedBy),
    llmModel: textOrNull(r.llmModel),
    inputTokens: countOrNull(r.inputTokens),
    outputTokens: countOrNull(r.outputTokens),
    totalTokens: countOrNull(r.totalTokens),
    costMicros: countOrNull(r.costMicros),
    workloadIssuer: textOrNull(r.workloadIssuer),
    workloadSubject: textOrNull(r.workloadSubject),
  };
}

/** Whether a stored checkpoint row (checkpointsIn, lastCheckpoints) is `key`'s signature over heads that include (vault, seq, hash). */
export function checkpointSignedBy(key: AnchorKey, vaultId: number, row: Record<string, unknown>): boolean {
  if (row.keyId !== key.keyId || typeof row.signature !== "string" || !/^[A-Za-z0-9_-]{86}$/.test(row.signature)) return false;
  let heads: [number, number, string][];
  try {
    heads = JSON.parse(String(row.heads));
  } catch {
    return false;
  }
  if (!Array.isArray(heads) || !heads.some((h) => Array.isArray(h) && h[0] === vaultId && h[1] === Number(row.seq) && h[2] === row.hash)) return false;
  const message = checkpointMessage({
    id: Number(row.id),
    at: Number(row.at),
    keyId: key.keyId,
    heads: heads.map(([v, seq, hash]) => ({ vaultId: Number(v), seq: Number(seq), hash: String(hash) })),
  });
  return verify(null, message, anchorKeyObjects(key).publicKey, Buffer.from(row.signature, "base64url"));
}

/** The vault's anchor as stored, if it is the genesis or carries `key`'s signature; else why not. */
export async function signedAnchorOf(read: ReadRows, key: AnchorKey, vaultId: number): Promise<{ anchor: ChainPoint } | { reason: string }> {
  const a = (await read(CHAIN_CHECK_STATEMENTS.anchor, [vaultId]))[0];
  if (!a) return { reason: "the vault has no chain row" };
  const anchor = { seq: Number(a.seq), hash: String(a.hash) };
  if (anchor.seq === 0) return anchor.hash === AUDIT_CHAIN_GENESIS ? { anchor } : { reason: "its anchor at seq 0 is not the genesis" };
  const facts = { vaultId, seq: anchor.seq, hash: anchor.hash, at: Number(a.at), keyId: String(a.keyId) };
  if (typeof a.signature !== "string" || !anchorSignedBy(key, facts, a.signature))
    return { reason: `its anchor (seq ${anchor.seq}) is not signed by this broker's key` };
  return { anchor };
}

/**
 * Why retention may not sign vault `vaultId`'s new anchor at `seq` (removing its records with ids in [fromId, upTo]),
 * or undefined when it may: the records removed continue the signed anchor (one per seq, linked, hashing to their
 * contents), and every head a valid checkpoint signed among them is theirs. A chain made up to replace them either
 * crosses a checkpoint (and differs there) or ends before the next one, where the records kept no longer follow its
 * anchor (which every verification names); only records no checkpoint signs yet are beyond both, and retention does
 * not remove those (removePrefix). Costs a hash per record removed, nothing per record kept.
 */
async function checkedRemoval(
  read: ReadRows,
  key: AnchorKey,
  vaultId: number,
  seq: number,
  fromId: number,
  upTo: number,
): Promise<{ end: ChainPoint } | { reason: string }> {
  const from = await signedAnchorOf(read, key, vaultId);
  if ("reason" in from) return from;
  const hashes = new Map<number, string>();
  const removed = walkSegment(vaultId, from.anchor, await read(CHAIN_CHECK_STATEMENTS.inRange, [vaultId, fromId, upTo]), (p) => hashes.set(p.seq, p.hash));
  if ("reason" in removed) return removed;
  if (removed.end.seq !== seq) return { reason: `the records removed end at seq ${removed.end.seq}, not ${seq}` };
  for (const cp of await read(CHAIN_CHECK_STATEMENTS.checkpointsIn, [vaultId, from.anchor.seq, seq])) {
    if (!checkpointSignedBy(key, vaultId, cp)) continue; // not the broker's: it proves nothing either way
    if (hashes.get(Number(cp.seq)) !== cp.hash) return { reason: `checkpoint ${Number(cp.id)} signed another hash for seq ${Number(cp.seq)}` };
  }
  return removed;
}

/** An anchor retention moved without signing it, and why. */
export interface UnsignedAnchor {
  readonly vaultId: number;
  readonly seq: number;
  readonly reason: string;
}

/**
 * Moves each vault's anchor to its last record among ids [fromId, upTo] (`anchors`: ANCHORS_IN's rows, `hashAt`:
 * HASH_AT), signed where the records check out (over the hash the check reached, not a row read apart); the others
 * are moved unsigned, so verification names them, and returned.
 */
export async function moveAnchorsChecked(
  read: ReadRows,
  run: RunStatement,
  statements: { readonly anchorsIn: string; readonly hashAt: string; readonly moveAnchor: string },
  fromId: number,
  upTo: number,
  signing: AnchorSigning | undefined,
): Promise<UnsignedAnchor[]> {
  const unsigned: UnsignedAnchor[] = [];
  for (const a of await read(statements.anchorsIn, [fromId, upTo])) {
    const vaultId = Number(a.vaultId);
    const seq = Number(a.seq);
    const checked = signing ? await checkedRemoval(read, signing.key, vaultId, seq, fromId, upTo) : undefined;
    if (checked && "end" in checked) {
      await run(statements.moveAnchor, movedAnchorParams(vaultId, seq, checked.end.hash, signing));
      continue;
    }
    if (checked) unsigned.push({ vaultId, seq, reason: checked.reason });
    const at = (await read(statements.hashAt, [vaultId, seq]))[0];
    if (at) await run(statements.moveAnchor, movedAnchorParams(vaultId, seq, String(at.hash), undefined));
  }
  return unsigned;
}
