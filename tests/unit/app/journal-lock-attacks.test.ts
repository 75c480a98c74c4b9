// Attacks on the audit journal's lock (app/journal-lock.ts, a kernel lock on `<journal>.lock`), each passing when the
// lock holds:
// - something other than a regular file of its own in the lock's place (a pipe, a symbolic link to a device or to a
//   file outside the data directory, a hard link to one, a socket, a directory), or beside it where SQLite looks (a
//   pipe as `-journal`, a link as `-wal`): never opened so that it blocks, never followed, never read without end,
//   never removed: the lock fails (the broker then runs without a journal, said in one line) and what was there stays;
// - a lock file that is not a SQLite database (a pid lock of an earlier build, garbage, a huge file, a torn database)
//   is made anew in place (its inode, so its kernel lock, stays), 0600 whatever the umask;
// - the holder file lies (names pid 1, is garbage, a link to a file outside, a pipe, a directory): it decides nothing,
//   is never followed or blocked on; a release over a pipe there neither hangs nor removes it;
// - a holder in another pid namespace (another container on this host): a second broker is refused;
// - a holder killed with kill -9: the next start gets the lock and says whose it was;
// - many processes starting together, 80 times, over a free lock or a garbage one: exactly one holder each time (a UDP
//   port each holder binds while it holds the lock is the witness: the kernel lets one socket have it), and each time one;
// - a second lock in the process that holds it is refused from memory and leaves the first held.

import { afterEach, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
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
  const dir = mkdtempSync(join(tmpdir(), "broker-lock-attacks-"));
  dirs.push(dir);
  return dir;
}

const lockFile = (dir: string) => join(dir, `${JOURNAL}.lock`);
const holderFile = (dir: string) => join(dir, `${JOURNAL}.holder`);

function startOf(pid: number): string {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  return text.slice(text.lastIndexOf(")") + 2).split(" ")[19]!;
}

const holderText = (pid: number, start: string | null, host = hostname()) => `${JSON.stringify({ pid, start, host })}\n`;

/**
 * lockJournal (then release) in a process of its own, killed if it has not answered in time: a lock that blocks or
 * reads without end fails this instead of hanging or exhausting the test runner. Says "held <tookOverFrom>",
 * "busy <pid>" or "error <message>".
 */
