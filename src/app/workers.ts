// `broker server --workers N` (issue 40): a supervisor that runs N copies of the server sharing both ports. Each worker
// is a whole broker process (its own event loop, caches and TLS); the kernel spreads connections among them
// (SO_REUSEPORT) and they share state through the store: PostgreSQL as several instances do, SQLite through its change
// log (store/sqlite-change-log.ts). The supervisor holds no store and serves nothing: it starts worker 1 alone (it
// migrates, creates the keyring and the CA on a fresh data directory, and binds the ports, which may be ephemeral),
// then the others on the ports worker 1 bound (each says where it listens over IPC); restarts one that dies; and on SIGTERM or SIGINT
// stops them all, each with the shutdown grace.

import type { Subprocess } from "bun";
import { WORKER_ENV, type Config } from "../config.ts";
import type { Logger } from "../log.ts";
import type { Secret } from "../secret.ts";
import { workerHello } from "./worker-link.ts";
import { claimPorts } from "./port-probe.ts";

/** A worker that dies this many times within RESTART_WINDOW_MS is not restarted again: the supervisor stops. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;
const RESTART_DELAY_MS = 1000;

export interface SupervisorOptions {
  readonly config: Config;
  readonly log: Logger;
  /** Given to each worker on its standard input, never in its environment. */
  readonly masterPassword: Secret | undefined;
  /** The command that runs `broker server` again (the binary, or Bun and the entry script). */
  readonly command: readonly string[];
  /** Called once every worker listens: where the broker is. */
  readonly onReady?: (where: { apiUrl: string; proxyAddress: string | null }) => void;
}

interface Worker {
  readonly id: number;
  proc: Subprocess<"pipe", "inherit", "inherit">;
  /** Resolves with the worker's `listening` line, rejects if it exits first. */
  listening: Promise<Listening>;
}

interface Listening {
  readonly api: string;
  readonly proxy: string | null;
}

/** The command that runs this program's `server` again: the compiled binary alone, or Bun with the entry script. */
export function serverCommand(): string[] {
  const script = process.argv[1] ?? "";
  // A compiled binary's script lives in Bun's embedded file system; run from source, it is the entry file.
  const compiled = script.startsWith("/$bunfs/") || script === "" || script === process.execPath;
  return compiled ? [process.execPath, "server"] : [process.execPath, script, "server"];
}

/**
 * Runs the workers until a signal stops them; resolves with the exit code the supervisor should end with. Throws
 * ListenFailed, before starting any, when a fixed port is already taken or claimed by another supervisor.
 */
export async function superviseWorkers(opts: SupervisorOptions): Promise<number> {
  const { config } = opts;
  // Fixed ports another broker holds or is starting on (perhaps with workers of its own, perhaps in this same instant):
  // refused, not shared (port-probe.ts). Held until every worker has stopped.
  const claim = await claimPorts(config.bindHost, [
    { setting: "BROKER_PORT", port: config.apiPort },
    { setting: "BROKER_PROXY_PORT", port: config.proxyPort },
  ]);
  try {
    return await runWorkers(opts);
  } finally {
    claim.release();
  }
}

