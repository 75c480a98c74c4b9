// One broker per port and per data directory, compiled binary on SQLite:
// - BROKER_WORKER set by hand with a standard input that stays open and silent is refused after the hello deadline
//   (app/worker-link.ts), saying so and echoing nothing of that input;
// - two `--workers` supervisors started in the same instant on the same fixed ports: exactly one serves, and every
//   fresh connection to the API port reaches its workers (the other's claim on the ports failed: app/port-probe.ts);
// - a lone broker is refused either port a `--workers` group holds;
// - two lone brokers on one data directory: the second is refused naming the first's pid (app/journal-lock.ts), the
//   first serves on; so is a `--workers` group on it; after the first is killed with `kill -9`, a broker starts there
//   again (the kernel let go of the lock; the start names the pid that held it) and a clean stop removes the holder
//   file.

import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { builtBinary, cleanEnv, collectOutput, freePort, runBinary } from "../helpers/binary.ts";
import { eventually, freshHealth, LISTENING, spawnServer, type ServerProcess } from "../helpers/server-process.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function home(): string {
  const dir = mkdtempSync(join(tmpdir(), "broker-exclusive-"));
  dirs.push(dir);
  return dir;
}

describe("one broker per port and per data directory", () => {
  test("BROKER_WORKER set by hand with an input that stays open and silent is refused after the deadline, echoing nothing", async () => {
    const dir = home();
    const proc = Bun.spawn([builtBinary(), "server"], {
      env: cleanEnv({ HOME: dir, BROKER_DATA_DIR: join(dir, "data"), BROKER_PORT: "0", BROKER_PROXY_PORT: "0", BROKER_WORKER: "2/2" }),
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const output = collectOutput(proc);
    // A guess at what a supervisor writes, without its end of line; the pipe stays open.
    proc.stdin.write('{"broker_worker":"2/2","master_password":"hunter2-guess');
    void proc.stdin.flush();
    try {
      const code = await proc.exited; // without the deadline, never (the test's own timeout fails it)
      await Bun.sleep(50);
      expect(code).not.toBe(0);
      expect(output.text()).toContain("BROKER_WORKER is set by broker server --workers for the workers it starts, never by hand; unset it");
      expect(output.text()).toContain("no word from a supervisor on standard input within 5 s");
      expect(output.text()).not.toContain("hunter2");
      expect(output.text()).not.toContain('"event":"listening"');
    } finally {
      void proc.stdin.end();
      if (proc.exitCode === null) proc.kill("SIGKILL");
    }
  }, 30_000);

  test("two --workers supervisors started in the same instant on the same fixed ports: exactly one serves, every answer is its own (5 rounds)", async () => {
    for (let round = 0; round < 5; round++) {
      const [api, proxy] = [freePort(), freePort()];
      const ports = { BROKER_PORT: String(api), BROKER_PROXY_PORT: String(proxy) };
      // Different data directories and worker counts: /health's `worker.of` says whose worker answered.
      const groups = [
        { count: 2, broker: spawnServer(["--workers", "2"], join(home(), "data"), ports) },
        { count: 3, broker: spawnServer(["--workers", "3"], join(home(), "data"), ports) },
      ];
      try {
        const listening = (g: (typeof groups)[number]) => g.broker.logs().includes(`"event":"workers_listening","workers":${g.count}`);
        const settled = await eventually(() => groups.every((g) => g.broker.exitCode() !== null || listening(g)));
        expect(settled).toBe(true);
        const survivors = groups.filter((g) => g.broker.exitCode() === null);
        const losers = groups.filter((g) => g.broker.exitCode() !== null);
        expect({ round, survivors: survivors.length, losers: losers.length }).toEqual({ round, survivors: 1, losers: 1 });
        const [survivor, loser] = [survivors[0]!, losers[0]!];
        expect(listening(survivor)).toBe(true);
        expect(await loser.broker.exited).not.toBe(0);
        expect(loser.broker.logs()).toContain(`cannot start: BROKER_PORT ${api} is already in use on 127.0.0.1`);
        expect(loser.broker.logs()).not.toContain('"event":"listening"');
        // Fresh connections, each placed by the kernel: all reach the survivor's workers.
        const answeredBy = new Set<string>();
        for (let i = 0; i < 40; i++) {
          const health = await freshHealth(`http://127.0.0.1:${api}`);
          answeredBy.add(`${health.worker?.id}/${health.worker?.of}`);
          expect(health.worker?.of).toBe(survivor.count);
        }
        expect(answeredBy.size).toBeGreaterThan(1); // more than one of its workers took connections
        const ss = Bun.spawnSync(["ss", "-ltnpH", `( sport = :${api} )`]).stdout.toString();
        expect(ss.trim().split("\n").length).toBe(survivor.count);
        expect(await survivor.broker.stop()).toBe(0);
      } finally {
        for (const g of groups) await g.broker.stop("SIGKILL");
      }
    }
  }, 240_000);

  test("a lone broker is refused the API port and the proxy port a --workers group holds", async () => {
    const [api, proxy] = [freePort(), freePort()];
    const group = spawnServer(["--workers", "2"], join(home(), "data"), { BROKER_PORT: String(api), BROKER_PROXY_PORT: String(proxy) });
    try {
      expect(await eventually(() => group.logs().includes('"event":"workers_listening","workers":2') || group.exitCode() !== null)).toBe(true);
      expect(group.exitCode()).toBeNull();
      for (const [setting, env] of [
        ["BROKER_PORT", { BROKER_PORT: String(api), BROKER_PROXY_PORT: "0" }],
        ["BROKER_PROXY_PORT", { BROKER_PORT: "0", BROKER_PROXY_PORT: String(proxy) }],
      ] as const) {
        const dir = home();
        const r = await runBinary(builtBinary(), ["server"], { env: cleanEnv({ HOME: dir, BROKER_DATA_DIR: join(dir, "data"), ...env }) });
        expect(r.exitCode).not.toBe(0);
        expect(r.stderr).toContain(`cannot start: ${setting} ${setting === "BROKER_PORT" ? api : proxy} is already in use`);
        expect(r.stderr).not.toContain('"event":"listening"');
      }
      // The group's two workers alone listen there still.
      for (const port of [api, proxy])
        expect(
          Bun.spawnSync(["ss", "-ltnpH", `( sport = :${port} )`])
            .stdout.toString()
            .trim()
            .split("\n").length,
        ).toBe(2);
      expect((await freshHealth(`http://127.0.0.1:${api}`)).worker?.of).toBe(2);
    } finally {
      expect(await group.stop()).toBe(0);
    }
  }, 90_000);

  test("a second broker on a data directory a broker serves is refused naming its pid; after kill -9 a broker starts there again", async () => {
    const dataDir = join(home(), "data");
    const first = spawnServer([], dataDir);
    try {
      expect(await eventually(() => LISTENING.test(first.logs()) || first.exitCode() !== null)).toBe(true);
      const url = LISTENING.exec(first.logs())![1]!;
      const refusal = `cannot start: another broker (pid ${first.pid}) is serving data directory ${dataDir}; stop it or use another data directory (BROKER_DATA_DIR)`;
      // Another lone broker (its own ports), and a --workers group (its worker 1 keeps the same journal): both refused.
      for (const args of [[], ["--workers", "2"]]) {
        const r = await runBinary(builtBinary(), ["server", ...args], {
          env: cleanEnv({ HOME: join(dataDir, ".."), BROKER_DATA_DIR: dataDir, BROKER_PORT: "0", BROKER_PROXY_PORT: "0" }),
        });
        expect(r.exitCode).not.toBe(0);
        expect(r.stderr).toContain(refusal);
        expect(r.stderr).not.toContain('"event":"listening"');
      }
      // The first serves on, its lock in place.
      expect((await fetch(`${url}/health`)).status).toBe(200);
      expect(existsSync(join(dataDir, "audit-journal.jsonl.lock"))).toBe(true);
      expect(existsSync(join(dataDir, "audit-journal.jsonl.holder"))).toBe(true);

      // Killed outright: the kernel lets go of its lock; the next broker gets it and says whose it was.
      await first.stop("SIGKILL");
      const again = spawnServer([], dataDir);
      try {
        expect(await eventually(() => LISTENING.test(again.logs()) || again.exitCode() !== null)).toBe(true);
        expect(again.exitCode()).toBeNull();
        expect(again.logs()).toContain(`"event":"data_dir_lock_taken_over","pid":${first.pid}`);
      } finally {
        expect(await again.stop()).toBe(0);
      }
      // A clean stop removes the holder file (the lock file stays, locked by nobody).
      expect(existsSync(join(dataDir, "audit-journal.jsonl.holder"))).toBe(false);
    } finally {
      await first.stop("SIGKILL");
    }
  }, 90_000);
});
