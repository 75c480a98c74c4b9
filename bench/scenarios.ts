// The scenarios: each runs through the broker and, in the same repetition, directly against the
// upstream (the baseline). Broker CPU comes from /proc/<pid>/stat around the broker run; RSS is
// sampled every 50 ms during it.

import type { BrokerProc } from "./broker.ts";
import { cpuMs, rssBytes, sampleRss } from "./broker.ts";
import { download, median, runLoad, statsOf, upload, type Target } from "./load.ts";
import { basicAuth, coldGet, openIdle, type Hop } from "./raw.ts";
import type { MitmproxyProc } from "./mitmproxy.ts";
import type { SquidProc } from "./squid.ts";

export interface Env {
  readonly broker: BrokerProc;
  readonly upstreamPort: number;
  readonly upstreamCa: string;
  /**
   * --peers: Squid ssl-bump, and the upstream's count of requests carrying a given Authorization value;
   * mitmproxy for the h2 row (its upstream keeps its own count).
   */
  readonly peers?: { readonly squid: SquidProc; authCount(value: string): number; readonly mitmproxy?: MitmproxyProc };
}

export interface Size {
  readonly seq: number;
  readonly conc: number;
  readonly big: number;
  readonly cold: number;
  readonly idle: number;
  readonly bulkBytes: number;
  /** Requests through the tunnel before the timed rows (and a quarter as many through each other path): JIT warm-up. */
  readonly warm: number;
  /** Requests on the one HTTP/2 connection of the h2 row (64 streams in flight). */
  readonly h2: number;
  readonly reps: number;
}

export const FULL: Size = { seq: 1000, conc: 4000, big: 400, cold: 300, idle: 10_000, bulkBytes: 1 << 30, warm: 30_000, h2: 10_000, reps: 3 };
export const QUICK: Size = { seq: 200, conc: 500, big: 40, cold: 50, idle: 100, bulkBytes: 64 << 20, warm: 500, h2: 1000, reps: 1 };

/** A peer proxy's medians for a scenario, against the broker's in the same repetitions (--peers). */
export interface PeerStats {
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly cpuMsPerReq: number;
  /** peer throughput / direct throughput */
  readonly ratio: number;
  /** broker throughput / peer throughput: median, and lowest and highest of the repetitions. */
  readonly brokerVsPeer: number;
  readonly brokerVsPeerRange: readonly [number, number];
  /** broker CPU per request / peer CPU per request: median, lowest and highest of the repetitions. */
  readonly cpuVsPeer: number;
  readonly cpuVsPeerRange: readonly [number, number];
}

export interface Row {
  readonly name: string;
  readonly requests: number;
  readonly errors: number;
  readonly non2xx: number;
  readonly directRps: number;
  readonly brokerRps: number;
  /** broker throughput / direct throughput */
  readonly ratio: number;
  readonly addedP50: number;
  readonly addedP99: number;
  readonly brokerP50: number;
  readonly brokerP99: number;
  readonly cpuMsPerReq: number;
  readonly peakRssMb: number;
  readonly rssGrowthMb?: number;
  readonly mbps?: { direct: number; broker: number };
  readonly note?: string;
  readonly firstError?: string;
  /** --peers: the same scenario through Squid ssl-bump in the same repetitions. */
  readonly squid?: PeerStats;
  /** --peers, the h2 row: the same HTTP/2 load through mitmproxy in the same repetitions. */
  readonly mitmproxy?: PeerStats;
  /** broker/direct throughput per repetition: lowest and highest. */
  readonly ratioRange?: readonly [number, number];
  /** The workers row: 2 workers' throughput against one process's in the same repetitions. */
  readonly workers?: { readonly ratio: number; readonly min: number; readonly max: number };
  /** A PostgreSQL-store row: its throughput against the SQLite-store broker in the same repetitions. */
  readonly vsSqlite?: { readonly ratio: number; readonly min: number; readonly max: number; readonly sqliteSpread: number };
}

export interface Rep {
  direct: { rps: number; p50: number; p99: number };
  broker: { rps: number; p50: number; p99: number };
  errors: number;
  non2xx: number;
  requests: number;
  cpuMs: number;
  peakRss: number;
  growth: number;
  firstError?: string;
  squid?: PeerRep;
  mitmproxy?: PeerRep;
}

