// Several compiled broker processes on one PostgreSQL database, for the multi-instance e2e test:
// a binary built from the current source, instances that can be killed with any signal (SIGKILL
// included) and whose logs are kept after they die, and polling that measures how long a change
// took to show. Never prints a credential value or a token.

import { SQL } from "bun";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { cleanEnv, collectOutput } from "../helpers/binary.ts";
import type { TestUpstream } from "../helpers/upstream.ts";
import { callApi, dumpResponse } from "./proxy-fixture.ts";
import type { Conn } from "./tunnel-fixture.ts";

export { dumpResponse }; // the proxy fixture's, for the multi-instance tests

const ROOT = join(import.meta.dir, "..", "..");
/** Instances still running, and directories to remove, for stopAllInstances. */
const live = new Set<(signal: "SIGKILL" | "SIGTERM") => Promise<number>>();
const cleanups: (() => void)[] = [];

/**
 * The compiled binary of the source under test. dist/broker may predate the change being tested
 * (only `npm test` rebuilds it), so this builds a private copy; it takes about 1.5 s.
 */
export function buildFreshBinary(): string {
  const out = join(mkdtempSync(join(tmpdir(), "broker-multi-bin-")), "broker");
  cleanups.push(() => rmSync(dirname(out), { recursive: true, force: true })); // 100+ MB each
  const r = Bun.spawnSync([process.execPath, "build.ts", out], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`bun build.ts failed:\n${r.stderr.toString()}${r.stdout.toString()}`);
  return out;
}

export interface Instance {
  readonly name: string;
  readonly url: string;
  readonly proxyPort: number;
  readonly pid: number;
  /** Everything the process wrote to stdout and stderr so far (kept after it dies). */
  logs(): string;
  kill(signal: "SIGKILL" | "SIGTERM"): Promise<number>;
}

export interface InstanceOptions {
  readonly bin: string;
  readonly databaseUrl: string;
  /** PEM bundle the broker trusts for upstreams. */
  readonly upstreamCaPem: string;
  readonly env?: Record<string, string>;
}

const LISTENING = /"event":"listening","api":"(http:\/\/[^"]+)","proxy":"[^"]*:(\d+)"/;

/** Spawns `broker server` (ports chosen by the OS, its own data dir) without waiting for it. */
export function spawnInstance(name: string, opts: InstanceOptions): Promise<Instance> {
  const dir = mkdtempSync(join(tmpdir(), `broker-multi-${name}-`));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, opts.upstreamCaPem);
  const env = cleanEnv({
    HOME: dir,
    BROKER_DATA_DIR: join(dir, "data"),
    BROKER_DATABASE_URL: opts.databaseUrl,
    BROKER_PORT: "0",
    BROKER_PROXY_PORT: "0",
    // Loopback upstreams are reached by allowlisting them, never by a bypass (DESIGN §5).
    BROKER_NETWORK_ALLOWLIST: "127.0.0.1,::1",
    BROKER_UPSTREAM_CA_FILE: caFile,
    BROKER_RATELIMIT_PROFILE: "off",
    BROKER_UPSTREAM_TIMEOUT_MS: "15000",
    ...opts.env,
  });
  const proc = Bun.spawn([opts.bin, "server"], { env, cwd: dir, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const output = collectOutput(proc);
  const kill = async (signal: "SIGKILL" | "SIGTERM") => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    return proc.exited;
  };
  live.add(kill);
  return (async () => {
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const m = LISTENING.exec(output.text());
      if (m) return { name, url: m[1]!, proxyPort: Number(m[2]), pid: proc.pid, logs: output.text, kill };
      if (proc.exitCode !== null) throw new Error(`broker ${name} exited with ${proc.exitCode}:\n${output.text()}`);
      await Bun.sleep(20);
    }
    await kill("SIGKILL");
    throw new Error(`broker ${name} did not start in time:\n${output.text()}`);
  })();
}

/** Ends every instance this file started and removes their directories and the built binary (for afterAll). */
export async function stopAllInstances(): Promise<void> {
  await Promise.all([...live].map((kill) => kill("SIGTERM")));
  live.clear();
  for (const clean of cleanups.splice(0)) clean();
}

/**
 * Calls `probe` every `everyMs` until it returns true or `limitMs` has passed since `since`
 * (a performance.now() reading). Returns the delay at which it first held, or undefined.
 */
export async function pollUntil(since: number, limitMs: number, probe: () => Promise<boolean>, everyMs = 50): Promise<number | undefined> {
  for (;;) {
    if (await probe()) return Math.round(performance.now() - since);
    if (performance.now() - since > limitMs) return undefined;
    await Bun.sleep(everyMs);
  }
}

