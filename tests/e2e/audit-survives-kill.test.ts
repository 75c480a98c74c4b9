// An instance killed with SIGKILL while its audit records are queued loses none of them: every
// proxied request it answered before the kill is in the vault's audit log, exactly once, after it is
// started again on the same data directory (and the database is back). The records wait in the audit
// journal (<data dir>/audit-journal.jsonl, egress/audit-journal.ts), which is 0600, holds no
// credential, and is back to its header line alone once everything reached the database. Against the
// compiled binary, on both stores:
// - PostgreSQL stopped (pg_ctl stop -m fast), requests answered from cache, kill -9, PostgreSQL back;
// - SQLite with another process holding the file's write lock (the broker's busy timeout is 5 s:
//   each audit write waits that long before the store counts as away), kill -9, lock released;
// - SQLite in normal operation, killed within the 250 ms flush interval of the last answer.

import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { collectOutput } from "../helpers/binary.ts";
import { pgMissing, startPgCluster, type PgCluster } from "../helpers/postgres.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import {
  buildFreshBinary,
  createRecorder,
  findLeak,
  pollUntil,
  spawnInstance,
  stopAllInstances,
  type Instance,
  type Recorder,
} from "./multi-instance-fixture.ts";

const JOURNAL = "audit-journal.jsonl";
const VAULT = "killed";
/** Requests answered while the database is away (PostgreSQL) or within the flush interval (SQLite). */
const N = 20;
/** Requests sent once the SQLite writer has deferred (answered when the event loop is free again). */
const LATE = 5;

let bin: string;
let upstream: TestUpstream;
let rec: Recorder;
let hostIp: string;
const dirs: string[] = [];
/** Each instance's data directory (shared by an instance and the one started after its kill). */
const dataDirs = new Map<Instance, string>();
const dirOf = (inst: Instance) => dataDirs.get(inst)!;
/** Every process started here, for the log checks (logs are kept after a process dies). */
const started: Instance[] = [];

function answer(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ ok: true, url: req.url }));
}

/** A data directory that outlives the instances started on it (removed in afterAll). */
function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "broker-audit-kill-"));
  dirs.push(dir);
  return join(dir, "data");
}

/** `broker server` on `dir`; databaseUrl "" keeps the embedded SQLite store. */
async function spawnOn(name: string, dir: string, databaseUrl: string): Promise<Instance> {
  const inst = await spawnInstance(name, { bin, databaseUrl, upstreamCaPem: upstream.pki.caPem, env: { BROKER_DATA_DIR: dir } });
  started.push(inst);
  dataDirs.set(inst, dir);
  return inst;
}

interface Setup {
  readonly owner: string;
  readonly session: string;
  /** SECRET: the vault's credential; in no response, log line, journal or audit record. */
  readonly secret: string;
}

/** An owner, a vault with one credential and a bearer service for the upstream, and a scoped session, all cached by one request. */
async function setUp(inst: Instance): Promise<Setup> {
  const secret = `sk-kill-${crypto.randomUUID()}`;
  const owner = (await rec.must(inst, "POST", "/v1/auth/register", { email: "owner@example.com", password: "correct horse battery" }, "", 201)).token;
  await rec.must(inst, "POST", "/v1/vaults", { name: VAULT }, owner, 201);
  await rec.must(inst, "PUT", `/v1/vaults/${VAULT}/credentials/API_KEY`, { value: secret }, owner, 200);
  await rec.must(inst, "POST", `/v1/vaults/${VAULT}/services`, { host: hostIp, auth: { type: "bearer", token: "API_KEY" } }, owner, 201);
  const session = (await rec.must(inst, "POST", "/v1/sessions", { vault: VAULT, role: "proxy" }, owner, 201)).token;
  const primed = await rec.proxy(inst, session, hostIp, "prime");
  expect([primed.status, rec.labelAuth(primed.path, { secret })]).toEqual([200, "secret"]);
  await waitSettled(inst, join(dirOf(inst), JOURNAL));
  return { owner, session, secret };
}

