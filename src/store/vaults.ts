// Vault rows. Deleting a vault cascades (foreign keys) to everything that belongs to it.

import type { Sql } from "./db.ts";

export type UnmatchedHosts = "tunnel" | "deny";

export interface VaultRow {
  id: number;
  name: string;
  unmatchedHosts: UnmatchedHosts;
  createdAt: number;
}

const COLUMNS = `id, name, unmatched_hosts AS "unmatchedHosts", created_at AS "createdAt"`;

export function vaultRepo(sql: Sql) {
  return {
    async create(name: string, now: number): Promise<VaultRow> {
      const row = await sql.get<VaultRow>(`INSERT INTO vaults (name, created_at) VALUES (?, ?) RETURNING ${COLUMNS}`, [name, now]);
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
  return { id: Number(r.id), name: r.name, unmatchedHosts: r.unmatchedHosts, createdAt: Number(r.createdAt) };
}
