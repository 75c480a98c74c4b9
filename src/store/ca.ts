// Root CA rows: certificate in PEM, private key sealed by the vault layer (ciphertext only here).

import type { Sql } from "./db.ts";

export interface CaRow {
  id: number;
  certPem: string;
  keyNonce: Uint8Array;
  keyCiphertext: Uint8Array;
  createdAt: number;
  notAfter: number;
}

const COLUMNS = `id, cert_pem AS "certPem", key_nonce AS "keyNonce", key_ciphertext AS "keyCiphertext", created_at AS "createdAt", not_after AS "notAfter"`;

export function caRepo(sql: Sql) {
  return {
    async active(): Promise<CaRow | undefined> {
      const row = await sql.get<CaRow>(`SELECT ${COLUMNS} FROM ca_certs ORDER BY id DESC LIMIT 1`);
      return (
        row && {
          ...row,
          id: Number(row.id),
          keyNonce: new Uint8Array(row.keyNonce),
          keyCiphertext: new Uint8Array(row.keyCiphertext),
          createdAt: Number(row.createdAt),
          notAfter: Number(row.notAfter),
        }
      );
    },
    async insert(r: Omit<CaRow, "id">): Promise<void> {
      await sql.run("INSERT INTO ca_certs (cert_pem, key_nonce, key_ciphertext, created_at, not_after) VALUES (?, ?, ?, ?, ?)", [
        r.certPem,
        r.keyNonce,
        r.keyCiphertext,
        r.createdAt,
        r.notAfter,
      ]);
    },
  };
}

export type CaRepo = ReturnType<typeof caRepo>;
