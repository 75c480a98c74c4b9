// Attacks on the audit writer's batches written by a SQLite file store's worker thread (store/audit-batch.ts run by
// sqlite-read-worker.ts, commits 2d151ba and a629c45), with the real worker thread throughout: odd and large records
// hash exactly as the main connection hashes them, and what the thread is sent is the journal's own lines and nothing
// else; an answer lost, a worker that goes on committing after it was given up (before or after the retry), a worker
// that commits and never answers through a shutdown; retention deleting in the same thread while the writer writes;
// a disk that refuses writes (full, failing, read-only, out of descriptors) keeps the records instead of dropping them;
// a record made after the writer stopped is never retried against the closed store. Each test passes when the
// guarantee holds.

import { Database } from "bun:sqlite";
import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startAuditRetention } from "../../../src/app/audit-retention.ts";
import { createAuditLog, type AuditEntry } from "../../../src/egress/audit.ts";
import { openAuditJournal } from "../../../src/egress/audit-journal.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { CHAIN_CHECK_STATEMENTS, createStore, migrate, openMemoryStore, walkSegment, type Store } from "../../../src/store/index.ts";
import type { ReadReply, ReadRequest } from "../../../src/store/sqlite-read-protocol.ts";
import { createSqliteReader, spawnReadWorker, type ReadThread } from "../../../src/store/sqlite-reader.ts";
import { DB_FILE, openSqliteFile } from "../../../src/store/sqlite.ts";

