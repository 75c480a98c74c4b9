// `broker server --workers N` attacked (issue 40 point 2), compiled binary on SQLite: a worker killed mid-load is
// restarted and loses no audit record; the supervisor killed outright takes its workers with it; a Ctrl-C reaching the
// whole process group (or systemd's SIGTERM to the whole cgroup) stops the workers gracefully rather than forcing them;
// SIGTERM lets an in-flight request finish and a second signal forces; BROKER_WORKER set by hand is refused; the
// master password is in no worker's environment, arguments or logs; metrics snapshots are private; a revocation and a
// rotation reach an open tunnel on the other worker within a second; rate limits shared among workers add up to the
// setting; the CLI's --workers values. No output carries the credential or the master password.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { connect as netConnect, createServer as netServer } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { builtBinary, cleanEnv, collectOutput, freePort, runBinary } from "../helpers/binary.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { oneConnectionPerWorker as pinnedPerWorker, pinned as pinnedConnection, type Pinned, type Reply } from "../helpers/pinned-connection.ts";

const FIRST = `sk-workers-attack-first-${crypto.randomUUID()}`;
const SECOND = `sk-workers-attack-second-${crypto.randomUUID()}`;
const MASTER = `master-${crypto.randomUUID()}`;
const outputs: string[] = [];
const dirs: string[] = [];
let upstream: TestUpstream;

beforeAll(async () => {
  // /slow/* answers after two seconds (an in-flight request at shutdown); everything else at once.
  upstream = await startUpstream((req, res, body) => {
    const answer = () => {
      const payload = JSON.stringify({ url: req.url, auth: req.headers.authorization ?? null, body: body.length });
      res.setHeader("content-type", "application/json");
      res.setHeader("content-length", Buffer.byteLength(payload));
      res.end(payload);
    };
    if (req.url?.startsWith("/slow")) setTimeout(answer, 2000);
    else answer();
  });
});
afterAll(async () => {
  await upstream?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  for (const o of outputs) {
    expect(o.includes(FIRST)).toBe(false);
    expect(o.includes(SECOND)).toBe(false);
    expect(o.includes(MASTER)).toBe(false);
  }
});

interface Running {
  readonly pid: number;
  readonly url: string;
  readonly proxyPort: number;
  readonly dataDir: string;
  readonly exited: Promise<number>;
  logs(): string;
  stop(): Promise<number>;
}

/** `broker server --workers <n>` (the supervisor alone in its process group when `group`), waiting for `workers_listening`. */
async function startWorkers(extra: Record<string, string> = {}, opts: { workers?: string; group?: boolean; count?: number } = {}): Promise<Running> {
  const dir = mkdtempSync(join(tmpdir(), "broker-workers-attacks-"));
  dirs.push(dir);
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, upstream.pki.caPem);
  const dataDir = join(dir, "data");
  const env = cleanEnv({
    HOME: dir,
    BROKER_DATA_DIR: dataDir,
    BROKER_PORT: "0",
    BROKER_PROXY_PORT: "0",
    BROKER_NETWORK_ALLOWLIST: "127.0.0.1",
    BROKER_UPSTREAM_CA_FILE: caFile,
    BROKER_RATELIMIT_PROFILE: "off",
    BROKER_METRICS: "true",
    ...extra,
  });
  const proc = Bun.spawn([builtBinary(), "server", "--workers", opts.workers ?? "2"], {
    env,
    cwd: dir,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: opts.group ?? false,
  });
  const output = collectOutput(proc);
  const exited = proc.exited.then((code) => {
    outputs.push(output.text());
    return code;
  });
  const stop = async () => {
    if (proc.exitCode === null) proc.kill("SIGTERM");
    return exited;
  };
  const count = opts.count ?? 2;
  const deadline = Date.now() + 40_000;
  while (Date.now() < deadline) {
    const m = new RegExp(`"event":"workers_listening","workers":${count},"api":"(http://[^"]+)","proxy":"[^"]*:(\\d+)"`).exec(output.text());
    if (m) return { pid: proc.pid, url: m[1]!, proxyPort: Number(m[2]), dataDir, exited, logs: output.text, stop };
    if (proc.exitCode !== null) throw new Error(`broker exited with ${proc.exitCode}:\n${output.text()}`);
    await Bun.sleep(25);
  }
  await stop();
  throw new Error(`the workers did not start in time:\n${output.text()}`);
}

