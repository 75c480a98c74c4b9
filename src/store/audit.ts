// Audit rows: written in batches, read newest first with an id cursor, pruned by age and count.

import type { Sql } from "./db.ts";

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

const COLUMNS = `id, at, principal, vault_id AS vaultId, vault, ingress, method, host, path, service, credential_keys AS credentialKeys,
  status, bytes_in AS bytesIn, bytes_out AS bytesOut, duration_ms AS durationMs, error`;

export function auditRepo(sql: Sql) {
  return {
    async insert(rows: readonly Omit<AuditRow, "id">[]): Promise<void> {
      for (const r of rows) {
        await sql.run(
          `INSERT INTO audit_logs (at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, status, bytes_in, bytes_out, duration_ms, error)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [r.at, r.principal, r.vaultId, r.vault, r.ingress, r.method, r.host, r.path, r.service, r.credentialKeys, r.status, r.bytesIn, r.bytesOut, r.durationMs, r.error],
        );
      }
    },
    /** Newest first below `before`, or oldest first above `after` (for following). */
    async list(f: AuditFilter): Promise<AuditRow[]> {
      const where = ["vault_id = ?"];
      const params: (string | number)[] = [f.vaultId];
      if (f.before !== undefined) (where.push("id < ?"), params.push(f.before));
      if (f.after !== undefined) (where.push("id > ?"), params.push(f.after));
      if (f.host !== undefined) (where.push("host = ?"), params.push(f.host));
      if (f.status !== undefined) (where.push("status = ?"), params.push(f.status));
      if (f.principal !== undefined) (where.push("principal = ?"), params.push(f.principal));
      const order = f.after !== undefined ? "ASC" : "DESC";
      params.push(f.limit);
      // Only fixed clause text is joined here; every value is a parameter.
      const rows = await sql.all<AuditRow>(`SELECT ${COLUMNS} FROM audit_logs WHERE ${where.join(" AND ")} ORDER BY id ${order} LIMIT ?`, params);
      return rows.map((r) => ({ ...r, id: Number(r.id), at: Number(r.at), vaultId: Number(r.vaultId), bytesIn: Number(r.bytesIn), bytesOut: Number(r.bytesOut) }));
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