const dirs: string[] = [];
const closers: (() => void)[] = [];
afterEach(() => {
  for (const c of closers.splice(0).reverse()) {
    try {
      c();
    } catch {}
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function dataDir(): string {
  const d = mkdtempSync(join(tmpdir(), "broker-audit-off-loop-attacks-"));
  dirs.push(d);
  return d;
}

/** What a test does to the messages between the reader and one real worker thread. */
interface Tap {
  /** Every request posted (before any is held). */
  readonly posted: ReadRequest[];
  /** Return true to keep the request from the thread (a hung thread); `held` gets it. */
  hold?: (req: ReadRequest) => boolean;
  /** Return true to drop the reply (an answer lost); or a reply to deliver instead. */
  reply?: (reply: ReadReply) => boolean | ReadReply;
  /** terminate() leaves the thread running (a thread stuck in a native call, which terminate cannot stop). */
  zombie?: boolean;
  readonly held: ReadRequest[];
  /** Every reply the thread sent, delivered or not (the zombie's too). */
  readonly replies: ReadReply[];
  /** The real thread (to post held requests to a zombie by hand). */
  real?: ReadThread;
  /** Delivers a reply to the reader as if the thread had sent it. */
  inject?: (reply: ReadReply) => void;
  terminated?: boolean;
}

function tap(init: Partial<Tap> = {}): Tap {
  return { posted: [], held: [], replies: [], ...init };
}

/** A real store worker thread (spawnReadWorker) whose traffic `t` sees and may change. */
function tapped(t: Tap): ReadThread {
  const real = spawnReadWorker();
  t.real = real;
  const listeners: ((ev: Event) => void)[] = [];
  real.addEventListener("message", (ev) => {
    const data = (ev as MessageEvent<ReadReply>).data;
    t.replies.push(data);
    const verdict = t.reply?.(data) ?? false;
    if (verdict === true) return;
    const out = verdict === false ? ev : new MessageEvent("message", { data: verdict });
    for (const l of listeners) l(out);
  });
  t.inject = (data) => {
    for (const l of listeners) l(new MessageEvent("message", { data }));
  };
  closers.push(() => real.terminate());
  return {
    postMessage(req) {
      t.posted.push(req);
      if (t.hold?.(req)) {
        t.held.push(req);
        return;
      }
      real.postMessage(req);
    },
    addEventListener(type, listener) {
      if (type === "message") listeners.push(listener);
      else real.addEventListener(type, listener);
    },
    terminate() {
      t.terminated = true;
      if (!t.zombie) real.terminate();
    },
  };
}

/** A migrated SQLite file store whose worker threads are the real one, each tapped by the next of `taps` (or plainly). */
async function fileStore(dir: string, taps: Tap[] = [], timeoutMs = 2_000): Promise<{ store: Store; faults: string[] }> {
  const db = openSqliteFile(dir);
  await migrate(db);
  await db.exec("PRAGMA busy_timeout = 250"); // as the server's main connection
  const faults: string[] = [];
  let n = 0;
  const reader = createSqliteReader(join(dir, DB_FILE), {
    timeoutMs,
    onFault: (r) => faults.push(r),
    spawn: () => {
      const t = taps[n++];
      return t ? tapped(t) : spawnReadWorker();
    },
  });
  await reader.ready;
  const store = createStore(db, reader);
  closers.push(() => store.close());
  return { store, faults };
}

function baseEntry(n: number, vaultId = 1): AuditEntry {
  return {
    at: 1_700_000_000_000 + n,
    principal: "agent:1",
    vaultId,
    vault: `vault-${vaultId}`,
    ingress: "proxy",
    method: "GET",
    host: "api.example.com",
    path: `/r/${n}`,
    service: "api.example.com",
    credentialKeys: "API_KEY",
    credentialRefs: null,
    status: 200,
    bytesIn: 0,
    bytesOut: 10,
    durationMs: 1,
    error: null,
    contained: false,
    approvedBy: null,
  };
}

/** Texts an agent, an upstream or a person could put in a record's fields, and values at the edges of each type. */
const ODD_TEXTS = [
  "\u0000nul\u0000",
  "\udbff\udfff last code point, \u{1f600} emoji, \u200b zero width",
  "line\u2028separator\u2029paragraph",
  '"quotes" \\backslash\\ \\u0041 not an escape',
  "\u202eright-to-left override",
  "</script><!-- -->",
  "\r\n\t\b\f",
  "é composed and e\u0301 decomposed",
  "x".repeat(70_000),
  "",
  " ",
  "null",
  "[1,2]",
  "%00%2F%2e%2e/",
];

/** Record n of a batch spread over `vaults` vaults, every field set to something awkward somewhere. */
function oddEntry(n: number, vaults: number): AuditEntry {
  const odd = ODD_TEXTS[n % ODD_TEXTS.length]!;
  const vaultId = 1 + ((n * 7) % vaults);
  const e: AuditEntry = {
    ...baseEntry(n, vaultId),
    at: n % 11 === 0 ? 8_640_000_000_000_000 : 1_700_000_000_000 + n,
    principal: n % 5 === 0 ? `agent:${odd.slice(0, 40)}` : `user:${n}`,
    vault: `v${vaultId}-\u{1f511}-"${n % 3}"`,
    ingress: ["proxy", "tunnel", "blind", "transparent"][n % 4]!,
    method: n % 9 === 0 ? "M-SEARCH" : "POST",
    host: n % 4 === 0 ? `xn--bcher-kva.example:${n}` : "[::1]:8443",
    path: `/p/${n}/${odd}`,
    service: n % 6 === 0 ? null : `svc-${odd.slice(0, 20)}`,
    credentialKeys: n % 2 ? "A,B,C" : "",
    credentialRefs: n % 3 === 0 ? JSON.stringify([`conn:path/${n}#f,g`, `x"y\\z`, odd.slice(0, 10)]) : null,
    status: [200, 0, 599, 101, 304][n % 5]!,
    bytesIn: n % 13 === 0 ? Number.MAX_SAFE_INTEGER : n,
    bytesOut: n % 17 === 0 ? 0 : n * 3,
    durationMs: n % 19 === 0 ? 0 : n % 7,
    error: n % 8 === 0 ? `would_refuse:forbidden,${odd.slice(0, 30)}` : null,
    contained: n % 4 === 1,
    approvedBy: n % 10 === 0 ? `user:${n}\u0000` : null,
  };
  // v2 by every field and by one alone; v3 by both workload fields and by the subject alone.
  if (n % 6 === 1) Object.assign(e, { llmModel: "gpt-x", inputTokens: Number.MAX_SAFE_INTEGER, outputTokens: 0, totalTokens: 2, costMicros: null });
  if (n % 6 === 2) Object.assign(e, { costMicros: 1 });
  if (n % 6 === 3) Object.assign(e, { workloadIssuer: "https://token.actions.example", workloadSubject: `repo:acme/${odd.slice(0, 30)}:ref:main` });
  if (n % 6 === 4) Object.assign(e, { workloadIssuer: null, workloadSubject: "sub-only", llmModel: null });
  return e;
}

/** Each vault's chain as written: [vaultId, seq, prev, hash, path] in seq order. */
function chainsOf(path: string): unknown[][] {
  const db = new Database(path, { readonly: true });
  try {
    return (db.query("SELECT vault_id, chain_seq, chain_prev, chain_hash, path FROM audit_logs ORDER BY vault_id, chain_seq, id").values() as unknown[][]).map(
      (r) => r.map((v) => (typeof v === "bigint" ? Number(v) : v)),
    );
  } finally {
    db.close();
  }
}

/** Verifies every vault's chain in `path` as `broker audit verify` does (walkSegment over the stored rows, from each anchor to its head). */
function verifyFile(path: string): { vaults: number; records: number; problems: string[] } {
  const db = new Database(path, { readonly: true });
  try {
    const problems: string[] = [];
    let records = 0;
    const chains = db
      .query("SELECT vault_id AS vaultId, head_seq AS headSeq, head_hash AS headHash, anchor_seq AS anchorSeq, anchor_hash AS anchorHash FROM audit_chains")
      .all() as {
      vaultId: number;
      headSeq: number;
      headHash: string;
      anchorSeq: number;
      anchorHash: string;
    }[];
    for (const c of chains) {
      const rows = db.query(CHAIN_CHECK_STATEMENTS.between).all(c.vaultId, c.anchorSeq, c.headSeq, 1_000_000) as Record<string, unknown>[];
      records += rows.length;
      const walked = walkSegment(Number(c.vaultId), { seq: Number(c.anchorSeq), hash: c.anchorHash }, rows);
      if ("reason" in walked) problems.push(`vault ${c.vaultId}: ${walked.reason}`);
      else if (walked.end.seq !== Number(c.headSeq) || walked.end.hash !== c.headHash)
        problems.push(`vault ${c.vaultId}: records end at ${walked.end.seq}, head ${c.headSeq}`);
    }
    return { vaults: chains.length, records, problems };
  } finally {
    db.close();
  }
}

function countsByPath(path: string): Map<string, number> {
  const db = new Database(path, { readonly: true });
  try {
    const out = new Map<string, number>();
    for (const r of db.query("SELECT path, COUNT(*) AS n FROM audit_logs GROUP BY path").all() as { path: string; n: number }[]) out.set(r.path, Number(r.n));
    return out;
  } finally {
    db.close();
  }
}

/** Paths written more or less than once, as "path × n" (every one of `expected` must be there exactly once, and nothing else). */
function notExactlyOnce(path: string, expected: readonly string[]): string[] {
  const counts = countsByPath(path);
  const bad = expected.filter((p) => counts.get(p) !== 1).map((p) => `${p.slice(0, 40)} × ${counts.get(p) ?? 0}`);
  const extra = [...counts.keys()].filter((p) => !expected.includes(p)).map((p) => `unexpected ${p.slice(0, 40)}`);
  return [...bad, ...extra];
}

async function until(what: string, probe: () => boolean | Promise<boolean>, limitMs = 20_000): Promise<void> {
  const deadline = performance.now() + limitMs;
  while (!(await probe())) {
    if (performance.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await Bun.sleep(10);
  }
}

test("1,300 awkward records over 150 vaults in batches of 500: the worker's chain is the main connection's, hash for hash, and verifies from the file", async () => {
  const dir = dataDir();
  const t = tap();
  const { store } = await fileStore(dir, [t]);
  const journal = openAuditJournal(dir, () => {});
  const audit = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal, flushIntervalMs: 60_000 });
  await audit.resume();
  const entries = Array.from({ length: 1300 }, (_, n) => oddEntry(n, 150));
  for (const e of entries) audit.record(e);
  await Bun.sleep(0); // the journal's write of this tick
  const journalLines = readFileSync(join(dir, "audit-journal.jsonl"), "utf8").split("\n").slice(1, -1);
  expect(journalLines).toHaveLength(1300);
  await audit.flush();
  expect(audit.queued).toBe(0);

  // What the thread was sent: the journal's own lines, joined, in three batches (500, 500, 300), and nothing more.
  const sent = t.posted.filter((r): r is Extract<ReadRequest, { kind: "audit" }> => r.kind === "audit");
  expect(sent.map((r) => (JSON.parse(r.records) as unknown[]).length)).toEqual([500, 500, 300]);
  expect(sent.map((r) => r.records).join("")).toBe(
    [journalLines.slice(0, 500), journalLines.slice(500, 1000), journalLines.slice(1000)].map((l) => `[${l.join(",")}]`).join(""),
  );
  expect(sent.every((r) => r.mark === journal.id)).toBe(true);

  // The same records through a memory store's main connection: the same chains.
  const memory = await openMemoryStore();
  closers.push(() => memory.close());
  const inThread = createAuditLog(memory, { now: Date.now, log: createMemoryLogger(), flushIntervalMs: 60_000 });
  for (const e of entries) inThread.record(e);
  await inThread.flush();
  const fromMemory = (
    await memory.db.all<Record<string, unknown>>("SELECT vault_id, chain_seq, chain_prev, chain_hash, path FROM audit_logs ORDER BY vault_id, chain_seq, id")
  ).map((r) => Object.values(r).map((v) => (typeof v === "bigint" ? Number(v) : v)));
  const fromWorker = chainsOf(join(dir, DB_FILE));
  expect(fromWorker).toHaveLength(1300);
  expect(fromWorker.map((r) => r.slice(0, 4))).toEqual(fromMemory.map((r) => r.slice(0, 4)));

  // And as verification reads them back from the file (every awkward text included).
  const verified = verifyFile(join(dir, DB_FILE));
  expect(verified).toEqual({ vaults: 150, records: 1300, problems: [] });
  expect(await store.auditMarks.get(journal.id)).toBe(1300);
  await audit.stop();
});

// A lone surrogate (text that came through JSON: a hostile upstream's model name) is stored as U+FFFD by both
// databases; the writer makes it U+FFFD before the record is journaled and hashed (egress/audit.ts wellFormed), so the
// hash covers what is stored and the record verifies. It hashed the JSON escape before: such records never verified.
test("lone surrogates: the worker hashes them exactly as the main connection does, and the chain verifies from the file", async () => {
  const dir = dataDir();
  const { store } = await fileStore(dir);
  const journal = openAuditJournal(dir, () => {});
  const audit = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal, flushIntervalMs: 60_000 });
  const texts = ["lone high \ud800", "lone low \udfff", "reversed \udc00\ud800", "\ud83d"];
  const entries = texts.flatMap((t, i) => [
    { ...baseEntry(i), path: `/${t}`, principal: `agent:${t}` },
    { ...baseEntry(10 + i, 2), workloadIssuer: t, workloadSubject: t },
  ]);
  for (const e of entries) audit.record(e);
  await audit.flush();
  const memory = await openMemoryStore();
  closers.push(() => memory.close());
  const inThread = createAuditLog(memory, { now: Date.now, log: createMemoryLogger(), flushIntervalMs: 60_000 });
  for (const e of entries) inThread.record(e);
  await inThread.flush();
  const fromMemory = (
    await memory.db.all<Record<string, unknown>>("SELECT vault_id, chain_seq, chain_prev, chain_hash FROM audit_logs ORDER BY vault_id, chain_seq, id")
  ).map((r) => Object.values(r).map((v) => (typeof v === "bigint" ? Number(v) : v)));
  expect(chainsOf(join(dir, DB_FILE)).map((r) => r.slice(0, 4))).toEqual(fromMemory);
  expect(verifyFile(join(dir, DB_FILE))).toEqual({ vaults: 2, records: entries.length, problems: [] });
  await audit.stop();
});

