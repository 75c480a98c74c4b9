// The Argon2id hashing gate under a login burst at the real parameters (architecture.md D16): N concurrent
// logins (default 200; odd ones a wrong password for a real account, even ones unknown emails, each
// from its own client address) against an in-process API over an in-memory store, built as
// tests/helpers/api.ts builds it but with the production KDF (KDF_DEFAULTS) and the production gate
// (2 hashing, 64 waiting, as src/app/start.ts makes it). The AUTH tier is raised out of the way
// and the login throttle never locks, so the gate alone decides.
//
// Prints each status's count and latency, the wall time, and the RSS the burst added (sampled every
// 5 ms). Exits 1 when the answers break the gate's contract (a 500; a status other than 401/503/429;
// served ≠ min(N, 2 + 64); refused ≠ the rest; a 503 without the `unavailable` envelope and header) or
// when RSS grew by 400 MiB or more: never on timing. This was the 200-login test of
// tests/unit/server/ratelimit.test.ts; that file keeps the gate's bounds with cheap parameters and
// held hashes. Usage: `bun bench/logins.ts [--logins N] [--json]` (--json: one JSON line).

import { loadConfig } from "../src/config.ts";
import { createLogger } from "../src/log.ts";
import { createLoginThrottle, createRateLimiter, resolveSettings } from "../src/ratelimit/index.ts";
import { createApi } from "../src/server/app.ts";
import { openMemoryStore } from "../src/store/index.ts";
import { KDF_DEFAULTS } from "../src/crypto/kdf.ts";
import { createHashGate, unlockKeyring } from "../src/crypto/index.ts";
import { createAuthenticator, type Domain } from "../src/identity/index.ts";
import { percentile } from "./load.ts";

const CONCURRENCY = 2;
const QUEUE = 64;
const RSS_BOUND_MIB = 400;
const args = process.argv.slice(2);
const json = args.includes("--json");
const at = args.indexOf("--logins");
const logins = at < 0 ? 200 : Number(args[at + 1]);
if (!Number.isInteger(logins) || logins < 1) throw new Error("--logins takes a positive whole number");
const log = (s: string) => console.error(`[logins] ${s}`);

const now = Date.now;
const store = await openMemoryStore();
const keyring = await unlockKeyring(store, undefined, { now });
const { rateLimit: r } = loadConfig({
  BROKER_DATA_DIR: "/nonexistent/broker-bench-logins",
  BROKER_RATELIMIT_AUTH_BURST: "10000",
  BROKER_RATELIMIT_AUTH_RPS: "1000",
});
const domain: Domain = {
  store,
  dataKey: keyring.dataKey,
  auth: createAuthenticator(store, { now, cacheTtlMs: 0 }),
  hashing: createHashGate({ concurrency: CONCURRENCY, queue: QUEUE }),
  now,
  publicUrl: "http://broker.test",
  proxyUrl: "http://broker.test:14322",
  passwordKdf: undefined, // KDF_DEFAULTS, as in production
  rateLimiter: createRateLimiter(resolveSettings(r.profile, r.overrides, r.locked), now),
  loginThrottle: createLoginThrottle({ now, accountFailures: Number.POSITIVE_INFINITY, addressFailures: Number.POSITIVE_INFINITY }),
};
let serverErrors = 0;
const app = createApi({ domain, log: createLogger({ level: "error", write: () => void serverErrors++ }) });

async function call(path: string, body: unknown, ip: string): Promise<{ status: number; body: any; headers: Headers }> {
  // Hono's getConnInfo asks the Bun server for the peer address: stand one in (as tests/helpers/api.ts does).
  const env = { requestIP: () => ({ address: ip, family: "IPv4", port: 40000 }) };
  const res = await app.request(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }, env);
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers };
}

const PASSWORD = "correct horse battery";
log(`registering the account (one Argon2id at ${KDF_DEFAULTS.memoryKiB / 1024} MiB, ${KDF_DEFAULTS.iterations} iterations)…`);
const reg = await call("/v1/auth/register", { email: "owner@example.com", password: PASSWORD }, "198.51.100.1");
if (reg.status !== 201) throw new Error(`register: ${reg.status} ${JSON.stringify(reg.body)}`);

