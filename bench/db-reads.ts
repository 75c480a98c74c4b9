// Counts database statements per proxied request in steady state, on the embedded SQLite store and,
// when PostgreSQL is installed, on PostgreSQL too (a throwaway cluster, or BENCH_POSTGRES_URL). The
// broker runs in-process here (startServer + the CLI's tunnel starter) so store.db can be wrapped
// with counters after warm-up; then requests go through the CONNECT tunnel and through /proxy.
// Reads must be zero (architecture.md D11); writes are the audit batches, reported separately. On
// PostgreSQL the change feed's heartbeat NOTIFY is counted apart, on a LISTEN connection of our own:
// it reads no table and is sent on a timer, whatever the traffic.
// `--json` prints one JSON line; `--no-postgres` skips the second count.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../src/config.ts";
import { createLogger } from "../src/log.ts";
import { startServer } from "../src/app/start.ts";
import type { Sql } from "../src/store/index.ts";
import { benchEnv, setUp } from "./broker.ts";
import { runLoad, type Target } from "./load.ts";
import { createBenchPki, type BenchPki } from "./pki.ts";
import { countChannel, startBenchCluster, type ChannelCounter } from "./postgres.ts";
import { startUpstream } from "./upstream.ts";

export interface ReadCount {
  readonly backend: "sqlite" | "postgres";
  readonly requests: number;
  readonly reads: number;
  readonly writes: number;
  readonly transactions: number;
  readonly readsPerRequest: number;
  readonly writesPerRequest: number;
  readonly readsPerRequestByPath: Record<string, number>;
  readonly failures: number;
  readonly statements: Record<string, number>;
  readonly readStacks: readonly string[];
  /** How long the counting window lasted (requests, then 400 ms for the last audit batch). */
  readonly windowMs: number;
  /** PostgreSQL only: NOTIFYs on the change channel during the window. */
  readonly notify?: { readonly beats: number; readonly changes: number };
  /**
   * A longer window at a steady rate (full runs only): catches what happens on a timer rather than
   * per request (cached sessions and grants are re-checked every 5 s).
   */
  readonly sustained?: {
    readonly ms: number;
    readonly requests: number;
    readonly reads: number;
    readonly writes: number;
    readonly statements: Record<string, number>;
    readonly notify?: { readonly beats: number; readonly changes: number };
  };
}

export interface DbReads {
  readonly sqlite: ReadCount;
  readonly postgres?: ReadCount;
  /** Why there is no PostgreSQL count, when there is none. */
  readonly postgresNote?: string;
}

const quick = process.argv.includes("--quick");
const N = quick ? 100 : 250; // per path: tunnel and /proxy
const SUSTAIN_MS = quick ? 0 : 6000;

interface Counts {
  stacks: string[];
  reads: number;
  writes: number;
  transactions: number;
  statements: Map<string, number>;
}

