// Micro-benchmarks of the hot pieces, in-process over an in-memory store: leaf mint (first and
// cached), host matching over 1,000 services, header rewriting, the guard's classification,
// credential decryption vs a plan-cache hit, audit batching, the host-wide needle set (architecture.md D22) with
// 1, 100 and 1,000 vaults sharing one host. `--json` prints one JSON line (name → ns per op, or
// records/s for names ending in "/s"); the text output adds the host-wide set's ratios.

import { buildUpstreamHeaders } from "../src/egress/headers.ts";
import { createAuditLog, createPlanCache } from "../src/egress/index.ts";
import { checkAddress, compileNetPolicy } from "../src/egress/netguard.ts";
import type { EgressPlan } from "../src/egress/plan.ts";
import { Needles, redactWhole } from "../src/egress/redact.ts";
import { redactHeaders } from "../src/egress/redact-headers.ts";
import { parseRequestHead } from "../src/http/index.ts";
import { allowedTarget, heldByRule } from "../src/egress/rules.ts";
import { createLogger } from "../src/log.ts";
import { Secret } from "../src/secret.ts";
import { openMemoryStore } from "../src/store/index.ts";
import { createMetrics } from "../src/server/kit/metrics.ts";
import { createLeafCache, decryptCredential, loadRootCa, mintLeaf, storeCredential, unlockKeyring } from "../src/crypto/index.ts";
import { RulesList } from "../src/policy/index.ts";

const quick = process.argv.includes("--quick");
const scale = quick ? 0.1 : 1;
const results: Record<string, number> = {};

/** Mean ns per call of `fn` over `n` calls (after a short warm-up). */
async function bench(name: string, n: number, fn: (i: number) => unknown | Promise<unknown>, warm = Math.min(1000, n)): Promise<void> {
  n = Math.max(10, Math.round(n * scale));
  for (let i = 0; i < warm; i++) await fn(i);
  const t0 = Bun.nanoseconds();
  for (let i = 0; i < n; i++) await fn(i);
  results[name] = (Bun.nanoseconds() - t0) / n;
}

const store = await openMemoryStore();
const { dataKey } = await unlockKeyring(store, undefined);
const ca = await loadRootCa(store, dataKey);

// leaf: a new host each time (the mint a first CONNECT to a host pays), then cache hits
let host = 0;
await bench("leaf mint (first)", 50, () => mintLeaf(ca, `host-${host++}.example.com`), 5);
const leaves = createLeafCache((h) => mintLeaf(ca, h), { max: 10_000, now: Date.now });
await leaves.get("api.example.com");
await bench("leaf cache hit", 200_000, () => leaves.get("api.example.com"));

// a vault with 1,000 services (900 exact, 100 wildcard) and one credential
const now = Date.now();
const vault = await store.vaults.create("micro", now);
const svc = (h: string) => ({
  vaultId: vault.id,
  host: h,
  description: "",
  authType: "bearer" as const,
  authKey: "API_KEY",
  authHeader: null,
  authPrefix: null,
  authUsername: null,
  enabled: true,
});
for (let i = 0; i < 900; i++) await store.services.put(svc(`api${i}.example.com`), now);
for (let i = 0; i < 100; i++) await store.services.put(svc(`*.w${i}.example.org`), now);
await storeCredential(store, dataKey, vault.id, "API_KEY", new Secret(`sk-${crypto.randomUUID()}`));
const plans = createPlanCache(store, dataKey, () => ({}));
const v = { id: vault.id, name: vault.name };
await plans.plan(v, "api1.example.com", 443); // compiles the table and decrypts the credential
const hosts = Array.from({ length: 1024 }, (_, i) =>
  i % 4 === 0 ? `x.w${i % 100}.example.org` : i % 4 === 1 ? `nomatch${i}.example.net` : `api${i % 900}.example.com`,
);
await bench("host match over 1,000 services (has)", 500_000, (i) => plans.has(v, hosts[i & 1023]!, 443));
await bench("plan cache hit (match + cached credential)", 300_000, (i) => plans.plan(v, `api${i % 900}.example.com`, 443));
const row = (await store.credentials.get(vault.id, "API_KEY"))!;
await bench("credential decryption (AES-256-GCM)", 50_000, () => decryptCredential(dataKey, row));

