// A read-only look at a store for `broker doctor`: schema version, keyring mode and the root CA's public
// certificate. Never migrates, never writes and never reads key material (the CA key stays sealed, unread).

import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Db } from "./db.ts";
import { MIGRATIONS } from "./schema.ts";
import { openPostgres } from "./postgres.ts";
import { DB_FILE } from "./sqlite.ts";

export interface StoreSummary {
  /** Newest applied migration (0: none; a fresh store). */
  readonly schemaVersion: number;
  /** Newest migration this broker knows. */
  readonly knownVersion: number;
  readonly keyring: "plain" | "password" | undefined;
  readonly ca: { readonly certPem: string; readonly notAfter: number } | undefined;
}

const KNOWN_VERSION = Math.max(0, ...MIGRATIONS.map((m) => m.version));

/** Reads the SQLite file read-only; undefined when there is no file yet (the server creates it). */
export function inspectSqlite(dataDir: string): StoreSummary | undefined {
  const path = join(dataDir, DB_FILE);
  if (!existsSync(path)) return undefined;
  const db = new Database(path, { readonly: true });
  try {
    db.run("PRAGMA busy_timeout = 2000");
    const has = (table: string) => db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table) !== null;
    const version = has("schema_migrations") ? (db.query("SELECT MAX(version) AS v FROM schema_migrations").get() as { v: number | null }).v : 0;
    const keyring = has("keyring") ? (db.query("SELECT mode FROM keyring WHERE id = 1").get() as { mode: "plain" | "password" } | null) : null;
    const ca = has("ca_certs")
      ? (db.query("SELECT cert_pem AS certPem, not_after AS notAfter FROM ca_certs ORDER BY id DESC LIMIT 1").get() as {
          certPem: string;
          notAfter: number;
        } | null)
      : null;
    return {
      schemaVersion: Number(version ?? 0),
      knownVersion: KNOWN_VERSION,
      keyring: keyring?.mode,
      ca: ca ? { certPem: ca.certPem, notAfter: Number(ca.notAfter) } : undefined,
    };
  } finally {
    db.close();
  }
}

/** Connects to PostgreSQL with one connection and only reads; errors are the backend's (DatabaseUnavailable etc.). */
export async function inspectPostgres(url: string): Promise<StoreSummary> {
  const db = openPostgres(url, { max: 1 });
  try {
    return await summarise(db);
  } finally {
    db.close();
  }
}

async function summarise(db: Db): Promise<StoreSummary> {
  const has = async (table: string) =>
    (await db.get("SELECT 1 AS one FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?", [table])) !== undefined;
  const version = (await has("schema_migrations")) ? (await db.get<{ v: number | null }>("SELECT MAX(version) AS v FROM schema_migrations"))?.v : 0;
  const keyring = (await has("keyring")) ? await db.get<{ mode: "plain" | "password" }>("SELECT mode FROM keyring WHERE id = 1") : undefined;
  const ca = (await has("ca_certs"))
    ? await db.get<{ certPem: string; notAfter: number }>(`SELECT cert_pem AS "certPem", not_after AS "notAfter" FROM ca_certs ORDER BY id DESC LIMIT 1`)
    : undefined;
  return {
    schemaVersion: Number(version ?? 0),
    knownVersion: KNOWN_VERSION,
    keyring: keyring?.mode,
    ca: ca ? { certPem: ca.certPem, notAfter: Number(ca.notAfter) } : undefined,
  };
}