/** One repetition through a peer proxy: its client-side stats and its process's CPU. */
export interface PeerRep {
  rps: number;
  p50: number;
  p99: number;
  cpuMs: number;
}

const MB = 1024 * 1024;

/** Runs `measure` for the broker with CPU and RSS sampling. */
export async function metered<T>(pid: number, fn: () => Promise<T>): Promise<{ value: T; cpu: number; peak: number; growth: number }> {
  const c0 = cpuMs(pid);
  const s = sampleRss(pid);
  const value = await fn();
  const r = s.stop();
  return { value, cpu: cpuMs(pid) - c0, peak: r.peak, growth: r.peak - r.start };
}

export function summarise(name: string, reps: Rep[], note?: string): Row {
  const m = (f: (r: Rep) => number) => median(reps.map(f));
  const range = (f: (r: Rep) => number): [number, number] => [Math.min(...reps.map(f)), Math.max(...reps.map(f))];
  const requests = reps.reduce((a, r) => a + r.requests, 0);
  return {
    name,
    requests,
    errors: reps.reduce((a, r) => a + r.errors, 0),
    non2xx: reps.reduce((a, r) => a + r.non2xx, 0),
    directRps: m((r) => r.direct.rps),
    brokerRps: m((r) => r.broker.rps),
    ratio: m((r) => r.broker.rps / r.direct.rps),
    ratioRange: range((r) => r.broker.rps / r.direct.rps),
    addedP50: m((r) => r.broker.p50 - r.direct.p50),
    addedP99: m((r) => r.broker.p99 - r.direct.p99),
    brokerP50: m((r) => r.broker.p50),
    brokerP99: m((r) => r.broker.p99),
    cpuMsPerReq: m((r) => r.cpuMs / r.requests),
    peakRssMb: m((r) => r.peakRss) / MB,
    note,
    firstError: reps.find((r) => r.firstError)?.firstError,
    ...(reps.every((r) => r.squid) ? { squid: peerStats(reps, (r) => r.squid!) } : {}),
    ...(reps.every((r) => r.mitmproxy) ? { mitmproxy: peerStats(reps, (r) => r.mitmproxy!) } : {}),
  };
}

function peerStats(reps: Rep[], peer: (r: Rep) => PeerRep): PeerStats {
  const m = (f: (r: Rep) => number) => median(reps.map(f));
  const range = (f: (r: Rep) => number): [number, number] => [Math.min(...reps.map(f)), Math.max(...reps.map(f))];
  return {
    rps: m((r) => peer(r).rps),
    p50: m((r) => peer(r).p50),
    p99: m((r) => peer(r).p99),
    cpuMsPerReq: m((r) => peer(r).cpuMs / r.requests),
    ratio: m((r) => peer(r).rps / r.direct.rps),
    brokerVsPeer: m((r) => r.broker.rps / peer(r).rps),
    brokerVsPeerRange: range((r) => r.broker.rps / peer(r).rps),
    cpuVsPeer: m((r) => r.cpuMs / peer(r).cpuMs),
    cpuVsPeerRange: range((r) => r.cpuMs / peer(r).cpuMs),
  };
}

/**
 * Runs `fn` (which sends `expected` requests) through Squid with its CPU metered, and fails loudly
 * unless the upstream saw exactly that many requests carrying the broker's Authorization value.
 */
async function viaSquid<T extends { errors: number; non2xx: number }>(env: Env, expected: number, fn: () => Promise<T>): Promise<{ value: T; cpu: number }> {
  const { squid, authCount } = env.peers!;
  const a0 = authCount(env.broker.authorization);
  const c0 = cpuMs(squid.pid);
  const value = await fn();
  const cpu = cpuMs(squid.pid) - c0;
  const injected = authCount(env.broker.authorization) - a0;
  // Requests that failed never reached the upstream; a non-2xx may be Squid's own answer.
  const most = expected - value.errors;
  if (injected > most || injected < most - value.non2xx || injected === 0)
    throw new Error(
      `Squid did not inject the Authorization header: the upstream saw it on ${injected} of ${expected} requests sent through Squid (${value.errors} errors, ${value.non2xx} non-2xx)\n${squid.logs().slice(-2000)}`,
    );
  return { value, cpu };
}

