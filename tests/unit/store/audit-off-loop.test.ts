// The audit writer's batches on a SQLite file go to the store's worker thread (store/audit-batch.ts run by
// sqlite-read-worker.ts on its own connection), not the main connection: the rows, their hash chain and the
// journal's mark are exactly what the main connection writes for the same records, a batch whose answer was
// lost is not written twice, and a worker that never answers keeps the records (memory and journal) until a
// later start writes them, once.

import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAuditLog, type AuditEntry } from "../../../src/egress/audit.ts";
import { openAuditJournal } from "../../../src/egress/audit-journal.ts";
import { DatabaseUnavailable } from "../../../src/errors.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createStore, migrate, openMemoryStore, openStore, type AuditRow, type Store } from "../../../src/store/index.ts";
import { createSqliteReader, type ReadThread } from "../../../src/store/sqlite-reader.ts";
import type { ReadRequest } from "../../../src/store/sqlite-read-protocol.ts";
import { openSqliteFile } from "../../../src/store/sqlite.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function dataDir(): string {
  const d = mkdtempSync(join(tmpdir(), "broker-audit-off-loop-"));
  dirs.push(d);
  return d;
}

/** Records of two vaults, one with LLM usage (the v2 encoding), one with a workload (v3), one with quotes, a backslash and characters beyond ASCII. */
function entry(n: number): AuditEntry {
  return {
    at: 1_700_000_000_000 + n,
    principal: "agent:1",
    vaultId: 1 + (n % 2),
    vault: n % 2 ? "second" : "main",
    ingress: "transparent",
    method: "GET",
    host: "api.example.com",
    path: n === 7 ? '/odd/"quoted"\\back/\u{1f600}/é' : `/v1/things/${n}`,
    service: "api.example.com",
    credentialKeys: "API_KEY",
    credentialRefs: n === 3 ? JSON.stringify(["conn:path#a,b"]) : null,
    status: 200,
    bytesIn: n,
    bytesOut: 10,
    durationMs: 3,
    error: n === 5 ? "upstream_error" : null,
    contained: n % 3 === 0,
    approvedBy: n === 4 ? "owner@example.com" : null,
    ...(n === 6 && { llmModel: "gpt-x", inputTokens: 10, outputTokens: 2, totalTokens: 12, costMicros: 40 }),
    ...(n === 8 && { workloadIssuer: "https://issuer.example", workloadSubject: "repo:acme/app" }),
  };
}

const chain = (rows: AuditRow[]) => rows.map((r) => [r.vaultId, r.path, r.chainSeq, r.chainPrev, r.chainHash]).reverse();

async function rowsOf(store: Store): Promise<AuditRow[]> {
  return [...(await store.audit.list({ vaultId: 1, limit: 1000 })), ...(await store.audit.list({ vaultId: 2, limit: 1000 }))];
}

test("on a SQLite file the worker writes each batch: the same rows, chain and mark as the main connection, never in-thread", async () => {
  const dir = dataDir();
  const store = await openStore({ dataDir: dir }, { readWorker: {} });
  try {
    expect(store.offLoopAudit).toBeDefined();
    let inThread = 0;
    let offLoop = 0;
    const original = store.transaction.bind(store);
    store.transaction = (fn) => (inThread++, original(fn));
    const worker = store.offLoopAudit!;
    Object.assign(store, { offLoopAudit: (mark: string, batch: never[]) => (offLoop++, worker(mark, batch)) });
    const journal = openAuditJournal(dir, () => {});
    const heads: Map<number, number>[] = [];
    const audit = createAuditLog(store, {
      now: Date.now,
      log: createMemoryLogger(),
      journal,
      maxBatch: 4,
      flushIntervalMs: 60_000,
      onWritten: (h) => heads.push(new Map(h)),
    });
    await audit.resume();
    for (let i = 0; i < 10; i++) audit.record(entry(i));
    await audit.flush();
    expect(offLoop).toBe(3); // batches of 4, 4 and 2
    expect(inThread).toBe(0);
    expect(heads.at(-1)).toEqual(
      new Map([
        [1, 5],
        [2, 5],
      ]),
    );
    expect(await store.auditMarks.get(journal.id)).toBe(10);

    // The same records through the main connection of a memory store: the same chain, hash for hash.
    const memory = await openMemoryStore();
    const inMemory = createAuditLog(memory, { now: Date.now, log: createMemoryLogger(), maxBatch: 4 });
    for (let i = 0; i < 10; i++) inMemory.record(entry(i));
    await inMemory.flush();
    const written = await rowsOf(store);
    expect(written).toHaveLength(10);
    expect(chain(written)).toEqual(chain(await rowsOf(memory)));
    expect(written.find((r) => r.chainSeq === 4 && r.vaultId === 2)!.path).toBe('/odd/"quoted"\\back/\u{1f600}/é');
    memory.close();
    await audit.stop();
  } finally {
    store.close();
  }
});