/** Until nothing is queued and the journal holds its header alone: everything recorded so far is in the database. */
async function waitSettled(inst: Instance, journal: string): Promise<void> {
  const settled = await pollUntil(
    performance.now(),
    15_000,
    async () => (await rec.api(inst, "GET", "/health")).body?.database?.audit_queued === 0 && journalLines(journal).length === 1,
    50,
  );
  if (settled === undefined) throw new Error(`${inst.name}: audit records still queued or journaled after 15 s`);
}

/** The journal's lines (the header first); the last is followed by a newline. */
function journalLines(path: string): string[] {
  const text = readFileSync(path, "utf8");
  if (!text.endsWith("\n")) throw new Error(`the journal does not end with a newline (${text.length} bytes)`);
  return text.slice(0, -1).split("\n");
}

/** The paths the journal holds records of (after its header). */
function journaledPaths(path: string): string[] {
  return journalLines(path)
    .slice(1)
    .map((l) => JSON.parse(l).entry.path as string);
}

/** Every audit record of the vault, paged through the id cursor. */
async function auditRecords(inst: Instance, owner: string): Promise<any[]> {
  const all: any[] = [];
  let before = "";
  for (;;) {
    const page = await rec.must(inst, "GET", `/v1/vaults/${VAULT}/logs?limit=1000${before}`, undefined, owner, 200);
    all.push(...page.logs);
    if (!page.next_cursor) return all;
    before = `&before=${page.next_cursor}`;
  }
}

/** How many audit records each of `paths` has: the ones not exactly once, as "path × n". */
function notOnce(records: readonly any[], paths: readonly string[]): string[] {
  const count = new Map<string, number>();
  for (const r of records) count.set(r.path, (count.get(r.path) ?? 0) + 1);
  return paths.filter((p) => count.get(p) !== 1).map((p) => `${p} × ${count.get(p) ?? 0}`);
}

interface Answered {
  readonly path: string;
  readonly status: number;
  readonly ms: number;
}

/** One proxied request with the cached session, timed; 200 only with the credential injected. */
async function send(inst: Instance, s: Setup, tag: string): Promise<Answered> {
  const t = performance.now();
  const r = await rec.proxy(inst, s.session, hostIp, tag);
  const injected = r.status === 200 && rec.labelAuth(r.path, { secret: s.secret }) === "secret";
  return { path: r.path, status: r.status === 200 && !injected ? -1 : r.status, ms: performance.now() - t };
}

/** The journal after the kill: 0600, no credential, and a record for each of `paths`. */
function checkKilledJournal(path: string, s: Setup, paths: readonly string[]): { records: number } {
  expect(statSync(path).mode & 0o777).toBe(0o600);
  const text = readFileSync(path, "utf8");
  expect(findLeak([text], s.secret)).toBeUndefined();
  expect(findLeak([text], s.session)).toBeUndefined();
  const held = new Set(journaledPaths(path));
  expect(paths.filter((p) => !held.has(p))).toEqual([]);
  return { records: held.size };
}

/** After the restart: every answered request audited exactly once, the journal back to its header, nothing leaked. */
async function checkRecovered(inst: Instance, s: Setup, paths: readonly string[], journaled: boolean): Promise<void> {
  const journal = join(dirOf(inst), JOURNAL);
  await waitSettled(inst, journal);
  const records = await auditRecords(inst, s.owner);
  expect(notOnce(records, paths)).toEqual([]);
  expect(records.filter((r) => paths.includes(r.path)).every((r) => r.status === 200 && r.credential_keys.join() === "API_KEY")).toBe(true);
  expect(statSync(journal).mode & 0o777).toBe(0o600);
  expect(journalLines(journal).length).toBe(1);
  expect(Object.keys(JSON.parse(journalLines(journal)[0]!))).toEqual(["journal"]);
  // What the journal held at the kill was written at the start, and said so.
  const replayed = inst.logs().match(/"event":"audit_journal_replayed"[^\n]*/)?.[0];
  if (journaled) expect(replayed).toBeDefined();
  report(inst.name, replayed ?? "nothing replayed");
  // The credential in no response, no process's log and no audit record; the tokens (which the API
  // answers with when they are made) in no log line and no audit record.
  const logs = [...started.map((i) => i.logs()), JSON.stringify(records)];
  expect(findLeak([...rec.outputs, ...logs], s.secret)).toBeUndefined();
  for (const token of [s.session, s.owner]) expect(findLeak(logs, token)).toBeUndefined();
  const lines = inst.logs().split("\n");
  expect(lines.filter((l) => /"event":"unhandled_error"|"stack"/.test(l)).slice(0, 5)).toEqual([]);
}