export function targets(env: Env) {
  const { broker, upstreamPort: port, upstreamCa } = env;
  const viaTunnel = (path: string): Target => ({ url: `https://localhost:${port}${path}`, init: { proxy: broker.proxyUrl, tls: { ca: broker.caPem } } });
  const direct = (path: string, host = "localhost"): Target => ({ url: `https://${host}:${port}${path}`, init: { tls: { ca: upstreamCa } } });
  const viaBlind = (path: string): Target => ({ url: `https://127.0.0.1:${port}${path}`, init: { proxy: broker.proxyUrl, tls: { ca: upstreamCa } } });
  const viaProxy = (path: string): Target => ({
    url: `${broker.apiUrl}/proxy/localhost:${port}${path}`,
    init: { headers: { authorization: `Bearer ${broker.token}` } },
  });
  const squid = env.peers?.squid;
  const viaSquid = squid
    ? (path: string): Target => ({ url: `https://localhost:${port}${path}`, init: { proxy: squid.proxyUrl, tls: { ca: squid.caPem } } })
    : undefined;
  return { viaTunnel, direct, viaBlind, viaProxy, viaSquid };
}

/**
 * Brings a freshly started broker to the state of one that has been serving for a while: JavaScriptCore
 * compiles the hot paths in stages over the first tens of thousands of requests (~0.4 s of JIT
 * threads' CPU), which a short repetition would otherwise count as per-request cost. Squid and the
 * upstream are native code and need none. Returns how many requests were sent.
 */
export async function warmUp(env: Env, requests: number): Promise<number> {
  const t = targets(env);
  const paths = [t.viaTunnel("/small"), t.viaProxy("/small"), t.viaBlind("/small"), t.viaTunnel("/gzip-json")];
  let sent = 0;
  for (const target of paths) {
    const share = target === paths[0] ? requests : Math.ceil(requests / 4);
    const r = await runLoad(target, { requests: share, concurrency: 16 });
    if (r.errors) throw new Error(`warm-up failed: ${r.firstError}`);
    sent += share;
  }
  return sent;
}

/** A fetch-driven scenario: direct then broker (then Squid, when `pair.squid` is given), `reps` times. */
export async function fetchScenario(
  env: Env,
  name: string,
  pair: { direct: Target; broker: Target; squid?: Target },
  o: { requests: number; concurrency: number; reps: number; expectBytes?: number },
): Promise<Row> {
  const reps: Rep[] = [];
  const warm = Math.min(200, o.requests);
  await runLoad(pair.direct, { requests: warm, concurrency: o.concurrency });
  await runLoad(pair.broker, { requests: warm, concurrency: o.concurrency });
  if (pair.squid) await viaSquid(env, warm, () => runLoad(pair.squid!, { requests: warm, concurrency: o.concurrency }));
  for (let i = 0; i < o.reps; i++) {
    const d = await runLoad(pair.direct, o);
    const b = await metered(env.broker.pid, () => runLoad(pair.broker, o));
    const sq = pair.squid ? await viaSquid(env, o.requests, () => runLoad(pair.squid!, o)) : undefined;
    const ds = statsOf(d);
    const bs = statsOf(b.value);
    reps.push({
      direct: ds,
      broker: bs,
      errors: b.value.errors + d.errors + (sq?.value.errors ?? 0),
      non2xx: b.value.non2xx + d.non2xx + (sq?.value.non2xx ?? 0),
      requests: o.requests,
      cpuMs: b.cpu,
      peakRss: b.peak,
      growth: b.growth,
      firstError: b.value.firstError ?? d.firstError ?? (sq?.value.firstError ? `squid: ${sq.value.firstError}` : undefined),
      squid: sq ? { ...statsOf(sq.value), cpuMs: sq.cpu } : undefined,
    });
  }
  return summarise(name, reps, `${o.concurrency} conn`);
}

