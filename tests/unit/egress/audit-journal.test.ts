// The audit journal (egress/audit-journal.ts): every record reaches a file before the database, so
// records queued during an outage, or in the last flush interval, survive a killed process; replay
// writes exactly the records the database lacks (never one twice, even after a lost answer); the file
// is 0600, emptied once everything is written, and its numbering survives being emptied.

import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAuditLog, type AuditEntry } from "../../../src/egress/audit.ts";
import { JOURNAL_FILE, openAuditJournal } from "../../../src/egress/audit-journal.ts";
import { DatabaseUnavailable } from "../../../src/errors.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { auditRecordHash, openMemoryStore, type Store } from "../../../src/store/index.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function dataDir(): string {
  const d = mkdtempSync(join(tmpdir(), "broker-journal-"));
  dirs.push(d);
  return d;
}

function entry(n: number): AuditEntry {
  return {
    at: 1_700_000_000_000 + n,
    principal: "agent:1",
    vaultId: 1,
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
  };
}

/** A store whose database can be switched away (every transaction refused with 503, as in an outage). */
function withOutage(store: Store) {
  const state = { down: false, loseNextAnswer: false };
  const original = store.transaction.bind(store);
  store.transaction = async (fn) => {
    if (state.down) throw new DatabaseUnavailable("ECONNREFUSED");
    const result = await original(fn);
    if (state.loseNextAnswer) {
      // Committed, but the answer never came back (a timed-out statement on a frozen server).
      state.loseNextAnswer = false;
      throw new DatabaseUnavailable("no answer within 2000 ms");
    }
    return result;
  };
  return state;
}

const paths = async (store: Store) => (await store.audit.list({ vaultId: 1, limit: 1000 })).map((r) => r.path).reverse();
const tick = () => new Promise((r) => setTimeout(r, 0));

test("records queued during an outage survive a killed process and are written, once each, on the next start", async () => {
  const dir = dataDir();
  const store = await openMemoryStore();
  const outage = withOutage(store);
  outage.down = true;
  const log = createMemoryLogger();
  const first = createAuditLog(store, { now: Date.now, log, journal: openAuditJournal(dir, () => {}), flushIntervalMs: 5 });
  await first.resume();
  for (let i = 0; i < 20; i++) first.record(entry(i));
  await first.flush(); // refused: the 20 wait in memory (and the journal)
  expect(first.queued).toBe(20);
  await tick();
  // kill -9: the first run's memory is gone, nothing more of it runs. The database comes back.
  outage.down = false;
  const second = createAuditLog(store, { now: Date.now, log, journal: openAuditJournal(dir, () => {}) });
  expect(await second.resume()).toBe(20);
  expect(await paths(store)).toEqual(Array.from({ length: 20 }, (_, i) => `/v1/things/${i}`));
  expect(log.lines.map((l) => JSON.parse(l)).some((l) => l.event === "audit_journal_replayed" && l.records === 20)).toBe(true);
  await second.stop();
});

test("a record made in the last flush interval survives kill -9: it reaches the file within its tick", async () => {
  const dir = dataDir();
  const store = await openMemoryStore();
  const first = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  await first.resume();
  first.record(entry(1));
  first.record(entry(2));
  await tick(); // the request's tick ends; the flush timer (a minute away) never fires: killed
  expect(await paths(store)).toEqual([]);
  const second = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}) });
  expect(await second.resume()).toBe(2);
  expect(await paths(store)).toEqual(["/v1/things/1", "/v1/things/2"]);
  await second.stop();
});

test("a batch committed whose answer was lost is not written twice when retried", async () => {
  const dir = dataDir();
  const store = await openMemoryStore();
  const outage = withOutage(store);
  const audit = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  await audit.resume();
  for (let i = 0; i < 3; i++) audit.record(entry(i));
  outage.loseNextAnswer = true;
  await audit.flush();
  expect(audit.queued).toBe(3); // the writer cannot know it landed
  audit.record(entry(3));
  await audit.flush();
  expect(audit.queued).toBe(0);
  expect(await paths(store)).toEqual(["/v1/things/0", "/v1/things/1", "/v1/things/2", "/v1/things/3"]);
  await audit.stop();
});

