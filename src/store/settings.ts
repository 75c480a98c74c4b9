// Instance settings as named JSON values (owner settings such as allowed signup domains).

import type { Sql } from "./db.ts";

export function settingRepo(sql: Sql) {
  return {
    async get<T>(name: string): Promise<T | undefined> {
      const row = await sql.get<{ value: string }>("SELECT value FROM settings WHERE name = ?", [name]);
      return row ? (JSON.parse(row.value) as T) : undefined;
    },
    async put(name: string, value: unknown, now: number): Promise<void> {
      await sql.run(
        "INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        [name, JSON.stringify(value), now],
      );
    },
  };
}

export type SettingRepo = ReturnType<typeof settingRepo>;
