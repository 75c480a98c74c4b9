// Persistence of the single keyring row. Holds key material exactly as the vault layer hands it
// over (raw only in passwordless mode); never derives, wraps or unwraps anything itself.

import type { Sql } from "./db.ts";

export type KeyringRow =
  | { mode: "plain"; dataKey: Uint8Array }
  | { mode: "password"; wrappedKey: Uint8Array; wrapNonce: Uint8Array; kdfSalt: Uint8Array; kdfParams: string };

interface RawRow {
  mode: "plain" | "password";
  data_key: Uint8Array | null;
  wrapped_key: Uint8Array | null;
  wrap_nonce: Uint8Array | null;
  kdf_salt: Uint8Array | null;
  kdf_params: string | null;
}

export function keyringRepo(sql: Sql) {
  return {
    async get(): Promise<KeyringRow | undefined> {
      const r = await sql.get<RawRow>("SELECT mode, data_key, wrapped_key, wrap_nonce, kdf_salt, kdf_params FROM keyring WHERE id = 1");
      if (!r) return undefined;
      if (r.mode === "plain") return { mode: "plain", dataKey: bytes(r.data_key) };
      return {
        mode: "password",
        wrappedKey: bytes(r.wrapped_key),
        wrapNonce: bytes(r.wrap_nonce),
        kdfSalt: bytes(r.kdf_salt),
        kdfParams: r.kdf_params ?? "",
      };
    },

    /** Inserts the first keyring; returns false when one already exists (another process won). */
    async create(row: KeyringRow, now: number): Promise<boolean> {
      const v = columns(row);
      const changed = await sql.run(
        `INSERT INTO keyring (id, mode, data_key, wrapped_key, wrap_nonce, kdf_salt, kdf_params, created_at, updated_at)
         VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
        [...v, now, now],
      );
      return changed === 1;
    },

    /**
     * Inside a transaction: holds the keyring row's write lock until the transaction ends. It is the
     * instance's one singleton row, so one-time decisions (who is the first user) take turns across
     * connections and instances; SQLite's single writer already serializes them.
     */
    async lock(): Promise<void> {
      await sql.run("UPDATE keyring SET updated_at = updated_at WHERE id = 1");
    },

    async replace(row: KeyringRow, now: number): Promise<void> {
      const v = columns(row);
      await sql.run("UPDATE keyring SET mode = ?, data_key = ?, wrapped_key = ?, wrap_nonce = ?, kdf_salt = ?, kdf_params = ?, updated_at = ? WHERE id = 1", [
        ...v,
        now,
      ]);
    },
  };
}

export type KeyringRepo = ReturnType<typeof keyringRepo>;

function columns(row: KeyringRow) {
  return row.mode === "plain"
    ? (["plain", row.dataKey, null, null, null, null] as const)
    : (["password", null, row.wrappedKey, row.wrapNonce, row.kdfSalt, row.kdfParams] as const);
}

function bytes(v: Uint8Array | null): Uint8Array {
  if (!v) throw new Error("keyring row is incomplete");
  return new Uint8Array(v);
}
