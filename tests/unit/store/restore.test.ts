// The store side of `broker restore`: which files count as a backup, seeing a process that holds the store
// open (from /proc/locks, without opening it), and the move aside that never deletes and never pairs an old -wal.

import { expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { backupSqlite, checkBackup, NotABrokerStore, openStore, restoreSqlite, storeHolders } from "../../../src/store/index.ts";

const dir = () => mkdtempSync(join(tmpdir(), "broker-restore-unit-"));

test("checkBackup accepts a broker store and refuses junk, a foreign SQLite file and an unknown schema version", async () => {
  const d = dir();
  (await openStore({ dataDir: join(d, "data") })).close();
  const good = join(d, "good.db");
  backupSqlite(join(d, "data"), good);
  expect(checkBackup(good).schemaVersion).toBeGreaterThan(0);

  writeFileSync(join(d, "junk.db"), "not sqlite at all, but long enough to be read as a header ............");
  expect(() => checkBackup(join(d, "junk.db"))).toThrow(NotABrokerStore);
  const foreign = new Database(join(d, "foreign.db"));
  foreign.run("CREATE TABLE invoices (id INTEGER PRIMARY KEY)");
  foreign.close();
  expect(() => checkBackup(join(d, "foreign.db"))).toThrow(/not a broker store/);
  const future = new Database(good);
  future.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)");
  future.close();
  expect(() => checkBackup(good)).toThrow(/schema version 9999/);
  expect(() => checkBackup(join(d, "missing.db"))).toThrow(NotABrokerStore);
});

test.skipIf(!existsSync("/proc/locks"))("storeHolders names another process with the store open, and none once it exits", async () => {
  const d = dir();
  (await openStore({ dataDir: d })).close();
  const script = `const { Database } = require("bun:sqlite"); const db = new Database(${JSON.stringify(join(d, "broker.db"))});
    db.run("PRAGMA journal_mode = WAL"); db.query("SELECT COUNT(*) FROM users").get(); console.log("open");
    await Bun.sleep(5000); db.close();`;
  const child = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "inherit" });
  try {
    const reader = child.stdout.getReader();
    await reader.read();
    expect(storeHolders(d)).toContain(child.pid);
  } finally {
    child.kill("SIGKILL");
    await child.exited;
  }
  expect(storeHolders(d)).toEqual([]);
});

test("restoreSqlite moves every current file aside and puts a 0600 copy in place", async () => {
  const d = dir();
  const data = join(d, "data");
  (await openStore({ dataDir: data })).close();
  const backup = join(d, "b.db");
  backupSqlite(data, backup);
  writeFileSync(join(data, "broker.db-wal"), "a stale wal");
  const report = restoreSqlite(data, backup, "20250101T000000Z");
  const stamp = "broker.db.before-restore-20250101T000000Z";
  // broker.db first, then whichever sidecars there were (the -shm a closed connection may leave behind).
  expect(report.movedAside.map((m) => m.to.slice(data.length + 1)).filter((f) => !f.endsWith("-shm"))).toEqual([stamp, `${stamp}-wal`]);
  expect(
    readdirSync(data)
      .filter((f) => !f.endsWith("-shm"))
      .sort(),
  ).toEqual(["broker.db", stamp, `${stamp}-wal`]);
  expect(statSync(join(data, "broker.db")).mode & 0o777).toBe(0o600);
  expect(checkBackup(join(data, "broker.db")).schemaVersion).toBe(report.schemaVersion);
  // The same stamp again would overwrite what was moved aside: refused, the restored store left as it is.
  expect(() => restoreSqlite(data, backup, "20250101T000000Z")).toThrow(/already exists/);
  expect(existsSync(join(data, "broker.db"))).toBe(true);
});

test("restoreSqlite moves the audit journal aside too: the replaced store's unwritten records are not replayed onto the backup", async () => {
  const d = dir();
  const data = join(d, "data");
  (await openStore({ dataDir: data })).close();
  const backup = join(d, "b.db");
  backupSqlite(data, backup);
  writeFileSync(join(data, "audit-journal.jsonl"), '{"journal":"00000000-0000-4000-8000-000000000000"}\n');
  const report = restoreSqlite(data, backup, "20250101T000000Z");
  expect(report.movedAside.map((m) => m.to.slice(data.length + 1))).toContain("audit-journal.jsonl.before-restore-20250101T000000Z");
  expect(existsSync(join(data, "audit-journal.jsonl"))).toBe(false);
});