async function lockElsewhere(dir: string, ms = 20_000): Promise<string> {
  const script = `
    const { lockJournal, DataDirBusy } = await import(${JSON.stringify(MODULE)});
    try { const l = lockJournal(${JSON.stringify(dir)}, ${JSON.stringify(JOURNAL)}); l.release(); console.log("held " + l.tookOverFrom); }
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

/** A process holding the lock until killed (its `unshare` prefix, if any, first); resolves once it holds it. */
async function holdElsewhere(dir: string, prefix: string[] = []): Promise<Bun.Subprocess<"ignore", "pipe", "inherit">> {
  const proc = Bun.spawn(
    [
      ...prefix,
      process.execPath,
      "-e",
      `const { lockJournal } = await import(${JSON.stringify(MODULE)});
       const lock = lockJournal(${JSON.stringify(dir)}, ${JSON.stringify(JOURNAL)});
       console.log("held " + process.pid);
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

/** Whether `path` is a SQLite database (opened read-only in a process of its own: a descriptor closed here would drop this process's locks). */
function isDatabase(path: string): boolean {
  const r = Bun.spawnSync([
    process.execPath,
    "-e",
    `const { Database } = require("bun:sqlite"); const db = new Database(${JSON.stringify(path)}, { readonly: true });
     console.log(db.query("SELECT count(*) AS n FROM sqlite_master WHERE name = 'holder'").get().n);`,
  ]);
  return r.stdout.toString().trim() === "1";
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

test("a symbolic link to a file outside the data directory (a database, garbage, nothing): never followed, the file untouched", async () => {
  const dir = dataDir();
  const outside = dataDir();
  const target = join(outside, "passwd");
  const db = new Database(join(outside, "some.db"));
  db.exec("CREATE TABLE t(x)");
  db.close();
  for (const text of [readFileSync(join(outside, "some.db")), Buffer.from("root:x:0:0:root:/root:/bin/bash\n")]) {
    writeFileSync(target, text, { mode: 0o644 });
    rmSync(lockFile(dir), { force: true });
    symlinkSync(target, lockFile(dir));
    expect(await lockElsewhere(dir)).toBe(`error ${lockFile(dir)} is not a regular file`);
    expect(readFileSync(target).equals(text)).toBe(true);
    expect(statSync(target).mode & 0o777).toBe(0o644);
    expect(readlinkSync(lockFile(dir))).toBe(target);
  }
  // A dangling link: the same (nothing is created through it).
  rmSync(lockFile(dir));
  symlinkSync(join(outside, "nothing-here"), lockFile(dir));
  expect(await lockElsewhere(dir)).toBe(`error ${lockFile(dir)} is not a regular file`);
  expect(existsSync(join(outside, "nothing-here"))).toBe(false);
});

test("a hard link to a file outside the data directory in the lock's place: refused, the file neither emptied nor written", async () => {
  const dir = dataDir();
  const target = join(dataDir(), "precious");
  writeFileSync(target, "not yours to empty\n", { mode: 0o644 });
  linkSync(target, lockFile(dir));
  expect(await lockElsewhere(dir)).toBe(`error ${lockFile(dir)} is not a regular file of its own (it has 2 names)`);
  expect(readFileSync(target, "utf8")).toBe("not yours to empty\n");
  expect(statSync(target).mode & 0o777).toBe(0o644);
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

test("a pipe as the lock's `-journal`, a link to /dev/zero as its `-wal`: the lock fails at once (SQLite would open them), they stay", async () => {
  const dir = dataDir();
  const journal = `${lockFile(dir)}-journal`;
  expect(Bun.spawnSync(["mkfifo", journal]).exitCode).toBe(0);
  expect(await lockElsewhere(dir)).toBe(`error ${journal} is not a regular file`);
  expect(lstatSync(journal).isFIFO()).toBe(true);
  rmSync(journal);
  symlinkSync("/dev/zero", `${lockFile(dir)}-wal`);
  expect(await lockElsewhere(dir)).toBe(`error ${lockFile(dir)}-wal is not a regular file`);
  expect(readlinkSync(`${lockFile(dir)}-wal`)).toBe("/dev/zero");
});

test("a lock file that is not a database (an earlier build's pid lock, garbage, huge, torn) is made anew in place, 0600", async () => {
  const dir = dataDir();
  const torn = (() => {
    const path = join(dataDir(), "torn.db");
    const db = new Database(path);
    db.exec("CREATE TABLE holder(pid INTEGER); CREATE TABLE padding(x); INSERT INTO padding VALUES (randomblob(20000))");
    db.close();
    const bytes = readFileSync(path);
    bytes.fill(0x5a, 100, 4096); // page 1's schema overwritten: the header still says SQLite
    return bytes;
  })();
  const garbage: (string | Buffer)[] = [
    `${JSON.stringify({ pid: process.pid, start: startOf(process.pid) })}\n`, // an earlier build's lock naming a live process
    `${JSON.stringify({ pid: 1, start: startOf(1) })}\n`,
    "null\n",
    "\n",
    "x".repeat(10 * 1024 * 1024),
    Buffer.concat([Buffer.from("SQLite format 3\0"), Buffer.alloc(200, 0xff)]),
    torn,
  ];
  for (const text of garbage) {
    writeFileSync(lockFile(dir), text, { mode: 0o644 });
    const inode = statSync(lockFile(dir)).ino;
    expect({ text: text.slice(0, 40).toString(), said: await lockElsewhere(dir) }).toEqual({ text: text.slice(0, 40).toString(), said: "held undefined" });
    expect(statSync(lockFile(dir)).ino).toBe(inode);
    expect(statSync(lockFile(dir)).mode & 0o777).toBe(0o600);
    expect(isDatabase(lockFile(dir))).toBe(true);
    expect(readdirSync(dir)).toEqual([`${JOURNAL}.lock`]);
  }
  // An empty one is a database to be.
  writeFileSync(lockFile(dir), "");
  expect(await lockElsewhere(dir)).toBe("held undefined");
});

test("the lock and the holder file are 0600 whatever the umask, fresh or over an earlier build's 0666 lock; nothing else is left beside them", () => {
  const dir = dataDir();
  const old = process.umask(0);
  try {
    const fresh = lockJournal(dir, JOURNAL);
    expect(statSync(lockFile(dir)).mode & 0o777).toBe(0o600);
    expect(statSync(holderFile(dir)).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir).sort()).toEqual([`${JOURNAL}.holder`, `${JOURNAL}.lock`]);
    fresh.release();
    rmSync(lockFile(dir));
    writeFileSync(lockFile(dir), `${JSON.stringify({ pid: 4_000_000, start: "1" })}\n`, { mode: 0o666 });
    const taken = lockJournal(dir, JOURNAL);
    expect(statSync(lockFile(dir)).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir).sort()).toEqual([`${JOURNAL}.holder`, `${JOURNAL}.lock`]);
    taken.release();
  } finally {
    process.umask(old);
  }
  expect(readdirSync(dir)).toEqual([`${JOURNAL}.lock`]);
});

test("a holder file that lies decides nothing: a free lock is taken whatever it says, a held one refused whatever it says", async () => {
  const dir = dataDir();
  const outside = join(dataDir(), "outside");
  const live = holderText(1, startOf(1)); // pid 1 lives, at that very start time
  writeFileSync(outside, live, { mode: 0o644 });
  // Free: taken each time. Pid 1 is named as the one before (information only); garbage and a link name nobody.
  for (const [plant, said] of [
    [() => writeFileSync(holderFile(dir), live), "held 1"],
    [() => writeFileSync(holderFile(dir), "x".repeat(100_000)), "held undefined"],
    [() => symlinkSync(outside, holderFile(dir)), "held undefined"],
    [() => symlinkSync("/dev/zero", holderFile(dir)), "held undefined"],
    [() => expect(Bun.spawnSync(["mkfifo", holderFile(dir)]).exitCode).toBe(0), "held undefined"],
  ] as const) {
    rmSync(holderFile(dir), { force: true });
    plant();
    expect(await lockElsewhere(dir)).toBe(said);
    // Replaced, never followed: nothing is left there after the release, and the file outside is as it was.
    expect(existsSync(holderFile(dir))).toBe(false);
    expect(readFileSync(outside, "utf8")).toBe(live);
    expect(statSync(outside).mode & 0o777).toBe(0o644);
  }
  // A directory there: the lock is still taken (the holder file is not written), the directory stays.
  mkdirSync(join(holderFile(dir), "inside"), { recursive: true });
  expect(await lockElsewhere(dir)).toBe("held undefined");
  expect(existsSync(join(holderFile(dir), "inside"))).toBe(true);
  rmSync(holderFile(dir), { recursive: true });

  // Held by another process: refused whatever the holder file says; the pid it names is only in the message.
  const other = await holdElsewhere(dir);
  writeFileSync(holderFile(dir), live);
  expect(await lockElsewhere(dir)).toBe("busy 1");
  for (const plant of [() => writeFileSync(holderFile(dir), "garbage\n"), () => symlinkSync(outside, holderFile(dir)), () => {}]) {
    rmSync(holderFile(dir), { force: true });
    plant();
    expect(await lockElsewhere(dir)).toBe("busy undefined");
  }
  other.kill("SIGKILL");
  await other.exited;
  expect(await lockElsewhere(dir)).toBe("held undefined");
});

test("a release after the holder file was replaced by a pipe neither hangs nor removes it", async () => {
  const dir = dataDir();
  const script = `
    const { lockJournal } = await import(${JSON.stringify(MODULE)});
    const l = lockJournal(${JSON.stringify(dir)}, ${JSON.stringify(JOURNAL)});
    require("node:fs").rmSync(${JSON.stringify(holderFile(dir))});
    Bun.spawnSync(["mkfifo", ${JSON.stringify(holderFile(dir))}]);
    l.release();
    console.log("released");
  `;
  const proc = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "inherit" });
  children.push(proc);
  const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
  const out = await new Response(proc.stdout).text();
  clearTimeout(timer);
  expect(out.trim()).toBe("released");
  expect(lstatSync(holderFile(dir)).isFIFO()).toBe(true);
});

