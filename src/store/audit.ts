// Audit rows: written in batches, read newest first with an id cursor, deleted by age and count in bounded
// statements (the retention loop's batches: audit-retention.ts).

import type { AnchorSigning } from "./audit-anchors.ts";
import { removePrefix, type PrefixRemoval } from "./audit-prune-batch.ts";
import { insertAuditRows, type AuditRow } from "./audit-batch.ts";
import type { Sql, SqlValue } from "./db.ts";
import { WOULD_REFUSE_PREDICATE } from "./policy-modes.ts";

/** A row of audit_logs: its shape is the writer's batches' (audit-batch.ts). */
export type { AuditRow };

export interface AuditFilter {
  vaultId: number;
  before?: number;
  after?: number;
  host?: string;
  status?: number;
  principal?: string;
  /** Only records report mode let through (`error` beginning `would_refuse:`). */
  wouldRefuse?: boolean;
  limit: number;
}

const COLUMNS = `id, at, principal, vault_id AS "vaultId", vault, ingress, method, host, path, service, credential_keys AS "credentialKeys",
  credential_refs AS "credentialRefs", status, bytes_in AS "bytesIn", bytes_out AS "bytesOut", duration_ms AS "durationMs", error, contained, approved_by AS "approvedBy",
  chain_seq AS "chainSeq", chain_prev AS "chainPrev", chain_hash AS "chainHash",
  llm_model AS "llmModel", input_tokens AS "inputTokens", output_tokens AS "outputTokens", total_tokens AS "totalTokens", cost_micros AS "costMicros",
  workload_issuer AS "workloadIssuer", workload_subject AS "workloadSubject"`;

// One fixed statement per filter shape, so each is an index range scan in id order, stopped at LIMIT
// (migration 19: audit_logs (vault_id, host | status | principal, id); unfiltered: (vault_id, id)). An
// absent filter is left out, not `? IS NULL OR col = ?`, which no planner can turn into a range. The id
// cursor is one inclusive range, after + 1 to before - 1 (absent: 1 to NO_UPPER_ID): written as
// BETWEEN, SQLite without statistics (the broker never runs ANALYZE) picks the filter's index, where
// `id > ? AND id < ?` made it prefer (vault_id, id) and filter the whole vault.
const FROM = "FROM audit_logs WHERE vault_id = ? AND id BETWEEN ? AND ?";
const HOST = "AND host = ?";
const STATUS = "AND status = ?";
const PRINCIPAL = "AND principal = ?";
const NEWEST = "ORDER BY id DESC LIMIT ?";
const OLDEST = "ORDER BY id ASC LIMIT ?";
/** At or above every id: ids are rowids / BIGINT identities from 1 and stay below 2^53 (read as numbers). */
const NO_UPPER_ID = Number.MAX_SAFE_INTEGER;

// Report mode's marked records (migration 28): a partial index of (vault_id, id) over them alone.
const WOULD_REFUSE_ONLY = `AND ${WOULD_REFUSE_PREDICATE}`;

/** The statement of each shape (filterShape(): bit 1 host, bit 2 status, bit 4 principal, bit 8 would_refuse), written once. */
function statements(order: string): readonly string[] {
  return Array.from({ length: 16 }, (_, bits) => {
    const terms = [bits & 1 ? HOST : "", bits & 2 ? STATUS : "", bits & 4 ? PRINCIPAL : "", bits & 8 ? WOULD_REFUSE_ONLY : ""].filter(Boolean);
    return [`SELECT ${COLUMNS} ${FROM}`, ...terms, order].join(" ");
  });
}
const LIST_NEWEST = statements(NEWEST);
const LIST_OLDEST = statements(OLDEST);

function filterShape(f: AuditFilter): number {
  return (f.host !== undefined ? 1 : 0) | (f.status !== undefined ? 2 : 0) | (f.principal !== undefined ? 4 : 0) | (f.wouldRefuse ? 8 : 0);
}

/** The statement and parameters list() runs for `f` (exported for the query-plan tests). */
export function auditListQuery(f: AuditFilter): { sql: string; params: SqlValue[] } {
  const params: SqlValue[] = [f.vaultId, (f.after ?? 0) + 1, f.before === undefined ? NO_UPPER_ID : f.before - 1];
  if (f.host !== undefined) params.push(f.host);
  if (f.status !== undefined) params.push(f.status);
  if (f.principal !== undefined) params.push(f.principal);
  params.push(f.limit);
  const sql = (f.after !== undefined ? LIST_OLDEST : LIST_NEWEST)[filterShape(f)]!;
  return { sql, params };
}

