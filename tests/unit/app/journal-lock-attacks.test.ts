// Attacks on the audit journal's lock (app/journal-lock.ts), each passing when the lock holds:
// - something other than a regular file in the lock's place (a pipe, a symbolic link to a device or to a file outside
//   the data directory, a socket, a directory) is never opened so that it blocks, never followed, never read without
//   end, never removed: the lock fails (the broker then runs without a journal, said in one line) and what was there
//   stays; a release over such a thing does not hang either;
// - a lock that is garbage (a pid that is negative, zero, fractional, a string, beyond any pid the kernel gives, a
//   huge file) is taken over; one naming pid 1 at its real start time is busy (init lives), at another time stale;
// - the lock is 0600 whatever the umask, and takeovers leave nothing beside it;
// - a stale `.breaking` (its maker died taking a lock over) does not block a start; a live one is waited for;
// - many processes restarted together over a stale lock: never two holding it at once (a UDP port each holder binds
//   while it holds the lock is the witness: the kernel lets one socket have it).

import { afterEach, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
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
  const dir = mkdtempSync(join(tmpdir(), "broker-lock-attacks-"));
  dirs.push(dir);
  return dir;
}

const lockFile = (dir: string) => join(dir, `${JOURNAL}.lock`);

function startOf(pid: number): string {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  return text.slice(text.lastIndexOf(")") + 2).split(" ")[19]!;
}

async function deadPid(): Promise<number> {
  const p = Bun.spawn(["true"]);
  await p.exited;
  return p.pid;
}

/**
 * lockJournal (then release) in a process of its own, killed if it has not answered in time: a lock that blocks or
 * reads without end fails this instead of hanging or exhausting the test runner. Says "held", "busy <pid>" or "error <message>".
 */
async function lockElsewhere(dir: string, ms = 20_000): Promise<string> {
  const script = `
    const { lockJournal, DataDirBusy } = await import(${JSON.stringify(MODULE)});
    try { const l = lockJournal(${JSON.stringify(dir)}, ${JSON.stringify(JOURNAL)}); l.release(); console.log("held"); }
    catch (e) { console.log(e instanceof DataDirBusy ? "busy " + e.pid : "error " + e.message); }
  `;
  const proc = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" });
  children.push(proc);
  const timer = setTimeout(() => proc.kill("SIGKILL"), ms);
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  if (code !== 0) return `died ${code} ${proc.signalCode ?? ""} ${err.slice(0, 300)}`;
  return out.trim();
}

test("a pipe in the lock's place: the lock fails at once (no blocking open), the pipe stays", async () => {
  const dir = dataDir();
  expect(Bun.spawnSync(["mkfifo", lockFile(dir)]).exitCode).toBe(0);
  expect(await lockElsewhere(dir)).toBe(`error ${lockFile(dir)} is not a regular file`);
  expect(lstatSync(lockFile(dir)).isFIFO()).toBe(true);
});

test("a symbolic link to /dev/zero in the lock's place: the lock fails (never read without end), the link stays", async () => {
  const dir = dataDir();
  symlinkSync("/dev/zero", lockFile(dir));
  expect(await lockElsewhere(dir)).toBe(`error ${lockFile(dir)} is not a regular file`);
  expect(readlinkSync(lockFile(dir))).toBe("/dev/zero");
});

test("a symbolic link to a file outside the data directory (a live lock's text, or garbage): never followed, the file untouched", async () => {
  const dir = dataDir();
  const outside = dataDir();
  // Text a live lock would hold (this process's), and text a stale one would: neither is taken for a lock through a link.
  for (const text of [`${JSON.stringify({ pid: process.pid, start: startOf(process.pid) })}\n`, "root:x:0:0:root:/root:/bin/bash\n"]) {
    const target = join(outside, "passwd");
    writeFileSync(target, text, { mode: 0o644 });
    rmSync(lockFile(dir), { force: true });
    symlinkSync(target, lockFile(dir));
    expect(await lockElsewhere(dir)).toBe(`error ${lockFile(dir)} is not a regular file`);
    expect(readFileSync(target, "utf8")).toBe(text);
    expect(statSync(target).mode & 0o777).toBe(0o644);
    expect(readlinkSync(lockFile(dir))).toBe(target);
  }
  // A dangling link: the same (O_EXCL never creates through it).
  rmSync(lockFile(dir));
  symlinkSync(join(outside, "nothing-here"), lockFile(dir));
  expect(await lockElsewhere(dir)).toBe(`error ${lockFile(dir)} is not a regular file`);
  expect(existsSync(join(outside, "nothing-here"))).toBe(false);
});

