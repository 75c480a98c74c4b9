// Throwaway PostgreSQL clusters for tests: initdb into a fresh temp dir, a postmaster on a loopback port,
// one empty database per caller. Never touches the system cluster or service; every cluster dies with the process.

import { SQL } from "bun";
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { freePort } from "./binary.ts";

export interface PgCluster {
  readonly port: number;
  readonly host: "127.0.0.1";
  /** The temp directory holding the data dir, the socket and server.log. Gone after destroy(). */
  readonly dir: string;
  /** Creates a fresh empty database and returns its URL: postgres://broker:<password>@127.0.0.1:<port>/<name> */
  createDatabase(name?: string): Promise<string>;
  /** pg_ctl stop -m fast (for tests that simulate a database outage) and start again on the same port/data dir */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops the server and deletes the temp directory. Idempotent. */
  destroy(): Promise<void>;
}

const DEBIAN_ROOT = "/usr/lib/postgresql";
const SERVER_BINARIES = ["initdb", "pg_ctl", "postgres"];
const DB_NAME = /^[a-z_][a-z0-9_]*$/;
const START_ATTEMPTS = 3; // freePort() can lose a race with another process; a fresh port usually wins

/** Where the server binaries are (initdb, pg_ctl, postgres), or undefined when PostgreSQL is not installed. */
export function findPgBin(): string | undefined {
  const hasAll = (dir: string) => SERVER_BINARIES.every((b) => existsSync(join(dir, b)));
  const versions = existsSync(DEBIAN_ROOT) ? readdirSync(DEBIAN_ROOT).filter((v) => /^\d+(\.\d+)?$/.test(v)) : [];
  for (const v of versions.sort((a, b) => Number(b) - Number(a))) {
    if (hasAll(join(DEBIAN_ROOT, v, "bin"))) return join(DEBIAN_ROOT, v, "bin");
  }
  const initdb = Bun.which("initdb");
  return initdb && hasAll(dirname(initdb)) ? dirname(initdb) : undefined;
}

/** For describe.skipIf: a developer without PostgreSQL skips; CI without it fails loudly in startPgCluster. */
export const pgMissing: boolean = findPgBin() === undefined && !process.env.CI;

interface Runner {
  readonly bin: string;
  /** Set when we are root: initdb and postgres refuse to run as root, so they run as this user. */
  readonly asUser?: { name: string; uid: number; gid: number };
}

interface Ctx {
  readonly runner: Runner;
  readonly dir: string;
  readonly dataDir: string;
  readonly logFile: string;
}

function createRunner(): Runner {
  const bin = findPgBin();
  if (!bin)
    throw new Error("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: install Debian's `postgresql` package (apt-get install postgresql)");
  if (process.getuid?.() !== 0) return { bin };
  const id = (flag: string) => Bun.spawnSync(["id", flag, "postgres"], { stdout: "pipe", stderr: "pipe" });
  const uid = id("-u");
  const gid = id("-g");
  if (uid.exitCode !== 0 || gid.exitCode !== 0)
    throw new Error("running as root but there is no `postgres` system user to run initdb/postgres as: install Debian's `postgresql` package");
  return { bin, asUser: { name: "postgres", uid: Number(uid.stdout.toString().trim()), gid: Number(gid.stdout.toString().trim()) } };
}

const shellQuote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

/** The argv for a PostgreSQL tool, wrapped in runuser (or su) when we are root. */
function commandFor(runner: Runner, tool: string, args: string[]): string[] {
  const argv = [join(runner.bin, tool), ...args];
  if (!runner.asUser) return argv;
  if (Bun.which("runuser")) return ["runuser", "-u", runner.asUser.name, "--", ...argv];
  return ["su", runner.asUser.name, "-s", "/bin/sh", "-c", argv.map(shellQuote).join(" ")];
}

// A minimal environment: a developer's PGPORT/PGDATA/PGHOST must not steer the tools.
const toolEnv = () => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C", TZ: "UTC" });

function logTail(ctx: Ctx, lines = 30): string {
  try {
    return readFileSync(ctx.logFile, "utf8").trimEnd().split("\n").slice(-lines).join("\n") || "(empty)";
  } catch {
    return "(no server log)";
  }
}