/** Why the pid-namespace test cannot run here, or undefined when it can. */
const noNamespaces = (() => {
  if (process.getuid?.() !== 0) return "not root (unshare --pid needs it)";
  const probe = Bun.spawnSync(["unshare", "--pid", "--uts", "--fork", "true"], { stderr: "pipe" });
  if (!probe.success) return `unshare --pid --uts --fork fails here: ${probe.stderr.toString().trim() || `exit ${probe.exitCode}`}`;
  return undefined;
})();

test.skipIf(noNamespaces !== undefined)(
  `a holder in another pid namespace (another container on this host) makes a second broker busy${noNamespaces ? ` (skipped: ${noNamespaces})` : ""}`,
  async () => {
    const dir = dataDir();
    // Its pid there is 1: here that is init, started at another time, so the refusal names no pid.
    const inside = await holdElsewhere(dir, ["unshare", "--pid", "--fork", "--kill-child"]);
    expect(JSON.parse(readFileSync(holderFile(dir), "utf8")).pid).toBe(1);
    expect(await lockElsewhere(dir)).toBe("busy undefined");
    expect(() => lockJournal(dir, JOURNAL)).toThrow(`another broker is serving data directory ${dir}`);
    inside.kill("SIGKILL");
    await inside.exited;
    // Its holder gone (the kernel let go of its lock): this one takes it, naming the pid it had there.
    const after = lockJournal(dir, JOURNAL);
    expect(after.tookOverFrom).toBe(1);
    after.release();

    // A container of its own host name: the refusal names its pid there and the host.
    const boxed = await holdElsewhere(dir, ["unshare", "--pid", "--uts", "--fork", "--kill-child", "sh", "-c", 'hostname other-box && exec "$0" "$@"']);
    expect(await lockElsewhere(dir)).toBe("busy 1");
    expect(() => lockJournal(dir, JOURNAL)).toThrow(`another broker (pid 1 on host other-box) is serving data directory ${dir}`);
    boxed.kill("SIGKILL");
    await boxed.exited;
    expect(await lockElsewhere(dir)).toBe("held 1");
  },
  60_000,
);