/** Cold connections: new TCP connection + CONNECT + two TLS handshakes per request (raw sockets). */
export async function coldScenario(env: Env, n: number, repsN: number): Promise<Row> {
  const { broker, upstreamPort: port, upstreamCa } = env;
  const authority = `localhost:${port}`;
  const viaBroker: Hop = {
    port: broker.proxyPort,
    connect: { authority, proxyAuth: basicAuth(broker.token, broker.vault) },
    servername: "localhost",
    ca: broker.caPem,
  };
  const direct: Hop = { port, servername: "localhost", ca: upstreamCa };
  const squid = env.peers?.squid;
  const viaSquidHop: Hop | undefined = squid
    ? { port: squid.port, connect: { authority, proxyAuth: "" }, servername: "localhost", ca: squid.caPem }
    : undefined;
  const run = (hop: Hop) => runN(hop, n);
  const runN = async (hop: Hop, n: number) => {
    const lat: number[] = [];
    const ports = new Set<number>();
    let errors = 0;
    let non2xx = 0;
    let firstError: string | undefined;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const s = performance.now();
      try {
        const r = await coldGet(hop, authority, "/small");
        ports.add(r.localPort);
        if (r.status < 200 || r.status > 299) non2xx++;
      } catch (err) {
        errors++;
        firstError ??= String(err);
      }
      lat.push(performance.now() - s);
    }
    const elapsed = performance.now() - t0;
    const sorted = Float64Array.from(lat).sort();
    return {
      rps: (n * 1000) / elapsed,
      p50: sorted[Math.floor(n * 0.5)]!,
      p99: sorted[Math.min(n - 1, Math.ceil(n * 0.99) - 1)]!,
      errors,
      non2xx,
      fresh: ports.size,
      firstError,
    };
  };
  await run(direct);
  if (viaSquidHop) await viaSquid(env, Math.min(n, 20), () => runN(viaSquidHop, Math.min(n, 20)));
  const reps: Rep[] = [];
  let fresh = 0;
  for (let i = 0; i < repsN; i++) {
    const d = await run(direct);
    const b = await metered(broker.pid, () => run(viaBroker));
    const sq = viaSquidHop ? await viaSquid(env, n, () => run(viaSquidHop)) : undefined;
    fresh = Math.min(fresh || Infinity, b.value.fresh);
    reps.push({
      direct: d,
      broker: b.value,
      errors: d.errors + b.value.errors + (sq?.value.errors ?? 0),
      non2xx: d.non2xx + b.value.non2xx + (sq?.value.non2xx ?? 0),
      requests: n,
      cpuMs: b.cpu,
      peakRss: b.peak,
      growth: b.growth,
      firstError: b.value.firstError ?? d.firstError ?? (sq?.value.firstError ? `squid: ${sq.value.firstError}` : undefined),
      squid: sq ? { rps: sq.value.rps, p50: sq.value.p50, p99: sq.value.p99, cpuMs: sq.cpu } : undefined,
    });
  }
  return summarise("cold connection (CONNECT + 2 TLS handshakes)", reps, `${fresh}/${n} distinct client sockets`);
}

/** `count` idle intercepted tunnels held open: broker RSS. */
export async function idleScenario(env: Env, count: number): Promise<Row> {
  const { broker, upstreamPort: port } = env;
  const hop: Hop = {
    port: broker.proxyPort,
    connect: { authority: `localhost:${port}`, proxyAuth: basicAuth(broker.token, broker.vault) },
    servername: "localhost",
    ca: broker.caPem,
  };
  const before = rssBytes(broker.pid);
  const m = await metered(broker.pid, async () => {
    const r = await openIdle(hop, count);
    await Bun.sleep(1500); // held idle
    const alive = r.sockets.filter((s) => !s.destroyed).length;
    return { ...r, alive };
  });
  const held = rssBytes(broker.pid);
  for (const s of m.value.sockets) s.destroy();
  const lost = count - m.value.alive;
  return {
    name: `${count} idle tunnels held open`,
    requests: count,
    errors: m.value.errors + lost,
    non2xx: 0,
    directRps: NaN,
    brokerRps: NaN,
    ratio: NaN,
    addedP50: NaN,
    addedP99: NaN,
    brokerP50: NaN,
    brokerP99: NaN,
    cpuMsPerReq: m.cpu / count,
    peakRssMb: m.peak / MB,
    rssGrowthMb: (held - before) / MB,
    note: `${m.value.alive} alive after 1.5 s; RSS ${(before / MB).toFixed(0)} → ${(held / MB).toFixed(0)} MB (${((held - before) / count / 1024).toFixed(1)} KiB/tunnel)`,
    firstError: m.value.firstError,
  };
}