async function runTool(ctx: Ctx, what: string, tool: string, args: string[]): Promise<void> {
  const proc = Bun.spawn(commandFor(ctx.runner, tool, args), { cwd: ctx.dir, env: toolEnv(), stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code === 0) return;
  throw new Error(`${what} failed (${tool} exited ${code})\n${err}${out}\n--- tail of ${ctx.logFile} ---\n${logTail(ctx)}`);
}

/** Writes a file the server user can read (root writes it, postgres reads it). */
function writeOwned(ctx: Ctx, path: string, text: string, append = false): void {
  if (append) appendFileSync(path, text);
  else writeFileSync(path, text, { mode: 0o600 });
  if (ctx.runner.asUser) chownSync(path, ctx.runner.asUser.uid, ctx.runner.asUser.gid);
}

async function initCluster(ctx: Ctx, password: string): Promise<void> {
  const pwfile = join(ctx.dir, "pwfile");
  writeOwned(ctx, pwfile, `${password}\n`);
  try {
    await runTool(ctx, "initdb", "initdb", [
      "-D",
      ctx.dataDir,
      "-U",
      "broker",
      `--pwfile=${pwfile}`,
      "--auth=scram-sha-256",
      "-E",
      "UTF8",
      "--locale=C",
      "--no-sync",
    ]);
  } finally {
    unlinkSync(pwfile);
  }
}

/** Settings live in postgresql.conf (not pg_ctl -o) so start() after stop() comes back on the same port. */
function configure(ctx: Ctx, port: number): void {
  const settings = {
    port: String(port),
    listen_addresses: "'127.0.0.1'",
    unix_socket_directories: `'${ctx.dir}'`,
    max_connections: "200",
    fsync: "off", // throwaway data: durability buys nothing and costs seconds
    synchronous_commit: "off",
    full_page_writes: "off",
  };
  const lines = Object.entries(settings).map(([k, v]) => `${k} = ${v}`);
  writeOwned(ctx, join(ctx.dataDir, "postgresql.conf"), `\n# tests/helpers/postgres.ts\n${lines.join("\n")}\n`, true);
}

const pgStart = (ctx: Ctx) => runTool(ctx, "starting PostgreSQL", "pg_ctl", ["start", "-D", ctx.dataDir, "-l", ctx.logFile, "-w", "-t", "60"]);
const pgStop = (ctx: Ctx, mode: "fast" | "immediate") =>
  runTool(ctx, `stopping PostgreSQL (-m ${mode})`, "pg_ctl", ["stop", "-D", ctx.dataDir, "-m", mode, "-w", "-t", "60"]);

// Clusters still alive when the process ends (a crashed or interrupted test run): stopped synchronously.
const live = new Set<Ctx>();
let exitHooksInstalled = false;

function stopAllNow(): void {
  for (const c of live) {
    Bun.spawnSync(commandFor(c.runner, "pg_ctl", ["stop", "-D", c.dataDir, "-m", "immediate"]), {
      cwd: c.dir,
      env: toolEnv(),
      stdout: "ignore",
      stderr: "ignore",
    });
    rmSync(c.dir, { recursive: true, force: true });
  }
  live.clear();
}

function killOnExit(ctx: Ctx): void {
  live.add(ctx);
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on("exit", stopAllNow);
  // 'exit' does not fire when a signal (Ctrl-C, a CI timeout) ends the process: clean up, then let the signal
  // do what it would have done, unless someone else listens for it and decides.
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const onSignal = () => {
      stopAllNow();
      process.off(sig, onSignal);
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

function createTempDir(runner: Runner): Ctx {
  const dir = mkdtempSync(join(tmpdir(), "broker-pg-"));
  if (runner.asUser) chownSync(dir, runner.asUser.uid, runner.asUser.gid);
  return { runner, dir, dataDir: join(dir, "data"), logFile: join(dir, "server.log") };
}

/** Starts a new cluster in a fresh temp directory on a free loopback port. */
export async function startPgCluster(): Promise<PgCluster> {
  const ctx = createTempDir(createRunner());
  killOnExit(ctx);
  const password = crypto.randomUUID().replaceAll("-", ""); // SECRET: never log (hex, so URL-safe as is)
  try {
    await initCluster(ctx, password);
    const port = await startOnFreePort(ctx);
    return createHandle(ctx, port, password);
  } catch (err) {
    live.delete(ctx);
    rmSync(ctx.dir, { recursive: true, force: true });
    throw err;
  }
}

async function startOnFreePort(ctx: Ctx): Promise<number> {
  const confPath = join(ctx.dataDir, "postgresql.conf");
  const pristine = readFileSync(confPath, "utf8");
  for (let attempt = 1; ; attempt++) {
    const port = freePort();
    writeOwned(ctx, confPath, pristine);
    configure(ctx, port);
    try {
      await pgStart(ctx);
      return port;
    } catch (err) {
      const portTaken = /could not bind|Address already in use/i.test(logTail(ctx, 50));
      if (!portTaken || attempt >= START_ATTEMPTS) throw err;
    }
  }
}

function createHandle(ctx: Ctx, port: number, password: string): PgCluster {
  const url = (db: string) => `postgres://broker:${password}@127.0.0.1:${port}/${db}`;
  let destroyed: Promise<void> | undefined;
  return {
    port,
    host: "127.0.0.1",
    dir: ctx.dir,
    async createDatabase(name = `t_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`) {
      // The name is interpolated into CREATE DATABASE: only plain lower-case identifiers get through.
      if (!DB_NAME.test(name)) throw new Error(`invalid database name ${JSON.stringify(name)}: must match ${DB_NAME}`);
      const admin = new SQL({ url: url("postgres"), max: 1, connectionTimeout: 10 });
      try {
        await admin.unsafe(`CREATE DATABASE "${name}"`);
      } catch (err) {
        throw new Error(`CREATE DATABASE "${name}" on 127.0.0.1:${port} failed: ${(err as Error).message}\n--- tail of ${ctx.logFile} ---\n${logTail(ctx)}`);
      } finally {
        await admin.close();
      }
      return url(name);
    },
    async stop() {
      await pgStop(ctx, "fast");
    },
    async start() {
      await pgStart(ctx);
    },
    destroy() {
      destroyed ??= (async () => {
        // Not tracked whether it runs: a stop() or start() that failed half-way leaves that unknown. pg_ctl knows.
        await pgStop(ctx, "fast")
          .catch(() => pgStop(ctx, "immediate"))
          .catch(() => {});
        live.delete(ctx);
        rmSync(ctx.dir, { recursive: true, force: true });
      })();
      return destroyed;
    },
  };
}
