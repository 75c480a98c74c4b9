// Attacks on "one broker per port and per data directory" (app/journal-lock.ts, app/port-probe.ts,
// app/worker-link.ts), compiled binary on SQLite unless said; each passes when things hold, for attackers and for
// people using the broker as they should:
// - something other than a lock file in the lock's place (a symbolic link to a file outside, to /dev/zero, a pipe):
//   the broker still starts (without a journal, said in one line), never following, blocking on or emptying it;
// - the lock and its holder file are 0600 under umask 000, and the holder file names the server;
// - restarted at once after SIGTERM or kill -9: it starts each time, never a false "busy";
// - backup, doctor and restore beside a running server, or beside what a killed one left: never refused because of the
//   lock, never touching it;
// - two lone brokers started in the same instant on one data directory (fresh, or over an earlier build's pid lock
//   left by a killed broker, three then): exactly one serves;
// - --workers with ports 0: groups on their own data directories both serve; a second on the same one is refused;
// - a UDP port something else holds: --workers refused naming the setting and the port; a lone broker serves there;
// - on ::1, two --workers supervisors started together on the same fixed ports: exactly one serves;
// - a supervisor killed outright and started again at once: refused (saying why) until its old workers are gone,
//   then serving, and never two groups on the port;
// - a worker killed outright is restarted by its supervisor and takes its own journal's lock back;
// - a worker slow to start (stopped for longer than the hello deadline before it reads) still joins;
// - in process: a second start on a data directory the first serves is refused naming this very process, the first
//   serving on; after its stop, a start there works.

import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { builtBinary, cleanEnv, collectOutput, freePort, runBinary } from "../helpers/binary.ts";
import { eventually, freshHealth, LISTENING, serverEnv as envFor, spawnServer as spawnProcess, type ServerProcess } from "../helpers/server-process.ts";
import { loadConfig } from "../../src/config.ts";
import { createMemoryLogger } from "../../src/log.ts";
import { DataDirBusy, startServer } from "../../src/app/index.ts";

