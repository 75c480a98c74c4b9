// User rows. Password hashes are stored with their salt and the Argon2id parameters that made them.

import type { Sql } from "./db.ts";

export type InstanceRole = "owner" | "member";

export interface UserRow {
  id: number;
  email: string;
  passwordHash: Uint8Array;
  passwordSalt: Uint8Array;
  passwordParams: string;
  role: InstanceRole;
  createdAt: number;
}

const COLUMNS = `id, email, password_hash AS "passwordHash", password_salt AS "passwordSalt", password_params AS "passwordParams", role, created_at AS "createdAt"`;

export function userRepo(sql: Sql) {
  return {
    async create(u: Omit<UserRow, "id">): Promise<UserRow> {
      const row = await sql.get<UserRow>(
        `INSERT INTO users (email, password_hash, password_salt, password_params, role, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
        [u.email, u.passwordHash, u.passwordSalt, u.passwordParams, u.role, u.createdAt],
      );
      return normalise(row!);
    },
    async byEmail(email: string): Promise<UserRow | undefined> {
      const row = await sql.get<UserRow>(`SELECT ${COLUMNS} FROM users WHERE email = ?`, [email]);
      return row && normalise(row);
    },
    async byId(id: number): Promise<UserRow | undefined> {
      const row = await sql.get<UserRow>(`SELECT ${COLUMNS} FROM users WHERE id = ?`, [id]);
      return row && normalise(row);
    },
    async count(): Promise<number> {
      const row = await sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM users");
      return Number(row?.n ?? 0);
    },
    async setPassword(id: number, hash: Uint8Array, salt: Uint8Array, params: string): Promise<void> {
      await sql.run("UPDATE users SET password_hash = ?, password_salt = ?, password_params = ? WHERE id = ?", [hash, salt, params, id]);
    },
  };
}

export type UserRepo = ReturnType<typeof userRepo>;

function normalise(r: UserRow): UserRow {
  return { ...r, id: Number(r.id), passwordHash: new Uint8Array(r.passwordHash), passwordSalt: new Uint8Array(r.passwordSalt), createdAt: Number(r.createdAt) };
}
