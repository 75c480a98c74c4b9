// Audit rows: written in batches, read newest first with an id cursor, pruned by age and count.

import { placeholderRows, type Sql, type SqlValue } from "./db.ts";

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
  status: number;
  bytesIn: number;
  bytesOut: number;
  durationMs: number;
  error: string | null;
  /** Made on a session minted by `vault run --contain`. */
  contained: boolean;
  /** `user:<id>` of the human who approved this exact request (rules with "approve": "each"), else null. */
  approvedBy: string | null;
}

export interface AuditFilter {
  vaultId: number;
  before?: number;
  after?: number;
  host?: string;
  status?: number;
  principal?: string;
  limit: number;
}

const COLUMNS = `id, at, principal, vault_id AS "vaultId", vault, ingress, method, host, path, service, credential_keys AS "credentialKeys",
  status, bytes_in AS "bytesIn", bytes_out AS "bytesOut", duration_ms AS "durationMs", error, contained, approved_by AS "approvedBy"`;

const FILTERED = `SELECT ${COLUMNS} FROM audit_logs WHERE vault_id = ?
  AND (CAST(? AS BIGINT) IS NULL OR id < ?) AND (CAST(? AS BIGINT) IS NULL OR id > ?) AND (CAST(? AS TEXT) IS NULL OR host = ?)
  AND (CAST(? AS INTEGER) IS NULL OR status = ?) AND (CAST(? AS TEXT) IS NULL OR principal = ?)`;
const LIST_DESC = `${FILTERED} ORDER BY id DESC LIMIT ?`;
const LIST_ASC = `${FILTERED} ORDER BY id ASC LIMIT ?`;

const INSERT_HEAD = `INSERT INTO audit_logs (at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by) VALUES`;
const AUDIT_COLUMNS = 17;
/** Rows per INSERT: 17 parameters each stays far below SQLite's and PostgreSQL's parameter limits. */
const INSERT_GROUP = 64;

export function auditRepo(sql: Sql) {
  return {
    async insert(rows: readonly Omit<AuditRow, "id">[]): Promise<void> {
      // Many rows per statement: one statement per proxied request was a measurable share of its
      // cost. At most INSERT_GROUP statement shapes (a full group and each remainder), each prepared once.
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
            r.status,
            r.bytesIn,
            r.bytesOut,
            r.durationMs,
            r.error,
            r.contained ? 1 : 0,
            r.approvedBy,
          );
        }
        await sql.run(`${INSERT_HEAD} ${placeholderRows(group.length, AUDIT_COLUMNS)}`, params);
      }
    },
    /** Newest first below `before`, or oldest first above `after` (for following). Fixed SQL; absent filters are NULL (cast, so PostgreSQL knows their type). */
    async list(f: AuditFilter): Promise<AuditRow[]> {
      const params = [
        f.vaultId,
        f.before ?? null,
        f.before ?? null,
        f.after ?? null,
        f.after ?? null,
        f.host ?? null,
        f.host ?? null,
        f.status ?? null,
        f.status ?? null,
        f.principal ?? null,
        f.principal ?? null,
        f.limit,
      ];
      const rows = await sql.all<AuditRow>(f.after !== undefined ? LIST_ASC : LIST_DESC, params);
      return rows.map((r) => ({
        ...r,
        id: Number(r.id),
        at: Number(r.at),
        vaultId: Number(r.vaultId),
        bytesIn: Number(r.bytesIn),
        bytesOut: Number(r.bytesOut),
        contained: Number(r.contained) === 1,
      }));
    },
    async prune(olderThan: number, keepRows: number): Promise<number> {
      let removed = await sql.run("DELETE FROM audit_logs WHERE at < ?", [olderThan]);
      const newest = await sql.get<{ id: number | null }>("SELECT MAX(id) AS id FROM audit_logs");
      if (newest?.id != null) removed += await sql.run("DELETE FROM audit_logs WHERE id <= ?", [Number(newest.id) - keepRows]);
      return removed;
    },
  };
}

export type AuditRepo = ReturnType<typeof auditRepo>;