/** Streamed upload or download of `bytes` through the tunnel vs direct: MB/s and peak RSS growth. */
export async function bulkScenario(env: Env, dir: "upload" | "download", bytes: number, repsN: number): Promise<Row> {
  const t = targets(env);
  const path = dir === "upload" ? "/upload" : `/download?bytes=${bytes}`;
  const op = dir === "upload" ? upload : download;
  const rows: { d: number; b: number; s?: number; growth: number; peak: number; cpu: number; ok: boolean; err?: string }[] = [];
  for (let i = 0; i < repsN; i++) {
    const d = await op(t.direct(path), bytes);
    const b = await metered(env.broker.pid, () => op(t.viaTunnel(path), bytes));
    // Squid terminates both TLS legs too: the same four AES passes per byte on the same two cores.
    const sq = t.viaSquid ? (await viaSquid(env, 1, async () => ({ ...(await op(t.viaSquid!(path), bytes)), errors: 0, non2xx: 0 }))).value : undefined;
    const mbps = (ms: number) => bytes / MB / (ms / 1000);
    rows.push({
      d: mbps(d.ms),
      b: mbps(b.value.ms),
      s: sq?.ok ? mbps(sq.ms) : undefined,
      growth: b.growth,
      peak: b.peak,
      cpu: b.cpu,
      ok: d.ok && b.value.ok,
      err: d.error ?? b.value.error ?? (sq && !sq.ok ? `squid: ${sq.error}` : undefined),
    });
  }
  const squidNote = rows.every((r) => r.s !== undefined)
    ? `, Squid ${median(rows.map((r) => r.s!)).toFixed(0)} MB/s (${(100 * median(rows.map((r) => r.s! / r.d))).toFixed(0)}% of direct)`
    : "";
  const m = (f: (r: (typeof rows)[number]) => number) => median(rows.map(f));
  const gib = bytes >= 1 << 30 ? `${bytes / (1 << 30)} GiB` : `${bytes / MB} MiB`;
  return {
    name: `${gib} ${dir} through the tunnel`,
    requests: repsN,
    errors: rows.filter((r) => !r.ok).length,
    non2xx: 0,
    directRps: NaN,
    brokerRps: NaN,
    ratio: m((r) => r.b / r.d),
    addedP50: NaN,
    addedP99: NaN,
    brokerP50: NaN,
    brokerP99: NaN,
    cpuMsPerReq: m((r) => r.cpu),
    peakRssMb: m((r) => r.peak) / MB,
    rssGrowthMb: m((r) => r.growth) / MB,
    mbps: { direct: m((r) => r.d), broker: m((r) => r.b) },
    note: `direct ${m((r) => r.d).toFixed(0)} MB/s, broker ${m((r) => r.b).toFixed(0)} MB/s${squidNote}`,
    firstError: rows.find((r) => r.err)?.err,
  };
}

/** Audit records the broker still holds (GET /health), 0 when it does not say. */
async function auditQueued(b: BrokerProc): Promise<number> {
  const h = (await fetch(`${b.apiUrl}/health`).then((r) => r.json())) as { database?: { audit_queued?: number } };
  return h.database?.audit_queued ?? 0;
}

/** Waits until the broker has written every audit record it queued (at most 30 s); returns how long that took. */
async function drainAudit(b: BrokerProc): Promise<number> {
  const t0 = performance.now();
  while ((await auditQueued(b)) > 0 && performance.now() - t0 < 30_000) await Bun.sleep(5);
  return performance.now() - t0;
}