test("an answer lost on the way back (the thread committed): the worker is given up, the retry on a fresh one writes nothing twice", async () => {
  const dir = dataDir();
  let dropped = 0;
  const first = tap({ reply: (r) => r.kind === "audited" && dropped++ === 0 });
  const { store, faults } = await fileStore(dir, [first], 500);
  const log = createMemoryLogger();
  const journal = openAuditJournal(dir, () => {});
  const heads: Map<number, number>[] = [];
  const audit = createAuditLog(store, { now: Date.now, log, journal, flushIntervalMs: 60_000, onWritten: (h) => heads.push(new Map(h)) });
  await audit.resume();
  const paths: string[] = [];
  for (let i = 0; i < 40; i++) {
    audit.record(baseEntry(i, 1 + (i % 3)));
    paths.push(`/r/${i}`);
  }
  await audit.flush(); // committed; its answer never came: given up after 500 ms, kept
  expect(dropped).toBe(1);
  expect(audit.queued).toBe(40);
  expect(first.terminated).toBe(true);
  expect(faults.join()).toContain("no answer");
  for (let i = 40; i < 45; i++) {
    audit.record(baseEntry(i, 1 + (i % 3)));
    paths.push(`/r/${i}`);
  }
  await until("the retry", async () => (await audit.flush(), audit.queued === 0));
  expect(notExactlyOnce(join(dir, DB_FILE), paths)).toEqual([]);
  expect(verifyFile(join(dir, DB_FILE)).problems).toEqual([]);
  expect(heads.at(-1)).toEqual(
    new Map([
      [1, 15],
      [2, 15],
      [3, 15],
    ]),
  );
  expect(await store.auditMarks.get(journal.id)).toBe(45);
  await audit.stop();
});

