// `bun run bench` [--quick] [--micro] [--no-micro] [--no-postgres]: the one-command benchmark of the
// broker. Starts a local HTTPS upstream, an HTTP/2 one (bench/h2.ts) and the compiled broker, runs
// every scenario through the broker and directly (same run, repetitions, medians), then the
// micro-benchmarks and the DB-read count, and writes bench/results/<date>.md and .svg. When
// PostgreSQL is installed (and not --no-postgres), a second broker on a throwaway cluster runs the
// tunnel keep-alive scenario in the same repetitions as the SQLite one, and the DB-read count runs on
// PostgreSQL too.
// --quick: a smoke run that fails on errors, never on timing.
// --peers: Squid ssl-bump (bench/squid.ts; squid-openssl installed when missing) injecting the same
// header runs the tunnel 1 and 16 keep-alive and cold-connection scenarios in the same repetitions;
// the report gets Squid columns and a direct / Squid / broker table. mitmproxy (bench/mitmproxy.ts;
// installed when missing), setting the same header, runs the h2 row's HTTP/2 load the same way and has
// its line in that table.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary, startBroker } from "./broker.ts";
import { h2Scenario, startH2Upstream } from "./h2.ts";
import { heyScenario } from "./hey.ts";
import { createBenchPki } from "./pki.ts";
import type { DbReads } from "./db-reads.ts";
import { serverCpuMs, startBenchCluster, type PgCluster } from "./postgres.ts";
import { chart, checkTargets, dbSection, machine, peersTable, table, targetTable } from "./report.ts";
import { referenceScenario } from "./secret-store-ref.ts";
import { bulkScenario, coldScenario, fetchScenario, FULL, idleScenario, QUICK, storeScenario, targets, warmUp, type Env, type Row } from "./scenarios.ts";
import { startMitmproxy, type MitmproxyProc } from "./mitmproxy.ts";
import { startSquid, type SquidProc } from "./squid.ts";
import { startUpstream } from "./upstream.ts";
import { runLoad } from "./load.ts";
import { workersScenario } from "./workers.ts";

const args = new Set(process.argv.slice(2));
const quick = args.has("--quick");
const microOnly = args.has("--micro");
const withPostgres = !args.has("--no-postgres");
const withPeers = args.has("--peers");
const size = quick ? QUICK : FULL;
/** The PostgreSQL/SQLite ratio is what the row is for: a few more repetitions than the other rows. */
const pgReps = quick ? 1 : Math.max(size.reps, 7);
const log = (s: string) => console.error(`[bench] ${s}`);
/** Streams in flight on the h2 row's one connection. */
const H2_STREAMS = 64;
const started = performance.now();

/** Runs a bench script in its own process (in-process broker or micro-benchmarks); returns its JSON. */
async function runScript(file: string, extra: string[] = [], env: Record<string, string> = {}): Promise<any> {
  const p = Bun.spawn([process.execPath, join(import.meta.dir, file), "--json", ...extra], {
    stdout: "pipe",
    stderr: "inherit",
    env: { ...process.env, ...env },
  });
  const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
  if (code !== 0) throw new Error(`${file} exited with ${code}`);
  return JSON.parse(out.trim().split("\n").at(-1)!);
}