test("without a journal (its file unusable), a batch whose answer was lost is not written twice either: the process keeps a mark of its own", async () => {
  const store = await openMemoryStore();
  const outage = withOutage(store);
  const audit = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), flushIntervalMs: 60_000 });
  for (let i = 0; i < 3; i++) audit.record(entry(i));
  outage.loseNextAnswer = true;
  await audit.flush();
  expect(audit.queued).toBe(3);
  audit.record(entry(3));
  await audit.flush();
  expect(audit.queued).toBe(0);
  expect(await paths(store)).toEqual(["/v1/things/0", "/v1/things/1", "/v1/things/2", "/v1/things/3"]);
  await audit.stop();
});

test("the file is 0600, emptied once everything is written, and numbering continues after an emptied file", async () => {
  const dir = dataDir();
  const store = await openMemoryStore();
  const one = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  await one.resume();
  one.record(entry(1));
  await tick();
  const file = join(dir, JOURNAL_FILE);
  expect(statSync(file).mode & 0o777).toBe(0o600);
  expect(readFileSync(file, "utf8")).toContain("/v1/things/1");
  await one.flush();
  expect(readFileSync(file, "utf8").trim().split("\n")).toHaveLength(1); // the header (its id) only
  await one.stop();
  // A second run: its first record must be numbered after the database's mark, or it would be taken as written.
  const two = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  expect(await two.resume()).toBe(0);
  two.record(entry(2));
  await tick();
  const three = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}) });
  expect(await three.resume()).toBe(1);
  expect(await paths(store)).toEqual(["/v1/things/1", "/v1/things/2"]);
  await three.stop();
});

test("a torn last line (a crash mid-write) is skipped and the next record starts on its own line", async () => {
  const dir = dataDir();
  const store = await openMemoryStore();
  const one = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  await one.resume();
  one.record(entry(1));
  await tick();
  const file = join(dir, JOURNAL_FILE);
  writeFileSync(file, `${readFileSync(file, "utf8")}{"seq":2,"entry":{"at":1,"pri`);
  const two = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  expect(await two.resume()).toBe(1);
  two.record(entry(3));
  await tick();
  const three = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}) });
  expect(await three.resume()).toBe(1);
  expect(await paths(store)).toEqual(["/v1/things/1", "/v1/things/3"]);
  await three.stop();
});

