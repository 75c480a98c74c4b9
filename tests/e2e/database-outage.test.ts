// PostgreSQL stopped and restarted under proxied load, against the compiled binary: no 500s; cached
// sessions keep getting 200 within BROKER_DATABASE_OUTAGE_GRACE_SECONDS (for service tables counted
// from the last moment announcements vouched for them, not from the read) and get 503 when it is 0;
// what needs the database and has nothing cached gets 503 database_unavailable; /health says
// degraded, then ok; every proxied response has its audit record afterwards. Three instances share
// one cluster, so one stop/start serves every case.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { builtBinary, cleanEnv, startBinaryServer, tempDir, type ServerProcess } from "../helpers/binary.ts";
import { pgMissing, startPgCluster, type PgCluster } from "../helpers/postgres.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { callApi, dumpResponse } from "./proxy-fixture.ts";

const PASSWORD = "correct horse battery staple";
const OUTAGE_MIN_MS = 3000;
const AFTER_MS = 3000;
const PAUSE_MS = 15; // between one loop's requests: steady load, not a flood (keeps the audit log small)
/**
 * The aged instance's grace: longer than a session's 5 s cache, so its sessions are still served for
 * at least ~3 s of the outage, while its service table (trusted as long as announcements arrive) was
 * loaded before that.
 */
const AGED_GRACE_MS = 8000;

/** Printed by Bun.SQL itself (console.warn) while its LISTEN connection reconnects; not the broker's. */
const BUN_LISTEN_RETRY = /^bun:sql LISTEN "broker_changes" failed, retrying: /;

interface Instance {
  readonly name: string;
  readonly server: ServerProcess;
  readonly apiUrl: string;
  readonly proxyPort: number;
  readonly caPem: string;
  readonly vault: string;
  readonly ownerToken: string;
  /** Scoped proxy session, used before the outage (cached). */
  readonly token: string;
  /** Scoped proxy session minted before the outage and never used (nothing cached). */
  readonly unusedToken: string;
  /** SECRET: the vault's credential, injected upstream; must appear in no log line. */
  readonly secret: string;
}

type Phase = "before" | "outage" | "after";

interface Outcome {
  readonly via: "proxy" | "tunnel";
  readonly path: string;
  readonly phase: Phase;
  /** When the request was sent, in ms since the database was stopped (-Infinity before). */
  readonly t: number;
  readonly status: number | "error";
  readonly detail?: string;
}

/** What one phase of the scenario saw, asserted by the tests below. */
interface Observed {
  load: Outcome[];
  strict: Outcome[];
  aged: Outcome[];
  healthDuring: any;
  healthAfter: any;
  freshLogin: { status: number; code: string | null; ms: number };
  unseenProxy: { status: number; code: string | null; ms: number };
  unseenConnect: { head: string; ms: number };
  envelopeProblems: string[];
  /** Responses (of the load loops and the unseen-token probes) that carried a credential, a token or the password. */
  leaks: { count: number; first: string[] };
  outageMs: number;
  logOffsets: Record<"tolerant" | "strict" | "aged", number>;
}

let cluster: PgCluster;
let upstream: TestUpstream;
let tolerant: Instance; // default grace (300 s)
let strict: Instance; // BROKER_DATABASE_OUTAGE_GRACE_SECONDS=0
let aged: Instance; // a short grace, and a service table loaded longer ago than that when the database goes
let observed: Observed | undefined;