function microTable(micro: Record<string, number>): string {
  const fmt = (ns: number) => (ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms` : ns >= 1e3 ? `${(ns / 1e3).toFixed(2)} µs` : `${ns.toFixed(0)} ns`);
  return [
    "| micro-benchmark | per op |",
    "|---|---:|",
    ...Object.entries(micro).map(([k, v]) => (k.endsWith("/s") ? `| ${k} | ${v.toFixed(0)} |` : `| ${k} | ${fmt(v)} |`)),
  ].join("\n");
}

if (microOnly) {
  const micro = await runScript("micro.ts", quick ? ["--quick"] : []);
  console.log(microTable(micro));
  process.exit(0);
}

const pki = await createBenchPki();
const upstream = startUpstream(pki, { countAuth: withPeers });
const h2Upstream = await startH2Upstream(pki);
const bin = ensureBinary(log);
const broker = await startBroker(bin, pki.caPem, [upstream.port, h2Upstream.port]);
let squid: SquidProc | undefined;
let mitmproxy: MitmproxyProc | undefined;
if (withPeers) {
  log("starting Squid (ssl-bump, request_header_add)…");
  try {
    squid = await startSquid({ upstreamCaPem: pki.caPem, authorization: broker.authorization, log });
  } catch (err) {
    await broker.stop();
    upstream.stop();
    throw err;
  }
  log(`Squid ${squid.version} on 127.0.0.1:${squid.port}`);
  log("starting mitmproxy (mitmdump, modify_headers; the h2 row's peer)…");
  try {
    mitmproxy = await startMitmproxy({ upstreamCaPem: pki.caPem, authorization: broker.authorization, log });
  } catch (err) {
    await squid.stop();
    await broker.stop();
    upstream.stop();
    throw err;
  }
  log(`mitmproxy ${mitmproxy.version} on 127.0.0.1:${mitmproxy.port}`);
}
const env: Env = {
  broker,
  upstreamPort: upstream.port,
  upstreamCa: pki.caPem,
  peers: squid ? { squid, authCount: upstream.authCount, mitmproxy } : undefined,
};
const rows: Row[] = [];
const notes: string[] = [];
const t = targets(env);
const step = async (name: string, fn: () => Promise<Row | string>) => {
  log(`${name}…`);
  const r = await fn();
  if (typeof r === "string") notes.push(r);
  else rows.push(r);
};

let cluster: PgCluster | undefined;
/** The tunnel keep-alive row again, through a second broker whose store is PostgreSQL, alternating with the SQLite one. */
async function postgresStep(env: Env, reps: number): Promise<Row | string> {
  const pgCluster = await startBenchCluster();
  if (typeof pgCluster === "string") return pgCluster;
  cluster = pgCluster;
  const pg = await startBroker(bin, pki.caPem, upstream.port, { BROKER_DATABASE_URL: await pgCluster.createDatabase() });
  try {
    await warmUp({ ...env, broker: pg }, size.warm); // as warm as the SQLite broker, or the JIT counts against the store
    const row = await storeScenario(env, pg, "tunnel, 16 keep-alive, /small", "/small", {
      requests: size.conc,
      concurrency: 16,
      reps,
      serverCpuMs: () => serverCpuMs(pgCluster),
    });
    const lost = pg.logs().match(/"event":"database_announcements_lost"/g)?.length ?? 0;
    return lost ? { ...row, note: `${row.note}; announcements lost ${lost}× during the row` } : row;
  } finally {
    await pg.stop();
  }
}

try {
  const { reps } = size;
  // first, while the broker's heap is small: the RSS the idle tunnels add is then easy to read
  await step("idle tunnels", () => idleScenario(env, size.idle));
  log(`JIT warm-up: ${await warmUp(env, size.warm)} requests`);
  if (squid) {
    // Squid is native code, but its caches (certificates minted for the host, connections) fill as the broker's do.
    const warmed = await runLoad(t.viaSquid!("/small"), { requests: size.warm, concurrency: 16 });
    if (warmed.errors) throw new Error(`Squid warm-up failed: ${warmed.firstError}`);
    log(`Squid warm-up: ${size.warm} requests`);
  }
  await step("tunnel 1 keep-alive", () =>
    fetchScenario(
      env,
      "tunnel, 1 keep-alive, /small",
      { direct: t.direct("/small"), broker: t.viaTunnel("/small"), squid: t.viaSquid?.("/small") },
      { requests: size.seq, concurrency: 1, reps },
    ),
  );
  await step("tunnel 16 keep-alive", () =>
    fetchScenario(
      env,
      "tunnel, 16 keep-alive, /small",
      { direct: t.direct("/small"), broker: t.viaTunnel("/small"), squid: t.viaSquid?.("/small") },
      { requests: size.conc, concurrency: 16, reps },
    ),
  );
  await step("tunnel 16 keep-alive, --workers 2", async () => {
    const two = await startBroker(bin, pki.caPem, [upstream.port, h2Upstream.port], { BROKER_WORKERS: "2" });
    try {
      return await workersScenario(env, two, { requests: size.conc, concurrency: 16, reps, warm: size.warm });
    } finally {
      await two.stop();
    }
  });
  if (withPostgres) await step("tunnel 16 keep-alive, PostgreSQL store", () => postgresStep(env, pgReps));
  await step("tunnel 1 MiB", () =>
    fetchScenario(
      env,
      "tunnel, 16 keep-alive, /1mib",
      { direct: t.direct("/1mib"), broker: t.viaTunnel("/1mib") },
      { requests: size.big, concurrency: 16, reps, expectBytes: 1 << 20 },
    ),
  );
  await step("tunnel stream", () =>
    fetchScenario(
      env,
      "tunnel, 16 keep-alive, /stream (8 chunks)",
      { direct: t.direct("/stream"), broker: t.viaTunnel("/stream") },
      { requests: size.big * 2, concurrency: 16, reps, expectBytes: 8 * 16 * 1024 },
    ),
  );
  // Echo redaction decodes, scans and (only when something matched, or when streamed) re-encodes compressed bodies.
  await step("tunnel gzip JSON", () =>
    fetchScenario(
      env,
      "tunnel, 16 keep-alive, /gzip-json (4 KiB JSON, gzip)",
      { direct: t.direct("/gzip-json"), broker: t.viaTunnel("/gzip-json") },
      { requests: size.conc, concurrency: 16, reps },
    ),
  );
  await step("tunnel gzip stream", () =>
    fetchScenario(
      env,
      "tunnel, 16 keep-alive, /gzip-stream (256 KiB JSON, gzip, chunked)",
      { direct: t.direct("/gzip-stream"), broker: t.viaTunnel("/gzip-stream") },
      { requests: size.big, concurrency: 16, reps },
    ),
  );
  await step("/proxy gzip JSON", () =>
    fetchScenario(
      env,
      "/proxy, 16 keep-alive, /gzip-json (4 KiB JSON, gzip)",
      { direct: t.direct("/gzip-json"), broker: t.viaProxy("/gzip-json") },
      { requests: size.conc, concurrency: 16, reps },
    ),
  );
  await step("reference vs stored value", () => referenceScenario(env, { requests: size.conc, concurrency: 16, reps }));
  await step("cold connections", () => coldScenario(env, size.cold, reps));
  await step("/proxy 1 keep-alive", () =>
    fetchScenario(
      env,
      "/proxy, 1 keep-alive, /small",
      { direct: t.direct("/small"), broker: t.viaProxy("/small") },
      { requests: size.seq, concurrency: 1, reps },
    ),
  );
  await step("/proxy 16 keep-alive", () =>
    fetchScenario(
      env,
      "/proxy, 16 keep-alive, /small",
      { direct: t.direct("/small"), broker: t.viaProxy("/small") },
      { requests: size.conc, concurrency: 16, reps },
    ),
  );
  await step("blind 1 keep-alive", () =>
    fetchScenario(
      env,
      "blind tunnel, 1 keep-alive, /small",
      { direct: t.direct("/small", "127.0.0.1"), broker: t.viaBlind("/small") },
      { requests: size.seq, concurrency: 1, reps },
    ),
  );
  await step("blind 16 keep-alive", () =>
    fetchScenario(
      env,
      "blind tunnel, 16 keep-alive, /small",
      { direct: t.direct("/small", "127.0.0.1"), broker: t.viaBlind("/small") },
      { requests: size.conc, concurrency: 16, reps },
    ),
  );
  // One HTTP/2 connection through the tunnel, 64 streams in flight; warmed like warmUp's other paths.
  await step(`h2 1 connection × ${H2_STREAMS} streams`, () =>
    h2Scenario(env, h2Upstream, { requests: size.h2, streams: H2_STREAMS, reps, warm: Math.ceil(size.warm / 4) }),
  );
  await step("hey", () => heyScenario(env, size.conc, reps));
  await step("bulk upload", () => bulkScenario(env, "upload", size.bulkBytes, reps));
  await step("bulk download", () => bulkScenario(env, "download", size.bulkBytes, reps));
} catch (err) {
  await cluster?.destroy();
  throw err;
} finally {
  await squid?.stop();
  await mitmproxy?.stop();
  await broker.stop();
  upstream.stop();
  await h2Upstream.stop();
}

let micro: Record<string, number> = {};
let db: DbReads | undefined;
if (!args.has("--no-micro")) {
  log("micro-benchmarks…");
  micro = await runScript("micro.ts", quick ? ["--quick"] : []);
}
log(`database reads per proxied request (in-process broker: SQLite${withPostgres ? ", then PostgreSQL" : ""})…`);
try {
  // The cluster started for the throughput row is reused: one database more, handed over in the environment.
  const pgEnv: Record<string, string> = cluster ? { BENCH_POSTGRES_URL: await cluster.createDatabase() } : {};
  db = await runScript("db-reads.ts", [...(quick ? ["--quick"] : []), ...(withPostgres ? [] : ["--no-postgres"])], pgEnv);
} finally {
  await cluster?.destroy();
}

const date = new Date().toISOString().slice(0, 10);
const ts = checkTargets(rows, micro, db);
const title = `broker bench ${date}${quick ? " (quick)" : ""}`;
const md = `# ${title}

Machine: ${machine()}. Repetitions: ${size.reps} per scenario, medians quoted. Wall time: ${((performance.now() - started) / 1000).toFixed(0)} s.
Broker: dist/broker as a subprocess, BROKER_LOG_LEVEL=warn, BROKER_RATELIMIT_PROFILE=off; client: Bun fetch (keep-alive, certificates verified) unless noted.${rows.some((r) => r.vsSqlite) ? `\nPostgreSQL store row: a second dist/broker with BROKER_DATABASE_URL on a throwaway local cluster (tests/helpers/postgres.ts: loopback, fsync and synchronous_commit off), alternating with the SQLite broker in each of ${pgReps} repetitions; its CPU and RSS are the broker's only, not the PostgreSQL server's.` : ""}
JIT warm-up: after the idle-tunnel row, ${size.warm} requests through the tunnel and a quarter as many through /proxy, a blind tunnel and the gzip path before any timed row (a long-running broker's state; the first ~20,000 requests after a start cost more while JavaScriptCore compiles).
"added" = broker percentile − direct percentile in the same repetition; CPU = broker utime+stime (/proc/<pid>/stat) / requests; peak RSS sampled every 50 ms (bulk and idle rows: growth in parentheses).

${table(rows)}
${squid ? `\n## Against Squid and mitmproxy (--peers)\n\nSquid ${squid.version} (squid-openssl), \`ssl-bump\` with \`peek\` at step 1 then \`bump\`, the broker's header added with \`request_header_add\` (the upstream counted it on every request), no cache, no access log, one worker; the same clients trust its bump CA. Same repetitions as the broker: direct, broker, Squid in turn; medians. Squid CPU: the squid process's utime+stime / requests.${mitmproxy ? `\n\nmitmproxy ${mitmproxy.version} (mitmdump, Debian's package) for the h2 row, which Squid cannot serve (it does not speak HTTP/2): regular mode, its own CA in a fresh confdir, HTTP/2 on both legs, the broker's header set with \`modify_headers\` (the h2 upstream counted it on every stream), no flow file, warnings only; the same HTTP/2 client, one connection and ${H2_STREAMS} streams in flight, after direct and broker in each repetition. mitmproxy CPU: the mitmdump process's utime+stime / requests.` : ""}\n\n${peersTable(rows)}\n` : ""}${notes.length ? `\n${notes.map((n) => `- ${n}`).join("\n")}\n` : ""}
## Targets (issue 17)

${targetTable(ts)}

## Micro-benchmarks

${Object.keys(micro).length ? microTable(micro) : "skipped (--no-micro)"}

## Database access per proxied request (steady state, in-process broker)

${dbSection(db)}
`;
console.log(md);
const dir = join(import.meta.dir, "results");
mkdirSync(dir, { recursive: true });
const base = quick ? `${date}-quick` : date;
writeFileSync(join(dir, `${base}.md`), md);
writeFileSync(join(dir, `${base}.svg`), chart(rows, `${title}: ${machine()}`));
log(`wrote bench/results/${base}.md and .svg in ${((performance.now() - started) / 1000).toFixed(0)} s`);

const failed = rows.filter((r) => r.errors || r.non2xx);
if (failed.length) {
  for (const r of failed) log(`FAILED: ${r.name}: ${r.errors} errors, ${r.non2xx} non-2xx${r.firstError ? ` (${r.firstError})` : ""}`);
  process.exit(1);
}
