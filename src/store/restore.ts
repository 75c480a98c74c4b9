// `broker restore`'s store side: checks that a file is a broker SQLite store (integrity, a schema version this
// broker knows, its own tables), sees whether another process holds the current store open, moves the current
// broker.db and its -wal/-shm aside (renamed, never deleted, so an old -wal is never replayed onto the backup)
// and puts a 0600 copy of the backup in place. Never reads a secret out of either file.

import { Database } from "bun:sqlite";
import { chmodSync, constants, copyFileSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { MIGRATIONS } from "./schema.ts";
import { AUDIT_JOURNAL_FILE } from "./audit-marks.ts";
import { DB_FILE, ensurePrivateDir } from "./sqlite.ts";

const KNOWN_VERSION = Math.max(0, ...MIGRATIONS.map((m) => m.version));
const REQUIRED_TABLES = ["schema_migrations", "keyring", "users", "vaults", "credentials"];
const SIDECARS = ["", "-wal", "-shm"] as const;

/** The file is not a store this broker can start on; nothing was changed. */
export class NotABrokerStore extends Error {}

export interface BackupCheck {
  readonly schemaVersion: number;
  readonly keyring: "plain" | "password" | undefined;
}

export interface RestoreReport extends BackupCheck {
  /** Where each file that was in the data directory went (old path, new path). */
  readonly movedAside: readonly { readonly from: string; readonly to: string }[];
  readonly restored: string;
}

/** Opens `path` read-only and checks that it is a sound broker store at a schema version this broker knows. */
export function checkBackup(path: string): BackupCheck {
  if (!existsSync(path) || !statSync(path).isFile()) throw new NotABrokerStore(`${path} is not a file`);
  let db: Database;
  try {
    db = new Database(path, { readonly: true });
  } catch (err) {
    throw new NotABrokerStore(`${path} does not open as SQLite: ${err instanceof Error ? err.message : String(err)}`);
  }
  try {
    const check = db.query("PRAGMA quick_check").get() as { quick_check: string } | null;
    if (check?.quick_check !== "ok") throw new NotABrokerStore(`${path} failed its integrity check: ${check?.quick_check ?? "no answer"}`);
    const tables = new Set((db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((r) => r.name));
    const missing = REQUIRED_TABLES.filter((t) => !tables.has(t));
    if (missing.length > 0) throw new NotABrokerStore(`${path} is not a broker store (no table ${missing.join(", ")})`);
    const version = Number((db.query("SELECT MAX(version) AS v FROM schema_migrations").get() as { v: number | null }).v ?? 0);
    if (version < 1 || version > KNOWN_VERSION) {
      throw new NotABrokerStore(`${path} is at schema version ${version}; this broker knows versions 1 to ${KNOWN_VERSION}`);
    }
    const keyring = db.query("SELECT mode FROM keyring WHERE id = 1").get() as { mode: "plain" | "password" } | null;
    return { schemaVersion: version, keyring: keyring?.mode };
  } catch (err) {
    if (err instanceof NotABrokerStore) throw err;
    throw new NotABrokerStore(`${path} is not a readable broker store: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    db.close();
  }
}

/**
 * Process ids (other than this one) holding a lock on the store's files, read from /proc/locks without opening
 * the store (SQLite keeps a shared lock on broker.db and -shm while a connection is open). Undefined where
 * /proc/locks does not exist (not Linux): then only the API port tells.
 */
export function storeHolders(dataDir: string): number[] | undefined {
  let locks: string;
  try {
    locks = readFileSync("/proc/locks", "utf8");
  } catch {
    return undefined;
  }
  const inodes = new Set<string>();
  for (const suffix of SIDECARS) {
    const f = join(dataDir, DB_FILE + suffix);
    if (existsSync(f)) inodes.add(String(statSync(f).ino));
  }
  const pids = new Set<number>();
  for (const line of locks.split("\n")) {
    // "1: POSIX  ADVISORY  READ 11079 fe:00:4276738 1073741826 1073742335" (a "->" marks a waiter)
    const m = /^\d+:\s+(?:->\s+)?\S+\s+\S+\s+\S+\s+(\d+)\s+[0-9a-f]+:[0-9a-f]+:(\d+)\s/.exec(line);
    if (m && inodes.has(m[2]!) && Number(m[1]) !== process.pid) pids.add(Number(m[1]));
  }
  return [...pids];
}

/**
 * Puts a checked copy of `backup` in place as `<dataDir>/broker.db` (0600), the current files renamed to
 * `<name>.before-restore-<stamp>` first. The caller has made sure no broker runs on `dataDir`.
 */
export function restoreSqlite(dataDir: string, backup: string, stamp: string): RestoreReport {
  const check = checkBackup(backup);
  ensurePrivateDir(dataDir);
  const target = join(dataDir, DB_FILE);
  // Copied under a temporary name in the data directory and checked there, so a failure leaves the store as it was.
  const temp = join(dataDir, `.${DB_FILE}.restore-${process.pid}.tmp`);
  rmSync(temp, { force: true });
  try {
    copyFileSync(backup, temp, constants.COPYFILE_EXCL);
    chmodSync(temp, 0o600);
    checkBackup(temp);
    // The audit journals go too (the broker's and each worker's of `--workers N`): their records were counted
    // against the store being replaced, and replaying them onto the backup would serve other than exactly its state.
    const journals = readdirSync(dataDir)
      .filter((f) => f === AUDIT_JOURNAL_FILE || /^audit-journal-\d+\.jsonl$/.test(f))
      .map((f) => join(dataDir, f));
    const movedAside = [
      ...SIDECARS.map((suffix) => ({ from: target + suffix, to: `${target}.before-restore-${stamp}${suffix}` })),
      ...journals.map((journal) => ({ from: journal, to: `${journal}.before-restore-${stamp}` })),
    ].filter((m) => existsSync(m.from));
    const taken = movedAside.find((m) => existsSync(m.to));
    if (taken) throw new Error(`${taken.to} already exists`);
    // broker.db first: a -wal or -shm left without it is never read, so no moment pairs the old -wal with a database.
    for (const m of movedAside) renameSync(m.from, m.to);
    renameSync(temp, target);
    return { ...check, movedAside, restored: target };
  } finally {
    rmSync(temp, { force: true });
  }
}