for (const order of ["after", "before"] as const) {
  test(`a thread given up that still commits the batch ${order} the retry has (terminate cannot stop a native call): written once, chain intact`, async () => {
    const dir = dataDir();
    // The first thread takes the batch but does not run it until the test says; terminate() leaves it running.
    const zombie = tap({ zombie: true, hold: (r) => r.kind === "audit" });
    const { store } = await fileStore(dir, [zombie], 500);
    const journal = openAuditJournal(dir, () => {});
    const audit = createAuditLog(store, { now: Date.now, log: createMemoryLogger(), journal, flushIntervalMs: 60_000 });
    await audit.resume();
    const paths: string[] = [];
    for (let i = 0; i < 30; i++) {
      audit.record(baseEntry(i, 1 + (i % 2)));
      paths.push(`/r/${i}`);
    }
    await audit.flush(); // no answer within 500 ms: given up, kept
    expect(zombie.terminated).toBe(true);
    expect(zombie.held).toHaveLength(1);
    const late = async () => {
      zombie.real!.postMessage(zombie.held[0]!);
      await until("the zombie's commit", () => zombie.replies.some((r) => r.kind === "audited" || r.kind === "failed"));
    };
    if (order === "before") await late();
    for (let i = 30; i < 35; i++) {
      audit.record(baseEntry(i, 1 + (i % 2)));
      paths.push(`/r/${i}`);
    }
    await until("the retry", async () => (await audit.flush(), audit.queued === 0));
    if (order === "after") await late();
    expect(zombie.replies.filter((r) => r.kind === "failed")).toEqual([]);
    expect(notExactlyOnce(join(dir, DB_FILE), paths)).toEqual([]);
    expect(verifyFile(join(dir, DB_FILE))).toEqual({ vaults: 2, records: 35, problems: [] });
    expect(await store.auditMarks.get(journal.id)).toBe(35);
    await audit.stop();
  });
}

