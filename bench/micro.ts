// Micro-benchmarks of the hot pieces, in-process over an in-memory store: leaf mint (first and
// cached), host matching over 1,000 services, header rewriting, the guard's classification,
// credential decryption vs a plan-cache hit, audit batching. `--json` prints one JSON line
// (name → ns per op, or records/s for names ending in "/s").

import { buildUpstreamHeaders } from "../src/egress/headers.ts";
import { createAuditLog, createPlanCache } from "../src/egress/index.ts";
import { checkAddress, compileNetPolicy } from "../src/egress/netguard.ts";
import type { EgressPlan } from "../src/egress/plan.ts";
import { allowedTarget, heldByRule } from "../src/egress/rules.ts";
import { createLogger } from "../src/log.ts";
import { Secret } from "../src/secret.ts";
import { openMemoryStore } from "../src/store/index.ts";
import { createMetrics } from "../src/server/metrics.ts";
import { createLeafCache, decryptCredential, loadRootCa, mintLeaf, parseRules, storeCredential, unlockKeyring } from "../src/vault/index.ts";

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
const svc = (h: string) => ({ vaultId: vault.id, host: h, description: "", authType: "bearer" as const, authKey: "API_KEY", authHeader: null, authPrefix: null, authUsername: null, enabled: true });
for (let i = 0; i < 900; i++) await store.services.put(svc(`api${i}.example.com`), now);
for (let i = 0; i < 100; i++) await store.services.put(svc(`*.w${i}.example.org`), now);
await storeCredential(store, dataKey, vault.id, "API_KEY", new Secret(`sk-${crypto.randomUUID()}`));
const plans = createPlanCache(store, dataKey, () => ({}));
const v = { id: vault.id, name: vault.name };
await plans.plan(v, "api1.example.com", 443); // compiles the table and decrypts the credential
const hosts = Array.from({ length: 1024 }, (_, i) => (i % 4 === 0 ? `x.w${i % 100}.example.org` : i % 4 === 1 ? `nomatch${i}.example.net` : `api${i % 900}.example.com`));
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

// the guard
const policy = compileNetPolicy({ allowPrivateRanges: false, allowlist: ["127.0.0.1/32"], ownListeners: [{ host: "127.0.0.1", port: 14322 }] });
const ips = ["93.184.216.34", "127.0.0.1", "10.1.2.3", "169.254.169.254", "2606:2800:220:1::1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "192.168.1.1"];
await bench("guard classification (checkAddress)", 500_000, (i) => checkAddress(ips[i & 7]!, 443, policy));

// audit batching: records/s from record() to rows in SQLite
const audit = createAuditLog(store, { now: Date.now, log: createLogger({ level: "error" }), flushIntervalMs: 50 });
const records = Math.round(100_000 * scale);
const t0 = Bun.nanoseconds();
for (let i = 0; i < records; i++) {
  audit.record({ at: now, principal: "scoped:1", vaultId: vault.id, vault: "micro", ingress: "tunnel", method: "GET", host: "api1.example.com", path: "/v1/items", service: "api1.example.com", credentialKeys: "API_KEY", status: 200, bytesIn: 0, bytesOut: 512, durationMs: 1, error: null, contained: false, approvedBy: null });
}
const recordNs = (Bun.nanoseconds() - t0) / records;
await audit.flush();
results["audit record() (enqueue)"] = recordNs;
results["audit batching (record → SQLite), records/s"] = records / ((Bun.nanoseconds() - t0) / 1e9);
await audit.stop();
store.close();

// metrics: what one proxied request adds when BROKER_METRICS is on (a counter and two histograms), 4 vaults × 8 services
const metrics = createMetrics({ auditQueued: () => 0, auditDropped: () => 0, proposalsPending: async () => 0, requestApprovalsPending: async () => 0, tunnel: () => undefined });
await bench("metrics per request (observe)", 500_000, (i) => {
  const t = metrics.egress.now();
  metrics.egress.observe({ ingress: i & 1 ? "explicit" : "transparent", vault: `vault-${i & 3}`, service: `api${i & 7}.example.com`, status: i & 15 ? 200 : 404, brokerSeconds: (metrics.egress.now() - t) / 1000, upstreamSeconds: 0.02 });
});
await bench("metrics scrape (render)", 2_000, () => metrics.render());

// service rules on a request that passes: plain rules, then the same with approval rules beside them
// (the loose matching and the claimed-method reading every ruled request now pays)
const ruled = (rules: unknown) => ({ service: { host: "api.stripe.com" }, rules: parseRules(rules) }) as unknown as EgressPlan;
const plainRules = ruled([{ methods: ["GET", "POST"], paths: ["/v1/**"] }]);
const approveRules = ruled([{ methods: ["GET", "POST"], paths: ["/v1/**"] }, { methods: ["POST"], paths: ["/v1/refunds"], approve: "each" }, { methods: ["DELETE"], paths: ["/v1/customers/*"], approve: "each" }]);
const hint = () => ({});
const ruleCheck = (plan: EgressPlan) => heldByRule(plan, "POST", allowedTarget(plan, "POST", "/v1/charges/ch_123/capture?expand=customer", hint, reqHeaders), reqHeaders);
await bench("rules check (plain rules)", 300_000, () => ruleCheck(plainRules));
await bench("rules check (with approval rules)", 300_000, () => ruleCheck(approveRules));

if (process.argv.includes("--json")) console.log(JSON.stringify(results));
else for (const [k, ns] of Object.entries(results)) console.log(`${k.padEnd(48)} ${k.endsWith("/s") ? ns.toFixed(0) : ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms/op` : ns >= 1e3 ? `${(ns / 1e3).toFixed(2)} µs/op` : `${ns.toFixed(0)} ns/op`}`);
