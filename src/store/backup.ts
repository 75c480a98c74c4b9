// `broker backup`'s store side: a consistent online copy of the SQLite store (VACUUM INTO on a connection of
// its own, which reads one WAL snapshot while a server keeps writing), made 0600 before it gets its final name,
// then opened read-only and checked. Never overwrites a file; never reads a secret out of the copy.

import { Database } from "bun:sqlite";
import { chmodSync, closeSync, existsSync, linkSync, openSync, rmSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { DB_FILE } from "./sqlite.ts";
import { quote } from "./catalog.ts";

export interface BackupReport {
  readonly path: string;
  readonly bytes: number;
  readonly schemaVersion: number;
  readonly keyring: "plain" | "password" | undefined;
  /** Rows per table in the copy, equal to the source at the snapshot's moment. */
  readonly tables: Readonly<Record<string, number>>;
}

/** The target exists already: a backup never overwrites a file. */
export class BackupTargetExists extends Error {}

/** Copies `<dataDir>/broker.db` to `target` (which must not exist) and verifies the copy. */
export function backupSqlite(dataDir: string, target: string): BackupReport {
  const source = join(dataDir, DB_FILE);
  if (!existsSync(source)) throw new Error(`no SQLite store at ${source}`);
  if (existsSync(target)) throw new BackupTargetExists(`${target} already exists`);
  // SQLite would create the VACUUM INTO file with the process umask; VACUUM INTO also accepts an empty file,
  // so one is made 0600 first under a temporary name in the same directory, and gets its final name only
  // once verified: the copy is never readable by others, and never half-written under the name asked for.
  const temp = join(dirname(target), `.${basename(target)}.${process.pid}.${Date.now()}.tmp`);
  closeSync(openSync(temp, "wx", 0o600));
  try {
    const db = new Database(source, { readonly: true });
    try {
      db.run("PRAGMA busy_timeout = 5000");
      db.query("VACUUM INTO ?").run(temp);
    } finally {
      db.close();
    }
    chmodSync(temp, 0o600);
    const report = verifyCopy(temp);
    // link + unlink rather than rename: link fails if the target appeared meanwhile, rename would replace it.
    linkSync(temp, target);
    return { ...report, path: target, bytes: statSync(target).size };
  } finally {
    rmSync(temp, { force: true });
  }
}

function verifyCopy(path: string): Omit<BackupReport, "path" | "bytes"> {
  const db = new Database(path, { readonly: true });
  try {
    const check = db.query("PRAGMA quick_check").get() as { quick_check: string } | null;
    if (check?.quick_check !== "ok") throw new Error(`the copy failed its integrity check: ${check?.quick_check ?? "no answer"}`);
    const version = db.query("SELECT MAX(version) AS v FROM schema_migrations").get() as { v: number | null };
    const names = db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string }[];
    const tables: Record<string, number> = {};
    for (const { name } of names) {
      // Names come from sqlite_master of our own copy; quote() refuses anything but a plain identifier.
      tables[name] = (db.query(["SELECT COUNT(*) AS n FROM", quote(name)].join(" ")).get() as { n: number }).n;
    }
    const keyring = db.query("SELECT mode FROM keyring WHERE id = 1").get() as { mode: "plain" | "password" } | null;
    return { schemaVersion: Number(version.v ?? 0), keyring: keyring?.mode, tables };
  } finally {
    db.close();
  }
}
