// Vault rows. Deleting a vault cascades (foreign keys) to everything that belongs to it.

import type { Dialect, Sql } from "./db.ts";
import type { PolicyMode } from "./policy-modes.ts";

export type UnmatchedHosts = "tunnel" | "deny";

export interface VaultRow {
  id: number;
  name: string;
  unmatchedHosts: UnmatchedHosts;
  /** Report mode (migration 28, policy-modes.ts): refusals of the rules and the unmatched-host policy let through, marked. */
  policyMode: PolicyMode;
  createdAt: number;
}

const COLUMNS = `id, name, unmatched_hosts AS "unmatchedHosts", policy_mode AS "policyMode", created_at AS "createdAt"`;

// A vault's id names its audit records and hash chain, which outlive it: an id is never given twice.
// PostgreSQL's identity never reuses one; SQLite's rowid would reuse a deleted highest id, so there the
// next id is past every id any vault, audit record or chain has had.
const CREATE = `INSERT INTO vaults (name, created_at) VALUES (?, ?) RETURNING ${COLUMNS}`;
const CREATE_PAST_EVERY_ID = `INSERT INTO vaults (id, name, created_at)
  SELECT COALESCE(MAX(used), 0) + 1, ?, ? FROM (SELECT MAX(id) AS used FROM vaults UNION ALL SELECT MAX(vault_id) FROM audit_logs UNION ALL SELECT MAX(vault_id) FROM audit_chains)
  RETURNING ${COLUMNS}`;

export function vaultRepo(sql: Sql, dialect: Dialect) {
  return {
    async create(name: string, now: number): Promise<VaultRow> {
      const row = await sql.get<VaultRow>(dialect === "sqlite" ? CREATE_PAST_EVERY_ID : CREATE, [name, now]);
      return normalise(row!);
    },
    async byName(name: string): Promise<VaultRow | undefined> {
      const row = await sql.get<VaultRow>(`SELECT ${COLUMNS} FROM vaults WHERE name = ?`, [name]);
      return row && normalise(row);
    },
    async byId(id: number): Promise<VaultRow | undefined> {
      const row = await sql.get<VaultRow>(`SELECT ${COLUMNS} FROM vaults WHERE id = ?`, [id]);
      return row && normalise(row);
    },
    async list(): Promise<VaultRow[]> {
      return (await sql.all<VaultRow>(`SELECT ${COLUMNS} FROM vaults ORDER BY name`)).map(normalise);
    },
    async setUnmatchedHosts(id: number, mode: UnmatchedHosts): Promise<void> {
      await sql.run("UPDATE vaults SET unmatched_hosts = ? WHERE id = ?", [mode, id]);
    },
    async remove(id: number): Promise<boolean> {
      return (await sql.run("DELETE FROM vaults WHERE id = ?", [id])) === 1;
    },
  };
}

export type VaultRepo = ReturnType<typeof vaultRepo>;

function normalise(r: VaultRow): VaultRow {
  return {
    id: Number(r.id),
    name: r.name,
    unmatchedHosts: r.unmatchedHosts,
    policyMode: r.policyMode === "report" ? "report" : "enforce",
    createdAt: Number(r.createdAt),
  };
}