// header rewriting: a typical agent request
const reqHeaders: [string, string][] = [
  ["Host", "api.example.com"],
  ["User-Agent", "agent/1.0"],
  ["Accept", "application/json"],
  ["Accept-Encoding", "gzip, br"],
  ["Content-Type", "application/json"],
  ["Content-Length", "42"],
  ["Connection", "keep-alive, x-trace"],
  ["X-Trace", "abc"],
  ["Authorization", "Bearer placeholder"],
  ["X-Request-Id", "123e4567"],
];
const injection = { header: "authorization", value: new Secret("Bearer sk-live-123") };
await bench("header rewriting (10 headers)", 500_000, () => buildUpstreamHeaders(reqHeaders, injection, true));

// the keep-alive path's per-request head work: an agent's head parsed, an answer's head lines scanned for echoes
const agentHead = Buffer.from(`GET /v1/items HTTP/1.1\r\n${reqHeaders.map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`, "latin1");
await bench("request head parse (10 headers)", 500_000, () => parseRequestHead(agentHead));
const answerHeaders: [string, string][] = [
  ["content-type", "application/json"],
  ["date", "Sat, 29 Nov 2025 05:00:00 GMT"],
  ["content-length", "83"],
];
const echoNeedles = new Needles(["Bearer sk-live-123", "sk-live-1234567890abcdef"]);
await bench("response header scan (3 headers)", 500_000, () => redactHeaders(answerHeaders, echoNeedles));