test("a socket or a directory in the lock's place: the lock fails, what was there stays; the broker's start says so in one line", async () => {
  const dir = dataDir();
  const socket = Bun.listen({ unix: lockFile(dir), socket: { data() {} } });
  try {
    expect(await lockElsewhere(dir)).toBe(`error ${lockFile(dir)} is not a regular file`);
    expect(lstatSync(lockFile(dir)).isSocket()).toBe(true);
  } finally {
    socket.stop(true);
  }
  rmSync(lockFile(dir), { force: true });
  mkdirSync(join(lockFile(dir), "inside"), { recursive: true });
  expect(await lockElsewhere(dir)).toBe(`error ${lockFile(dir)} is not a regular file`);
  expect(existsSync(join(lockFile(dir), "inside"))).toBe(true);
  // The broker's start: no lock, so no journal, and one line naming the lock.
  const log = createMemoryLogger();
  expect(claimJournal(loadConfig({ BROKER_DATA_DIR: dir }), log)).toBeUndefined();
  const lines = log.lines.filter((l) => l.includes('"event":"audit_journal_unavailable"'));
  expect(lines).toHaveLength(1);
  expect(lines[0]).toContain(`${JOURNAL}.lock`);
});

test("a release after the lock was replaced by a pipe neither hangs nor removes it", async () => {
  const dir = dataDir();
  const script = `
    const { lockJournal } = await import(${JSON.stringify(MODULE)});
    const l = lockJournal(${JSON.stringify(dir)}, ${JSON.stringify(JOURNAL)});
    require("node:fs").rmSync(${JSON.stringify(lockFile(dir))});
    Bun.spawnSync(["mkfifo", ${JSON.stringify(lockFile(dir))}]);
    l.release();
    console.log("released");
  `;
  const proc = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "inherit" });
  children.push(proc);
  const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
  const out = await new Response(proc.stdout).text();
  clearTimeout(timer);
  expect(out.trim()).toBe("released");
  expect(lstatSync(lockFile(dir)).isFIFO()).toBe(true);
});

test("garbage locks are taken over (naming nobody); a pid beyond any the kernel gives is stale, naming it", async () => {
  const dir = dataDir();
  const garbage = [
    `${JSON.stringify({ pid: -1, start: null })}\n`,
    `${JSON.stringify({ pid: 0, start: null })}\n`,
    `${JSON.stringify({ pid: 1.5, start: null })}\n`,
    `${JSON.stringify({ pid: String(process.pid), start: startOf(process.pid) })}\n`,
    `${JSON.stringify({ pid: -process.pid })}\n`,
    "null\n",
    "[]\n",
    "\n",
    "",
    "x".repeat(10 * 1024 * 1024), // no end of line at all: waited for briefly, then garbage
    `${JSON.stringify({ pid: process.pid, start: startOf(process.pid), pad: "y".repeat(8192) })}\n`, // longer than a lock: garbage
  ];
  for (const text of garbage) {
    writeFileSync(lockFile(dir), text);
    const lock = lockJournal(dir, JOURNAL);
    expect({ text: text.slice(0, 40), tookOverFrom: lock.tookOverFrom }).toEqual({ text: text.slice(0, 40), tookOverFrom: undefined });
    expect(JSON.parse(readFileSync(lockFile(dir), "utf8"))).toEqual({ pid: process.pid, start: startOf(process.pid) });
    lock.release();
    expect(existsSync(lockFile(dir))).toBe(false);
  }
  // PID_MAX_LIMIT is 2^22: no process has a larger pid.
  const beyond = 2 ** 22 + 1;
  writeFileSync(lockFile(dir), `${JSON.stringify({ pid: beyond, start: "12345" })}\n`);
  const lock = lockJournal(dir, JOURNAL);
  expect(lock.tookOverFrom).toBe(beyond);
  lock.release();
  expect(readdirSync(dir)).toEqual([]);
});

test("a lock naming pid 1 at its real start time is busy (it lives); at another start time, or a dead pid with no start, it is stale", async () => {
  const dir = dataDir();
  writeFileSync(lockFile(dir), `${JSON.stringify({ pid: 1, start: startOf(1) })}\n`);
  expect(() => lockJournal(dir, JOURNAL)).toThrow(DataDirBusy);
  expect(() => lockJournal(dir, JOURNAL)).toThrow(`another broker (pid 1) is serving data directory ${dir}`);
  writeFileSync(lockFile(dir), `${JSON.stringify({ pid: 1, start: `${Number(startOf(1)) + 1}` })}\n`);
  const a = lockJournal(dir, JOURNAL);
  expect(a.tookOverFrom).toBe(1);
  a.release();
  const dead = await deadPid();
  writeFileSync(lockFile(dir), `${JSON.stringify({ pid: dead })}\n`);
  const b = lockJournal(dir, JOURNAL);
  expect(b.tookOverFrom).toBe(dead);
  b.release();
});