test("stop waits within its grace for the database to return; past the grace the records stay in the journal, not lost", async () => {
  const dir = dataDir();
  const store = await openMemoryStore();
  const outage = withOutage(store);
  const log = createMemoryLogger();
  const audit = createAuditLog(store, { now: Date.now, log, journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  await audit.resume();
  outage.down = true;
  audit.record(entry(1));
  setTimeout(() => (outage.down = false), 300);
  await audit.stop(5000);
  expect(await paths(store)).toEqual(["/v1/things/1"]);

  const later = createAuditLog(store, { now: Date.now, log, journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  await later.resume();
  outage.down = true;
  later.record(entry(2));
  await later.stop(0);
  const events = log.lines.map((l) => JSON.parse(l).event);
  expect(events).toContain("audit_records_spilled");
  expect(events).not.toContain("audit_records_lost");
  outage.down = false;
  const next = createAuditLog(store, { now: Date.now, log, journal: openAuditJournal(dir, () => {}) });
  expect(await next.resume()).toBe(1);
  expect(await paths(store)).toEqual(["/v1/things/1", "/v1/things/2"]);
  await next.stop();
});

test("under steady load, where the queue is never empty when a batch ends, the file is rewritten rather than left to grow", async () => {
  const dir = dataDir();
  const journal = openAuditJournal(dir, () => {});
  journal.resume(0);
  const file = join(dir, JOURNAL_FILE);
  const records = Array.from({ length: 30_000 }, (_, i) => ({ seq: journal.append(entry(i)), entry: entry(i) }));
  journal.sync();
  expect(statSync(file).size).toBeGreaterThan(4 * 1024 * 1024);
  const stillQueued = records.slice(-3);
  journal.settled(stillQueued);
  expect(statSync(file).mode & 0o777).toBe(0o600);
  const lines = readFileSync(file, "utf8").trim().split("\n");
  expect(lines).toHaveLength(4); // the header and the three still unwritten
  journal.append(entry(30_000));
  journal.close();
  const reopened = openAuditJournal(dir, () => {});
  expect(reopened.resume(records[records.length - 4]!.seq).map((r) => r.entry.path)).toEqual([
    "/v1/things/29997",
    "/v1/things/29998",
    "/v1/things/29999",
    "/v1/things/30000",
  ]);
  reopened.close();
});

test("credential references (issue 36) survive the journal; a line written before them is still a record", async () => {
  const dir = dataDir();
  const store = await openMemoryStore();
  const refs = JSON.stringify(["prod-vault:kv/stripe#api_key (version 3)", "aws:arn:aws:secretsmanager:eu-west-1:1:secret:a,b"]);
  const first = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  await first.resume();
  first.record({ ...entry(1), credentialRefs: refs });
  await tick(); // killed before the flush
  const file = join(dir, JOURNAL_FILE);
  // As an earlier release wrote it: no credentialRefs at all. And a hand-edited line whose references are no JSON array.
  const old = entry(2);
  expect("credentialRefs" in old).toBe(false);
  const bad = { ...entry(3), credentialRefs: "prod-vault:kv/x#y" };
  writeFileSync(file, `${readFileSync(file, "utf8")}${JSON.stringify({ seq: 2, entry: old })}\n${JSON.stringify({ seq: 3, entry: bad })}\n`);
  const journal = openAuditJournal(dir, () => {});
  expect(journal.opened.unreadableLines).toBe(1);
  const second = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal });
  expect(await second.resume()).toBe(2);
  const rows = (await store.audit.list({ vaultId: 1, after: 0, limit: 10 })).map((r) => [r.path, r.credentialRefs]);
  expect(rows).toEqual([
    ["/v1/things/1", refs],
    ["/v1/things/2", null],
  ]);
  await second.stop();
});

test("LLM usage (issue 38) survives the journal with the record's hash; a line with a count that is no integer is not a record", async () => {
  const dir = dataDir();
  const store = await openMemoryStore();
  const usage = { llmModel: "gpt-4o", inputTokens: 1200, outputTokens: 345, totalTokens: 1545, costMicros: null };
  const first = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  await first.resume();
  first.record({ ...entry(1), ...usage });
  first.record(entry(2)); // unmetered: a line as an earlier release wrote it
  await tick(); // killed before the flush
  const file = join(dir, JOURNAL_FILE);
  const bad = [
    { ...entry(3), inputTokens: "1200" },
    { ...entry(4), costMicros: 1.5 },
    { ...entry(5), llmModel: 4 },
  ];
  writeFileSync(file, `${readFileSync(file, "utf8")}${bad.map((e, i) => `${JSON.stringify({ seq: 3 + i, entry: e })}\n`).join("")}`);
  const journal = openAuditJournal(dir, () => {});
  expect(journal.opened.unreadableLines).toBe(3);
  const second = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal });
  expect(await second.resume()).toBe(2);
  const rows = await store.audit.chained(1, 0, 10);
  expect(rows.map((r) => [r.path, r.llmModel, r.inputTokens, r.outputTokens, r.totalTokens, r.costMicros])).toEqual([
    ["/v1/things/1", "gpt-4o", 1200, 345, 1545, null],
    ["/v1/things/2", null, null, null, null, null],
  ]);
  // Replayed, the metered record is hashed with its usage (v2): the stored hash is the one its contents give.
  const r = rows[0]!;
  expect(r.chainHash).toBe(auditRecordHash({ ...r, seq: r.chainSeq!, prev: r.chainPrev! }));
  const unmetered = { llmModel: null, inputTokens: null, outputTokens: null, totalTokens: null };
  expect(r.chainHash).not.toBe(auditRecordHash({ ...r, ...unmetered, seq: r.chainSeq!, prev: r.chainPrev! }));
  await second.stop();
});
