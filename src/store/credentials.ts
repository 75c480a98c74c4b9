// Credential rows: ciphertext in, ciphertext out. This module never sees a plaintext value.

import type { Sql } from "./db.ts";

export interface CredentialRow {
  vaultId: number;
  key: string;
  nonce: Uint8Array;
  ciphertext: Uint8Array;
  updatedAt: number;
}

const COLUMNS = `vault_id AS "vaultId", key, nonce, ciphertext, updated_at AS "updatedAt"`;

export function credentialRepo(sql: Sql) {
  return {
    async put(row: Omit<CredentialRow, "updatedAt">, now: number): Promise<void> {
      await sql.run(
        `INSERT INTO credentials (vault_id, key, nonce, ciphertext, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (vault_id, key) DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, updated_at = excluded.updated_at`,
        [row.vaultId, row.key, row.nonce, row.ciphertext, now, now],
      );
    },
    async get(vaultId: number, key: string): Promise<CredentialRow | undefined> {
      const row = await sql.get<CredentialRow>(`SELECT ${COLUMNS} FROM credentials WHERE vault_id = ? AND key = ?`, [vaultId, key]);
      return row && normalise(row);
    },
    async list(vaultId: number): Promise<CredentialRow[]> {
      return (await sql.all<CredentialRow>(`SELECT ${COLUMNS} FROM credentials WHERE vault_id = ? ORDER BY key`, [vaultId])).map(normalise);
    },
    async keys(vaultId: number): Promise<string[]> {
      return (await sql.all<{ key: string }>("SELECT key FROM credentials WHERE vault_id = ? ORDER BY key", [vaultId])).map((r) => r.key);
    },
    async remove(vaultId: number, key: string): Promise<boolean> {
      return (await sql.run("DELETE FROM credentials WHERE vault_id = ? AND key = ?", [vaultId, key])) === 1;
    },
  };
}

export type CredentialRepo = ReturnType<typeof credentialRepo>;

function normalise(r: CredentialRow): CredentialRow {
  return { vaultId: Number(r.vaultId), key: r.key, nonce: new Uint8Array(r.nonce), ciphertext: new Uint8Array(r.ciphertext), updatedAt: Number(r.updatedAt) };
}