/** `broker server` with these arguments, alone (no supervisor), waiting for its `listening` line. */
async function startBinaryServerWith(args: string[]) {
  const dir = mkdtempSync(join(tmpdir(), "broker-workers-one-"));
  dirs.push(dir);
  const env = cleanEnv({ HOME: dir, BROKER_DATA_DIR: join(dir, "data"), BROKER_PORT: "0", BROKER_PROXY_PORT: "0" });
  const proc = Bun.spawn([builtBinary(), ...args], { env, cwd: dir, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const output = collectOutput(proc);
  const exited = proc.exited.then((code) => {
    outputs.push(output.text());
    return code;
  });
  expect(await eventually(() => /"event":"listening","api":"/.test(output.text()) || proc.exitCode !== null, 30_000)).toBe(true);
  const url = /"event":"listening","api":"(http:\/\/[^"]+)"/.exec(output.text())?.[1];
  if (!url) throw new Error(`broker server did not start:\n${output.text()}`);
  return { pid: proc.pid, url, logs: output.text, stop: () => (proc.kill("SIGTERM"), exited) };
}

/** The supervisor's children (its workers), from /proc. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim();
      if (text) out.push(...text.split(/\s+/).map(Number));
    }
  } catch {}
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

/** Polls until `check` holds (a deadline for the test, not a timing claim). */
async function eventually(check: () => boolean | Promise<boolean>, ms = 15_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await Bun.sleep(50);
  }
  return check();
}

const oneConnectionPerWorker = (base: string) => pinnedPerWorker(base, outputs);
const pinned = (base: string) => pinnedConnection(base, outputs);

const HOST = () => `127.0.0.1:${upstream.port}`;

/** An owner, vault ops with the credential FIRST on the upstream, and an agent (proxy role) of ops. */
async function setUp(conn: Pinned) {
  const reg = await conn.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "owner password 123" } });
  expect(reg.status).toBe(201);
  const owner = reg.body.token as string;
  expect((await conn.call("POST", "/v1/vaults", { token: owner, body: { name: "ops" } })).status).toBe(201);
  expect((await conn.call("PUT", "/v1/vaults/ops/credentials/KEY", { token: owner, body: { value: FIRST } })).status).toBe(200);
  expect((await conn.call("POST", "/v1/vaults/ops/services", { token: owner, body: { host: HOST(), auth: { type: "bearer", token: "KEY" } } })).status).toBe(
    201,
  );
  const invite = await conn.call("POST", "/v1/vaults/ops/agent-invites", { token: owner, body: { name: "bot", role: "proxy" } });
  expect(invite.status).toBe(201);
  const redeemed = await fetch(invite.body.invite_url, { method: "POST" });
  const agent = ((await redeemed.json()) as { token: string }).token;
  return { owner, agent };
}

/** The Authorization the upstream received with the request for `url`. */
const injected = (url: string) => upstream.received.findLast((r) => r.url === url)?.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")?.[1];

const via = (conn: Pinned, agent: string, path = "/whoami") => conn.call("GET", `/proxy/${HOST()}${path}`, { token: agent, vault: "ops" });

