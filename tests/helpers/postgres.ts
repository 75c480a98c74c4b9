// Throwaway PostgreSQL clusters for tests: initdb into a fresh temp dir, a postmaster on a loopback port,
// one empty database per caller. Never touches the system cluster or service; every cluster dies with the process.
//
// sharedPgCluster(): one cluster per test process, shared by every file that only needs a database of its
// own (initdb and a postmaster start cost about a second each time). startPgCluster(): a private cluster,
// for the files that stop/start the server or change what is server-wide.

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

/**
 * The process's shared cluster, as one caller (a test file, a describe block) sees it: databases of its own,
 * nothing server-wide. Other files use the same server, so there is no stop(), start() or destroy().
 */
export interface SharedPgCluster {
  readonly port: number;
  readonly host: "127.0.0.1";
  /** A fresh empty database with a name no other caller has (t_<random>); the URL as PgCluster.createDatabase. */
  createDatabase(): Promise<string>;
  /**
   * Drops every database this handle created, cutting the connections still open to them (WITH (FORCE)), so
   * nothing a file leaves behind takes disk or connection slots from the files after it. The cluster stays up
   * until the process ends. Idempotent; never throws (a failed drop is a warning).
   */
  release(): Promise<void>;
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
    // The shared cluster serves every file of a test process. One file opens up to ~130 at once (16 stores with
    // pools of 8); release() cuts what a file left open, so this is room for a file that does not release().
    max_connections: "400",
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

// Every cluster dies with the process, however it ends: bun test never fires process.on("exit") (nor does
// a SIGKILL), so a detached watchdog polls for this process and then stops the server and deletes its
// directory. It ignores the signals that end the process (Ctrl-C reaches the whole process group);
// destroy() kills it with SIGKILL once it has cleaned up itself.
const WATCHDOG = `trap "" INT TERM HUP
owner=$1 dir=$2 info=$3; shift 3
while kill -0 "$owner" 2>/dev/null; do sleep 0.25; done
pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null)
if [ -n "$pid" ]; then kill -CONT "$pid" 2>/dev/null; pkill -CONT -P "$pid" 2>/dev/null; fi
"$@" >/dev/null 2>&1
rm -rf "$dir"
if [ -n "$info" ]; then rm -f "$info"; fi`;

/**
 * Starts the watchdog for ctx's server (and `infoFile`, removed with it). Returns its pid. A server a test
 * froze (SIGSTOP) when its runner died is woken first: pg_ctl cannot stop stopped processes.
 */
function killOnExit(ctx: Ctx, infoFile = ""): number {
  const stop = commandFor(ctx.runner, "pg_ctl", ["stop", "-D", ctx.dataDir, "-m", "immediate", "-w", "-t", "30"]);
  const proc = Bun.spawn(["sh", "-c", WATCHDOG, "broker-pg-watchdog", String(process.pid), ctx.dir, infoFile, ...stop], {
    cwd: "/",
    env: toolEnv(),
    stdio: ["ignore", "ignore", "ignore"],
    detached: true,
  });
  proc.unref();
  return proc.pid;
}

function killWatchdog(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}

const ctxFor = (runner: Runner, dir: string): Ctx => ({ runner, dir, dataDir: join(dir, "data"), logFile: join(dir, "server.log") });

function createTempDir(runner: Runner): Ctx {
  const dir = mkdtempSync(join(tmpdir(), "broker-pg-"));
  if (runner.asUser) chownSync(dir, runner.asUser.uid, runner.asUser.gid);
  return ctxFor(runner, dir);
}

/** A running server: what a handle needs to reach it. */
interface Server {
  readonly ctx: Ctx;
  readonly port: number;
  readonly password: string; // SECRET: never log (hex, so URL-safe as is)
  readonly watchdog: number;
}

/** initdb and a postmaster on a free port, in a fresh temp directory watched by killOnExit. */
async function startServer(infoFile?: string): Promise<Server> {
  const ctx = createTempDir(createRunner());
  const watchdog = killOnExit(ctx, infoFile);
  const password = crypto.randomUUID().replaceAll("-", "");
  try {
    await initCluster(ctx, password);
    return { ctx, port: await startOnFreePort(ctx), password, watchdog };
  } catch (err) {
    killWatchdog(watchdog);
    await pgStop(ctx, "immediate").catch(() => {});
    rmSync(ctx.dir, { recursive: true, force: true });
    throw err;
  }
}

/** Starts a new cluster in a fresh temp directory on a free loopback port. */
export async function startPgCluster(): Promise<PgCluster> {
  return createHandle(await startServer());
}

// --- the shared cluster ---------------------------------------------------------------------------------
// One per process. Found again by a later file through a file named after the process, not a module or
// globalThis variable: with --isolate (which --parallel implies) every test file gets a fresh global object
// and module registry, but it runs in the same process. The file holds the password: mode 0600, and the
// watchdog deletes it with the cluster.

let shared: Promise<Server> | undefined;

const sharedInfoFile = () => join(tmpdir(), `broker-shared-pg-${process.pid}.json`);

/** One fresh database for each createDatabase() on the process's one shared cluster, started on first use. */
export async function sharedPgCluster(): Promise<SharedPgCluster> {
  shared ??= findOrStartShared().catch((err) => {
    shared = undefined; // the next file tries again
    throw err;
  });
  return lease(await shared);
}

async function findOrStartShared(): Promise<Server> {
  const infoFile = sharedInfoFile();
  const found = readShared(infoFile);
  if (found) return found;
  const server = await startServer(infoFile);
  const { ctx, port, password, watchdog } = server;
  writeFileSync(infoFile, JSON.stringify({ dir: ctx.dir, port, password, watchdog }), { mode: 0o600 });
  return server;
}

/** The cluster an earlier (isolated) file of this process started, while its watchdog and server are up. */
function readShared(infoFile: string): Server | undefined {
  let info: { dir: string; port: number; password: string; watchdog: number };
  try {
    info = JSON.parse(readFileSync(infoFile, "utf8"));
    process.kill(info.watchdog, 0); // throws when it is gone: then so is (or soon is) the cluster
  } catch {
    return undefined;
  }
  const ctx = ctxFor(createRunner(), info.dir);
  return existsSync(join(ctx.dataDir, "postmaster.pid")) ? { ctx, port: info.port, password: info.password, watchdog: info.watchdog } : undefined;
}

function lease(server: Server): SharedPgCluster {
  const mine: string[] = [];
  let released: Promise<void> | undefined;
  return {
    port: server.port,
    host: "127.0.0.1",
    async createDatabase() {
      if (released) throw new Error("createDatabase() after release()");
      const name = randomDbName();
      mine.push(name); // before CREATE: one that half-failed is dropped too
      return createDb(server, name);
    },
    release() {
      released ??= dropDatabases(server, mine.splice(0));
      return released;
    },
  };
}

async function dropDatabases(server: Server, names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  // Side by side: each DROP DATABASE waits for a checkpoint, and concurrent ones share it.
  const admin = new SQL({ url: dbUrl(server, "postgres"), max: Math.min(names.length, 8), connectionTimeout: 10 });
  try {
    await Promise.all(
      names.map((name) =>
        admin.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch((err: Error) => {
          console.warn(`[postgres helper] DROP DATABASE "${name}" on 127.0.0.1:${server.port} failed (left behind): ${err.message}`);
        }),
      ),
    );
  } finally {
    await admin.close().catch(() => {});
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

const dbUrl = (server: Server, db: string) => `postgres://broker:${server.password}@127.0.0.1:${server.port}/${db}`;

const randomDbName = () => `t_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;

async function createDb(server: Server, name: string): Promise<string> {
  // The name is interpolated into CREATE DATABASE: only plain lower-case identifiers get through.
  if (!DB_NAME.test(name)) throw new Error(`invalid database name ${JSON.stringify(name)}: must match ${DB_NAME}`);
  const admin = new SQL({ url: dbUrl(server, "postgres"), max: 1, connectionTimeout: 10 });
  try {
    await admin.unsafe(`CREATE DATABASE "${name}"`);
  } catch (err) {
    throw new Error(
      `CREATE DATABASE "${name}" on 127.0.0.1:${server.port} failed: ${(err as Error).message}\n--- tail of ${server.ctx.logFile} ---\n${logTail(server.ctx)}`,
    );
  } finally {
    await admin.close();
  }
  return dbUrl(server, name);
}

function createHandle(server: Server): PgCluster {
  const { ctx } = server;
  let destroyed: Promise<void> | undefined;
  return {
    port: server.port,
    host: "127.0.0.1",
    dir: ctx.dir,
    createDatabase: (name = randomDbName()) => createDb(server, name),
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
        killWatchdog(server.watchdog);
        rmSync(ctx.dir, { recursive: true, force: true });
      })();
      return destroyed;
    },
  };
}
