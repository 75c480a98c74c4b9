// Pending account connections (OAuth authorization code with PKCE at a template's provider): who started
// the flow, from which session, for which vault, template and operations. Stored only under the SHA-256 of
// the state and deleted when read (single use). SECRET: code_verifier is a per-flow secret; never log rows.

import type { Sql } from "./db.ts";

export interface ConnectStateRow {
  stateHash: string;
  codeVerifier: string; // SECRET: never log
  userId: number;
  sessionPublicId: string;
  vaultId: number;
  template: string;
  /** Operation names, in catalogue order. */
  operations: string[];
  expiresAt: number;
}

const COLUMNS = `state_hash AS "stateHash", code_verifier AS "codeVerifier", user_id AS "userId", session_public_id AS "sessionPublicId",
  vault_id AS "vaultId", template, operations, expires_at AS "expiresAt"`;

export function connectStateRepo(sql: Sql) {
  return {
    async put(s: ConnectStateRow): Promise<void> {
      await sql.run(
        `INSERT INTO connect_states (state_hash, code_verifier, user_id, session_public_id, vault_id, template, operations, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        // Operation names are single words: kept space-separated.
        [s.stateHash, s.codeVerifier, s.userId, s.sessionPublicId, s.vaultId, s.template, s.operations.join(" "), s.expiresAt],
      );
    },
    /** Deletes and returns the state (expired or not: the caller checks expiry). */
    async take(stateHash: string): Promise<ConnectStateRow | undefined> {
      const row = await sql.get<ConnectStateRow & { operations: string }>(`DELETE FROM connect_states WHERE state_hash = ? RETURNING ${COLUMNS}`, [stateHash]);
      return row && normalise(row);
    },
    async prune(now: number): Promise<number> {
      return sql.run("DELETE FROM connect_states WHERE expires_at <= ?", [now]);
    },
  };
}

export type ConnectStateRepo = ReturnType<typeof connectStateRepo>;

function normalise(r: Omit<ConnectStateRow, "operations"> & { operations: string }): ConnectStateRow {
  return {
    ...r,
    userId: Number(r.userId),
    vaultId: Number(r.vaultId),
    operations: String(r.operations).split(" ").filter(Boolean),
    expiresAt: Number(r.expiresAt),
  };
}