async function must(apiUrl: string, method: string, path: string, body: unknown, token: string | undefined, status: number): Promise<any> {
  const r = await callApi(apiUrl, method, path, body, token);
  if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function startInstance(name: string, databaseUrl: string, extra: Record<string, string>): Promise<Instance> {
  const dir = tempDir(`broker-outage-${name}-`);
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, upstream.pki.caPem);
  const server = await startBinaryServer(
    builtBinary(),
    cleanEnv({
      BROKER_DATA_DIR: join(dir, "data"),
      BROKER_DATABASE_URL: databaseUrl,
      BROKER_NETWORK_ALLOWLIST: "127.0.0.1/32",
      BROKER_UPSTREAM_CA_FILE: caFile,
      BROKER_RATELIMIT_PROFILE: "off",
      ...extra,
    }),
    dir,
  );
  const proxy = /"proxy":"[^"]*:(\d+)"/.exec(server.logs());
  if (!proxy) throw new Error(`no proxy address in the listening line:\n${server.logs()}`);
  const apiUrl = server.url;
  const vault = "outage";
  const secret = `sk-outage-${crypto.randomUUID()}`;
  const owner = await must(apiUrl, "POST", "/v1/auth/register", { email: "owner@example.com", password: PASSWORD }, undefined, 201);
  await must(apiUrl, "POST", "/v1/vaults", { name: vault }, owner.token, 201);
  await must(apiUrl, "PUT", `/v1/vaults/${vault}/credentials/API_KEY`, { value: secret }, owner.token, 200);
  await must(
    apiUrl,
    "POST",
    `/v1/vaults/${vault}/services`,
    { host: `localhost:${upstream.port}`, auth: { type: "bearer", token: "API_KEY" } },
    owner.token,
    201,
  );
  const session = await must(apiUrl, "POST", "/v1/sessions", { vault, role: "proxy", ttl_seconds: 3600 }, owner.token, 201);
  const unused = await must(apiUrl, "POST", "/v1/sessions", { vault, role: "proxy", ttl_seconds: 3600 }, owner.token, 201);
  const caPem = await fetch(`${apiUrl}/v1/ca.pem`).then((r) => r.text());
  return { name, server, apiUrl, proxyPort: Number(proxy[1]), caPem, vault, ownerToken: owner.token, token: session.token, unusedToken: unused.token, secret };
}

function proxyRequest(b: Instance, path: string, token = b.token): Promise<Response> {
  return fetch(`${b.apiUrl}/proxy/localhost:${upstream.port}${path}`, { headers: { authorization: `Bearer ${token}` } });
}

function tunnelRequest(b: Instance, path: string): Promise<Response> {
  return fetch(`https://localhost:${upstream.port}${path}`, { proxy: `http://${b.token}:${b.vault}@127.0.0.1:${b.proxyPort}`, tls: { ca: b.caPem } });
}

/** A 503 must be the database_unavailable envelope with Retry-After; returns what is wrong, if anything. */
async function envelopeProblem(res: Response, where: string): Promise<string | undefined> {
  const text = await res.text();
  if (res.status !== 503) return undefined;
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {}
  const ok =
    body?.error === "database_unavailable" &&
    typeof body?.message === "string" &&
    res.headers.get("x-broker-error") === "database_unavailable" &&
    res.headers.get("retry-after") !== null;
  return ok
    ? undefined
    : `${where}: 503 x-broker-error=${res.headers.get("x-broker-error")} retry-after=${res.headers.get("retry-after")} ${text.slice(0, 200)}`;
}

/** The scenario's clock, read by every load loop. */
interface Clock {
  phase: Phase;
  /** performance.now() when the database was stopped (Infinity before). */
  outageStart: number;
  done: boolean;
  readonly problems: string[];
  /** Responses holding a secret: counted, the first few named (where and which, never the value). */
  readonly leaks: { count: number; first: string[] };
}

/** The values no response and no log line may hold: the instance's credential, its tokens, the owner's password (each also in base64). */
function secretsOf(inst: Instance): Record<string, string> {
  return {
    credential: inst.secret,
    "proxy session token": inst.token,
    "unused session token": inst.unusedToken,
    "owner token": inst.ownerToken,
    password: PASSWORD,
  };
}

/** The names of the secrets of `inst` found in `text` (raw or base64). */
function secretsIn(inst: Instance, text: string): string[] {
  return Object.entries(secretsOf(inst))
    .filter(([, v]) => text.includes(v) || text.includes(Buffer.from(v).toString("base64")))
    .map(([name]) => name);
}

/** Checks one response text as it arrives (nothing is kept unless it leaks). */
function noteLeaks(clock: Clock, inst: Instance, where: string, text: string): void {
  const found = secretsIn(inst, text);
  if (found.length === 0) return;
  clock.leaks.count++;
  if (clock.leaks.first.length < 5) clock.leaks.first.push(`${where}: ${found.join(", ")}`);
}