async function runWorkers(opts: SupervisorOptions): Promise<number> {
  const { config, log } = opts;
  const count = config.workers;
  const workers: Worker[] = [];
  const deaths: number[] = [];
  let stopping = false;
  let ports: { api: number; proxy: number } | undefined;
  let fatal: ((code: number) => void) | undefined;
  const failed = new Promise<number>((resolve) => (fatal = resolve));

  const spawnWorker = (id: number): Worker => {
    const env: Record<string, string | undefined> = { ...process.env, [WORKER_ENV]: `${id}/${count}`, BROKER_WORKERS: undefined };
    if (ports) Object.assign(env, { BROKER_PORT: String(ports.api), BROKER_PROXY_PORT: String(ports.proxy) });
    if (opts.masterPassword) env.BROKER_MASTER_PASSWORD_FILE = undefined; // given on stdin instead
    const seen = Promise.withResolvers<Listening>();
    // The worker says where it listens over IPC (its log level may hide its `listening` line).
    const proc = Bun.spawn([...opts.command], {
      env,
      stdin: "pipe",
      stdout: "inherit",
      stderr: "inherit", // each log line is one write: workers' lines interleave whole
      ipc(message: unknown) {
        const m = message as { type?: string; api?: string; proxy?: string | null };
        if (m?.type === "listening" && typeof m.api === "string") seen.resolve({ api: m.api, proxy: m.proxy ?? null });
      },
    });
    // Its standard input stays open while this process lives: the worker stops when it closes (app/worker-link.ts).
    proc.stdin.write(workerHello({ id, count }, opts.masterPassword));
    void proc.stdin.flush();
    void proc.exited.then((code) => {
      seen.reject(new Error(`worker ${id} exited with ${code} before it listened`));
      // Worker 1 failing its first start (its error is on stderr) stops the supervisor below: not a death to restart.
      if (!stopping && ports) onDeath(id, code);
    });
    seen.promise.catch(() => {});
    return { id, proc, listening: seen.promise };
  };

  const onDeath = (id: number, code: number | null) => {
    const now = Date.now();
    deaths.push(now);
    while (deaths.length && now - deaths[0]! > RESTART_WINDOW_MS) deaths.shift();
    if (deaths.length > MAX_RESTARTS) {
      log.error("workers_failing", { detail: `workers died ${deaths.length} times within a minute; stopping`, worker: id, exit_code: code });
      fatal?.(1);
      return;
    }
    log.warn("worker_exited", { worker: id, exit_code: code, detail: "restarting it" });
    setTimeout(() => {
      if (stopping) return;
      const w = spawnWorker(id);
      workers[id - 1] = w;
      w.listening.then(() => log.info("worker_restarted", { worker: id })).catch(() => {});
    }, RESTART_DELAY_MS);
  };

  const stopAll = async (signal: NodeJS.Signals) => {
    stopping = true;
    for (const w of workers) w.proc.kill(signal);
    await Promise.all(workers.map((w) => w.proc.exited));
  };

  // Worker 1 first, alone: a fresh data directory is set up once, and ephemeral ports are chosen once.
  const first = spawnWorker(1);
  workers.push(first);
  let where: Listening;
  try {
    where = await Promise.race([first.listening, failed.then(() => Promise.reject(new Error("worker 1 failed")))]);
  } catch {
    stopping = true;
    return (await first.proc.exited) || 1;
  }
  ports = { api: Number(new URL(where.api).port), proxy: where.proxy ? Number(where.proxy.split(":").at(-1)) : config.proxyPort };
  for (let id = 2; id <= count; id++) workers.push(spawnWorker(id));
  try {
    await Promise.all(workers.slice(1).map((w) => w.listening));
  } catch (err) {
    log.error("workers_failed_to_start", { err });
    await stopAll("SIGTERM");
    return 1;
  }
  log.info("workers_listening", { workers: count, api: where.api, proxy: where.proxy });
  opts.onReady?.({ apiUrl: where.api, proxyAddress: where.proxy });

  return new Promise<number>((resolve) => {
    let signalled = false;
    const shutdown = (signal: NodeJS.Signals) => {
      if (signalled) {
        // The second signal: whoever sent it does not want to wait for the grace time.
        for (const w of workers) w.proc.kill("SIGKILL");
        resolve(signal === "SIGINT" ? 130 : 143);
        return;
      }
      signalled = true;
      void stopAll(signal).then(() => resolve(0));
    };
    process.on("SIGINT", () => shutdown("SIGINT"));
    process.on("SIGTERM", () => shutdown("SIGTERM"));
    void failed.then((code) => stopAll("SIGTERM").then(() => resolve(code)));
  });
}