test("the lock is 0600 whatever the umask, fresh or taken over, and takeovers leave nothing beside it", async () => {
  const dir = dataDir();
  const old = process.umask(0);
  try {
    const fresh = lockJournal(dir, JOURNAL);
    expect(statSync(lockFile(dir)).mode & 0o777).toBe(0o600);
    fresh.release();
    writeFileSync(lockFile(dir), `${JSON.stringify({ pid: await deadPid(), start: "1" })}\n`, { mode: 0o666 });
    const taken = lockJournal(dir, JOURNAL);
    expect(taken.tookOverFrom).toBeDefined();
    expect(statSync(lockFile(dir)).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual([`${JOURNAL}.lock`]);
    taken.release();
  } finally {
    process.umask(old);
  }
  expect(readdirSync(dir)).toEqual([]);
});

test("a `.breaking` left by a process that died taking a lock over does not block the start; a live one is waited for", async () => {
  const dir = dataDir();
  const breaking = `${lockFile(dir)}.breaking`;
  const stale = await deadPid();
  writeFileSync(lockFile(dir), `${JSON.stringify({ pid: stale, start: "1" })}\n`);
  writeFileSync(breaking, `${JSON.stringify({ pid: await deadPid(), start: "1" })}\n`);
  const a = lockJournal(dir, JOURNAL);
  expect(a.tookOverFrom).toBe(stale);
  expect(readdirSync(dir)).toEqual([`${JOURNAL}.lock`]);
  a.release();

  // Another process in the middle of a takeover (it holds `.breaking` a while): this one waits, then takes the lock.
  writeFileSync(lockFile(dir), `${JSON.stringify({ pid: stale, start: "1" })}\n`);
  const holder = Bun.spawn([
    process.execPath,
    "-e",
    `const fs = require("node:fs");
     const t = fs.readFileSync("/proc/self/stat", "utf8"); const start = t.slice(t.lastIndexOf(")") + 2).split(" ")[19];
     fs.writeFileSync(${JSON.stringify(breaking)}, JSON.stringify({ pid: process.pid, start }) + "\\n", { flag: "wx" });
     console.log("holding");
     await Bun.sleep(400);
     fs.rmSync(${JSON.stringify(breaking)});
     await Bun.sleep(60_000);`,
  ]);
  children.push(holder);
  const reader = (holder.stdout as ReadableStream<Uint8Array>).getReader();
  expect(new TextDecoder().decode((await reader.read()).value)).toContain("holding");
  const b = lockJournal(dir, JOURNAL); // waits while the other holds `.breaking`
  expect(b.tookOverFrom).toBe(stale);
  expect(existsSync(breaking)).toBe(false);
  b.release();
});

test("ten processes restarted together over a stale lock, 80 times: never two holding it at once", async () => {
  const dir = dataDir();
  const witness = (() => {
    const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = s.port;
    s.stop(true);
    return port;
  })();
  const [procs, rounds, period] = [10, 80, 200];
  const base = Date.now() + 3000; // every process started and waiting by then (if not, it joins late: still checked)
  // Each, at each round's instant, tries the lock; a holder binds the witness UDP port while it holds it (two holders
  // at once: the second cannot), and lets go of both before the next round.
  const script = `
    const { lockJournal } = await import(${JSON.stringify(MODULE)});
    for (let r = 0; r < ${rounds}; r++) {
      const t = ${base} + r * ${period};
      while (Date.now() < t - 10) await Bun.sleep(2);
      while (Date.now() < t) {}
      let lock, said = "busy";
      try { lock = lockJournal(${JSON.stringify(dir)}, ${JSON.stringify(JOURNAL)}); } catch (e) { if (e.constructor.name !== "DataDirBusy") said = "error " + e.message; }
      let sock;
      if (lock) {
        try { sock = await Bun.udpSocket({ hostname: "127.0.0.1", port: ${witness}, socket: { data() {} } }); said = "held"; }
        catch (e) { said = "DOUBLE " + e.code; }
      }
      while (Date.now() < t + ${period} * 0.6) await Bun.sleep(5);
      sock?.close();
      lock?.release();
      process.stdout.write(r + " " + said + "\\n");
    }
  `;
  const dead = await deadPid();
  const plant = async () => {
    for (let r = 0; r < rounds; r++) {
      const t = base + r * period - 60;
      while (Date.now() < t) await Bun.sleep(2);
      rmSync(lockFile(dir), { force: true });
      writeFileSync(lockFile(dir), `${JSON.stringify({ pid: dead, start: null })}\n`);
    }
  };
  const running = Array.from({ length: procs }, () => Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" }));
  children.push(...running);
  const [outs] = await Promise.all([Promise.all(running.map((p) => new Response(p.stdout).text())), plant()]);
  const lines = outs.flatMap((o) => o.trim().split("\n"));
  expect(lines).toHaveLength(procs * rounds);
  expect(lines.filter((l) => !/^\d+ (held|busy)$/.test(l))).toEqual([]);
  // Each round someone held it (the stale lock never blocked everyone).
  const heldRounds = new Set(lines.filter((l) => l.endsWith(" held")).map((l) => l.split(" ")[0]));
  expect(heldRounds.size).toBe(rounds);
  expect(readdirSync(dir).filter((n) => n !== `${JOURNAL}.lock`)).toEqual([]);
}, 120_000);

test("a data directory reached through a symbolic link (a person's own layout) locks, refuses and releases as any other", () => {
  const real = dataDir();
  const link = join(dataDir(), "data");
  symlinkSync(real, link);
  const lock = lockJournal(link, JOURNAL);
  expect(JSON.parse(readFileSync(lockFile(real), "utf8")).pid).toBe(process.pid);
  expect(() => lockJournal(real, JOURNAL)).toThrow(DataDirBusy);
  lock.release();
  expect(existsSync(lockFile(real))).toBe(false);
});
