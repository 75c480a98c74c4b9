// Runs the compiled dist/broker as a subprocess (as users do), sets it up through the HTTP API
// (owner, vault, credential, bearer service for the upstream, scoped session), and reads its CPU
// time and memory from /proc so the bench measures the broker from outside.

import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..");
const DIST = join(ROOT, "dist", "broker");

function newestSource(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestSource(p) : statSync(p).mtimeMs);
  }
  return newest;
}

/** dist/broker, built when missing (or older than src/, when the build succeeds). */
export function ensureBinary(log: (s: string) => void): string {
  const stale = existsSync(DIST) && newestSource(join(ROOT, "src")) > statSync(DIST).mtimeMs;
  if (existsSync(DIST) && !stale) return DIST;
  log(existsSync(DIST) ? "dist/broker is older than src/: rebuilding (bun build.ts)" : "building dist/broker (bun build.ts)");
  const r = Bun.spawnSync([process.execPath, "build.ts"], { cwd: ROOT, stdout: "ignore", stderr: "pipe" });
  if (r.exitCode !== 0) {
    if (!existsSync(DIST)) throw new Error(`bun build.ts failed:\n${r.stderr.toString()}`);
    log("warning: rebuild failed, using the existing dist/broker");
  }
  return DIST;
}

export interface BrokerProc {
  readonly pid: number;
  readonly apiUrl: string;
  readonly proxyPort: number;
  readonly caPem: string;
  readonly token: string;
  /** The bench owner's session (what sets up the reference row's secret store). */
  readonly ownerToken: string;
  readonly vault: string;
  /** The Authorization value the broker injects for the bench upstream ("Bearer <credential>"). */
  readonly authorization: string;
  /** http://<token>:<vault>@127.0.0.1:<proxyPort> */
  readonly proxyUrl: string;
  logs(): string;
  stop(): Promise<void>;
}

/** The broker's settings in every bench run: a private HOME, loopback upstreams allowed, no rate limits, quiet logs. */
export function benchEnv(dir: string, upstreamCaFile: string): Record<string, string> {
  return {
    HOME: dir,
    BROKER_DATA_DIR: join(dir, "data"),
    BROKER_PORT: "0",
    BROKER_PROXY_PORT: "0",
    BROKER_NETWORK_ALLOWLIST: "127.0.0.1/32",
    BROKER_UPSTREAM_CA_FILE: upstreamCaFile,
    BROKER_RATELIMIT_PROFILE: "off",
    BROKER_LOG_LEVEL: "warn",
    // The idle row holds 10,000 tunnels for one bench agent (the default cap is 2,000 per principal).
    BROKER_MAX_TUNNELS_PER_PRINCIPAL: "20000",
  };
}

/**
 * `upstreamPort`: the bench upstream(s), each a bearer service localhost:<port> (the HTTP/1.1 upstream,
 * and the HTTP/2 one). `extraEnv` adds to (or overrides) the bench environment, e.g. BROKER_DATABASE_URL
 * for the PostgreSQL store.
 */
