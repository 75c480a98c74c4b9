// One process per audit journal (app/journal-lock.ts): a journal whose lock a live process holds is refused with the
// holder's pid and the data directory; each worker's journal has a lock of its own; a lock left by a process that is
// gone (killed, or a pid now another process's, or a file that names nobody) is taken over and says whose it was; a
// release removes only this process's own lock; one that cannot be made at all leaves the broker without a journal.

import { afterEach, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { claimJournal } from "../../../src/app/audit-start.ts";
import { DataDirBusy, lockJournal } from "../../../src/app/journal-lock.ts";
import { loadConfig } from "../../../src/config.ts";
import { createMemoryLogger } from "../../../src/log.ts";

const dirs: string[] = [];
const children: { kill(): void }[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "broker-journal-lock-"));
  dirs.push(dir);
  return dir;
}

/** /proc's start time of `pid` (field 22 of its stat). */
function startOf(pid: number): string {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  return text.slice(text.lastIndexOf(")") + 2).split(" ")[19]!;
}

const lockFile = (dir: string, journal = "audit-journal.jsonl") => join(dir, `${journal}.lock`);

test("a second lock on one journal is refused naming the holder's pid and the data directory; another journal's is not", () => {
  const dir = dataDir();
  const first = lockJournal(dir, "audit-journal.jsonl");
  expect(first.tookOverFrom).toBeUndefined();
  expect(JSON.parse(readFileSync(lockFile(dir), "utf8"))).toEqual({ pid: process.pid, start: startOf(process.pid) });
  const err = (() => {
    try {
      lockJournal(dir, "audit-journal.jsonl");
    } catch (e) {
      return e;
    }
  })();
  expect(err).toBeInstanceOf(DataDirBusy);
  expect((err as DataDirBusy).pid).toBe(process.pid);
  expect((err as Error).message).toBe(
    `another broker (pid ${process.pid}) is serving data directory ${dir}; stop it or use another data directory (BROKER_DATA_DIR)`,
  );
  // Each worker of `--workers N` keeps a journal of its own, so a lock of its own.
  const worker2 = lockJournal(dir, "audit-journal-2.jsonl");
  worker2.release();
  first.release();
  expect(existsSync(lockFile(dir))).toBe(false);
  lockJournal(dir, "audit-journal.jsonl").release();
});

test("a lock another live process holds is refused with its pid", () => {
  const dir = dataDir();
  const other = Bun.spawn(["sleep", "30"]);
  children.push(other);
  writeFileSync(lockFile(dir), `${JSON.stringify({ pid: other.pid, start: startOf(other.pid) })}\n`);
  expect(() => lockJournal(dir, "audit-journal.jsonl")).toThrow(`another broker (pid ${other.pid}) is serving data directory ${dir}`);
  // Still the other's: nothing removed it.
  expect(JSON.parse(readFileSync(lockFile(dir), "utf8")).pid).toBe(other.pid);
});

test("a lock whose process is gone (kill -9), whose pid is now another process's, or that names nobody is taken over", async () => {
  const dir = dataDir();
  const dead = Bun.spawn(["sleep", "30"]);
  const deadStart = startOf(dead.pid);
  dead.kill("SIGKILL");
  await dead.exited;
  writeFileSync(lockFile(dir), `${JSON.stringify({ pid: dead.pid, start: deadStart })}\n`);
  const a = lockJournal(dir, "audit-journal.jsonl");
  expect(a.tookOverFrom).toBe(dead.pid);
  expect(JSON.parse(readFileSync(lockFile(dir), "utf8")).pid).toBe(process.pid);
  a.release();

  // This very pid, but started at another time: the pid was given to this process since (a restart in a container).
  writeFileSync(lockFile(dir), `${JSON.stringify({ pid: process.pid, start: "1" })}\n`);
  const b = lockJournal(dir, "audit-journal.jsonl");
  expect(b.tookOverFrom).toBe(process.pid);
  b.release();

  writeFileSync(lockFile(dir), "not a lock at all\n");
  const c = lockJournal(dir, "audit-journal.jsonl");
  expect(c.tookOverFrom).toBeUndefined();
  c.release();
  expect(existsSync(lockFile(dir))).toBe(false);
  // Nothing is left beside it from the takeovers.
  expect(existsSync(`${lockFile(dir)}.stale-${process.pid}`)).toBe(false);
});

test("a release removes only this process's own lock", () => {
  const dir = dataDir();
  const lock = lockJournal(dir, "audit-journal.jsonl");
  const someoneElses = `${JSON.stringify({ pid: 999_999_999, start: null })}\n`;
  writeFileSync(lockFile(dir), someoneElses);
  lock.release();
  expect(readFileSync(lockFile(dir), "utf8")).toBe(someoneElses);
});

test("brokers restarted together over a stale lock: exactly one takes it over, each time", async () => {
  const dir = dataDir();
  const module = join(import.meta.dir, "../../../src/app/journal-lock.ts");
  // Each waits for "go" on its input, then tries the lock, says what happened, and holds on until its input closes.
  const script = `
    const { lockJournal } = await import(${JSON.stringify(module)});
    const reader = Bun.stdin.stream().getReader();
    await reader.read();
    let said;
    try { lockJournal(${JSON.stringify(dir)}, "audit-journal.jsonl"); said = "held"; } catch (e) { said = e.constructor.name; }
    process.stdout.write(said + "\\n");
    while (!(await reader.read()).done) {}
  `;
  for (let round = 0; round < 5; round++) {
    const dead = Bun.spawn(["true"]);
    await dead.exited;
    writeFileSync(lockFile(dir), `${JSON.stringify({ pid: dead.pid, start: null })}\n`);
    const procs = Array.from({ length: 4 }, () => Bun.spawn([process.execPath, "-e", script], { stdin: "pipe", stdout: "pipe", stderr: "inherit" }));
    await Bun.sleep(300); // most likely each is waiting on its input by now (if not, it reads "go" at once)
    for (const p of procs) p.stdin.write("go\n");
    for (const p of procs) void p.stdin.flush();
    const said = await Promise.all(
      procs.map(async (p) => {
        const reader = p.stdout.getReader();
        let text = "";
        while (!text.includes("\n")) {
          const r = await reader.read();
          if (r.done) break;
          text += new TextDecoder().decode(r.value);
        }
        return text.trim();
      }),
    );
    expect(said.sort()).toEqual(["DataDirBusy", "DataDirBusy", "DataDirBusy", "held"]);
    for (const p of procs) void p.stdin.end();
    await Promise.all(procs.map((p) => p.exited));
  }
}, 60_000);

test("a lock that cannot be made (a directory in its place) leaves the broker without a journal, said in one line; a busy one refuses", () => {
  const dir = dataDir();
  const config = loadConfig({ BROKER_DATA_DIR: dir });
  mkdirSync(lockFile(dir));
  const log = createMemoryLogger();
  expect(claimJournal(config, log)).toBeUndefined();
  expect(log.lines.filter((l) => l.includes('"event":"audit_journal_unavailable"') && l.includes("audit-journal.jsonl.lock"))).toHaveLength(1);
  rmSync(lockFile(dir), { recursive: true });
  const held = claimJournal(config, log);
  expect(held).toBeDefined();
  expect(() => claimJournal(config, log)).toThrow(DataDirBusy);
  held?.release();
});