/** Audit rows in the store (read once the broker has stopped). */
function auditRows(dataDir: string): number {
  const db = new Database(join(dataDir, "broker.db"), { readonly: true });
  try {
    return Number(db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM audit_logs").get()?.n ?? 0);
  } finally {
    db.close();
  }
}

/** An HTTPS connection through the broker's tunnel (CONNECT, then TLS with the broker's CA), kept alive. */
async function openTunnel(proxyPort: number, agent: string, caPem: string) {
  const raw = netConnect({ host: "127.0.0.1", port: proxyPort });
  await new Promise<void>((resolve, reject) => raw.once("connect", resolve).once("error", reject));
  const auth = Buffer.from(`${agent}:ops`).toString("base64");
  raw.write(`CONNECT ${HOST()} HTTP/1.1\r\nHost: ${HOST()}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
  const head = await new Promise<string>((resolve, reject) => {
    let got = "";
    const onData = (d: Buffer) => {
      got += d.toString("latin1");
      if (got.includes("\r\n\r\n")) {
        raw.off("data", onData);
        resolve(got);
      }
    };
    raw.on("data", onData).once("error", reject);
  });
  expect(head).toMatch(/^HTTP\/1\.1 200/);
  const tls: TLSSocket = tlsConnect({ socket: raw, ca: caPem, servername: "localhost", checkServerIdentity: () => undefined });
  await new Promise<void>((resolve, reject) => tls.once("secureConnect", resolve).once("error", reject));
  let buffered = Buffer.alloc(0);
  let closed = false;
  let wake: (() => void) | undefined;
  tls.on("data", (d: Buffer) => {
    buffered = Buffer.concat([buffered, d]);
    wake?.();
  });
  tls.on("close", () => {
    closed = true;
    wake?.();
  });
  tls.on("error", () => {});
  const more = () => new Promise<void>((resolve) => (wake = resolve));
  /** One request on the open tunnel: its status (0: the broker closed the connection) and body. */
  const call = async (path: string): Promise<{ status: number; body: string }> => {
    if (closed) return { status: 0, body: "" };
    tls.write(`GET ${path} HTTP/1.1\r\nHost: ${HOST()}\r\n\r\n`);
    for (;;) {
      const end = buffered.indexOf("\r\n\r\n");
      if (end >= 0) {
        const headText = buffered.subarray(0, end).toString("latin1");
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(headText)?.[1] ?? 0);
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(headText);
        if (length) {
          const total = end + 4 + Number(length[1]);
          if (buffered.length >= total) {
            const body = buffered.subarray(end + 4, total).toString("utf8");
            buffered = buffered.subarray(total);
            outputs.push(headText, body);
            return { status, body };
          }
        } else if (/\r\ntransfer-encoding:\s*chunked/i.test(headText)) {
          const tail = buffered.indexOf("\r\n0\r\n\r\n", end);
          if (tail >= 0) {
            const body = buffered.subarray(end + 4, tail).toString("utf8");
            buffered = buffered.subarray(tail + 7);
            outputs.push(headText, body);
            return { status, body };
          }
        } else {
          outputs.push(headText);
          return { status, body: "" };
        }
      }
      if (closed) return { status: 0, body: "" };
      await more();
    }
  };
  return { call, localPort: raw.localPort!, close: () => tls.destroy() };
}

/** Which process holds the broker's end of the connection from our local port (ss lists the owner). */
function ownerOf(proxyPort: number, localPort: number): number | undefined {
  const ss = Bun.spawnSync(["ss", "-tnpH", "state", "established", `( sport = :${proxyPort} and dport = :${localPort} )`]);
  return Number(/pid=(\d+)/.exec(ss.stdout.toString())?.[1]) || undefined;
}

/** A tunnel held by the given worker process: tunnels are opened until the kernel hands one to it. */
async function tunnelOn(pid: number, proxyPort: number, agent: string, caPem: string) {
  for (let i = 0; i < 64; i++) {
    const t = await openTunnel(proxyPort, agent, caPem);
    if (ownerOf(proxyPort, t.localPort) === pid) return t;
    t.close();
  }
  throw new Error(`no tunnel landed on worker process ${pid}`);
}

/** The pid of the worker holding a pinned connection: the local ports of our sockets to the API, matched by ss. */
async function findPidOf(supervisor: number, apiPort: number, conn: Pinned): Promise<number> {
  const port = await conn.localPort();
  const owner = ownerOf(apiPort, port);
  if (!owner || !childrenOf(supervisor).includes(owner)) throw new Error(`no worker holds the connection from port ${port}`);
  return owner;
}

describe("broker server --workers 2 attacked", () => {
  test("SIGKILL of the supervisor: its workers stop and free both ports, none is left an orphan", async () => {
    const broker = await startWorkers();
    const workers = childrenOf(broker.pid);
    expect(workers.length).toBe(2);
    process.kill(broker.pid, "SIGKILL");
    await broker.exited;
    const gone = await eventually(() => workers.every((pid) => !alive(pid)));
    if (!gone) for (const pid of workers) if (alive(pid)) process.kill(pid, "SIGKILL");
    expect(gone).toBe(true);
    // The ports are free again: nothing (orphaned) still listens on them.
    const apiPort = Number(new URL(broker.url).port);
    for (const port of [apiPort, broker.proxyPort]) {
      const s = netServer();
      await new Promise<void>((resolve, reject) => s.once("error", reject).listen(port, "127.0.0.1", resolve));
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  }, 90_000);

  test("BROKER_WORKER set by hand is refused clearly, whatever its value, and nothing listens", async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-workers-hand-"));
    dirs.push(dir);
    for (const value of ["2/2", "1/2", "9/2"]) {
      const env = cleanEnv({ HOME: dir, BROKER_DATA_DIR: join(dir, "data"), BROKER_PORT: "0", BROKER_PROXY_PORT: "0", BROKER_WORKER: value });
      // stdin closed (as a service manager gives it) and stdin a pipe carrying a guess of what a supervisor writes
      for (const stdin of [undefined, "hunter2\n"]) {
        const r = await runBinary(builtBinary(), ["server"], { env, stdin });
        outputs.push(r.stdout, r.stderr);
        expect(r.exitCode).not.toBe(0);
        expect(r.stderr).toContain("BROKER_WORKER");
        expect(r.stderr).toContain("never by hand");
        expect(r.stderr).not.toContain('"event":"listening"');
      }
    }
  }, 90_000);

  test("Ctrl-C reaching the supervisor and its workers together stops them gracefully: an in-flight request completes, exit 0", async () => {
    const broker = await startWorkers({}, { group: true });
    const { one, two } = await oneConnectionPerWorker(broker.url);
    const { agent } = await setUp(one);
    const before = upstream.received.length;
    const slow = [via(one, agent, "/slow/a"), via(two, agent, "/slow/b")];
    expect(await eventually(() => upstream.received.length >= before + 2)).toBe(true);
    process.kill(-broker.pid, "SIGINT"); // the terminal's Ctrl-C: the whole foreground process group
    const answers = await Promise.all(slow);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(await broker.exited).toBe(0);
    expect(broker.logs()).not.toContain("shutdown_forced");
    for (const w of [1, 2]) expect(broker.logs()).toContain(`"event":"shutdown_complete","worker":${w}`);
  }, 90_000);

  test("SIGTERM to the supervisor lets in-flight requests finish (exit 0); a second signal forces (exit 143, no worker left)", async () => {
    const broker = await startWorkers();
    const { one, two } = await oneConnectionPerWorker(broker.url);
    const { agent } = await setUp(one);
    let before = upstream.received.length;
    const slow = [via(one, agent, "/slow/c"), via(two, agent, "/slow/d")];
    expect(await eventually(() => upstream.received.length >= before + 2)).toBe(true);
    process.kill(broker.pid, "SIGTERM");
    expect((await Promise.all(slow)).map((a) => a.status)).toEqual([200, 200]);
    expect(await broker.exited).toBe(0);

    const again = await startWorkers();
    const conns = await oneConnectionPerWorker(again.url);
    const setup2 = await setUp(conns.one);
    const workers = childrenOf(again.pid);
    before = upstream.received.length;
    const cut = via(conns.two, setup2.agent, "/slow/e").catch(() => ({ status: 0 }));
    expect(await eventually(() => upstream.received.length >= before + 1)).toBe(true);
    process.kill(again.pid, "SIGTERM");
    await Bun.sleep(200);
    process.kill(again.pid, "SIGTERM");
    expect(await again.exited).toBe(143);
    expect((await cut).status).not.toBe(200);
    expect(await eventually(() => workers.every((pid) => !alive(pid)))).toBe(true);
  }, 90_000);

  test("a worker killed with SIGKILL mid-load is restarted; the other keeps serving; none of its audit records is lost", async () => {
    const broker = await startWorkers();
    const { one, two } = await oneConnectionPerWorker(broker.url);
    const { agent } = await setUp(one);
    const apiPort = Number(new URL(broker.url).port);
    const before = upstream.received.length;
    // Worker 2's pid: the child that is not the one answering on connection `one`'s... found by killing the one whose
    // socket holds `two` (ss names it).
    const health2 = await two.call("GET", "/health");
    expect(health2.body.worker.id).toBe(2);
    const workersBefore = childrenOf(broker.pid);
    const pidOfTwo = await findPidOf(broker.pid, apiPort, two);
    expect(workersBefore).toContain(pidOfTwo);
    let stop = false;
    const statuses = { one: [] as number[], two: [] as number[] };
    const loop = async (conn: Pinned, into: number[]) => {
      while (!stop)
        into.push(
          await via(conn, agent).then(
            (r) => r.status,
            () => 0,
          ),
        );
    };
    const loops = [loop(one, statuses.one), loop(two, statuses.two)];
    await eventually(() => statuses.two.length >= 50);
    process.kill(pidOfTwo, "SIGKILL");
    const countAtKill = statuses.one.length;
    // The other worker keeps answering meanwhile, and the supervisor starts a new worker 2.
    expect(await eventually(() => broker.logs().includes('"event":"worker_restarted","worker":2'))).toBe(true);
    expect(await eventually(() => statuses.one.length > countAtKill + 20)).toBe(true);
    stop = true;
    await Promise.all(loops);
    one.close();
    two.close();
    expect(statuses.one.every((s) => s === 200)).toBe(true);
    expect(childrenOf(broker.pid).length).toBe(2);
    expect(childrenOf(broker.pid)).not.toContain(pidOfTwo);
    // The restarted worker can serve (fresh connections until it answers).
    const fresh = await oneConnectionPerWorker(broker.url);
    expect((await via(fresh.two, agent)).status).toBe(200);
    fresh.one.close();
    fresh.two.close();
    expect(await broker.stop()).toBe(0);
    const reached = upstream.received.length - before;
    // Every request that reached the upstream was audited, the killed worker's included (its journal was replayed),
    // except at most the one it had in flight when it died (whose record it never made).
    const rows = auditRows(broker.dataDir);
    expect(rows).toBeGreaterThanOrEqual(reached - 1);
    expect(rows).toBeLessThanOrEqual(reached);
    console.log(`worker SIGKILL: ${reached} requests reached the upstream, ${rows} audit rows`);
  }, 120_000);

  test("the master password reaches the workers on stdin only: in no worker's environment or arguments, nor in any log; metrics snapshots are private", async () => {
    const broker = await startWorkers({ BROKER_MASTER_PASSWORD: MASTER });
    const { one, two } = await oneConnectionPerWorker(broker.url);
    const { agent, owner } = await setUp(one);
    // Both workers opened the password-sealed keyring: each injects the credential.
    expect((await via(one, agent)).status).toBe(200);
    expect((await via(two, agent)).status).toBe(200);
    const workers = childrenOf(broker.pid);
    expect(workers.length).toBe(2);
    for (const pid of workers) {
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8");
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      expect(environ).not.toContain(MASTER);
      expect(environ).not.toContain("BROKER_MASTER_PASSWORD");
      expect(cmdline).not.toContain(MASTER);
    }
    expect(readFileSync(`/proc/${broker.pid}/cmdline`, "utf8")).not.toContain(MASTER);
    // The snapshots each worker writes for /metrics: 0600 files in a 0700 directory, names and numbers only.
    const dir = join(broker.dataDir, "workers");
    expect(await eventually(() => readdirSync(dir).filter((f) => f.endsWith(".json")).length === 2)).toBe(true);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const f of readdirSync(dir)) {
      expect(statSync(join(dir, f)).mode & 0o777).toBe(0o600);
      const text = readFileSync(join(dir, f), "utf8");
      for (const secret of [MASTER, FIRST, agent, owner]) expect(text.includes(secret)).toBe(false);
    }
    one.close();
    two.close();
    expect(await broker.stop()).toBe(0);
  }, 90_000);

  test("an agent revoked through worker 1 is refused on its open tunnel to worker 2 a second later; a rotation is seen there too", async () => {
    const broker = await startWorkers();
    const { one, two } = await oneConnectionPerWorker(broker.url);
    const { agent, owner } = await setUp(one);
    const caPem = await (await fetch(`${broker.url}/v1/ca.pem`)).text();
    const apiPort = Number(new URL(broker.url).port);
    const pidOfTwo = await findPidOf(broker.pid, apiPort, two);
    const tunnel = await tunnelOn(pidOfTwo, broker.proxyPort, agent, caPem);
    const first = await tunnel.call("/t1");
    expect(first.status).toBe(200);
    expect(injected("/t1")).toBe(`Bearer ${FIRST}`);
    // Rotated through worker 1: the open tunnel on worker 2 injects the new value a second later.
    expect((await one.call("PUT", "/v1/vaults/ops/credentials/KEY", { token: owner, body: { value: SECOND } })).status).toBe(200);
    await Bun.sleep(1000);
    const rotated = await tunnel.call("/t2");
    expect(rotated.status).toBe(200);
    expect(injected("/t2")).toBe(`Bearer ${SECOND}`);
    // Revoked through worker 1: the next request on the open tunnel is refused (or the tunnel closed) a second later.
    const before = upstream.received.length;
    expect((await one.call("DELETE", "/v1/agents/bot", { token: owner })).status).toBe(204);
    await Bun.sleep(1000);
    const after = await tunnel.call("/t3");
    expect(after.status === 0 || after.status === 401 || after.status === 407 || after.status === 403).toBe(true);
    expect(upstream.received.slice(before).some((r) => r.url === "/t3")).toBe(false);
    tunnel.close();
    one.close();
    two.close();
    expect(await broker.stop()).toBe(0);
  }, 90_000);

  test("rate limits shared by two workers add up to the setting, not more; the 429 says so", async () => {
    const broker = await startWorkers({ BROKER_RATELIMIT_PROFILE: "default", BROKER_RATELIMIT_PROXY_BURST: "5", BROKER_RATELIMIT_PROXY_RPS: "0.01" });
    const { one, two } = await oneConnectionPerWorker(broker.url);
    const { agent } = await setUp(one);
    const statuses: number[] = [];
    let refused: Reply | undefined;
    for (let i = 0; i < 10; i++) {
      for (const conn of [one, two]) {
        const r = await via(conn, agent);
        statuses.push(r.status);
        if (r.status === 429) refused ??= r;
      }
    }
    const accepted = statuses.filter((s) => s === 200).length;
    console.log(`PROXY burst 5 over two workers: ${accepted} accepted of ${statuses.length}`);
    expect(accepted).toBeLessThanOrEqual(5);
    expect(accepted).toBeGreaterThanOrEqual(4);
    expect(refused?.body?.error?.code ?? refused?.body?.error).toBeDefined();
    expect(Number(refused?.headers["retry-after"])).toBeGreaterThan(0);
    console.log(`429: ${refused?.text} ${JSON.stringify(refused?.headers)}`);
    one.close();
    two.close();
    expect(await broker.stop()).toBe(0);
  }, 90_000);

  test("under load through the tunnel (16 keep-alive connections, two workers, one SQLite file): no 503, no error logged, every request audited, the change log stays small", async () => {
    const total = Number(process.env.WORKERS_ATTACK_LOAD ?? 3000);
    const broker = await startWorkers();
    const { one, two } = await oneConnectionPerWorker(broker.url);
    const { agent, owner } = await setUp(one);
    const caPem = await (await fetch(`${broker.url}/v1/ca.pem`)).text();
    const proxy = `http://${encodeURIComponent(agent)}:ops@127.0.0.1:${broker.proxyPort}`;
    const before = upstream.received.length;
    const statuses = new Map<number, number>();
    let next = 0;
    let firstFailure: string | undefined;
    const client = async () => {
      while (next++ < total) {
        try {
          const res = await fetch(`https://${HOST()}/load`, { proxy, tls: { ca: caPem }, keepalive: true } as RequestInit);
          const text = await res.text();
          if (res.status !== 200) firstFailure ??= `${res.status} ${text.slice(0, 200)}`;
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        } catch (err) {
          firstFailure ??= String(err);
          statuses.set(0, (statuses.get(0) ?? 0) + 1);
        }
      }
    };
    // Changes made meanwhile (credential writes through both workers) feed the change log every worker reads.
    let editing = true;
    const edits = (async () => {
      for (let i = 0; editing; i++) {
        const conn = i % 2 ? one : two;
        expect((await conn.call("PUT", "/v1/vaults/ops/credentials/OTHER", { token: owner, body: { value: `other-${i}` } })).status).toBe(200);
        await Bun.sleep(20);
      }
    })();
    const t0 = performance.now();
    await Promise.all(Array.from({ length: 16 }, client));
    const ms = performance.now() - t0;
    editing = false;
    await edits;
    const changeLog = (() => {
      const db = new Database(join(broker.dataDir, "broker.db"), { readonly: true });
      try {
        return Number(db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM change_log").get()?.n ?? 0);
      } finally {
        db.close();
      }
    })();
    one.close();
    two.close();
    expect(await broker.stop()).toBe(0);
    const reached = upstream.received.length - before;
    const rows = auditRows(broker.dataDir);
    console.log(
      `load: ${total} requests in ${Math.round(ms)} ms (${Math.round((total * 1000) / ms)}/s): ${JSON.stringify(Object.fromEntries(statuses))}; upstream ${reached}, audit rows ${rows}, change_log rows ${changeLog}${firstFailure ? `; first failure ${firstFailure}` : ""}`,
    );
    expect(firstFailure).toBeUndefined();
    expect(statuses.get(200)).toBe(total);
    expect(reached).toBe(total);
    expect(rows).toBe(total);
    expect(changeLog).toBeLessThan(total);
    const errors = broker
      .logs()
      .split("\n")
      .filter((l) => l.includes('"level":"error"') || l.includes("database_unavailable"));
    expect(errors).toEqual([]);
  }, 300_000);

  test("--workers: abc, 0, 65 and 1.5 are refused naming the setting; --help lists it; auto is one per core; explicit ports are shared", async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-workers-cli-"));
    dirs.push(dir);
    const env = cleanEnv({ HOME: dir, BROKER_DATA_DIR: join(dir, "data"), BROKER_PORT: "0", BROKER_PROXY_PORT: "0" });
    for (const bad of ["abc", "0", "65", "1.5", "-2"]) {
      const r = await runBinary(builtBinary(), ["server", "--workers", bad], { env });
      outputs.push(r.stdout, r.stderr);
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr).toContain("BROKER_WORKERS: must be auto or a whole number from 1 to 64");
      expect(r.stderr).not.toContain('"event":"listening"');
    }
    const help = await runBinary(builtBinary(), ["server", "--help"], { env });
    expect(help.exitCode).toBe(0);
    expect(help.stdout + help.stderr).toContain("--workers");
    // auto: one per core this process may use; on fixed ports, which both workers share.
    const cores = navigator.hardwareConcurrency;
    const [api, proxy] = [freePort(), freePort()];
    const broker = await startWorkers({ BROKER_PORT: String(api), BROKER_PROXY_PORT: String(proxy) }, { workers: "auto", count: Math.min(64, cores) });
    expect(broker.url).toBe(`http://127.0.0.1:${api}`);
    expect(broker.proxyPort).toBe(proxy);
    expect(childrenOf(broker.pid).length).toBe(Math.min(64, cores));
    expect(await broker.stop()).toBe(0);
  }, 90_000);

  test("--workers 1 is the broker as before: one process, no supervisor, /health names no worker", async () => {
    const broker = await startBinaryServerWith(["server", "--workers", "1"]);
    try {
      const health = await (await fetch(`${broker.url}/health`)).json();
      expect(health.worker).toBeUndefined();
      expect(broker.logs()).not.toContain("workers_listening");
      expect(broker.logs()).not.toContain('"worker":');
      expect(childrenOf(broker.pid).length).toBe(0);
    } finally {
      expect(await broker.stop()).toBe(0);
    }
  }, 90_000);

  test("a second --workers broker on the same fixed ports (same data directory) is refused, not silently joined to the first", async () => {
    const [api, proxy] = [freePort(), freePort()];
    const first = await startWorkers({ BROKER_PORT: String(api), BROKER_PROXY_PORT: String(proxy) });
    try {
      const r = await runBinary(builtBinary(), ["server", "--workers", "2"], {
        env: cleanEnv({ HOME: join(first.dataDir, ".."), BROKER_DATA_DIR: first.dataDir, BROKER_PORT: String(api), BROKER_PROXY_PORT: String(proxy) }),
      });
      outputs.push(r.stdout, r.stderr);
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr).toContain(`BROKER_PORT ${api} is already in use`);
      expect(r.stderr).not.toContain('"event":"listening"');
      // Only the first broker's two workers listen.
      const ss = Bun.spawnSync(["ss", "-ltnpH", `( sport = :${api} )`]).stdout.toString();
      expect(ss.trim().split("\n").length).toBe(2);
    } finally {
      expect(await first.stop()).toBe(0);
    }
  }, 90_000);
});
