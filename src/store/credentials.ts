// Credential rows: ciphertext in, ciphertext out. This module never sees a plaintext value. A row holds
// either a sealed value or a reference into an external secret store (issue 36): names only, stored as
// JSON, with empty nonce and ciphertext so that opening it as a value fails closed.

import type { Sql } from "./db.ts";
import { assertObject, fail, parseStoredJson } from "./stored-json.ts";

/** Where a reference credential's value lives: a connection's name and the store's own address of it. */
export interface CredentialReference {
  readonly connection: string;
  readonly path: string;
  readonly field?: string;
  readonly version?: string;
}

export interface CredentialRow {
  vaultId: number;
  key: string;
  nonce: Uint8Array;
  ciphertext: Uint8Array;
  /** Set for a reference credential (then nonce and ciphertext are empty). */
  reference: CredentialReference | null;
  updatedAt: number;
}

const COLUMNS = `vault_id AS "vaultId", key, nonce, ciphertext, reference, updated_at AS "updatedAt"`;
const EMPTY = new Uint8Array(0);

export function credentialRepo(sql: Sql) {
  return {
    /** A sealed value, or (with `reference`) a reference whose value lives in a store. */
    async put(
      row: { vaultId: number; key: string } & ({ nonce: Uint8Array; ciphertext: Uint8Array } | { reference: CredentialReference }),
      now: number,
    ): Promise<void> {
      const sealed = "reference" in row ? { nonce: EMPTY, ciphertext: EMPTY, reference: JSON.stringify(row.reference) } : { ...row, reference: null };
      await sql.run(
        `INSERT INTO credentials (vault_id, key, nonce, ciphertext, reference, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (vault_id, key) DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, reference = excluded.reference, updated_at = excluded.updated_at`,
        [row.vaultId, row.key, sealed.nonce, sealed.ciphertext, sealed.reference, now, now],
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
    /** Every reference credential (of one vault, or all): what a connection's page and check list. */
    async references(vaultId?: number): Promise<CredentialRow[]> {
      const rows =
        vaultId === undefined
          ? await sql.all<CredentialRow>(`SELECT ${COLUMNS} FROM credentials WHERE reference IS NOT NULL ORDER BY vault_id, key`)
          : await sql.all<CredentialRow>(`SELECT ${COLUMNS} FROM credentials WHERE reference IS NOT NULL AND vault_id = ? ORDER BY key`, [vaultId]);
      return rows.map(normalise);
    },
  };
}

export type CredentialRepo = ReturnType<typeof credentialRepo>;

function normalise(r: CredentialRow): CredentialRow {
  const vaultId = Number(r.vaultId);
  const raw = r.reference as unknown;
  const reference = raw === null || raw === undefined ? null : parseStoredJson("credentials", vaultId, "reference", raw, assertReference);
  return { vaultId, key: r.key, nonce: new Uint8Array(r.nonce), ciphertext: new Uint8Array(r.ciphertext), reference, updatedAt: Number(r.updatedAt) };
}

function assertReference(v: unknown, at: string): asserts v is CredentialReference {
  assertObject(v, at);
  if (typeof v.connection !== "string" || typeof v.path !== "string") fail(at, "must name a connection and a path");
  if ((v.field !== undefined && typeof v.field !== "string") || (v.version !== undefined && typeof v.version !== "string"))
    fail(at, "has a field or version that is not text");
}