function report(what: string, value: string): void {
  console.log(`[audit-survives-kill] ${what}: ${value}`);
}

const maxMs = (xs: readonly Answered[]) => `${Math.round(Math.max(...xs.map((x) => x.ms)))} ms`;

beforeAll(async () => {
  bin = buildFreshBinary();
  upstream = await startUpstream(answer);
  rec = createRecorder(upstream);
  hostIp = `127.0.0.1:${upstream.port}`;
}, 60_000);

afterAll(async () => {
  await stopAllInstances();
  await upstream?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(pgMissing)("PostgreSQL: kill -9 during an outage with records queued", () => {
  let cluster: PgCluster | undefined;
  afterAll(async () => {
    await cluster?.destroy();
  });

  test("every request answered from cache while PostgreSQL was stopped is audited once after the restart", async () => {
    cluster = await startPgCluster();
    const dbUrl = await cluster.createDatabase();
    const dir = dataDir();
    const first = await spawnOn("pg-first", dir, dbUrl);
    const s = await setUp(first);

    await cluster.stop();
    const answered: Answered[] = [];
    for (let i = 0; i < N; i++) answered.push(await send(first, s, "pg-outage"));
    expect(answered.filter((x) => x.status !== 200)).toEqual([]); // the cached session, within the outage grace
    // The writer has tried and deferred: the records are queued (and journaled), not written.
    const deferred = await pollUntil(performance.now(), 10_000, async () => first.logs().includes('"event":"audit_write_deferred"'), 50);
    expect(deferred).toBeDefined();
    expect((await rec.api(first, "GET", "/health")).body?.database?.audit_queued).toBeGreaterThanOrEqual(N);
    expect(await first.kill("SIGKILL")).not.toBe(0);
    const paths = answered.map((x) => x.path);
    const held = checkKilledJournal(join(dir, JOURNAL), s, paths);
    report("PostgreSQL", `${N} requests answered during the outage (slowest ${maxMs(answered)}), ${held.records} records in the journal at the kill`);

    await cluster.start();
    const second = await spawnOn("pg-second", dir, dbUrl);
    await checkRecovered(second, s, paths, true);
    // And it keeps auditing: a request after the restart is recorded as usual.
    const next = await send(second, s, "pg-after");
    expect(next.status).toBe(200);
    await waitSettled(second, join(dir, JOURNAL));
    expect(notOnce(await auditRecords(second, s.owner), [...paths, next.path])).toEqual([]);
  }, 90_000);
});

/** Another process holding the SQLite file's write lock (BEGIN EXCLUSIVE) until told to let go. */
async function holdWriteLock(dbPath: string): Promise<{ release(): Promise<void> }> {
  const script = `
    import { Database } from "bun:sqlite";
    const db = new Database(process.env.LOCKED_DB, { create: false });
    db.run("PRAGMA busy_timeout = 20000"); // the broker may be mid-write: wait for it, then hold the lock
    db.run("BEGIN EXCLUSIVE");
    console.log("locked");
    for await (const _ of process.stdin) {}
    db.run("ROLLBACK");
    db.close();
    console.log("released");
  `;
  const proc = Bun.spawn([process.execPath, "-e", script], { env: { ...process.env, LOCKED_DB: dbPath }, stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  const out = collectOutput(proc);
  const locked = await pollUntil(performance.now(), 30_000, async () => out.text().includes("locked") || proc.exitCode !== null, 20);
  if (locked === undefined || !out.text().includes("locked")) throw new Error(`the lock holder did not get the lock:\n${out.text()}`);
  return {
    async release() {
      proc.stdin.end();
      const code = await proc.exited;
      if (code !== 0 || !out.text().includes("released")) throw new Error(`the lock holder failed (${code}):\n${out.text()}`);
    },
  };
}

describe("SQLite: kill -9 with records queued", () => {
  test("another process holds the write lock: every request answered meanwhile is audited once after the restart", async () => {
    const dir = dataDir();
    const first = await spawnOn("sqlite-locked", dir, "");
    const s = await setUp(first);

    const lock = await holdWriteLock(join(dir, "broker.db"));
    let released = false;
    try {
      // Requests keep coming until the writer has waited out the busy timeout (holding the event loop:
      // bun:sqlite is synchronous) and deferred; then a few more, side by side, queued behind it.
      const answered: Answered[] = [];
      const t0 = performance.now();
      while (!first.logs().includes('"event":"audit_write_deferred"') && performance.now() - t0 < 30_000) {
        answered.push(await send(first, s, "sqlite-locked"));
        await Bun.sleep(20);
      }
      const deferredAt = answered.length;
      expect(first.logs()).toContain('"event":"audit_write_deferred"');
      const tDeferred = performance.now();
      const late = await Promise.all(Array.from({ length: LATE }, () => send(first, s, "sqlite-locked-late")));
      answered.push(...late);
      const lateMs = performance.now() - tDeferred;
      expect(answered.filter((x) => x.status !== 200)).toEqual([]);
      expect(await first.kill("SIGKILL")).not.toBe(0);
      const paths = answered.map((x) => x.path);
      const held = checkKilledJournal(join(dir, JOURNAL), s, paths);
      report(
        "SQLite, write lock held",
        `${answered.length} requests answered under the lock: ${deferredAt} until the writer deferred (${Math.round(tDeferred - t0)} ms), then ${LATE} side by side answered within ${Math.round(lateMs)} ms (slowest ${maxMs(late)}); ${held.records} records in the journal at the kill`,
      );
      await lock.release();
      released = true;

      const second = await spawnOn("sqlite-locked-again", dir, "");
      await checkRecovered(second, s, paths, true);
    } finally {
      if (!released) await lock.release().catch(() => {});
    }
  }, 120_000);

  test("normal operation, killed within the flush interval of the last answer: every request audited once after the restart", async () => {
    const dir = dataDir();
    const first = await spawnOn("sqlite-quick", dir, "");
    const s = await setUp(first);

    const t0 = performance.now();
    const answered = await Promise.all(Array.from({ length: N }, () => send(first, s, "sqlite-quick")));
    const answeredMs = performance.now() - t0;
    expect(answered.filter((x) => x.status !== 200)).toEqual([]);
    expect(await first.kill("SIGKILL")).not.toBe(0);
    const killedMs = performance.now() - t0;
    const paths = answered.map((x) => x.path);
    // Which the database already had when the process died: the journal must hold the rest.
    const db = new Database(join(dir, "broker.db"), { readonly: true });
    let missing: string[];
    try {
      const count = db.query<{ n: number }, [string]>("SELECT count(*) AS n FROM audit_logs WHERE path = ?");
      missing = paths.filter((p) => count.get(p)?.n === 0);
    } finally {
      db.close();
    }
    const inDb = paths.length - missing.length;
    const held = checkKilledJournal(join(dir, JOURNAL), s, missing);
    report(
      "SQLite, normal operation",
      `${N} requests answered in ${Math.round(answeredMs)} ms, killed ${Math.round(killedMs)} ms after the first was sent; ${inDb} in the database and ${held.records} in the journal at the kill`,
    );

    const second = await spawnOn("sqlite-quick-again", dir, "");
    await checkRecovered(second, s, paths, held.records > 0);
  }, 60_000);
});