test("a thread that commits and then never answers, through a shutdown: the journal keeps the records, the next start writes none of them twice", async () => {
  const dir = dataDir();
  const mute = tap({ reply: (r) => r.kind === "audited" });
  const { store } = await fileStore(dir, [mute, mute, mute, mute, mute, mute, mute, mute], 300);
  const log = createMemoryLogger();
  const audit = createAuditLog(store, { now: Date.now, log, journal: openAuditJournal(dir, () => {}), flushIntervalMs: 60_000 });
  await audit.resume();
  const paths = Array.from({ length: 25 }, (_, i) => `/r/${i}`);
  for (let i = 0; i < 25; i++) audit.record(baseEntry(i));
  await audit.stop(1_000); // every try committed (the first) or wrote nothing (the mark); no answer came
  expect(log.lines.map((l) => JSON.parse(l).event)).toContain("audit_records_spilled");
  store.close();
  expect(notExactlyOnce(join(dir, DB_FILE), paths)).toEqual([]);

  const { store: again } = await fileStore(dir);
  const second = createAuditLog(again, { now: Date.now, log: createMemoryLogger(), journal: openAuditJournal(dir, () => {}) });
  expect(await second.resume()).toBe(0); // the mark moved with the records: nothing left to replay
  await second.stop();
  expect(notExactlyOnce(join(dir, DB_FILE), paths)).toEqual([]);
  expect(verifyFile(join(dir, DB_FILE))).toEqual({ vaults: 1, records: 25, problems: [] });
});