/** Sends one request at a time until the scenario is done; every outcome tagged with phase and time. */
async function loop(clock: Clock, inst: Instance, send: (path: string) => Promise<Response>, via: Outcome["via"], tag: string, out: Outcome[]): Promise<void> {
  for (let i = 0; !clock.done; i++) {
    const path = `/load/${tag}/${i}`;
    const sent = { phase: clock.phase, t: performance.now() - clock.outageStart };
    try {
      const res = await send(path);
      noteLeaks(clock, inst, `${inst.name} ${via} ${path}`, await dumpResponse(res.clone()));
      const problem = await envelopeProblem(res, `${via} ${path}`);
      if (problem) clock.problems.push(problem);
      out.push({ via, path, ...sent, status: res.status, detail: res.headers.get("x-broker-error") ?? undefined });
    } catch (err) {
      out.push({ via, path, ...sent, status: "error", detail: String(err) });
    }
    await Bun.sleep(PAUSE_MS);
  }
}

const health = (b: Instance) => fetch(`${b.apiUrl}/health`).then(async (r) => ({ status: r.status, body: await r.json() }));

async function waitFor<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)} after ${timeoutMs} ms`);
    await Bun.sleep(100);
  }
}

async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const t0 = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - t0 };
}

/** CONNECT with a never-used token: the raw status line and headers the listener answers with. */
function rawConnect(b: Instance, token: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const auth = Buffer.from(`${token}:${b.vault}`).toString("base64");
    const sock = connect({ host: "127.0.0.1", port: b.proxyPort }, () =>
      sock.write(`CONNECT localhost:${upstream.port} HTTP/1.1\r\nHost: localhost:${upstream.port}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`),
    );
    const timer = setTimeout(() => sock.destroy(), 5000);
    sock.on("data", (d: Buffer) => chunks.push(d));
    sock.on("error", reject);
    sock.on("close", () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString("latin1"));
    });
  });
}

/** Every audit record of the vault (newest first, paged through the id cursor). */
async function auditRecords(b: Instance): Promise<any[]> {
  const all: any[] = [];
  let before = "";
  for (;;) {
    const page = await must(b.apiUrl, "GET", `/v1/vaults/${b.vault}/logs?limit=1000${before}`, undefined, b.ownerToken, 200);
    all.push(...page.logs);
    if (!page.next_cursor) return all;
    before = `&before=${page.next_cursor}`;
  }
}

describe.skipIf(pgMissing)("PostgreSQL outage under proxied load (compiled binary)", () => {
  let agedPrimedAt = 0;
  beforeAll(async () => {
    cluster = await startPgCluster();
    upstream = await startUpstream((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end('{"ok":true}');
    });
    const [a, b, c] = await Promise.all([cluster.createDatabase(), cluster.createDatabase(), cluster.createDatabase()]);
    [tolerant, strict, aged] = await Promise.all([
      startInstance("tolerant", a, {}),
      startInstance("strict", b, { BROKER_DATABASE_OUTAGE_GRACE_SECONDS: "0" }),
      startInstance("aged", c, { BROKER_DATABASE_OUTAGE_GRACE_SECONDS: String(AGED_GRACE_MS / 1000) }),
    ]);
    // Prime both ingress paths: session, vault grant, service table and credential now cached.
    for (const inst of [aged, tolerant, strict]) {
      for (const send of [proxyRequest, tunnelRequest]) {
        const res = await send(inst, "/prime");
        if (res.status !== 200) throw new Error(`${inst.name}: priming failed with ${res.status} ${await res.text()}`);
      }
      if (inst === aged) agedPrimedAt = performance.now();
    }
    await waitFor(
      "health before the outage",
      () => health(tolerant),
      (h) => h.body.status === "ok",
      5000,
    );
  }, 60_000);

  afterAll(async () => {
    await Promise.all([tolerant?.server.stop(), strict?.server.stop(), aged?.server.stop()]);
    await upstream?.close();
    await cluster?.destroy();
  });

  test("load through /proxy and the tunnel while the database stops and comes back: only 200s, every response audited", async () => {
    const clock: Clock = { phase: "before", outageStart: Infinity, done: false, problems: [], leaks: { count: 0, first: [] } };
    const load: Outcome[] = [];
    const strictOut: Outcome[] = [];
    const agedOut: Outcome[] = [];
    const loops = [
      loop(clock, tolerant, (p) => proxyRequest(tolerant, p), "proxy", "p1", load),
      loop(clock, tolerant, (p) => proxyRequest(tolerant, p), "proxy", "p2", load),
      loop(clock, tolerant, (p) => tunnelRequest(tolerant, p), "tunnel", "t1", load),
      loop(clock, tolerant, (p) => tunnelRequest(tolerant, p), "tunnel", "t2", load),
      // Cached sessions of the other two instances, through both paths
      loop(clock, strict, (p) => proxyRequest(strict, p), "proxy", "s1", strictOut),
      loop(clock, strict, (p) => tunnelRequest(strict, p), "tunnel", "s2", strictOut),
      loop(clock, aged, (p) => proxyRequest(aged, p), "proxy", "a1", agedOut),
      loop(clock, aged, (p) => tunnelRequest(aged, p), "tunnel", "a2", agedOut),
    ];
    // The aged instance's service table must be older than its grace when the database goes.
    await Bun.sleep(Math.max(1000, agedPrimedAt + AGED_GRACE_MS + 500 - performance.now()));
    const logOffsets = { tolerant: tolerant.server.logs().length, strict: strict.server.logs().length, aged: aged.server.logs().length };

    clock.phase = "outage";
    clock.outageStart = performance.now();
    await cluster.stop();
    // Degraded as soon as the breaker and the missing heartbeat notice; the strict instance refuses
    // its cached session once that session's last check is older than the re-validation interval.
    const healthDuring = await waitFor(
      "health during the outage",
      () => health(tolerant),
      (h) => h.status === 200 && h.body.status === "degraded" && h.body.database.reachable === false && h.body.database.announcements === "lost",
      5000,
    );
    await waitFor(
      "strict instance refusing its cached session",
      async () => strictOut.filter((o) => o.phase === "outage" && o.status === 503).length,
      (n) => n >= 2,
      5000,
    );
    const freshLogin = await timed(() => callApi(tolerant.apiUrl, "POST", "/v1/auth/login", { email: "owner@example.com", password: PASSWORD }));
    const unseenProxy = await timed(async () => {
      const res = await proxyRequest(tolerant, "/unseen", tolerant.unusedToken);
      const problem = await envelopeProblem(res.clone(), "unseen token /proxy");
      if (problem) clock.problems.push(problem);
      noteLeaks(clock, tolerant, "unseen token /proxy", await dumpResponse(res.clone()));
      return res;
    });
    const unseenConnect = await timed(() => rawConnect(tolerant, tolerant.unusedToken));
    noteLeaks(clock, tolerant, "unseen token CONNECT", unseenConnect.value);
    noteLeaks(clock, tolerant, "login during the outage", JSON.stringify(freshLogin.value.body));
    const left = OUTAGE_MIN_MS - (performance.now() - clock.outageStart);
    if (left > 0) await Bun.sleep(left);
    await cluster.start();
    const outageMs = performance.now() - clock.outageStart;

    clock.phase = "after";
    const healthAfter = await waitFor(
      "health after the outage",
      () => health(tolerant),
      (h) => h.body.status === "ok" && h.body.database.announcements === "listening",
      10_000,
    );
    await Bun.sleep(AFTER_MS);
    clock.done = true;
    await Promise.all(loops);
    await waitFor(
      "audit queue drained",
      () => health(tolerant),
      (h) => h.body.database.audit_queued === 0,
      10_000,
    );

    observed = {
      load,
      strict: strictOut,
      aged: agedOut,
      healthDuring: healthDuring.body,
      healthAfter: healthAfter.body,
      freshLogin: { status: freshLogin.value.status, code: freshLogin.value.body?.error ?? null, ms: freshLogin.ms },
      unseenProxy: { status: unseenProxy.value.status, code: unseenProxy.value.headers.get("x-broker-error"), ms: unseenProxy.ms },
      unseenConnect: { head: unseenConnect.value.split("\r\n\r\n")[0] ?? "", ms: unseenConnect.ms },
      envelopeProblems: clock.problems,
      leaks: clock.leaks,
      outageMs,
      logOffsets,
    };

    const count = (phase: Phase, via?: Outcome["via"]) => load.filter((o) => o.phase === phase && (!via || o.via === via)).length;
    console.error(
      `[database-outage] outage ${outageMs.toFixed(0)} ms; tolerant load: ${load.length} responses (before ${count("before")}, outage ${count("outage")}: /proxy ${count("outage", "proxy")}, tunnel ${count("outage", "tunnel")}, after ${count("after")}); strict: ${strictOut.length}, ${strictOut.filter((o) => o.status === 503).length} × 503`,
    );
    const notOk = load.filter((o) => o.status !== 200);
    expect(notOk.slice(0, 5)).toEqual([]); // cached sessions keep being served: that is what the grace is for
    expect(count("outage", "proxy")).toBeGreaterThan(20);
    expect(count("outage", "tunnel")).toBeGreaterThan(20);
    expect(count("after")).toBeGreaterThan(20);

    // None lost, none doubled: one record per response, matched by its unique path.
    const audited = (await auditRecords(tolerant)).filter((r) => r.path.startsWith("/load/"));
    const key = (via: string, path: string) => `${via === "tunnel" ? "transparent" : "explicit"} ${path}`;
    const want = load.map((o) => key(o.via, o.path)).sort();
    const got = audited.map((r) => `${r.ingress} ${r.path}`).sort();
    expect(got.length).toBe(want.length);
    expect(got).toEqual(want);
    expect(audited.every((r) => r.status === 200 && r.credential_keys.join() === "API_KEY")).toBe(true);
    // The audit records hold no credential, token or password.
    expect(secretsIn(tolerant, JSON.stringify(await auditRecords(tolerant)))).toEqual([]);
  }, 40_000);

  test("no response carried a credential, a token or the password", () => {
    if (!observed) throw new Error("the outage scenario did not run");
    const responses = observed.load.length + observed.strict.length + observed.aged.length;
    expect(responses).toBeGreaterThan(0);
    expect(observed.leaks).toEqual({ count: 0, first: [] });
  });

  test("no 5xx but 503, and every 503 is the database_unavailable envelope with Retry-After", () => {
    if (!observed) throw new Error("the outage scenario did not run");
    const all = [...observed.load, ...observed.strict, ...observed.aged];
    expect(all.filter((o) => o.status === "error").map((o) => `${o.via} ${o.path}: ${o.detail}`)).toEqual([]);
    expect(all.filter((o) => typeof o.status === "number" && o.status >= 500 && o.status !== 503).map((o) => `${o.via} ${o.path}: ${o.status}`)).toEqual([]);
    expect(observed.envelopeProblems).toEqual([]);
  });

  test("/health: 200 degraded (unreachable, announcements lost) during the outage, ok afterwards", () => {
    if (!observed) throw new Error("the outage scenario did not run");
    expect(observed.healthDuring).toMatchObject({ status: "degraded", database: { backend: "postgres", reachable: false, announcements: "lost" } });
    expect(observed.healthAfter).toMatchObject({ status: "ok", database: { backend: "postgres", reachable: true, announcements: "listening" } });
  });

  test("what needs the database and has nothing cached gets 503 database_unavailable, promptly", () => {
    if (!observed) throw new Error("the outage scenario did not run");
    const { freshLogin, unseenProxy, unseenConnect } = observed;
    expect({ status: freshLogin.status, code: freshLogin.code }).toEqual({ status: 503, code: "database_unavailable" });
    expect({ status: unseenProxy.status, code: unseenProxy.code }).toEqual({ status: 503, code: "database_unavailable" });
    expect(unseenConnect.head).toStartWith("HTTP/1.1 503");
    expect(unseenConnect.head.toLowerCase()).toContain("x-broker-error: database_unavailable");
    for (const ms of [freshLogin.ms, unseenProxy.ms, unseenConnect.ms]) expect(ms).toBeLessThan(5000);
  });

  test("BROKER_DATABASE_OUTAGE_GRACE_SECONDS=0: a cached session is refused with 503 during the outage, served again after", () => {
    if (!observed) throw new Error("the outage scenario did not run");
    const during = observed.strict.filter((o) => o.phase === "outage");
    const refused = during.filter((o) => o.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const via of ["proxy", "tunnel"] as const) expect(refused.some((o) => o.via === via)).toBe(true);
    expect(refused.every((o) => o.detail === "database_unavailable")).toBe(true);
    expect(during.filter((o) => o.status !== 200 && o.status !== 503)).toEqual([]);
    // Back once the database is: the last probes after recovery succeed.
    const after = observed.strict.filter((o) => o.phase === "after");
    expect(after.slice(-4).map((o) => o.status)).toEqual([200, 200, 200, 200]);
  });

  test("a service table loaded longer ago than the grace, but trusted until the outage, keeps serving", () => {
    if (!observed) throw new Error("the outage scenario did not run");
    // Its sessions were checked at most 5 s before the outage, so the 8 s grace covers them for the
    // first 3 s; the table was loaded 8.5 s before it, but announcements vouched for it until then.
    const early = observed.aged.filter((o) => o.phase === "outage" && o.t < AGED_GRACE_MS - 5000 - 500);
    expect(early.length).toBeGreaterThan(20);
    expect(early.filter((o) => o.status !== 200).slice(0, 5)).toEqual([]);
    const late = observed.aged.filter((o) => o.phase === "outage" && o.status !== 200);
    expect(late.every((o) => o.status === 503 && o.detail === "database_unavailable")).toBe(true);
  });

  test("server logs: announcements-lost warning, no credential, no stack trace, no error line per request", () => {
    if (!observed) throw new Error("the outage scenario did not run");
    const outcomes = { tolerant: observed.load, strict: observed.strict, aged: observed.aged };
    for (const inst of [tolerant, strict, aged]) {
      const logs = inst.server.logs();
      const lines = logs.split("\n").filter((l) => l.trim());
      expect(lines.some((l) => l.includes('"event":"database_announcements_lost"'))).toBe(true);
      for (const v of [inst.secret, Buffer.from(inst.secret).toString("base64"), inst.token, inst.unusedToken]) expect(logs.includes(v)).toBe(false);
      // Nor the owner's token or password (or anything above in base64).
      expect(`${inst.name}: ${secretsIn(inst, logs).join(", ") || "none"}`).toBe(`${inst.name}: none`);
      // Every line is one JSON event: a stack trace (or any unstructured output) would break that. The
      // one exception is Bun.SQL's own console.warn while it re-subscribes (exponential back-off, so a
      // handful per outage, never one per request).
      const runtime = lines.filter((l) => BUN_LISTEN_RETRY.test(l));
      expect(runtime.length).toBeLessThan(10);
      // The other: the one human line at start (stderr), saying where the console is.
      expect(lines.filter((l) => l.startsWith("broker ready: ")).length).toBe(1);
      expect(lines.filter((l) => !l.startsWith("{") && !BUN_LISTEN_RETRY.test(l) && !l.startsWith("broker ready: ")).slice(0, 5)).toEqual([]);
      expect(lines.filter((l) => /"event":"unhandled_error"|"stack"/.test(l)).slice(0, 5)).toEqual([]);
      const name = inst.name as keyof typeof outcomes;
      const offset = observed.logOffsets[name];
      const outageErrors = logs
        .slice(offset)
        .split("\n")
        .filter((l) => l.includes('"level":"error"'));
      const requests = outcomes[name].filter((o) => o.phase === "outage").length;
      console.error(
        `[database-outage] ${inst.name}: ${outageErrors.length} error lines for ${requests} requests during the outage${outageErrors.length ? `: ${[...new Set(outageErrors.map((l) => /"event":"([^"]+)"/.exec(l)?.[1]))].join(", ")}` : ""}`,
      );
      expect(outageErrors.length).toBeLessThan(Math.max(10, requests / 10));
    }
  });
});