const dirs: string[] = [];
const killers: (() => unknown)[] = [];
afterAll(async () => {
  for (const k of killers) await k();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function home(): string {
  const dir = mkdtempSync(join(tmpdir(), "broker-exclusive-attacks-"));
  dirs.push(dir);
  return dir;
}

/** A server process, killed at the end whatever the test left running. */
function spawnServer(args: string[], dataDir: string, env: Record<string, string> = {}, argv?: string[]): ServerProcess {
  const started = spawnProcess(args, dataDir, env, argv);
  killers.push(() => started.stop("SIGKILL"));
  return started;
}

const listening = (s: ServerProcess) => LISTENING.test(s.logs());
const groupListening = (s: ServerProcess, n: number) => s.logs().includes(`"event":"workers_listening","workers":${n}`);

async function serving(s: ServerProcess): Promise<string> {
  expect(await eventually(() => listening(s) || s.exitCode() !== null)).toBe(true);
  if (s.exitCode() !== null) throw new Error(`exited ${s.exitCode()}:\n${s.logs()}`);
  return LISTENING.exec(s.logs())![1]!;
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\S+ \(.*\) [ZX] /.test(stat);
  } catch {
    return false;
  }
}

function startOf(pid: number): string {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  return text.slice(text.lastIndexOf(")") + 2).split(" ")[19]!;
}

const lockOf = (dataDir: string, journal = "audit-journal.jsonl") => join(dataDir, `${journal}.lock`);
/** Who holds a journal's lock, as its holder file says (app/journal-lock.ts: for people; the kernel lock decides). */
const holderOf = (dataDir: string, journal = "audit-journal.jsonl") => join(dataDir, `${journal}.holder`);
const readHolder = (dataDir: string, journal?: string) =>
  JSON.parse(readFileSync(holderOf(dataDir, journal), "utf8")) as { pid: number; start: string; host: string };

/** Listeners on a TCP port (lines of `ss`). */
function listeners(port: number): string[] {
  return Bun.spawnSync(["ss", "-ltnpH", `( sport = :${port} )`])
    .stdout.toString()
    .trim()
    .split("\n")
    .filter(Boolean);
}

describe("what is in the lock's place", () => {
  test("a symbolic link to a file outside, to /dev/zero, or a pipe: the broker starts without a journal, says so, and leaves it be", async () => {
    const outside = join(home(), "passwd");
    const passwd = "root:x:0:0:root:/root:/bin/bash\n";
    writeFileSync(outside, passwd, { mode: 0o644 });
    const kinds: [string, (lock: string) => void, (lock: string) => void][] = [
      ["a link to a file outside", (l) => symlinkSync(outside, l), (l) => expect(readlinkSync(l)).toBe(outside)],
      ["a link to /dev/zero", (l) => symlinkSync("/dev/zero", l), (l) => expect(readlinkSync(l)).toBe("/dev/zero")],
      ["a pipe", (l) => expect(Bun.spawnSync(["mkfifo", l]).exitCode).toBe(0), (l) => expect(lstatSync(l).isFIFO()).toBe(true)],
    ];
    for (const [kind, plant, check] of kinds) {
      const dataDir = join(home(), "data");
      mkdirSync(dataDir, { mode: 0o700 });
      plant(lockOf(dataDir));
      const broker = spawnServer([], dataDir);
      try {
        const url = await serving(broker);
        expect({ kind, status: (await fetch(`${url}/health`)).status }).toEqual({ kind, status: 200 });
        const unavailable = broker
          .logs()
          .split("\n")
          .filter((l) => l.includes('"event":"audit_journal_unavailable"'));
        expect({ kind, lines: unavailable.length }).toEqual({ kind, lines: 1 });
        expect(unavailable[0]).toContain("audit-journal.jsonl.lock");
        expect(unavailable[0]).toContain("is not a regular file");
      } finally {
        expect(await broker.stop()).toBe(0);
      }
      check(lockOf(dataDir));
      expect(readFileSync(outside, "utf8")).toBe(passwd);
      expect(statSync(outside).mode & 0o777).toBe(0o644);
    }
  }, 120_000);

  test("the lock and its holder file are 0600 under umask 000; the holder file names the server, its pid, start time and host", async () => {
    const dataDir = join(home(), "data");
    const broker = spawnServer([], dataDir, {}, ["sh", "-c", `umask 000; exec ${builtBinary()} server`]);
    try {
      await serving(broker);
      expect(statSync(lockOf(dataDir)).mode & 0o777).toBe(0o600);
      expect(statSync(holderOf(dataDir)).mode & 0o777).toBe(0o600);
      expect(statSync(dataDir).mode & 0o777).toBe(0o700);
      expect(readHolder(dataDir)).toEqual({ pid: broker.pid, start: startOf(broker.pid), host: hostname() });
    } finally {
      expect(await broker.stop()).toBe(0);
    }
    expect(existsSync(holderOf(dataDir))).toBe(false);
  }, 60_000);
});

describe("restarts and the other commands", () => {
  test("started again at once after SIGTERM (3 times) and after kill -9 (3 times): it starts each time; only a kill -9 is taken over", async () => {
    const dataDir = join(home(), "data");
    for (const signal of ["SIGTERM", "SIGTERM", "SIGTERM", "SIGKILL", "SIGKILL", "SIGKILL"] as const) {
      const broker = spawnServer([], dataDir);
      await serving(broker);
      const before = readHolder(dataDir);
      expect(before.pid).toBe(broker.pid);
      await broker.stop(signal);
      expect(existsSync(holderOf(dataDir))).toBe(signal === "SIGKILL");
      const next = spawnServer([], dataDir);
      try {
        await serving(next);
        expect({ signal, takenOver: next.logs().includes(`"event":"data_dir_lock_taken_over","pid":${broker.pid}`) }).toEqual({
          signal,
          takenOver: signal === "SIGKILL",
        });
        expect(next.logs()).not.toContain("another broker");
        expect(readHolder(dataDir).pid).toBe(next.pid);
      } finally {
        // Stopped the way the next round starts over from.
        await next.stop(signal);
      }
    }
  }, 180_000);

  test("backup and doctor beside a running server work and leave its lock be; restore is refused; after its kill -9 all three work and a start takes the lock", async () => {
    const dataDir = join(home(), "data");
    const env = envFor(dataDir);
    const broker = spawnServer([], dataDir);
    await serving(broker);
    const lock = readFileSync(lockOf(dataDir));
    const holder = readFileSync(holderOf(dataDir), "utf8");
    const backup = join(home(), "broker.db");
    const b = await runBinary(builtBinary(), ["backup", backup], { env });
    expect(b.exitCode).toBe(0);
    const d = await runBinary(builtBinary(), ["doctor", "--json"], { env });
    expect(d.stdout + d.stderr).not.toContain(".lock");
    expect(d.stdout + d.stderr).not.toContain("another broker");
    const r = await runBinary(builtBinary(), ["restore", backup], { env });
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain("nothing was changed");
    expect(readFileSync(lockOf(dataDir)).equals(lock)).toBe(true);
    expect(readFileSync(holderOf(dataDir), "utf8")).toBe(holder);
    expect(broker.exitCode()).toBeNull();

    // Killed outright: the kernel let go of its lock, its holder file stays. The commands neither refuse because of
    // them nor touch them.
    await broker.stop("SIGKILL");
    const backup2 = join(home(), "broker.db");
    expect((await runBinary(builtBinary(), ["backup", backup2], { env })).exitCode).toBe(0);
    const d2 = await runBinary(builtBinary(), ["doctor", "--json"], { env });
    expect(d2.stdout + d2.stderr).not.toContain("another broker");
    const r2 = await runBinary(builtBinary(), ["restore", backup], { env });
    expect(r2.exitCode).toBe(0);
    expect(readFileSync(lockOf(dataDir)).equals(lock)).toBe(true);
    expect(readFileSync(holderOf(dataDir), "utf8")).toBe(holder);
    const again = spawnServer([], dataDir);
    try {
      await serving(again);
      expect(again.logs()).toContain(`"event":"data_dir_lock_taken_over","pid":${broker.pid}`);
    } finally {
      expect(await again.stop()).toBe(0);
    }
    expect(existsSync(holderOf(dataDir))).toBe(false);
  }, 120_000);
});

describe("brokers started in the same instant on one data directory", () => {
  test("two lone brokers on a fresh data directory (3 rounds), then three over an earlier build's pid lock (3 rounds): exactly one serves", async () => {
    for (const [round, count, stale] of [
      [0, 2, false],
      [1, 2, false],
      [2, 2, false],
      [3, 3, true],
      [4, 3, true],
      [5, 3, true],
    ] as const) {
      const dataDir = join(home(), "data");
      if (stale) {
        mkdirSync(dataDir, { mode: 0o700 });
        const dead = Bun.spawn(["true"]);
        await dead.exited;
        // What a broker of an earlier build, killed, left: a lock file that is not a kernel lock's (made anew in place).
        writeFileSync(lockOf(dataDir), `${JSON.stringify({ pid: dead.pid, start: "1" })}\n`, { mode: 0o600 });
      }
      const brokers = Array.from({ length: count }, () => spawnServer([], dataDir));
      try {
        expect(await eventually(() => brokers.every((b) => b.exitCode() !== null || listening(b)))).toBe(true);
        const survivors = brokers.filter((b) => b.exitCode() === null);
        expect({ round, survivors: survivors.length }).toEqual({ round, survivors: 1 });
        const survivor = survivors[0]!;
        for (const loser of brokers.filter((b) => b !== survivor)) {
          expect(await loser.exited).not.toBe(0);
          expect(loser.logs()).toContain(`cannot start: another broker (pid ${survivor.pid}) is serving data directory ${dataDir}`);
          expect(loser.logs()).not.toContain('"event":"listening"');
        }
        expect(readHolder(dataDir).pid).toBe(survivor.pid);
        expect(await survivor.stop()).toBe(0);
        expect(existsSync(holderOf(dataDir))).toBe(false);
      } finally {
        for (const b of brokers) await b.stop("SIGKILL");
      }
    }
  }, 240_000);
});

describe("--workers", () => {
  test("with BROKER_PORT=0 and BROKER_PROXY_PORT=0: groups on their own data directories both serve; one on the same data directory is refused", async () => {
    const [dirA, dirB] = [join(home(), "data"), join(home(), "data")];
    const a = spawnServer(["--workers", "2"], dirA);
    const b = spawnServer(["--workers", "2"], dirB);
    try {
      expect(await eventually(() => [a, b].every((g) => groupListening(g, 2) || g.exitCode() !== null))).toBe(true);
      expect([a.exitCode(), b.exitCode()]).toEqual([null, null]);
      const worker1 = readHolder(dirA).pid;
      expect(alive(worker1)).toBe(true);
      expect(readHolder(dirA, "audit-journal-2.jsonl").pid).not.toBe(worker1);
      const c = await runBinary(builtBinary(), ["server", "--workers", "2"], { env: envFor(dirA) });
      expect(c.exitCode).not.toBe(0);
      expect(c.stderr).toContain(`cannot start: another broker (pid ${worker1}) is serving data directory ${dirA}`);
      expect(c.stderr).not.toContain('"event":"workers_listening"');
      expect(readHolder(dirA).pid).toBe(worker1);
    } finally {
      expect(await a.stop()).toBe(0);
      expect(await b.stop()).toBe(0);
    }
    for (const d of [dirA, dirB]) {
      expect(existsSync(holderOf(d))).toBe(false);
      expect(existsSync(holderOf(d, "audit-journal-2.jsonl"))).toBe(false);
    }
  }, 120_000);

  test("a UDP port something else holds: --workers is refused naming the setting and the port; a lone broker serves on that TCP port", async () => {
    const api = freePort();
    const udp = await Bun.udpSocket({ hostname: "127.0.0.1", port: api, socket: { data() {} } });
    try {
      const dir = home();
      const r = await runBinary(builtBinary(), ["server", "--workers", "2"], {
        env: cleanEnv({ HOME: dir, BROKER_DATA_DIR: join(dir, "data"), BROKER_PORT: String(api), BROKER_PROXY_PORT: "0" }),
      });
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr).toContain(`cannot start: BROKER_PORT ${api} is already in use on 127.0.0.1`);
      expect(r.stderr).toContain(`UDP port ${api}`);
      expect(r.stderr).not.toContain('"event":"listening"');
      const lone = spawnServer([], join(home(), "data"), { BROKER_PORT: String(api) });
      try {
        expect(await serving(lone)).toBe(`http://127.0.0.1:${api}`);
      } finally {
        expect(await lone.stop()).toBe(0);
      }
    } finally {
      udp.close();
    }
  }, 60_000);

  test("on ::1: two supervisors started in the same instant on the same fixed ports, exactly one serves (2 rounds)", async () => {
    const v6Free = () => {
      const s = Bun.listen({ hostname: "::1", port: 0, socket: { data() {} } });
      const port = s.port;
      s.stop(true);
      return port;
    };
    for (let round = 0; round < 2; round++) {
      const [api, proxy] = [v6Free(), v6Free()];
      const env = { BROKER_HOST: "::1", BROKER_PORT: String(api), BROKER_PROXY_PORT: String(proxy) };
      const groups = [
        { count: 2, broker: spawnServer(["--workers", "2"], join(home(), "data"), env) },
        { count: 3, broker: spawnServer(["--workers", "3"], join(home(), "data"), env) },
      ];
      try {
        expect(await eventually(() => groups.every((g) => g.broker.exitCode() !== null || groupListening(g.broker, g.count)))).toBe(true);
        const survivors = groups.filter((g) => g.broker.exitCode() === null);
        expect({ round, survivors: survivors.length }).toEqual({ round, survivors: 1 });
        const loser = groups.find((g) => g.broker.exitCode() !== null)!;
        expect(loser.broker.logs()).toContain(`cannot start: BROKER_PORT ${api} is already in use on ::1`);
        for (let i = 0; i < 20; i++) expect((await freshHealth(`http://[::1]:${api}`)).worker?.of).toBe(survivors[0]!.count);
        expect(listeners(api)).toHaveLength(survivors[0]!.count);
        expect(await survivors[0]!.broker.stop()).toBe(0);
      } finally {
        for (const g of groups) await g.broker.stop("SIGKILL");
      }
    }
  }, 120_000);

  test("a supervisor killed outright, started again at once (and again until it serves): refused while its workers live, saying why; in the end one group serves, alone", async () => {
    const [api, proxy] = [freePort(), freePort()];
    const dataDir = join(home(), "data");
    const env = { BROKER_PORT: String(api), BROKER_PROXY_PORT: String(proxy), BROKER_SHUTDOWN_GRACE_S: "2" };
    const first = spawnServer(["--workers", "2"], dataDir, env);
    expect(await eventually(() => groupListening(first, 2) || first.exitCode() !== null)).toBe(true);
    const oldWorkers = [readHolder(dataDir).pid, readHolder(dataDir, "audit-journal-2.jsonl").pid];
    // Its workers frozen as it dies (as if slow to notice): they still listen and hold their journals.
    for (const pid of oldWorkers) process.kill(pid, "SIGSTOP");
    await first.stop("SIGKILL");
    let next: ServerProcess | undefined;
    const refusals: string[] = [];
    try {
      const early = spawnServer(["--workers", "2"], dataDir, env);
      expect(await early.exited).not.toBe(0);
      expect(early.logs()).toContain(`cannot start: BROKER_PORT ${api} is already in use`);
      expect(early.logs()).not.toContain('"event":"workers_listening"');
      // Their locks still theirs: a stopped process holds its kernel lock.
      expect([readHolder(dataDir).pid, readHolder(dataDir, "audit-journal-2.jsonl").pid]).toEqual(oldWorkers);
    } finally {
      for (const pid of oldWorkers) process.kill(pid, "SIGCONT");
    }
    for (let attempt = 0; attempt < 60; attempt++) {
      const s = spawnServer(["--workers", "2"], dataDir, env);
      expect(await eventually(() => groupListening(s, 2) || s.exitCode() !== null)).toBe(true);
      if (s.exitCode() === null) {
        next = s;
        break;
      }
      expect(await s.exited).not.toBe(0);
      const why = /cannot start: [^\n]*/.exec(s.logs())?.[0] ?? s.logs().slice(-500);
      refusals.push(why);
      await Bun.sleep(200);
    }
    try {
      for (const why of refusals)
        expect(why).toMatch(
          new RegExp(
            `^cannot start: (BROKER_PORT ${api} is already in use|BROKER_PROXY_PORT ${proxy} is already in use|another broker \\(pid (${oldWorkers.join("|")})\\) is serving)`,
          ),
        );
      expect(next).toBeDefined();
      // The old workers are gone (their supervisor's pipe closed), and only the new group's two listen.
      for (const pid of oldWorkers) expect(await eventually(() => !alive(pid), 20_000)).toBe(true);
      expect(listeners(api)).toHaveLength(2);
      expect(listeners(proxy)).toHaveLength(2);
      const newWorkers = [readHolder(dataDir).pid, readHolder(dataDir, "audit-journal-2.jsonl").pid];
      for (const pid of newWorkers) expect(oldWorkers).not.toContain(pid);
      // Every answer is the new group's (a worker's change feed may still be starting: "degraded" for a moment, so the
      // status is not what is checked here).
      for (let i = 0; i < 10; i++) expect((await freshHealth(`http://127.0.0.1:${api}`)).worker?.of).toBe(2);
    } finally {
      if (next) expect(await next.stop()).toBe(0);
    }
  }, 180_000);

  test("a worker killed outright is restarted by its supervisor and takes its own journal's lock back (worker 2, then worker 1)", async () => {
    const dataDir = join(home(), "data");
    const group = spawnServer(["--workers", "2"], dataDir);
    try {
      expect(await eventually(() => groupListening(group, 2) || group.exitCode() !== null)).toBe(true);
      expect(group.exitCode()).toBeNull();
      const url = /"event":"workers_listening","workers":2,"api":"(http:\/\/[^"]+)"/.exec(group.logs())![1]!;
      for (const [journal, id] of [
        ["audit-journal-2.jsonl", 2],
        ["audit-journal.jsonl", 1],
      ] as const) {
        const old = readHolder(dataDir, journal).pid;
        process.kill(old, "SIGKILL");
        // Its successor holds the lock (the kernel let go of the dead one's), and says whose it was.
        expect(
          await eventually(() => {
            try {
              const now = readHolder(dataDir, journal).pid;
              return now !== old && alive(now) && new RegExp(`"event":"data_dir_lock_taken_over","worker":${id},"pid":${old}\\b`).test(group.logs());
            } catch {
              return false;
            }
          }),
        ).toBe(true);
        expect(await eventually(() => group.logs().includes(`"event":"worker_restarted","worker":${id}`))).toBe(true);
        expect(group.exitCode()).toBeNull();
      }
      const seen = new Set<number>();
      for (let i = 0; i < 40; i++) seen.add((await freshHealth(url)).worker?.id);
      expect([...seen].sort()).toEqual([1, 2]);
    } finally {
      expect(await group.stop()).toBe(0);
    }
    expect(existsSync(holderOf(dataDir))).toBe(false);
    expect(existsSync(holderOf(dataDir, "audit-journal-2.jsonl"))).toBe(false);
  }, 120_000);

  test("a worker slow to start (stopped for longer than the hello deadline before it reads) still joins: the line already waits in its pipe", async () => {
    const dir = home();
    const proc = Bun.spawn([builtBinary(), "server"], {
      env: cleanEnv({ HOME: dir, BROKER_DATA_DIR: join(dir, "data"), BROKER_PORT: "0", BROKER_PROXY_PORT: "0", BROKER_WORKER: "1/2" }),
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    killers.push(() => proc.kill("SIGKILL"));
    // As a supervisor does: the line first, then nothing more, the pipe held open.
    proc.stdin.write(`${JSON.stringify({ broker_worker: "1/2" })}\n`);
    void proc.stdin.flush();
    proc.kill("SIGSTOP");
    const output = collectOutput(proc);
    await Bun.sleep(7000); // longer than the 5 s deadline
    proc.kill("SIGCONT");
    try {
      expect(await eventually(() => output.text().includes('"event":"listening","worker":1,') || proc.exitCode !== null)).toBe(true);
      expect(output.text()).not.toContain("never by hand");
      expect(proc.exitCode).toBeNull();
    } finally {
      // Its supervisor's pipe closing stops it, as a supervisor's end would.
      void proc.stdin.end();
      const code = await Promise.race([proc.exited, Bun.sleep(60_000).then(() => "still running")]);
      expect(code).toBe(0);
    }
    expect(output.text()).toContain('"event":"supervisor_gone"');
  }, 90_000);
});

describe("in process", () => {
  test("a second start on a data directory the first serves is refused naming this process; the first serves on; after its stop a start works", async () => {
    const dataDir = join(home(), "data");
    const config = loadConfig({ BROKER_DATA_DIR: dataDir, BROKER_PORT: "0", BROKER_PROXY_PORT: "0" });
    const first = await startServer({ config, log: createMemoryLogger(), masterPassword: undefined, tunnel: true });
    try {
      const err = await startServer({ config, log: createMemoryLogger(), masterPassword: undefined, tunnel: true }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DataDirBusy);
      expect((err as DataDirBusy).pid).toBe(process.pid);
      expect((await fetch(`${first.apiUrl}/health`)).status).toBe(200);
      expect(readHolder(dataDir).pid).toBe(process.pid);
    } finally {
      await first.stop();
    }
    expect(existsSync(holderOf(dataDir))).toBe(false);
    const again = await startServer({ config, log: createMemoryLogger(), masterPassword: undefined, tunnel: true });
    expect((await fetch(`${again.apiUrl}/health`)).status).toBe(200);
    await again.stop();
    expect(existsSync(holderOf(dataDir))).toBe(false);
  }, 60_000);
});