export async function startBroker(
  bin: string,
  upstreamCaPem: string,
  upstreamPort: number | readonly number[],
  extraEnv: Record<string, string> = {},
): Promise<BrokerProc> {
  const dir = mkdtempSync(join(tmpdir(), "broker-bench-"));
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, upstreamCaPem);
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", ...benchEnv(dir, caFile), ...extraEnv };
  // BROKER_LOG_LEVEL=warn keeps per-request logging out of the measurement, but it also hides the
  // info-level "listening" line: so the bench picks two free ports itself and waits for /health.
  const [apiPort, proxyPort] = [freePort(), freePort()];
  const proc = Bun.spawn([bin, "server"], {
    env: { ...env, BROKER_PORT: String(apiPort), BROKER_PROXY_PORT: String(proxyPort) },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let logs = "";
  const decoder = new TextDecoder();
  const collect = async (s: ReadableStream<Uint8Array>) => {
    for await (const c of s) logs += decoder.decode(c, { stream: true });
  };
  void collect(proc.stdout);
  void collect(proc.stderr);
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`broker exited with ${proc.exitCode}:\n${logs}`);
    if (Date.now() > deadline) throw new Error(`broker did not start:\n${logs}`);
    const up = await fetch(`${apiUrl}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (up && (await proxyAccepts(proxyPort))) break;
    await Bun.sleep(25);
  }
  // With --workers N, every worker must listen before the load opens its kept-alive connections (each stays with the
  // worker that took it): fresh connections ask /health until every worker has answered.
  const seen = new Set<number>();
  for (;;) {
    const h = (await fetch(`${apiUrl}/health`, { headers: { connection: "close" } }).then((r) => r.json())) as { worker?: { id: number; of: number } };
    if (!h.worker || (seen.add(h.worker.id), seen.size === h.worker.of)) break;
    if (Date.now() > deadline) {
      proc.kill("SIGKILL"); // the supervisor and the workers it started go with it, not left running
      throw new Error(`not every worker answered:\n${logs}`);
    }
    await Bun.sleep(10);
  }
  const stop = async () => {
    proc.kill("SIGTERM");
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const setup = await setUp(apiUrl, upstreamPort);
    const caPem = await fetch(`${apiUrl}/v1/ca.pem`).then((r) => (r.ok ? r.text() : Promise.reject(new Error(`GET /v1/ca.pem: ${r.status}`))));
    const proxyUrl = `http://${encodeURIComponent(setup.token)}:${encodeURIComponent(setup.vault)}@127.0.0.1:${proxyPort}`;
    return { pid: proc.pid, apiUrl, proxyPort, caPem, ...setup, proxyUrl, logs: () => logs, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A free port on 127.0.0.1 (bound, then closed). */
export function freePort(): number {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = l.port;
  l.stop(true);
  return port;
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
export function proxyAccepts(port: number): Promise<boolean> {
  return Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } }).then(
    (s) => (s.end(), true),
    () => false,
  );
}

async function api(apiUrl: string, method: string, path: string, body: unknown, token?: string): Promise<any> {
  const res = await fetch(`${apiUrl}${path}`, {
    method,
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

export async function setUp(
  apiUrl: string,
  upstreamPort: number | readonly number[],
): Promise<{ token: string; ownerToken: string; vault: string; authorization: string }> {
  const vault = "bench";
  const secret = `sk-bench-${crypto.randomUUID()}`;
  const owner = await api(apiUrl, "POST", "/v1/auth/register", { email: "bench@example.com", password: `pw-${crypto.randomUUID()}` });
  await api(apiUrl, "POST", "/v1/vaults", { name: vault }, owner.token);
  await api(apiUrl, "PUT", `/v1/vaults/${vault}/credentials/BENCH_TOKEN`, { value: secret }, owner.token);
  for (const port of typeof upstreamPort === "number" ? [upstreamPort] : upstreamPort)
    await api(
      apiUrl,
      "POST",
      `/v1/vaults/${vault}/services`,
      { host: `localhost:${port}`, auth: { type: "bearer", token: "BENCH_TOKEN" }, description: "bench upstream" },
      owner.token,
    );
  const session = await api(apiUrl, "POST", "/v1/sessions", { vault, role: "proxy", ttl_seconds: 3600 }, owner.token);
  return { token: session.token, ownerToken: owner.token, vault, authorization: `Bearer ${secret}` };
}

// ---- /proc sampling ----

export const CLK_TCK = Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;

/** utime + stime of the process, in milliseconds. */
/** CPU of the process and its descendants (a `--workers N` supervisor and its workers), in ms. */
export function cpuMs(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + ownCpuMs(p), 0);
}

function ownCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // after "pid (comm) ": state is field 3, so utime (14) and stime (15) are at indexes 11 and 12
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
  } catch {
    return 0; // gone between listing and reading
  }
}

/** The pid and its descendants (/proc/<pid>/task/<tid>/children). */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${out[i]}/task`);
    } catch {}
    for (const t of tasks) {
      try {
        for (const c of readFileSync(`/proc/${out[i]}/task/${t}/children`, "utf8").trim().split(/\s+/)) if (c) out.push(Number(c));
      } catch {}
    }
  }
  return out;
}

/** VmRSS in bytes, of the process and its descendants. */
export function rssBytes(pid: number): number {
  return processTree(pid).reduce((sum, p) => {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, "utf8"));
      return sum + (m ? Number(m[1]) * 1024 : 0);
    } catch {
      return sum;
    }
  }, 0);
}

/** Samples VmRSS every `intervalMs` until stopped; returns the start and the peak. */
export function sampleRss(pid: number, intervalMs = 50): { stop(): { start: number; peak: number; end: number } } {
  const start = rssBytes(pid);
  let peak = start;
  const timer = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), intervalMs);
  return {
    stop() {
      clearInterval(timer);
      const end = rssBytes(pid);
      return { start, peak: Math.max(peak, end), end };
    },
  };
}

/** The broker as it was at `rev`, built in a temporary directory (the repository's node_modules lent to it). */
export function buildBaseline(rev: string): { bin: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "broker-baseline-"));
  const archive = Bun.spawnSync(["sh", "-c", `git archive ${JSON.stringify(rev)} | tar -x -C ${JSON.stringify(dir)}`], { cwd: ROOT, stderr: "pipe" });
  if (archive.exitCode !== 0) throw new Error(`git archive ${rev} failed: ${archive.stderr.toString()}`);
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  const bin = join(dir, "broker");
  const built = Bun.spawnSync([process.execPath, "build.ts", bin], { cwd: dir, stdout: "ignore", stderr: "pipe" });
  if (built.exitCode !== 0) throw new Error(`building ${rev} failed: ${built.stderr.toString()}`);
  return { bin, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