// Chain order, and id order among records that claim the same seq (an insertion: the verifier names it).
const CHAINED = "FROM audit_logs WHERE vault_id = ? AND chain_seq > ? ORDER BY chain_seq, id LIMIT ?";
const CHAINED_AT = "FROM audit_logs WHERE vault_id = ? AND chain_seq = ? ORDER BY id";
// Records without chain fields: written before the chain began (ids up to the one migration 25 noted; none on a broker
// installed since), or inserted since, whatever id they were given (the verifier's "inserted").
const PRECHAIN_MAX_ID = "SELECT prechain_max_id AS id FROM audit_chain_start WHERE id = 1";
const UNCHAINED_BEFORE = "SELECT COUNT(*) AS n FROM audit_logs WHERE vault_id = ? AND chain_seq IS NULL AND id <= ?";
const UNCHAINED_AFTER = "SELECT id FROM audit_logs WHERE vault_id = ? AND chain_seq IS NULL AND id > ? ORDER BY id LIMIT ?";
const UNCHAINED_ANY = "SELECT id FROM audit_logs WHERE vault_id = ? AND chain_seq IS NULL ORDER BY id LIMIT ?";

function normaliseRow(r: AuditRow): AuditRow {
  const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    ...r,
    id: Number(r.id),
    at: Number(r.at),
    vaultId: Number(r.vaultId),
    bytesIn: Number(r.bytesIn),
    bytesOut: Number(r.bytesOut),
    contained: Number(r.contained) === 1,
    chainSeq: n(r.chainSeq),
    chainPrev: r.chainPrev ?? null,
    chainHash: r.chainHash ?? null,
    // BIGINT columns: PostgreSQL's driver may answer text; the hash needs the numbers the writer hashed.
    llmModel: r.llmModel ?? null,
    inputTokens: n(r.inputTokens),
    outputTokens: n(r.outputTokens),
    totalTokens: n(r.totalTokens),
    costMicros: n(r.costMicros),
    workloadIssuer: r.workloadIssuer ?? null,
    workloadSubject: r.workloadSubject ?? null,
  };
}

// Retention reads the id bounds (two primary-key probes, never a count) and deletes one id range at a time,
// so a statement can touch no more rows than its range holds, whatever the planner does. `+at` keeps
// audit_logs_at out of the plan, so its cost follows the range, not the size of the age backlog; the
// first shape, `id IN (SELECT id … LIMIT ?)`, let PostgreSQL hash-join it against a full table scan.
const ID_BOUNDS = "SELECT (SELECT MIN(id) FROM audit_logs) AS lowest, (SELECT MAX(id) FROM audit_logs) AS highest";
// Retention removes a prefix of the log by id, never a row behind a kept one: each vault's hash chain then
// loses only its oldest records, and the anchor (the last removed record's seq and hash) is where
// verification starts (docs/audit-chain.md). The first row in the range that must stay ends the prefix.
const FIRST_KEPT = "SELECT MIN(id) AS stop FROM audit_logs WHERE id BETWEEN ? AND ? AND id > ? AND +at >= ?";
const ANCHORS_IN = `SELECT vault_id AS "vaultId", MAX(chain_seq) AS seq FROM audit_logs WHERE id BETWEEN ? AND ? AND chain_seq IS NOT NULL GROUP BY vault_id ORDER BY vault_id`;
const HASH_AT = `SELECT chain_hash AS hash FROM audit_logs WHERE vault_id = ? AND chain_seq = ?`;
// The anchor with retention's signature of it (store/audit-anchors.ts; nulls when no key was given: tests' stores).
const MOVE_ANCHOR =
  "UPDATE audit_chains SET anchor_seq = ?, anchor_hash = ?, anchor_at = ?, anchor_key_id = ?, anchor_signature = ? WHERE vault_id = ? AND anchor_seq < ?";
const DELETE_RANGE = "DELETE FROM audit_logs WHERE id BETWEEN ? AND ?";

/** The statements retention runs (exported for the query-plan tests, and sent to the SQLite worker, which runs the same batch). */
export const RETENTION_STATEMENTS = {
  idBounds: ID_BOUNDS,
  firstKept: FIRST_KEPT,
  anchorsIn: ANCHORS_IN,
  hashAt: HASH_AT,
  moveAnchor: MOVE_ANCHOR,
  deleteRange: DELETE_RANGE,
} as const;