export interface Recorder {
  /** Every response body and header seen so far, for the leak checks. */
  readonly outputs: string[];
  api(inst: Instance, method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: any; headers: Headers }>;
  /** As api, but throws unless the status is `status`; returns the body. */
  must(inst: Instance, method: string, path: string, body: unknown, token: string, status: number): Promise<any>;
  /** GET `/proxy/<hostPort>/<tag>/<n>` with a bearer token; `path` finds what the upstream received. */
  proxy(inst: Instance, token: string, hostPort: string, tag: string): Promise<{ status: number; code: string | null; path: string }>;
  /** GET `/<tag>/<n>` inside an open tunnel. */
  tunnelGet(conn: Conn, host: string, tag: string): Promise<{ status: number; path: string }>;
  /**
   * Which of `expected` (name → value) the upstream got as `Bearer <value>` for the request to `path`,
   * by name, so a failing expectation never prints a credential value.
   */
  labelAuth(path: string, expected: Record<string, string>): string;
}

/** Calls the instances and keeps every response for the leak checks; paths are unique per request. */
export function createRecorder(upstream: TestUpstream): Recorder {
  const outputs: string[] = [];
  let n = 0;
  const api: Recorder["api"] = async (inst, method, path, body, token) => {
    const r = await callApi(inst.url, method, path, body, token);
    outputs.push(typeof r.body === "string" ? r.body : (JSON.stringify(r.body) ?? ""), JSON.stringify([...r.headers]));
    return r;
  };
  return {
    outputs,
    api,
    async must(inst, method, path, body, token, status) {
      const r = await api(inst, method, path, body, token);
      if (r.status !== status) throw new Error(`${inst.name}: ${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    },
    async proxy(inst, token, hostPort, tag) {
      const path = `/${tag}/${++n}`;
      const res = await fetch(`${inst.url}/proxy/${hostPort}${path}`, { headers: { authorization: `Bearer ${token}` } });
      const code = res.headers.get("x-broker-error");
      outputs.push(await dumpResponse(res));
      return { status: res.status, code, path };
    },
    async tunnelGet(conn, host, tag) {
      const path = `/${tag}/${++n}`;
      conn.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      const r = await conn.readResponse();
      outputs.push(`${r.head}\r\n\r\n${r.body.toString("latin1")}`);
      return { status: r.status, path };
    },
    labelAuth(path, expected) {
      const seen = upstream.received.find((r) => r.url === path);
      const got = seen?.rawHeaders.filter(([k]) => k.toLowerCase() === "authorization").map(([, v]) => v);
      if (!got) return "not reached";
      if (got.length !== 1) return `${got.length} authorization headers`;
      return Object.entries(expected).find(([, v]) => got[0] === `Bearer ${v}`)?.[0] ?? "another value";
    },
  };
}

/** Where `secret` (or its base64) appears in `texts`: the first offending excerpt, or undefined. */
export function findLeak(texts: readonly string[], secret: string): string | undefined {
  const variants = [secret, Buffer.from(secret).toString("base64")];
  for (const t of texts) {
    for (const v of variants) {
      const at = t.indexOf(v);
      if (at >= 0) return `${t.slice(Math.max(0, at - 80), at)}<SECRET>`;
    }
  }
  return undefined;
}

/** The same cluster's maintenance database (for ALTER DATABASE on the one under test). */
export function adminUrl(databaseUrl: string): string {
  const u = new URL(databaseUrl);
  u.pathname = "/postgres";
  return u.toString();
}

/** Runs statements on the database directly (what the instances share), in order, on one connection. */
export async function queryDb(url: string, statements: readonly (string | readonly [string, readonly unknown[]])[]): Promise<Record<string, any>[][]> {
  const sql = new SQL({ url, max: 1 });
  try {
    const out: Record<string, any>[][] = [];
    for (const s of statements) out.push([...(await (typeof s === "string" ? sql.unsafe(s) : sql.unsafe(s[0], [...s[1]])))]);
    return out;
  } finally {
    await sql.close();
  }
}

/**
 * Waits until no other connection to the database is running a statement. A killed instance's last
 * statements (a COMMIT already sent, say) may still finish after the process is gone; state is judged
 * once they have ended, committed or rolled back.
 */
export async function waitForQuietDatabase(url: string, limitMs = 10_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  const busy = "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'";
  while ((await queryDb(url, [busy]))[0]![0]!.n > 0) {
    if (Date.now() > deadline) throw new Error(`PostgreSQL still runs statements ${limitMs} ms after the instance died`);
    await Bun.sleep(20);
  }
}
