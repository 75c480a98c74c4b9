// One process per audit journal (app/journal-lock.ts), a kernel lock on `<journal>.lock`: a journal another process (or
// this one) holds is refused naming the holder's pid and the data directory; each worker's journal has a lock of its
// own; the kernel lets go of a lock however its holder ends, and the next start says whose it was (from the holder
// file, which decides nothing); a release removes only this process's own holder file and leaves the lock file; a
// lock that cannot be taken at all leaves the broker without a journal.

import { afterEach, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { claimJournal } from "../../../src/app/audit-start.ts";
import { DataDirBusy, lockJournal } from "../../../src/app/journal-lock.ts";
import { loadConfig } from "../../../src/config.ts";
import { createMemoryLogger } from "../../../src/log.ts";

const MODULE = join(import.meta.dir, "../../../src/app/journal-lock.ts");
const JOURNAL = "audit-journal.jsonl";

const dirs: string[] = [];
const children: { kill(signal?: number | NodeJS.Signals): void }[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
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

const lockFile = (dir: string, journal = JOURNAL) => join(dir, `${journal}.lock`);
const holderFile = (dir: string, journal = JOURNAL) => join(dir, `${journal}.holder`);
const holderText = (pid: number, start: string | null, host = hostname()) => `${JSON.stringify({ pid, start, host })}\n`;

/** A process of its own holding the lock until killed; resolves once it holds it. */
async function holdElsewhere(dir: string, journal = JOURNAL): Promise<Bun.Subprocess<"ignore", "pipe", "inherit">> {
  const proc = Bun.spawn(
    [
      process.execPath,
      "-e",
      `const { lockJournal } = await import(${JSON.stringify(MODULE)});
       const lock = lockJournal(${JSON.stringify(dir)}, ${JSON.stringify(journal)});
       console.log("held");
       setInterval(() => lock, 60_000);`,
    ],
    { stdout: "pipe", stderr: "inherit" },
  );
  children.push(proc);
  const reader = proc.stdout.getReader();
  expect(new TextDecoder().decode((await reader.read()).value)).toContain("held");
  reader.releaseLock();
  return proc;
}

test("a second lock on one journal is refused naming the holder's pid and the data directory; another journal's is not", () => {
  const dir = dataDir();
  const first = lockJournal(dir, JOURNAL);
  expect(first.tookOverFrom).toBeUndefined();
  expect(readFileSync(holderFile(dir), "utf8")).toBe(holderText(process.pid, startOf(process.pid)));
  const err = (() => {
    try {
      lockJournal(dir, JOURNAL);
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
  // The lock file stays (deleting one another process may be about to lock is a race); the holder file goes.
  expect(readdirSync(dir).sort()).toEqual([`audit-journal-2.jsonl.lock`, `${JOURNAL}.lock`]);
  const again = lockJournal(dir, JOURNAL);
  expect(again.tookOverFrom).toBeUndefined();
  again.release();
  again.release(); // twice: nothing more
});

test("a lock another process holds is refused with its pid, touching nothing; after its kill -9 it is taken and says whose it was", async () => {
  const dir = dataDir();
  const other = await holdElsewhere(dir);
  const holder = readFileSync(holderFile(dir), "utf8");
  expect(JSON.parse(holder)).toEqual({ pid: other.pid, start: startOf(other.pid), host: hostname() });
  expect(() => lockJournal(dir, JOURNAL)).toThrow(`another broker (pid ${other.pid}) is serving data directory ${dir}`);
  expect(readFileSync(holderFile(dir), "utf8")).toBe(holder);
  other.kill("SIGKILL");
  await other.exited;
  // The kernel let go of it: no stale lock to judge, only a holder file that says who left it.
  const lock = lockJournal(dir, JOURNAL);
  expect(lock.tookOverFrom).toBe(other.pid);
  expect(JSON.parse(readFileSync(holderFile(dir), "utf8")).pid).toBe(process.pid);
  lock.release();
  expect(existsSync(holderFile(dir))).toBe(false);
});

test("what a holder file left behind says: a process gone, this pid at another start time, another host: named; nobody: not", () => {
  const dir = dataDir();
  for (const [text, named] of [
    [holderText(4_000_000, "12345"), 4_000_000],
    [holderText(process.pid, "1"), process.pid], // this very pid, started at another time (a restart in a container)
    [holderText(7, startOf(process.pid), "another-container"), 7],
    ["not a holder at all\n", undefined],
    [holderText(process.pid, startOf(process.pid)), undefined], // this process's own (a release that could not remove it)
  ] as const) {
    writeFileSync(holderFile(dir), text);
    const lock = lockJournal(dir, JOURNAL);
    expect({ text, tookOverFrom: lock.tookOverFrom }).toEqual({ text, tookOverFrom: named });
    lock.release();
  }
});

test("a release removes only this process's own holder file, and never the lock file", () => {
  const dir = dataDir();
  const lock = lockJournal(dir, JOURNAL);
  const someoneElses = holderText(999_999, null);
  writeFileSync(holderFile(dir), someoneElses);
  lock.release();
  expect(readFileSync(holderFile(dir), "utf8")).toBe(someoneElses);
  expect(existsSync(lockFile(dir))).toBe(true);
});

test("a lock whose JournalLock is dropped stays held: its Database is kept from the collector (one collected is closed)", async () => {
  const dir = dataDir();
  (() => {
    lockJournal(dir, JOURNAL); // the JournalLock dropped at once
  })();
  Bun.gc(true);
  await Bun.sleep(50);
  Bun.gc(true);
  const said = Bun.spawnSync([
    process.execPath,
    "-e",
    `const { lockJournal } = await import(${JSON.stringify(MODULE)});
     try { lockJournal(${JSON.stringify(dir)}, ${JSON.stringify(JOURNAL)}); console.log("held"); } catch (e) { console.log(e.constructor.name); }`,
  ]);
  expect(said.stdout.toString().trim()).toBe("DataDirBusy");
});

test("brokers restarted together after a kill -9: exactly one gets the lock, each time", async () => {
  const dir = dataDir();
  // Each waits for "go" on its input, then tries the lock, says what happened, and holds on until its input closes.
  const script = `
    const { lockJournal } = await import(${JSON.stringify(MODULE)});
    const reader = Bun.stdin.stream().getReader();
    await reader.read();
    let said;
    try { lockJournal(${JSON.stringify(dir)}, ${JSON.stringify(JOURNAL)}); said = "held"; } catch (e) { said = e.constructor.name; }
    process.stdout.write(said + "\\n");
    while (!(await reader.read()).done) {}
  `;
  for (let round = 0; round < 5; round++) {
    const dead = await holdElsewhere(dir);
    dead.kill("SIGKILL");
    await dead.exited;
    const procs = Array.from({ length: 4 }, () => Bun.spawn([process.execPath, "-e", script], { stdin: "pipe", stdout: "pipe", stderr: "inherit" }));
    children.push(...procs);
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

test("a refusal whose holder file names nobody plausible names no pid", async () => {
  const dir = dataDir();
  const other = await holdElsewhere(dir);
  for (const text of ["garbage\n", holderText(4_000_000, "1"), holderText(other.pid, "1")]) {
    writeFileSync(holderFile(dir), text);
    expect(() => lockJournal(dir, JOURNAL)).toThrow(`another broker is serving data directory ${dir}; stop it or use another data directory (BROKER_DATA_DIR)`);
  }
  rmSync(holderFile(dir));
  const err = (() => {
    try {
      lockJournal(dir, JOURNAL);
    } catch (e) {
      return e as DataDirBusy;
    }
  })();
  expect(err).toBeInstanceOf(DataDirBusy);
  expect(err?.pid).toBeUndefined();
});

test("a lock that cannot be taken (a directory in its place) leaves the broker without a journal, said in one line; a busy one refuses", () => {
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

test("a start after a kill -9 logs data_dir_lock_taken_over with the pid that held it", async () => {
  const dir = dataDir();
  const config = loadConfig({ BROKER_DATA_DIR: dir });
  const dead = await holdElsewhere(dir);
  dead.kill("SIGKILL");
  await dead.exited;
  const log = createMemoryLogger();
  const lock = claimJournal(config, log);
  expect(lock?.tookOverFrom).toBe(dead.pid);
  expect(log.lines.filter((l) => l.includes(`"event":"data_dir_lock_taken_over","pid":${dead.pid}`))).toHaveLength(1);
  lock?.release();
});