// the guard
const policy = compileNetPolicy({ allowPrivateRanges: false, allowlist: ["127.0.0.1/32"], ownListeners: [{ host: "127.0.0.1", port: 14322 }] });
const ips = ["93.184.216.34", "127.0.0.1", "10.1.2.3", "169.254.169.254", "2606:2800:220:1::1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "192.168.1.1"];
await bench("guard classification (checkAddress)", 500_000, (i) => checkAddress(ips[i & 7]!, 443, policy));

// audit batching: records/s from record() to rows in SQLite
const audit = createAuditLog(store, { now: Date.now, log: createLogger({ level: "error" }), flushIntervalMs: 50 });
const records = Math.round(100_000 * scale);
const t0 = Bun.nanoseconds();
for (let i = 0; i < records; i++) {
  audit.record({
    at: now,
    principal: "scoped:1",
    vaultId: vault.id,
    vault: "micro",
    ingress: "tunnel",
    method: "GET",
    host: "api1.example.com",
    path: "/v1/items",
    service: "api1.example.com",
    credentialKeys: "API_KEY",
    status: 200,
    bytesIn: 0,
    bytesOut: 512,
    durationMs: 1,
    error: null,
    contained: false,
    approvedBy: null,
  });
}
const recordNs = (Bun.nanoseconds() - t0) / records;
await audit.flush();
results["audit record() (enqueue)"] = recordNs;
results["audit batching (record → SQLite), records/s"] = records / ((Bun.nanoseconds() - t0) / 1e9);
await audit.stop();
store.close();

// metrics: what one proxied request adds when BROKER_METRICS is on (a counter and two histograms), 4 vaults × 8 services
const metrics = createMetrics({
  auditQueued: () => 0,
  auditDropped: () => 0,
  proposalsPending: async () => 0,
  requestApprovalsPending: async () => 0,
  tunnel: () => undefined,
});
await bench("metrics per request (observe)", 500_000, (i) => {
  const t = metrics.egress.now();
  metrics.egress.observe({
    ingress: i & 1 ? "explicit" : "transparent",
    vault: `vault-${i & 3}`,
    service: `api${i & 7}.example.com`,
    status: i & 15 ? 200 : 404,
    brokerSeconds: (metrics.egress.now() - t) / 1000,
    upstreamSeconds: 0.02,
  });
});
await bench("metrics scrape (render)", 2_000, () => metrics.render());

// service rules on a request that passes: plain rules, then the same with approval rules beside them
// (the loose matching and the claimed-method reading every ruled request now pays)
const ruled = (rules: unknown) => ({ service: { host: "api.stripe.com" }, rules: RulesList.parse(rules) }) as unknown as EgressPlan;
const plainRules = ruled([{ methods: ["GET", "POST"], paths: ["/v1/**"] }]);
const approveRules = ruled([
  { methods: ["GET", "POST"], paths: ["/v1/**"] },
  { methods: ["POST"], paths: ["/v1/refunds"], approve: "each" },
  { methods: ["DELETE"], paths: ["/v1/customers/*"], approve: "each" },
]);
const hint = () => ({});
const ruleCheck = (plan: EgressPlan) =>
  heldByRule(plan, "POST", allowedTarget(plan, "POST", "/v1/charges/ch_123/capture?expand=customer", hint, reqHeaders), reqHeaders);
await bench("rules check (plain rules)", 300_000, () => ruleCheck(plainRules));
await bench("rules check (with approval rules)", 300_000, () => ruleCheck(approveRules));

// needles follow the host (architecture.md D22): N vaults, each with its own bearer value for one host.
// Per answer: getting the host's compiled set (a plan-cache look-up), then that plus scanning a
// 4 KiB JSON answer with it, without an echo (the usual case) and with one vault's value in it.
// The cold build (store read, N decryptions, one compile) is paid once per host and change, measured once.
const json4k = JSON.stringify({
  data: Array.from({ length: 40 }, (_, i) => ({
    id: `obj_${i.toString(36).padStart(8, "0")}`,
    object: "charge",
    amount: 1000 + i,
    currency: "eur",
    paid: true,
    note: "lorem ipsum dolor",
  })),
});
const answer = new TextEncoder().encode(json4k.slice(0, 4096).padEnd(4096, " "));
const setups: { n: number; get: () => Promise<Needles>; echo: Uint8Array; close: () => void }[] = [];
for (const n of [1, 100, 1000]) {
  const s = await openMemoryStore();
  const { dataKey: key } = await unlockKeyring(s, undefined);
  const at = Date.now();
  let first: { id: number; name: string } | undefined;
  let echoed = "";
  for (let i = 0; i < n; i++) {
    const v = await s.vaults.create(`shared-${i}`, at);
    first ??= { id: v.id, name: v.name };
    await s.services.put(
      {
        vaultId: v.id,
        host: "shared.example.com",
        description: "",
        authType: "bearer",
        authKey: "API_KEY",
        authHeader: null,
        authPrefix: null,
        authUsername: null,
        enabled: true,
      },
      at,
    );
    const value = `sk-${crypto.randomUUID()}`;
    if (i === n - 1) echoed = value; // the last vault's: another vault's value for every n > 1
    await storeCredential(s, key, v.id, "API_KEY", new Secret(value));
  }
  const echo = new TextEncoder().encode(`{"authorization":"Bearer ${echoed}",${json4k.slice(1)}`.slice(0, 4096));
  const cache = createPlanCache(s, key, () => ({}));
  const plan = await cache.plan(first!, "shared.example.com", 443);
  const t0 = Bun.nanoseconds();
  await cache.responseNeedles(plan);
  results[`echo needles, ${n} vaults: cold build (once per change)`] = Bun.nanoseconds() - t0;
  setups.push({ n, get: () => cache.responseNeedles(plan), echo, close: () => s.close() });
}
// Three interleaved rounds, the best of each kept: the sizes are compared in the same conditions
// (JIT warmed alike, the shared machine's noise mostly filtered).
type Measure = "get" | "scan" | "echo";
const shared: Record<number, Record<Measure, number>> = {};
const best = async (n: number, what: Measure, count: number, fn: () => unknown, warm?: number) => {
  await bench("round", count, fn, warm);
  shared[n] = { ...({ get: Infinity, scan: Infinity, echo: Infinity } as Record<Measure, number>), ...shared[n] };
  shared[n]![what] = Math.min(shared[n]![what], results.round!);
};
for (let round = 0; round < 3; round++) {
  for (const { n, get, echo } of setups) {
    await best(n, "get", 300_000, () => get());
    await best(n, "scan", 20_000, async () => redactWhole(answer, await get()), 200);
    await best(n, "echo", 20_000, async () => redactWhole(echo, await get()), 200);
  }
}
delete results.round;
const LABEL: Record<Measure, string> = { get: "get", scan: "get + scan 4 KiB JSON", echo: "get + scan 4 KiB JSON, one echo" };
for (const { n, close } of setups) {
  for (const what of ["get", "scan", "echo"] as const) results[`echo needles, ${n} vaults: ${LABEL[what]}`] = shared[n]![what];
  close();
}

if (process.argv.includes("--json")) console.log(JSON.stringify(results));
else {
  for (const [k, ns] of Object.entries(results))
    console.log(
      `${k.padEnd(48)} ${k.endsWith("/s") ? ns.toFixed(0) : ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms/op` : ns >= 1e3 ? `${(ns / 1e3).toFixed(2)} µs/op` : `${ns.toFixed(0)} ns/op`}`,
    );
  const ratio = (n: number, what: Measure) => (shared[n]![what] / shared[1]![what]).toFixed(2);
  for (const what of ["get", "scan", "echo"] as const)
    console.log(`echo needles, ${LABEL[what]}: 100 vaults / 1 = ${ratio(100, what)}×, 1,000 vaults / 1 = ${ratio(1000, what)}×`);
}