test("a holder killed with kill -9: the next start gets the lock and logs data_dir_lock_taken_over with its pid", async () => {
  const dir = dataDir();
  const dead = await holdElsewhere(dir);
  expect(await lockElsewhere(dir)).toBe(`busy ${dead.pid}`);
  dead.kill("SIGKILL");
  await dead.exited;
  const log = createMemoryLogger();
  const lock = claimJournal(loadConfig({ BROKER_DATA_DIR: dir }), log);
  expect(lock?.tookOverFrom).toBe(dead.pid);
  expect(log.lines.filter((l) => l.includes(`"event":"data_dir_lock_taken_over","pid":${dead.pid}`))).toHaveLength(1);
  expect(await lockElsewhere(dir)).toBe(`busy ${process.pid}`);
  lock?.release();
});

test("ten processes starting together, 80 times, over a free lock or an earlier build's: never two holding it at once", async () => {
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
  // Before every other round, while nobody holds it, the lock file becomes an earlier build's pid lock (a new file, or
  // the same one rewritten): the processes make it anew together.
  const plant = async () => {
    for (let r = 0; r < rounds; r += 2) {
      const t = base + r * period - 60;
      while (Date.now() < t) await Bun.sleep(2);
      if (r % 4 === 0) rmSync(lockFile(dir), { force: true });
      writeFileSync(lockFile(dir), `${JSON.stringify({ pid: 4_000_000, start: null })}\n`);
    }
  };
  const running = Array.from({ length: procs }, () => Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" }));
  children.push(...running);
  const [outs] = await Promise.all([Promise.all(running.map((p) => new Response(p.stdout).text())), plant()]);
  const lines = outs.flatMap((o) => o.trim().split("\n"));
  expect(lines).toHaveLength(procs * rounds);
  expect(lines.filter((l) => !/^\d+ (held|busy)$/.test(l))).toEqual([]);
  // Each round exactly one held it (contention never left everyone refused, nor let a second in after the first).
  const holders = new Map<string, number>();
  for (const l of lines.filter((l) => l.endsWith(" held"))) holders.set(l.split(" ")[0]!, (holders.get(l.split(" ")[0]!) ?? 0) + 1);
  expect(holders.size).toBe(rounds);
  expect([...holders.values()].filter((n) => n !== 1)).toEqual([]);
  expect(readdirSync(dir)).toEqual([`${JOURNAL}.lock`]);
}, 120_000);

test("a second lock in the process that holds it is refused from memory: the first stays held against other processes", async () => {
  const dir = dataDir();
  const first = lockJournal(dir, JOURNAL);
  for (let i = 0; i < 3; i++) expect(() => lockJournal(dir, JOURNAL)).toThrow(DataDirBusy);
  expect(await lockElsewhere(dir)).toBe(`busy ${process.pid}`);
  first.release();
  expect(await lockElsewhere(dir)).toBe("held undefined");
});

test("a data directory reached through a symbolic link (a person's own layout) locks, refuses and releases as any other", () => {
  const real = dataDir();
  const link = join(dataDir(), "data");
  symlinkSync(real, link);
  const lock = lockJournal(link, JOURNAL);
  expect(JSON.parse(readFileSync(holderFile(real), "utf8")).pid).toBe(process.pid);
  expect(() => lockJournal(real, JOURNAL)).toThrow(`another broker (pid ${process.pid}) is serving data directory ${real}`);
  lock.release();
  expect(existsSync(holderFile(real))).toBe(false);
  lockJournal(real, JOURNAL).release();
});