log(`${logins} concurrent logins…`);
Bun.gc(true);
const mib = (b: number) => b / 2 ** 20;
const before = process.memoryUsage.rss();
let peak = before;
const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5);
const t0 = performance.now();
const results = await Promise.all(
  Array.from({ length: logins }, async (_, i) => {
    const started = performance.now();
    const res = await call(
      "/v1/auth/login",
      { email: i % 2 ? "owner@example.com" : `nobody${i}@example.com`, password: "wrong password" },
      `10.0.${i >> 8}.${i & 255}`,
    );
    peak = Math.max(peak, process.memoryUsage.rss());
    return { ...res, ms: performance.now() - started };
  }),
);
const wallMs = performance.now() - t0;
clearInterval(sampler);
peak = Math.max(peak, process.memoryUsage.rss());

const byStatus: Record<number, number[]> = {};
for (const res of results) (byStatus[res.status] ??= []).push(res.ms);
const counts = Object.fromEntries(Object.entries(byStatus).map(([s, ms]) => [s, ms.length])) as Record<string, number>;
const latency = Object.fromEntries(
  Object.entries(byStatus).map(([s, ms]) => {
    const sorted = Float64Array.from(ms).sort();
    return [s, { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1]! }];
  }),
);
const served = Math.min(logins, CONCURRENCY + QUEUE);
const growthMib = mib(peak - before);

// The contract (not timing): what the moved test asserted.
const failures: string[] = [];
if (counts[500]) failures.push(`${counts[500]} answered 500`);
const others = Object.keys(counts).filter((s) => !["401", "503", "429"].includes(s));
if (others.length) failures.push(`statuses other than 401/503/429: ${others.join(", ")}`);
if ((counts[401] ?? 0) !== served) failures.push(`401 ×${counts[401] ?? 0}, expected ${served} (${CONCURRENCY} hashing + ${QUEUE} waiting)`);
if ((counts[503] ?? 0) !== logins - served) failures.push(`503 ×${counts[503] ?? 0}, expected ${logins - served}`);
const badRefusals = results.filter((r) => r.status === 503 && (r.body?.error !== "unavailable" || r.headers.get("x-broker-error") !== "unavailable"));
if (badRefusals.length) failures.push(`${badRefusals.length} 503s without the "unavailable" error and x-broker-error header`);
if (growthMib >= RSS_BOUND_MIB) failures.push(`RSS grew by ${growthMib.toFixed(0)} MiB (bound ${RSS_BOUND_MIB} MiB)`);
if (serverErrors) failures.push(`${serverErrors} error log lines`);

const report = {
  logins,
  kdf: KDF_DEFAULTS,
  gate: { concurrency: CONCURRENCY, queue: QUEUE },
  counts,
  latencyMs: latency,
  wallMs,
  hashesPerSec: ((counts[401] ?? 0) * 1000) / wallMs,
  rssMib: { before: mib(before), peak: mib(peak), growth: growthMib, bound: RSS_BOUND_MIB },
  failures,
};
if (json) console.log(JSON.stringify(report));
else {
  const fmt = (x: number) => x.toFixed(0);
  console.log(
    `${logins} concurrent logins, Argon2id ${KDF_DEFAULTS.iterations} iterations × ${KDF_DEFAULTS.memoryKiB / 1024} MiB × ${KDF_DEFAULTS.parallelism} lanes, gate ${CONCURRENCY} hashing + ${QUEUE} waiting`,
  );
  for (const [s, l] of Object.entries(latency)) console.log(`  ${s} ×${counts[s]}: p50 ${fmt(l.p50)} ms, p99 ${fmt(l.p99)} ms, max ${fmt(l.max)} ms`);
  console.log(`  wall ${(wallMs / 1000).toFixed(1)} s, ${report.hashesPerSec.toFixed(2)} served logins/s`);
  console.log(`  RSS ${fmt(mib(before))} MiB before, ${fmt(mib(peak))} MiB peak: +${fmt(growthMib)} MiB (bound ${RSS_BOUND_MIB} MiB)`);
  console.log(failures.length ? `FAILED: ${failures.join("; ")}` : "contract held: none 500, the excess refused 503, RSS within the bound");
}
store.close();
process.exit(failures.length ? 1 : 0);