export function auditRepo(sql: Sql) {
  return {
    /** Rows as the writer makes them (chain fields included when it set them), many to a statement (audit-batch.ts). */
    async insert(rows: readonly Omit<AuditRow, "id">[]): Promise<void> {
      await insertAuditRows((statement, params) => sql.run(statement, params), rows);
    },
    /** Newest first below `before`, or oldest first above `after` (for following); each filter shape its own fixed, indexed SQL. */
    async list(f: AuditFilter): Promise<AuditRow[]> {
      const q = auditListQuery(f);
      const rows = await sql.all<AuditRow>(q.sql, q.params);
      return rows.map(normaliseRow);
    },
    /** A vault's chained records in chain order, after `afterSeq`, at most `limit` (verification and export). */
    async chained(vaultId: number, afterSeq: number, limit: number): Promise<AuditRow[]> {
      const rows = await sql.all<AuditRow>(`SELECT ${COLUMNS} ${CHAINED}`, [vaultId, afterSeq, limit]);
      return rows.map(normaliseRow);
    },
    /** Every record of the vault that claims chain seq `seq` (one, unless a record was inserted), by id. */
    async chainedAt(vaultId: number, seq: number): Promise<AuditRow[]> {
      const rows = await sql.all<AuditRow>(`SELECT ${COLUMNS} ${CHAINED_AT}`, [vaultId, seq]);
      return rows.map(normaliseRow);
    },
    /**
     * The vault's records without chain fields: how many were written before the chain began (migration 23; ids up
     * to the one migration 25 noted), and the ids (at most `limit`) of the others, which only an insertion makes.
     */
    async unchained(vaultId: number, limit: number): Promise<{ beforeChain: number; afterChain: number[] }> {
      const start = await sql.get<{ id: number | null }>(PRECHAIN_MAX_ID);
      if (start?.id == null) {
        const all = await sql.all<{ id: number }>(UNCHAINED_ANY, [vaultId, limit]);
        return { beforeChain: 0, afterChain: all.map((r) => Number(r.id)) };
      }
      const before = await sql.get<{ n: number }>(UNCHAINED_BEFORE, [vaultId, Number(start.id)]);
      const after = await sql.all<{ id: number }>(UNCHAINED_AFTER, [vaultId, Number(start.id), limit]);
      return { beforeChain: Number(before?.n ?? 0), afterChain: after.map((r) => Number(r.id)) };
    },
    /** The lowest and highest id, or undefined when the log is empty. */
    async idBounds(): Promise<{ lowest: number; highest: number } | undefined> {
      const r = await sql.get<{ lowest: number | null; highest: number | null }>(ID_BOUNDS);
      return r?.lowest == null || r.highest == null ? undefined : { lowest: Number(r.lowest), highest: Number(r.highest) };
    },
    /**
     * Deletes, among the rows with `fromId` <= id <= `toId` (so never more than that many), those with an id at
     * or below `throughId` (the row cap, by id) or an `at` before `olderThan`, as a prefix (store/audit-prune-batch.ts).
     */
    deletePrunable(
      fromId: number,
      toId: number,
      throughId: number,
      olderThan: number,
      signing?: AnchorSigning,
      waitForCheckpoints = true,
    ): Promise<PrefixRemoval> {
      return removePrefix(
        (q, params) => sql.all(q, [...params]),
        (q, params) => sql.run(q, [...params]),
        RETENTION_STATEMENTS,
        { fromId, toId, throughId, olderThan, waitForCheckpoints },
        signing,
      );
    },
    /**
     * Both limits in unbounded statements, as the broker once pruned hourly (seconds on the event loop over a
     * million rows): kept for bench/audit-prune.ts to compare against. The broker runs pruneAuditBatch.
     */
    async prune(olderThan: number, keepRows: number): Promise<number> {
      let removed = await sql.run("DELETE FROM audit_logs WHERE at < ?", [olderThan]);
      const newest = await sql.get<{ id: number | null }>("SELECT MAX(id) AS id FROM audit_logs");
      if (newest?.id != null) removed += await sql.run("DELETE FROM audit_logs WHERE id <= ?", [Number(newest.id) - keepRows]);
      return removed;
    },
  };
}

export type AuditRepo = ReturnType<typeof auditRepo>;