test("retention deleting in the same thread while the writer writes: every record gets one seq, the kept ones chain from the anchor", async () => {
  const dir = dataDir();
  const { store } = await fileStore(dir);
  const log = createMemoryLogger();
  const journal = openAuditJournal(dir, () => {});
  const audit = createAuditLog(store, { now: Date.now, log, journal, flushIntervalMs: 2, maxBatch: 97 });
  await audit.resume();
  let batches = 0;
  let removed = 0;
  let recording = true;
  /** Batches that deleted rows while records were still being made and written. */
  let removedWhileWriting = 0;
  const retention = startAuditRetention(store.db, {
    maxAgeMs: 365 * 86_400_000,
    maxRows: 300,
    now: Date.now,
    log,
    checkEveryMs: 3,
    pauseMs: 0,
    batchRows: { first: 40, min: 10, max: 200 },
    prune: store.offLoopPrune!,
    onBatch: (b) => {
      batches++;
      removed += b.removed;
      if (recording && b.removed > 0) removedWhileWriting++;
    },
  });
  const perVault = new Map<number, number>();
  const N = 4_000;
  for (let i = 0; i < N; i++) {
    const v = 1 + (i % 3);
    audit.record(baseEntry(i, v));
    perVault.set(v, (perVault.get(v) ?? 0) + 1);
    if (i % 50 === 0) await Bun.sleep(1);
  }
  recording = false;
  await audit.flush();
  await until("retention to reach the cap", () => {
    const db = new Database(join(dir, DB_FILE), { readonly: true });
    try {
      return Number((db.query("SELECT COUNT(*) AS n FROM audit_logs").get() as { n: number }).n) <= 300;
    } finally {
      db.close();
    }
  });
  await retention.stop();
  await audit.stop();
  expect(log.lines.filter((l) => /audit_write_failed|audit_retention_failed/.test(l))).toEqual([]);
  expect(batches).toBeGreaterThan(1);
  expect(removedWhileWriting).toBeGreaterThan(0);
  const db = new Database(join(dir, DB_FILE), { readonly: true });
  try {
    const heads = db.query("SELECT vault_id AS v, head_seq AS seq FROM audit_chains ORDER BY vault_id").all() as { v: number; seq: number }[];
    // One seq per record ever written: a record written twice or lost would move the head off the count.
    expect(heads.map((h) => [Number(h.v), Number(h.seq)])).toEqual([...perVault].sort((a, b) => a[0] - b[0]));
    const kept = Number((db.query("SELECT COUNT(*) AS n FROM audit_logs").get() as { n: number }).n);
    expect(kept + removed).toBe(N);
  } finally {
    db.close();
  }
  expect(verifyFile(join(dir, DB_FILE)).problems).toEqual([]);
  expect(await store.auditMarks.get(journal.id)).toBe(N);
});