test("a batch the worker committed but whose answer was lost is not written twice when retried", async () => {
  const dir = dataDir();
  const store = await openStore({ dataDir: dir }, { readWorker: {} });
  try {
    const worker = store.offLoopAudit!;
    let lose = true;
    Object.assign(store, {
      offLoopAudit: async (mark: string, batch: never[]) => {
        const heads = await worker(mark, batch);
        if (lose) {
          lose = false;
          throw new DatabaseUnavailable("a read got no answer within 10000 ms");
        }
        return heads;
      },
    });
    const journal = openAuditJournal(dir, () => {});
    const audit = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal, flushIntervalMs: 60_000 });
    await audit.resume();
    for (let i = 0; i < 6; i++) audit.record(entry(i));
    await audit.flush(); // committed, answer lost: kept queued
    expect(audit.queued).toBe(6);
    await audit.flush(); // retried: the mark says they are in
    expect(audit.queued).toBe(0);
    expect(await rowsOf(store)).toHaveLength(6);
    await audit.stop();
  } finally {
    store.close();
  }
});

/** A worker that opens and then never answers an audit batch (a hung thread); reads are not asked of it here. */
function hungThread(): ReadThread & { asked: ReadRequest["kind"][] } {
  const events = new EventTarget();
  const asked: ReadRequest["kind"][] = [];
  return {
    asked,
    addEventListener: (type, listener) => events.addEventListener(type, listener),
    terminate: () => {},
    postMessage(req: ReadRequest) {
      asked.push(req.kind);
      if (req.kind === "open") queueMicrotask(() => events.dispatchEvent(new MessageEvent("message", { data: { kind: "opened" } })));
      if (req.kind === "close") Atomics.store(req.done, 0, 1);
    },
  };
}

test("a worker that never answers: the records stay queued and journaled, and a later start writes them once", async () => {
  const dir = dataDir();
  const db = openSqliteFile(dir);
  await migrate(db);
  const threads: ReturnType<typeof hungThread>[] = [];
  const hung = createStore(db, createSqliteReader("/unused", { timeoutMs: 30, spawn: () => threads[threads.push(hungThread()) - 1]! }));
  const log = createMemoryLogger();
  const first = createAuditLog(hung, { now: Date.now, log, journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  await first.resume();
  for (let i = 0; i < 5; i++) first.record(entry(i));
  await first.flush();
  expect(first.queued).toBe(5);
  expect(threads[0]!.asked).toContain("audit");
  expect(log.lines.map((l) => JSON.parse(l).event)).toContain("audit_write_deferred");
  // Nothing reached the file in-thread either (asked of the main connection: the list reads are the hung worker's).
  expect(await db.get<{ n: number }>("SELECT COUNT(*) AS n FROM audit_logs")).toEqual({ n: 0 });
  hung.close(); // the process ends here, its queue with it; the journal has the five

  const store = await openStore({ dataDir: dir }, { readWorker: {} });
  try {
    const second = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}) });
    expect(await second.resume()).toBe(5);
    expect((await rowsOf(store)).map((r) => r.path).sort()).toEqual(Array.from({ length: 5 }, (_, i) => `/v1/things/${i}`).sort());
    await second.stop();
  } finally {
    store.close();
  }
});