/** Wraps a Db (or a transaction's Sql) so statements are counted while `counting()` is true. */
function createCounter(counting: () => boolean) {
  const counts: Counts = { stacks: [], reads: 0, writes: 0, transactions: 0, statements: new Map() };
  const wrapped = new WeakSet<object>();
  let depth = 0;
  const isRead = (q: string) => /^\s*(SELECT|WITH)\b/i.test(q);
  function wrap(sql: Sql): void {
    if (wrapped.has(sql)) return;
    wrapped.add(sql);
    for (const m of ["all", "get", "run"] as const) {
      const orig = (sql[m] as (...a: unknown[]) => Promise<unknown>).bind(sql);
      (sql as unknown as Record<string, unknown>)[m] = (q: string, params?: unknown) => {
        // sqlite's get() calls all() synchronously: count the outermost call only
        if (counting() && depth === 0) {
          if (m !== "run" && isRead(q)) {
            counts.reads++;
            if (counts.stacks.length < 2)
              counts.stacks.push(
                (new Error().stack ?? "")
                  .split("\n")
                  .slice(2, 7)
                  .map((l) =>
                    l
                      .trim()
                      .replace(/^at /, "")
                      .replace(/\(.*\/(src|bench)\//, "($1/"),
                  )
                  .join(" ← "),
              );
          } else counts.writes++;
          const flat = q.replace(/\s+/g, " ").trim();
          const key = flat.length > 90 ? `${flat.slice(0, 40)} … ${flat.slice(-45)}` : flat;
          counts.statements.set(key, (counts.statements.get(key) ?? 0) + 1);
        }
        depth++;
        try {
          return orig(q, params);
        } finally {
          depth--;
        }
      };
    }
  }
  return { counts, wrap };
}

async function countReads(pki: BenchPki, upstreamPort: number, database?: string): Promise<ReadCount> {
  const dir = mkdtempSync(join(tmpdir(), "broker-bench-db-"));
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, pki.caPem);
  const config = loadConfig({ ...benchEnv(dir, caFile), ...(database && { BROKER_DATABASE_URL: database }) });
  const server = await startServer({ config, log: createLogger({ level: "warn", write: (l) => console.error(l) }), masterPassword: undefined, tunnel: true });
  const channel = database ? await countChannel(database) : undefined;
  let counting = false;
  const { counts, wrap } = createCounter(() => counting);
  try {
    const { token, vault } = await setUp(server.apiUrl, upstreamPort);
    const proxyPort = Number(server.proxyAddress!.split(":").at(-1));
    const caPem = await fetch(`${server.apiUrl}/v1/ca.pem`).then((r) => r.text());
    const proxy = `http://${token}:${vault}@127.0.0.1:${proxyPort}`;
    const tunnel = { url: `https://localhost:${upstreamPort}/small`, init: { proxy, tls: { ca: caPem } } };
    const explicit = { url: `${server.apiUrl}/proxy/localhost:${upstreamPort}/small`, init: { headers: { authorization: `Bearer ${token}` } } };
    const db = server.store.db;
    wrap(db);
    const tx = db.transaction.bind(db);
    (db as { transaction: typeof db.transaction }).transaction = (fn) =>
      tx((inner) => {
        if (counting) counts.transactions++;
        wrap(inner);
        return fn(inner);
      });
    // warm-up: session and vault look-ups cached, service table compiled, credential decrypted, leaf minted
    for (const t of [tunnel, explicit]) {
      const w = await runLoad(t, { requests: 50, concurrency: 4 });
      if (w.errors || w.non2xx) throw new Error(`warm-up failed: ${w.firstError}`);
    }
    await Bun.sleep(400); // let the warm-up's audit batch land
    counting = true;
    channel?.reset();
    const t0 = performance.now();
    let failures = 0;
    const perPath: Record<string, number> = {};
    for (const [name, t] of [
      ["tunnel", tunnel],
      ["/proxy", explicit],
    ] as const) {
      const before = counts.reads;
      const r = await runLoad(t, { requests: N, concurrency: 8 });
      failures += r.errors + r.non2xx;
      perPath[name] = (counts.reads - before) / N;
    }
    await Bun.sleep(400); // audit batches written after the requests still belong to them
    counting = false;
    const windowMs = performance.now() - t0;
    const notify = channel?.counts();
    const requests = 2 * N;
    const perRequest: ReadCount = {
      backend: database ? "postgres" : "sqlite",
      requests,
      reads: counts.reads,
      writes: counts.writes,
      transactions: counts.transactions,
      readsPerRequest: counts.reads / requests,
      writesPerRequest: counts.writes / requests,
      readsPerRequestByPath: perPath,
      failures,
      statements: Object.fromEntries(counts.statements),
      readStacks: [...counts.stacks],
      windowMs,
      ...(notify && { notify }),
    };
    const sustained = SUSTAIN_MS ? await sustain(counts, (on) => (counting = on), [tunnel, explicit], channel) : undefined;
    return { ...perRequest, ...(sustained && { sustained }) };
  } finally {
    await channel?.stop();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Steady traffic for SUSTAIN_MS, alternating the two paths in batches; counts start from zero. */
async function sustain(
  counts: Counts,
  setCounting: (on: boolean) => void,
  targets: Target[],
  channel: ChannelCounter | undefined,
): Promise<NonNullable<ReadCount["sustained"]>> {
  Object.assign(counts, { reads: 0, writes: 0, transactions: 0, statements: new Map() });
  channel?.reset();
  setCounting(true);
  const t0 = performance.now();
  let requests = 0;
  for (let i = 0; performance.now() - t0 < SUSTAIN_MS; i++) {
    const r = await runLoad(targets[i % targets.length]!, { requests: 100, concurrency: 4 });
    if (r.errors || r.non2xx) throw new Error(`sustained load failed: ${r.firstError}`);
    requests += r.requests;
  }
  await Bun.sleep(400);
  setCounting(false);
  const notify = channel?.counts();
  return {
    ms: performance.now() - t0,
    requests,
    reads: counts.reads,
    writes: counts.writes,
    statements: Object.fromEntries(counts.statements),
    ...(notify && { notify }),
  };
}

/** The PostgreSQL count: on BENCH_POSTGRES_URL when given (bench/run.ts shares its cluster), else on a cluster of its own. */
async function countOnPostgres(pki: BenchPki, upstreamPort: number): Promise<{ count?: ReadCount; note?: string }> {
  const given = process.env.BENCH_POSTGRES_URL;
  if (given) return { count: await countReads(pki, upstreamPort, given) };
  const cluster = await startBenchCluster();
  if (typeof cluster === "string") return { note: cluster };
  try {
    return { count: await countReads(pki, upstreamPort, await cluster.createDatabase()) };
  } finally {
    await cluster.destroy();
  }
}

if (import.meta.main) {
  const pki = await createBenchPki();
  const upstream = startUpstream(pki);
  try {
    const sqlite = await countReads(pki, upstream.port);
    const pg = process.argv.includes("--no-postgres") ? { note: "PostgreSQL count skipped (--no-postgres)" } : await countOnPostgres(pki, upstream.port);
    const result: DbReads = { sqlite, ...(pg.count && { postgres: pg.count }), ...(pg.note && { postgresNote: pg.note }) };
    if (process.argv.includes("--json")) console.log(JSON.stringify(result));
    else console.log(JSON.stringify(result, null, 2));
    if (sqlite.failures || pg.count?.failures) process.exitCode = 1;
  } finally {
    upstream.stop();
  }
}
