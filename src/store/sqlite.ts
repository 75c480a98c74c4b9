// The embedded SQLite backend (bun:sqlite). Owns file permissions and PRAGMAs: the data directory
// is 0700 and the database, -wal and -shm files 0600 from creation; busy timeout before WAL, then
// foreign keys and secure_delete (so a removed plaintext data key does not linger in free pages).

import { Database } from "bun:sqlite";
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from "node:fs";
import { Conflict, DatabaseUnavailable } from "../errors.ts";
import { RACED, type Db, type Sql, type SqlValue } from "./db.ts";

export const DB_FILE = "broker.db";

export interface SqliteOptions {
  /** Milliseconds a writer waits for another process's lock before failing. */
  readonly busyTimeoutMs?: number;
}

/** Creates the data directory (0700) and the database file (0600) and opens it. */
export function openSqliteFile(dataDir: string, opts: SqliteOptions = {}): Db {
  ensurePrivateDir(dataDir);
  const path = `${dataDir}/${DB_FILE}`;
  // Create the file ourselves so it is 0600 before SQLite ever writes a byte to it.
  closeSync(openSync(path, "a", 0o600));
  chmodSync(path, 0o600);
  const db = new Database(path, { create: true, strict: true });
  applyPragmas(db, opts);
  tightenSidecars(path);
  return wrapDatabase(db, () => tightenSidecars(path));
}

/** An in-memory database for unit tests. */
export function openSqliteMemory(opts: SqliteOptions = {}): Db {
  const db = new Database(":memory:", { strict: true });
  applyPragmas(db, opts);
  return wrapDatabase(db);
}

export function ensurePrivateDir(dir: string): void {
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (!statSync(dir).isDirectory()) throw new Error(`${dir} exists and is not a directory`);
  chmodSync(dir, 0o700);
}

function applyPragmas(db: Database, opts: SqliteOptions): void {
  // Order matters: busy_timeout first so switching to WAL waits for other processes.
  db.run(`PRAGMA busy_timeout = ${Math.trunc(opts.busyTimeoutMs ?? 5000)}`);
  switchToWal(db, opts.busyTimeoutMs ?? 5000);
  db.run("PRAGMA synchronous = NORMAL");
  db.run("PRAGMA foreign_keys = ON");
  db.run("PRAGMA secure_delete = ON");
}

/**
 * Two processes opening a new database at the same moment can both try to switch it to WAL; the loser
 * gets SQLITE_BUSY at once (the busy timeout does not cover this switch), so it waits and tries again.
 */
function switchToWal(db: Database, timeoutMs: number): void {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      db.run("PRAGMA journal_mode = WAL");
      return;
    } catch (err) {
      if ((err as { code?: unknown }).code !== "SQLITE_BUSY" || Date.now() > deadline) throw err;
      Bun.sleepSync(5);
    }
  }
}

function tightenSidecars(path: string): void {
  for (const suffix of ["-wal", "-shm"]) {
    const f = path + suffix;
    if (existsSync(f)) chmodSync(f, 0o600);
  }
}

/** As on PostgreSQL: a unique violation the domain's own check did not foresee is a race, answered 409. */
function raced<T>(run: () => T): T {
  try {
    return run();
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY") throw new Conflict(RACED);
    // Another process held the file's lock past the busy timeout: the store is away for now (503, audit
    // records kept for later), not a failed statement.
    if (code === "SQLITE_BUSY" || code === "SQLITE_BUSY_SNAPSHOT") throw new DatabaseUnavailable(`${code}: the database file is locked by another process`);
    throw err;
  }
}

function wrapDatabase(db: Database, afterWrite?: () => void): Db {
  const exec: Sql = {
    async all<T>(sql: string, params: readonly SqlValue[] = []) {
      return raced(() => db.query(sql).all(...(params as SqlValue[] as never[])) as T[]);
    },
    async get<T>(sql: string, params: readonly SqlValue[] = []) {
      return raced(() => (db.query(sql).get(...(params as never[])) ?? undefined) as T | undefined);
    },
    async run(sql: string, params: readonly SqlValue[] = []) {
      return raced(() => db.query(sql).run(...(params as never[])).changes);
    },
  };

  // bun:sqlite is synchronous, but a transaction's callback may await; statements from other
  // callers must not slip into an open transaction, so they wait for it to end.
  // The `while (open) await open` loops are inline on purpose: checking and acting with no await
  // in between is what stops a statement (or a second transaction) slipping into an open one.
  let open: Promise<void> | undefined;
  const outside: Sql = {
    async all(sql, params) {
      while (open) await open;
      return exec.all(sql, params);
    },
    async get(sql, params) {
      while (open) await open;
      return exec.get(sql, params);
    },
    async run(sql, params) {
      while (open) await open;
      return exec.run(sql, params);
    },
  };
  let sidecarsChecked = false;

  return {
    dialect: "sqlite",
    ...outside,
    async transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
      while (open) await open;
      let release!: () => void;
      open = new Promise<void>((r) => (release = r));
      try {
        raced(() => db.run("BEGIN IMMEDIATE"));
        try {
          const result = await fn(exec);
          db.run("COMMIT");
          return result;
        } catch (err) {
          // A full disk or an I/O error (at COMMIT, say) has rolled it back already: a ROLLBACK then would throw "no
          // transaction is active" in place of the error that says what happened.
          if (db.inTransaction) db.run("ROLLBACK");
          throw err;
        }
      } finally {
        open = undefined;
        release();
        if (!sidecarsChecked && afterWrite) {
          sidecarsChecked = true;
          afterWrite();
        }
      }
    },
    // BEGIN IMMEDIATE already makes migrating writers take turns.
    async lockMigrations() {},
    async exec(script: string) {
      while (open) await open;
      db.run(script);
      afterWrite?.();
    },
    close() {
      db.close();
    },
  };
}
