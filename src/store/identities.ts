// Identity-provider state: linked identities, pending sign-in states and CLI hand-over codes.
// States and codes are stored only as SHA-256 hashes and are deleted when read (single use).
// SECRET: nonce and code_verifier are per-flow secrets; never log rows of oidc_states.

import type { Sql } from "./db.ts";

export interface IdentityRow {
  id: number;
  userId: number;
  issuer: string;
  subject: string;
  email: string;
  createdAt: number;
}

export type OidcPurpose = "login" | "link" | "cli";

export interface OidcStateRow {
  stateHash: string;
  nonce: string;
  codeVerifier: string;
  purpose: OidcPurpose;
  userId: number | null;
  returnTo: string | null;
  cliPort: number | null;
  cliNonce: string | null;
  expiresAt: number;
}

export interface OidcCliCodeRow {
  codeHash: string;
  userId: number;
  cliNonce: string;
  expiresAt: number;
}

const IDENTITY = `id, user_id AS "userId", issuer, subject, email, created_at AS "createdAt"`;
const STATE = `state_hash AS "stateHash", nonce, code_verifier AS "codeVerifier", purpose, user_id AS "userId", return_to AS "returnTo", cli_port AS "cliPort", cli_nonce AS "cliNonce", expires_at AS "expiresAt"`;

export function identityRepo(sql: Sql) {
  return {
    async create(i: Omit<IdentityRow, "id">): Promise<IdentityRow> {
      const row = await sql.get<IdentityRow>(
        `INSERT INTO user_identities (user_id, issuer, subject, email, created_at) VALUES (?, ?, ?, ?, ?) RETURNING ${IDENTITY}`,
        [i.userId, i.issuer, i.subject, i.email, i.createdAt],
      );
      return normaliseIdentity(row!);
    },
    async bySubject(issuer: string, subject: string): Promise<IdentityRow | undefined> {
      const row = await sql.get<IdentityRow>(`SELECT ${IDENTITY} FROM user_identities WHERE issuer = ? AND subject = ?`, [issuer, subject]);
      return row && normaliseIdentity(row);
    },
    async forUser(userId: number): Promise<IdentityRow[]> {
      const rows = await sql.all<IdentityRow>(`SELECT ${IDENTITY} FROM user_identities WHERE user_id = ? ORDER BY created_at, id`, [userId]);
      return rows.map(normaliseIdentity);
    },
    async remove(id: number, userId: number): Promise<boolean> {
      return (await sql.run("DELETE FROM user_identities WHERE id = ? AND user_id = ?", [id, userId])) > 0;
    },
    async putState(s: OidcStateRow): Promise<void> {
      await sql.run(
        "INSERT INTO oidc_states (state_hash, nonce, code_verifier, purpose, user_id, return_to, cli_port, cli_nonce, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [s.stateHash, s.nonce, s.codeVerifier, s.purpose, s.userId, s.returnTo, s.cliPort, s.cliNonce, s.expiresAt],
      );
    },
    /** Deletes and returns the state (expired or not: the caller checks expiry). */
    async takeState(stateHash: string): Promise<OidcStateRow | undefined> {
      const row = await sql.get<OidcStateRow>(`DELETE FROM oidc_states WHERE state_hash = ? RETURNING ${STATE}`, [stateHash]);
      return row && normaliseState(row);
    },
    async pruneStates(now: number): Promise<number> {
      return sql.run("DELETE FROM oidc_states WHERE expires_at <= ?", [now]);
    },
    async putCliCode(c: OidcCliCodeRow): Promise<void> {
      await sql.run("INSERT INTO oidc_cli_codes (code_hash, user_id, cli_nonce, expires_at) VALUES (?, ?, ?, ?)", [
        c.codeHash,
        c.userId,
        c.cliNonce,
        c.expiresAt,
      ]);
    },
    async takeCliCode(codeHash: string): Promise<OidcCliCodeRow | undefined> {
      const row = await sql.get<OidcCliCodeRow>(
        `DELETE FROM oidc_cli_codes WHERE code_hash = ? RETURNING code_hash AS "codeHash", user_id AS "userId", cli_nonce AS "cliNonce", expires_at AS "expiresAt"`,
        [codeHash],
      );
      return row && { ...row, userId: Number(row.userId), expiresAt: Number(row.expiresAt) };
    },
  };
}

export type IdentityRepo = ReturnType<typeof identityRepo>;

function normaliseIdentity(r: IdentityRow): IdentityRow {
  return { ...r, id: Number(r.id), userId: Number(r.userId), createdAt: Number(r.createdAt) };
}

function normaliseState(r: OidcStateRow): OidcStateRow {
  return {
    ...r,
    userId: r.userId === null ? null : Number(r.userId),
    cliPort: r.cliPort === null ? null : Number(r.cliPort),
    expiresAt: Number(r.expiresAt),
  };
}
