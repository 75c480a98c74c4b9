// One batch of audit records written in one transaction (egress/audit.ts queues them): the journal's mark
// locked and moved (a batch retried after a lost answer is not written twice), each vault's hash chain moved on
// by its records (a record and its place in the chain are written together or not at all), the rows inserted
// many to a statement. The same code runs on the main connection (PostgreSQL, memory stores) and on a SQLite
// file's worker thread (sqlite-read-worker.ts), so it imports only what that thread may: the chain encoding.

import { AUDIT_CHAIN_GENESIS } from "./audit-chain-genesis.ts";
import { auditRecordHash, type ChainedRecord } from "./audit-chain-encoding.ts";
import { placeholderRows, type SqlValue } from "./db.ts";

/** A row of audit_logs (store/audit.ts reads and lists them). */
export interface AuditRow {
  id: number;
  at: number;
  principal: string;
  vaultId: number;
  vault: string;
  ingress: string;
  method: string;
  host: string;
  path: string;
  service: string | null;
  credentialKeys: string;
  /**
   * The credentials by reference among them, as people write them (`conn:path#field`, and a pinned version), as a
   * JSON array (a reference may hold a comma); null when there were none. Never a value. Absent (none) in rows
   * made before references (migration 22), such as old audit journal lines; list() always sets it.
   */
  credentialRefs?: string | null;
  status: number;
  bytesIn: number;
  bytesOut: number;
  durationMs: number;
  error: string | null;
  /** Made on a session minted by `vault run --contain`. */
  contained: boolean;
  /** `user:<id>` of the human who approved this exact request (rules with "approve": "each"), else null. */
  approvedBy: string | null;
  /**
   * The hash chain (migration 23, docs/audit-chain.md): the record's place in its vault's chain, the previous
   * record's hash and its own. Set by the audit writer in the transaction that writes the record; null on rows
   * written before the chain began; absent on entries not yet written.
   */
  chainSeq?: number | null;
  chainPrev?: string | null;
  chainHash?: string | null;
  /**
   * What an LLM call used (migration 27, issue 38): the model and token counts the provider reported, and the cost in
   * integer micro-units of the price table's currency (null: the price table does not know the model). Null on records
   * that are not LLM calls; absent in rows and journal lines made before; list() always sets them. A record with usage
   * is hashed with the chain's v2 encoding (docs/audit-chain.md).
   */
  llmModel?: string | null;
  inputTokens?: number | null;
  outputTokens?: number | null;
  totalTokens?: number | null;
  costMicros?: number | null;
  /**
   * The workload that asked (migration 31, issue 39): the platform token's `iss` and `sub` of a session exchanged for
   * one. Null otherwise; absent in rows and journal lines made before. A record with a workload is hashed with the
   * chain's v3 encoding.
   */
  workloadIssuer?: string | null;
  workloadSubject?: string | null;
}

/** An audit record as the writer queues it: the row without its id (and, until this batch, its chain fields). */
export type AuditEntry = Omit<AuditRow, "id">;

/** A queued record: its sequence number under its mark (the journal's line number, or the process's own count) and the entry. */
export interface BatchRecord {
  readonly seq: number;
  readonly entry: AuditEntry;
  /** `{"seq":…,"entry":…}` as JSON, when the journal made it already (the worker is sent it rather than a second encoding). */
  readonly line?: string;
}

/** What a batch needs of a connection inside its transaction. */
export interface BatchSql {
  get<T>(sql: string, params: readonly SqlValue[]): Promise<T | undefined>;
  run(sql: string, params: readonly SqlValue[]): Promise<number>;
}

/**
 * The journal's mark, its row locked until the transaction ends: a batch given up on but still committing and its
 * retry cannot both write (PostgreSQL holds the second until the first ends; SQLite's writers take turns anyway).
 */
export const MARK_LOCK =
  "INSERT INTO audit_journal_marks (journal, seq) VALUES (?, 0) ON CONFLICT (journal) DO UPDATE SET seq = audit_journal_marks.seq RETURNING seq";
/** Moves the mark forward (never back). */
export const MARK_SET = "UPDATE audit_journal_marks SET seq = ? WHERE journal = ? AND seq < ?";
/** The vault's head, its row locked until the transaction ends (created at the genesis when the vault has none yet). */
export const HEAD_LOCK = `INSERT INTO audit_chains (vault_id, head_seq, head_hash, anchor_seq, anchor_hash) VALUES (?, 0, ?, 0, ?)
         ON CONFLICT (vault_id) DO UPDATE SET head_seq = audit_chains.head_seq RETURNING head_seq AS seq, head_hash AS hash`;
export const HEAD_SET = "UPDATE audit_chains SET head_seq = ?, head_hash = ? WHERE vault_id = ?";

const INSERT_HEAD = `INSERT INTO audit_logs (at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, credential_refs, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by, chain_seq, chain_prev, chain_hash,
  llm_model, input_tokens, output_tokens, total_tokens, cost_micros, workload_issuer, workload_subject) VALUES`;
const AUDIT_COLUMNS = 28;
/** Rows per INSERT: 28 parameters each (1,792 a group) stays far below SQLite's and PostgreSQL's parameter limits. */
const INSERT_GROUP = 64;