/**
 * One fetch scenario through two brokers that differ only in their store (SQLite: `env.broker`;
 * PostgreSQL: `pg`), alternating which goes first in each repetition so drift and warm-up favour
 * neither. Audit records are written off the request path, so each run ends when its broker has
 * written them: that work is in its CPU figure (not in its req/s) and never spills into the other
 * broker's run. `serverCpuMs` (optional) reads the PostgreSQL server's own CPU time.
 * Returns the PostgreSQL row; `vsSqlite` holds the per-repetition PostgreSQL/SQLite ratios.
 */
export async function storeScenario(
  env: Env,
  pg: BrokerProc,
  name: string,
  path: string,
  o: { requests: number; concurrency: number; reps: number; serverCpuMs?: () => number },
): Promise<Row> {
  const t = targets(env);
  const direct = t.direct(path);
  const brokers = { sqlite: env.broker, postgres: pg };
  const via = { sqlite: t.viaTunnel(path), postgres: targets({ ...env, broker: pg }).viaTunnel(path) };
  // A full repetition's worth each: the PostgreSQL broker has just started, the SQLite one has served
  // thousands of requests already, and a cold JIT would otherwise count against the store.
  for (const target of [direct, via.sqlite, via.postgres]) await runLoad(target, { requests: o.requests, concurrency: o.concurrency });
  await Promise.all([drainAudit(env.broker), drainAudit(pg)]);
  const reps: Rep[] = [];
  const lite = { rps: [] as number[], cpu: [] as number[], drain: [] as number[] };
  const post = { drain: [] as number[], server: [] as number[] };
  const run = async (which: "sqlite" | "postgres") => {
    const s0 = which === "postgres" ? o.serverCpuMs?.() : undefined;
    const m = await metered(brokers[which].pid, async () => {
      const load = await runLoad(via[which], o);
      return { load, drainMs: await drainAudit(brokers[which]) };
    });
    return { ...m, serverMs: s0 === undefined ? undefined : o.serverCpuMs!() - s0 };
  };
  for (let i = 0; i < o.reps; i++) {
    const d = await runLoad(direct, o);
    const first = i % 2 === 0 ? "sqlite" : "postgres";
    const a = await run(first);
    const b = await run(first === "sqlite" ? "postgres" : "sqlite");
    const [l, p] = first === "sqlite" ? [a, b] : [b, a];
    lite.rps.push(statsOf(l.value.load).rps);
    lite.cpu.push(l.cpu / o.requests);
    lite.drain.push(l.value.drainMs);
    post.drain.push(p.value.drainMs);
    if (p.serverMs !== undefined) post.server.push(p.serverMs / o.requests);
    reps.push({
      direct: statsOf(d),
      broker: statsOf(p.value.load),
      errors: d.errors + p.value.load.errors + l.value.load.errors,
      non2xx: d.non2xx + p.value.load.non2xx + l.value.load.non2xx,
      requests: o.requests,
      cpuMs: p.cpu,
      peakRss: p.peak,
      growth: p.growth,
      firstError: p.value.load.firstError ?? l.value.load.firstError ?? d.firstError,
    });
  }
  const ratios = reps.map((r, i) => r.broker.rps / lite.rps[i]!);
  const sqliteMedian = median(lite.rps);
  const vsSqlite = {
    ratio: median(ratios),
    min: Math.min(...ratios),
    max: Math.max(...ratios),
    sqliteSpread: (Math.max(...lite.rps) - Math.min(...lite.rps)) / sqliteMedian,
  };
  const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
  const note = [
    `${o.concurrency} conn; PostgreSQL/SQLite throughput ${pct(vsSqlite.ratio)} (per repetition ${pct(vsSqlite.min)}–${pct(vsSqlite.max)})`,
    `SQLite broker in the same repetitions: ${sqliteMedian.toFixed(0)} req/s (spread ${pct(vsSqlite.sqliteSpread)}), CPU ${median(lite.cpu).toFixed(3)} ms/req`,
    `CPU includes writing the run's audit records, which took ${median(post.drain).toFixed(0)} ms after the last response on PostgreSQL, ${median(lite.drain).toFixed(0)} ms on SQLite`,
    ...(post.server.length ? [`PostgreSQL server CPU ${median(post.server).toFixed(3)} ms/req besides`] : []),
  ].join("; ");
  return { ...summarise(`${name}, PostgreSQL store`, reps, note), vsSqlite };
}
