// Counts database statements per proxied request in steady state. The broker runs in-process here
// (startServer + the CLI's tunnel starter) so store.db can be wrapped with counters after warm-up;
// then requests go through the CONNECT tunnel and through /proxy. Reads must be zero (DESIGN.md
// §3.11); writes are the audit batches, reported separately. `--json` prints one JSON line.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTunnel } from "../src/cli/commands/server.ts";
import { loadConfig } from "../src/config.ts";
import { createLogger } from "../src/log.ts";
import { startServer } from "../src/server/serve.ts";
import type { Sql } from "../src/store/index.ts";
import { setUp } from "./broker.ts";
import { runLoad } from "./load.ts";
import { createBenchPki } from "./pki.ts";
import { startUpstream } from "./upstream.ts";

const quick = process.argv.includes("--quick");
const N = quick ? 100 : 250; // per path: tunnel and /proxy

const pki = await createBenchPki();
const upstream = startUpstream(pki);
const dir = mkdtempSync(join(tmpdir(), "broker-bench-db-"));
const caFile = join(dir, "upstream-ca.pem");
writeFileSync(caFile, pki.caPem);
const config = loadConfig({
  HOME: dir,
  BROKER_DATA_DIR: join(dir, "data"),
  BROKER_PORT: "0",
  BROKER_PROXY_PORT: "0",
  BROKER_NETWORK_ALLOWLIST: "127.0.0.1/32",
  BROKER_UPSTREAM_CA_FILE: caFile,
  BROKER_RATELIMIT_PROFILE: "off",
  BROKER_LOG_LEVEL: "warn",
});
const server = await startServer({ config, log: createLogger({ level: "warn", write: (l) => console.error(l) }), masterPassword: undefined, startTunnel });
const counts = { stacks: [] as string[], reads: 0, writes: 0, transactions: 0, statements: new Map<string, number>() };
let counting = false;
let depth = 0;

const wrapped = new WeakSet<object>();
function wrap(sql: Sql): void {
  if (wrapped.has(sql)) return;
  wrapped.add(sql);
  const isRead = (q: string) => /^\s*(SELECT|WITH)\b/i.test(q);
  for (const m of ["all", "get", "run"] as const) {
    const orig = (sql[m] as (...a: unknown[]) => Promise<unknown>).bind(sql);
    (sql as unknown as Record<string, unknown>)[m] = (q: string, params?: unknown) => {
      // sqlite's get() calls all() synchronously: count the outermost call only
      if (counting && depth === 0) {
        if (m !== "run" && isRead(q)) {
          counts.reads++;
          if (counts.stacks.length < 2) counts.stacks.push((new Error().stack ?? "").split("\n").slice(2, 7).map((l) => l.trim().replace(/^at /, "").replace(/\(.*\/(src|bench)\//, "($1/")).join(" ← "));
        }
        else counts.writes++;
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

try {
  const { token, vault } = await setUp(server.apiUrl, upstream.port);
  const proxyPort = Number(server.proxyAddress!.split(":").at(-1));
  const caPem = await fetch(`${server.apiUrl}/v1/ca.pem`).then((r) => r.text());
  const proxy = `http://${token}:${vault}@127.0.0.1:${proxyPort}`;
  const tunnel = { url: `https://localhost:${upstream.port}/small`, init: { proxy, tls: { ca: caPem } } };
  const explicit = { url: `${server.apiUrl}/proxy/localhost:${upstream.port}/small`, init: { headers: { authorization: `Bearer ${token}` } } };
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
  let failures = 0;
  const perPath: Record<string, number> = {};
  for (const [name, t] of [["tunnel", tunnel], ["/proxy", explicit]] as const) {
    const before = counts.reads;
    const r = await runLoad(t, { requests: N, concurrency: 8 });
    failures += r.errors + r.non2xx;
    perPath[name] = (counts.reads - before) / N;
  }
  counting = false;
  // audit batches written after the requests still belong to them
  counting = true;
  await Bun.sleep(400);
  counting = false;
  const requests = 2 * N;
  const result = { requests, reads: counts.reads, writes: counts.writes, transactions: counts.transactions, readsPerRequest: counts.reads / requests, readsPerRequestByPath: perPath, failures, statements: Object.fromEntries(counts.statements), readStacks: counts.stacks };
  if (process.argv.includes("--json")) console.log(JSON.stringify(result));
  else console.log(result);
  if (failures) process.exitCode = 1;
} finally {
  await server.stop();
  upstream.stop();
  rmSync(dir, { recursive: true, force: true });
}
