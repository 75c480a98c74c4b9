// Journals of workers that no longer run (issue 40): a broker started with fewer workers than before (or alone)
// writes what worker 3's journal holds before it serves, exactly once, chained like every record; its own journal and
// those of workers still counted are left to their workers, and so is one whose lock a live process holds.

import { afterEach, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adoptOrphanJournals } from "../../../src/app/audit-journal-open.ts";
import { lockJournal } from "../../../src/app/journal-lock.ts";
import type { AuditEntry } from "../../../src/egress/audit.ts";
import { openAuditJournal } from "../../../src/egress/audit-journal.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { openStore } from "../../../src/store/index.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const entry = (n: number, vaultId: number): AuditEntry => ({
  at: 1_700_000_000_000 + n,
  principal: "agent:1",
  vaultId,
  vault: "main",
  ingress: "explicit",
  method: "GET",
  host: "api.example.com",
  path: `/v1/things/${n}`,
  service: "api.example.com",
  credentialKeys: "API_KEY",
  status: 200,
  bytesIn: 0,
  bytesOut: 10,
  durationMs: 3,
  error: null,
  contained: false,
  approvedBy: null,
});

/** A journal a killed worker left: records appended and on disk, none in the database. */
function leftBehind(dataDir: string, file: string, paths: number[], vaultId: number): void {
  const journal = openAuditJournal(dataDir, () => {}, file);
  for (const n of paths) journal.append(entry(n, vaultId));
  journal.sync();
  journal.close();
}

test("worker 3's journal is written once by a broker of 2 workers; worker 2's is left to worker 2", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "broker-orphans-"));
  dirs.push(dataDir);
  const store = await openStore({ dataDir });
  const vault = await store.vaults.create("main", 1);
  leftBehind(dataDir, "audit-journal-3.jsonl", [1, 2, 3], vault.id);
  leftBehind(dataDir, "audit-journal-2.jsonl", [10], vault.id);
  const log = createMemoryLogger();
  expect(await adoptOrphanJournals(dataDir, 2, store, { now: () => 5, log })).toBe(3);
  const rows = await store.audit.list({ vaultId: vault.id, after: 0, limit: 10 });
  expect(rows.map((r) => [r.path, r.chainSeq])).toEqual([
    ["/v1/things/1", 1],
    ["/v1/things/2", 2],
    ["/v1/things/3", 3],
  ]);
  // Written and marked: a second start writes nothing again; the emptied journal keeps only its id line.
  expect(await adoptOrphanJournals(dataDir, 2, store, { now: () => 6, log })).toBe(0);
  expect(readFileSync(join(dataDir, "audit-journal-3.jsonl"), "utf8").trim().split("\n")).toHaveLength(1);
  // Alone (1 worker), worker 2's journal is an orphan too.
  expect(await adoptOrphanJournals(dataDir, 1, store, { now: () => 7, log })).toBe(1);
  expect((await store.audit.list({ vaultId: vault.id, after: 0, limit: 10 })).map((r) => r.path)).toContain("/v1/things/10");
  store.close();
});

test("a worker journal whose lock a live process holds (another broker's worker on this data directory) is left to it", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "broker-orphans-"));
  dirs.push(dataDir);
  const store = await openStore({ dataDir });
  const vault = await store.vaults.create("main", 1);
  leftBehind(dataDir, "audit-journal-3.jsonl", [1, 2], vault.id);
  const held = lockJournal(dataDir, "audit-journal-3.jsonl"); // this process stands in for that worker
  const log = createMemoryLogger();
  try {
    expect(await adoptOrphanJournals(dataDir, 2, store, { now: () => 5, log })).toBe(0);
    expect(await store.audit.list({ vaultId: vault.id, after: 0, limit: 10 })).toEqual([]);
    expect(log.lines.some((l) => l.includes('"event":"audit_journal_in_use"') && l.includes(`"pid":${process.pid}`))).toBe(true);
  } finally {
    held.release();
  }
  // Once its holder is gone, it is adopted (and its lock let go again).
  expect(await adoptOrphanJournals(dataDir, 2, store, { now: () => 6, log })).toBe(2);
  expect(existsSync(join(dataDir, "audit-journal-3.jsonl.holder"))).toBe(false);
  store.close();
});