// A disk that refuses the batch for now is an outage, not a wrong batch: the records must wait (memory and journal) and
// reach the database once, never be dropped. The worker reports SQLite's own code; these are the ones a full disk, a
// failing one, a read-only mount or running out of file descriptors (the thread opens its writable connection on
// first use) give.
for (const code of ["SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_IOERR_FSYNC"]) {
  test(`a batch the disk refuses (${code}) is kept and written once when the disk takes writes again`, async () => {
    const dir = dataDir();
    let refused = 0;
    // The thread answers the first two batches with the failure (without running them), then runs them.
    const t = tap({ hold: (r) => r.kind === "audit" && refused < 2 });
    const { store } = await fileStore(dir, [t]);
    const log = createMemoryLogger();
    const journal = openAuditJournal(dir, () => {});
    const audit = createAuditLog(store, { now: Date.now, log, journal, flushIntervalMs: 60_000 });
    await audit.resume();
    const paths = Array.from({ length: 12 }, (_, i) => `/r/${i}`);
    for (let i = 0; i < 12; i++) audit.record(baseEntry(i));
    // As the worker answers a batch whose COMMIT hit the disk's refusal (SQLite rolled it back).
    const refuse = (): void => {
      const req = t.held.shift() as Extract<ReadRequest, { kind: "audit" }>;
      refused++;
      t.inject!({ kind: "failed", id: req.id, message: `disk says no (${code})`, code });
    };
    const flushing = audit.flush();
    await until("the first batch", () => t.held.length === 1);
    refuse();
    await flushing;
    expect(audit.queued).toBe(12); // kept, not dropped
    const events = () => log.lines.map((l) => JSON.parse(l).event as string);
    expect(events()).not.toContain("audit_write_failed");
    const again = audit.flush();
    await until("the second batch", () => t.held.length === 1);
    refuse();
    await again;
    expect(audit.queued).toBe(12);
    // The disk takes writes again.
    await until("the records written", async () => (await audit.flush(), audit.queued === 0));
    expect(notExactlyOnce(join(dir, DB_FILE), paths)).toEqual([]);
    expect(readFileSync(join(dir, "audit-journal.jsonl"), "utf8").split("\n").filter(Boolean)).toHaveLength(1); // emptied only once written
    await audit.stop();
  });
}

// Found by these attacks: a record made after the writer stopped (a metered answer's usage arriving after the
// shutdown's wait) went to the worker's closed store, which answers DatabaseUnavailable, and the writer retried it
// for ever: the process never exited. A stopped writer now schedules nothing and says the record is lost.
test("a record made after the writer stopped and the store closed: said lost, never retried (nothing keeps the process alive)", async () => {
  const dir = dataDir();
  const { store } = await fileStore(dir);
  const worker = store.offLoopAudit!;
  let asked = 0;
  Object.assign(store, { offLoopAudit: (mark: string, batch: never[]) => (asked++, worker(mark, batch)) });
  const log = createMemoryLogger();
  const audit = createAuditLog(store, { now: Date.now, log, journal: openAuditJournal(dir, () => {}), flushIntervalMs: 5 });
  await audit.resume();
  audit.record(baseEntry(1));
  await audit.stop();
  expect(asked).toBe(1);
  store.close();
  audit.record(baseEntry(2));
  await Bun.sleep(300); // past the flush interval and the first retry's wait
  expect(asked).toBe(1);
  expect(audit.queued).toBe(0);
  expect(log.lines.map((l) => JSON.parse(l).event)).toContain("audit_records_lost");
  await audit.flush(); // a flush asked for after the stop tries once and schedules nothing
  await Bun.sleep(300);
  expect(asked).toBe(1);
});