/** Inserts rows many to a statement (one statement per proxied request was a measurable share of its cost). */
export async function insertAuditRows(run: BatchSql["run"], rows: readonly AuditEntry[]): Promise<void> {
  // At most INSERT_GROUP statement shapes (a full group and each remainder), each prepared once.
  for (let at = 0; at < rows.length; at += INSERT_GROUP) {
    const group = rows.slice(at, at + INSERT_GROUP);
    const params: SqlValue[] = [];
    for (const r of group) {
      params.push(
        r.at,
        r.principal,
        r.vaultId,
        r.vault,
        r.ingress,
        r.method,
        r.host,
        r.path,
        r.service,
        r.credentialKeys,
        r.credentialRefs ?? null,
        r.status,
        r.bytesIn,
        r.bytesOut,
        r.durationMs,
        r.error,
        r.contained ? 1 : 0,
        r.approvedBy ?? null,
        r.chainSeq ?? null,
        r.chainPrev ?? null,
        r.chainHash ?? null,
        r.llmModel ?? null,
        r.inputTokens ?? null,
        r.outputTokens ?? null,
        r.totalTokens ?? null,
        r.costMicros ?? null,
        r.workloadIssuer ?? null,
        r.workloadSubject ?? null,
      );
    }
    await run(`${INSERT_HEAD} ${placeholderRows(group.length, AUDIT_COLUMNS)}`, params);
  }
}

/** The vault's head, locked for the transaction (see HEAD_LOCK). */
export async function lockHead(sql: BatchSql, vaultId: number): Promise<{ seq: number; hash: string }> {
  const row = await sql.get<{ seq: number; hash: string }>(HEAD_LOCK, [vaultId, AUDIT_CHAIN_GENESIS, AUDIT_CHAIN_GENESIS]);
  return { seq: Number(row!.seq), hash: row!.hash };
}

/** The journal's mark, locked for the transaction (see MARK_LOCK). */
export async function lockMark(sql: BatchSql, journal: string): Promise<number> {
  const row = await sql.get<{ seq: number }>(MARK_LOCK, [journal]);
  return row ? Number(row.seq) : 0;
}

/** What a batch does inside its transaction: the store's repositories (Store.transaction), or batchOps over a connection. */
export interface BatchOps {
  lockMark(journal: string): Promise<number>;
  setMark(journal: string, seq: number): Promise<void>;
  lockHead(vaultId: number): Promise<{ seq: number; hash: string }>;
  setHead(vaultId: number, seq: number, hash: string): Promise<void>;
  insert(rows: readonly AuditEntry[]): Promise<void>;
}

/** The same statements the repositories run, over a bare connection (the SQLite worker thread's). */
export function batchOps(sql: BatchSql): BatchOps {
  return {
    lockMark: (journal) => lockMark(sql, journal),
    setMark: async (journal, seq) => void (await sql.run(MARK_SET, [seq, journal, seq])),
    lockHead: (vaultId) => lockHead(sql, vaultId),
    setHead: async (vaultId, seq, hash) => void (await sql.run(HEAD_SET, [seq, hash, vaultId])),
    insert: (rows) => insertAuditRows((statement, params) => sql.run(statement, params), rows),
  };
}

/**
 * Writes the batch's records the database lacks (those after `mark`'s seq: the journal's, or a process's own without
 * one), chained, and moves the mark. Call inside one transaction. Returns each vault's head seq after the batch.
 */
export async function writeAuditBatch(ops: BatchOps, mark: string, batch: readonly BatchRecord[]): Promise<Map<number, number>> {
  const heads = new Map<number, number>();
  const written = await ops.lockMark(mark);
  const missing = batch.filter((r) => r.seq > written);
  if (missing.length) {
    const rows = await chained(
      ops,
      missing.map((r) => r.entry),
    );
    for (const r of rows) heads.set(r.vaultId, r.chainSeq!);
    await ops.insert(rows);
  }
  if (batch.length) await ops.setMark(mark, batch[batch.length - 1]!.seq);
  return heads;
}

/**
 * The entries with their chain fields (docs/audit-chain.md): per vault, in the batch's order, each record's
 * seq follows its vault's head, its prev is the head's hash, and the head moves to it. Heads are locked in
 * vault order, so two instances writing batches that share vaults never wait on each other in a circle.
 */
async function chained(ops: BatchOps, entries: readonly AuditEntry[]): Promise<AuditEntry[]> {
  const vaults = [...new Set(entries.map((e) => e.vaultId))].sort((a, b) => a - b);
  const heads = new Map<number, { seq: number; hash: string }>();
  for (const v of vaults) heads.set(v, await ops.lockHead(v));
  const out = entries.map((e) => {
    const head = heads.get(e.vaultId)!;
    const seq = head.seq + 1;
    // The entry's usage fields, when it has them, go in too and select the v2 encoding (audit-chain-encoding.ts).
    const record: ChainedRecord = { ...e, seq, prev: head.hash, contained: Boolean(e.contained) };
    const hash = auditRecordHash(record);
    heads.set(e.vaultId, { seq, hash });
    return { ...e, chainSeq: seq, chainPrev: head.hash, chainHash: hash };
  });
  for (const [v, head] of heads) await ops.setHead(v, head.seq, head.hash);
  return out;
}
