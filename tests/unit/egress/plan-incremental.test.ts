// Incremental plans (issue 35, architecture.md D11): a request reads the one service that can match
// its host and the credential that service names, never its vault's service list, so an edit of a
// vault of 10,000 services costs another vault's request nothing and its own requests one indexed
// read; the edit is in force on the very next request. Reads are counted with an observed store,
// never timed. Outages: each host keeps its own grace (D11's fallback, per entry).

import { beforeAll, describe, expect, test } from "bun:test";
import { createPlanCache, type EgressPlan, type PlanCache } from "../../../src/egress/index.ts";
import { FIRST_PAGE_ROWS, PAGE_ROWS, pagesToRead } from "../../../src/egress/stored-values.ts";
import { DatabaseUnavailable, HostNotAllowed, ServiceDisabled } from "../../../src/errors.ts";
import { storeCredential } from "../../../src/crypto/index.ts";
import { Secret } from "../../../src/secret.ts";
import type { Freshness } from "../../../src/store/index.ts";
import { bearer, bigValue, observedStore, pagesRead, seedVaults, turnsUntil, type ObservedStore } from "../../helpers/big-vault.ts";

const SERVICES = 10_000;
const QUIET = `sk-quiet-${crypto.randomUUID()}`;
let o: ObservedStore;
let big: { id: number; name: string };
let quiet: { id: number; name: string };

beforeAll(async () => {
  o = await observedStore();
  ({ big, quiet } = await seedVaults(o, SERVICES, QUIET));
});

const injected = (p: EgressPlan) => p.injection?.value.reveal(); // reveal: compared in the test only
/** A plan never shows a value when printed or serialised. */
function expectNoValueIn(p: EgressPlan, values: readonly string[]) {
  for (const text of [JSON.stringify(p), Bun.inspect(p), String(p.needles)]) for (const v of values) expect(text).not.toContain(v);
}

describe("a request reads one entry, never its vault", () => {
  test("after an edit of the 10,000-service vault, another vault's request and answer do no vault-sized read", async () => {
    const plans = createPlanCache(o.store, o.dataKey, () => ({}));
    const quietPlan = await plans.plan(quiet, "api.quiet.example", 443);
    await plans.responseNeedles(quietPlan); // the first read of every vault (an answer waits for it once)

    await o.store.services.put({ ...bearer(big.id, "svc-4321.big.example", "K1"), rules: JSON.stringify([{ methods: ["GET"], paths: ["/x"] }]) }, 2_000_000);
    o.reset();
    plans.invalidate(big.id);
    const again = await plans.plan(quiet, "api.quiet.example", 443);
    expect(again).toBe(quietPlan);
    expect(o.calls).toEqual([]); // the quiet vault's plan is untouched by the other's edit
    const needles = await plans.responseNeedles(again);
    // The answer waited for the first (small) page of the edited vault's read at most, never the whole vault.
    expect(o.calls.filter((c) => !c.startsWith("services.pageWithCredentials"))).toEqual([]);
    expect(o.rows().total).toBeLessThanOrEqual(FIRST_PAGE_ROWS);
    expect(o.calls.some((c) => /services\.(list|all|allOfVault)$/.test(c))).toBe(false);
    expect(needles.empty).toBe(false);
    expectNoValueIn(again, [QUIET]);
    await turnsUntil(o, () => pagesRead(o) === pagesToRead(SERVICES));
    // The rest of the vault was read in pages, none larger than PAGE_ROWS.
    expect(o.rows().largest).toBeLessThanOrEqual(PAGE_ROWS);
  });

  test("a request in the edited vault reads its host's service and its credential: two indexed statements", async () => {
    const plans = createPlanCache(o.store, o.dataKey, () => ({}));
    await plans.plan(big, "svc-17.big.example", 443);
    plans.invalidate(big.id);
    o.reset();
    const p = await plans.plan(big, "svc-17.big.example", 443);
    expect(injected(p)).toBe(`Bearer ${bigValue(1)}`);
    expect(o.calls).toEqual(["services.forHost", "credentials.get"]);
    expect(o.rows()).toEqual({ total: 2, largest: 1 });
    // Every later request of that host, and a tunnel's has(), is served from memory.
    o.reset();
    expect(await plans.plan(big, "svc-17.big.example", 443)).toBe(p);
    expect(await plans.has(big, "svc-17.big.example", 443)).toBe(true);
    expect(o.calls).toEqual([]);
    expectNoValueIn(p, [bigValue(1)]);
  });

  test("invalidating a vault costs nothing until a request asks: then only what that request needs", async () => {
    const plans = createPlanCache(o.store, o.dataKey, () => ({}));
    for (let i = 0; i < 50; i++) await plans.plan(big, `svc-${i}.big.example`, 443);
    o.reset();
    plans.invalidate(big.id);
    expect(o.calls).toEqual([]);
    await plans.plan(big, "svc-3.big.example", 443);
    expect(o.calls).toEqual(["services.forHost", "credentials.get"]);
  });
});

describe("an edit is in force on the very next request", () => {
  let plans: PlanCache;
  const host = "svc-250.big.example";
  beforeAll(() => {
    plans = createPlanCache(o.store, o.dataKey, () => ({}));
  });

  test("a service's new rules, then its new credential key", async () => {
    expect((await plans.plan(big, host, 443)).rules).toBeUndefined();
    await o.store.services.put({ ...bearer(big.id, host, "K25"), rules: JSON.stringify([{ methods: ["GET"], paths: ["/only"] }]) }, 2_000_000);
    plans.invalidate(big.id);
    expect((await plans.plan(big, host, 443)).rules).toEqual([{ methods: ["GET"], paths: ["/only"] }]);
    await o.store.services.put(bearer(big.id, host, "K26"), 2_000_001);
    plans.invalidate(big.id);
    const p = await plans.plan(big, host, 443);
    expect([p.credentialKeys, injected(p)]).toEqual([["K26"], `Bearer ${bigValue(26)}`]);
    expectNoValueIn(p, [bigValue(25), bigValue(26)]);
  });

  test("a credential's new value; a disabled, a removed and a wildcard service", async () => {
    const rotated = `sk-rotated-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "K26", new Secret(rotated), 2_000_002);
    plans.invalidate(big.id);
    const p = await plans.plan(big, host, 443);
    expect(injected(p)).toBe(`Bearer ${rotated}`);
    expectNoValueIn(p, [rotated]);
    await o.store.services.put({ ...bearer(big.id, host, "K26"), enabled: false }, 2_000_003);
    plans.invalidate(big.id);
    await expect(plans.plan(big, host, 443)).rejects.toBeInstanceOf(ServiceDisabled);
    expect(await plans.has(big, host, 443)).toBe(true); // a tunnel still intercepts it, to refuse
    await o.store.services.remove(big.id, host);
    plans.invalidate(big.id);
    await expect(plans.plan(big, host, 443)).rejects.toBeInstanceOf(HostNotAllowed);
    expect(await plans.has(big, host, 443)).toBe(false);
    // A wildcard added covers the removed host (one label below), an exact service still wins.
    await o.store.services.put(bearer(big.id, "*.big.example", "K2"), 2_000_004);
    plans.invalidate(big.id);
    expect(injected(await plans.plan(big, host, 443))).toBe(`Bearer ${bigValue(2)}`);
    expect(injected(await plans.plan(big, "svc-30.big.example", 443))).toBe(`Bearer ${bigValue(3)}`);
    await expect(plans.plan(big, "a.svc-30.big.example", 443)).rejects.toBeInstanceOf(HostNotAllowed); // one label only
    await expect(plans.plan(big, "svc-30.big.example", 8443)).rejects.toBeInstanceOf(HostNotAllowed); // another port
    await o.store.services.remove(big.id, "*.big.example");
    plans.invalidate(big.id);
  });

  test("ports and IP literals match as stored: host:port, [v6]:port", async () => {
    await o.store.services.put(bearer(big.id, "svc-30.big.example:8443", "K4"), 2_000_005);
    await o.store.services.put(bearer(big.id, "[2001:db8::1]:8443", "K5"), 2_000_005);
    plans.invalidate(big.id);
    expect(injected(await plans.plan(big, "svc-30.big.example", 8443))).toBe(`Bearer ${bigValue(4)}`);
    expect(injected(await plans.plan(big, "2001:db8::1", 8443))).toBe(`Bearer ${bigValue(5)}`);
    await expect(plans.plan(big, "2001:db8::1", 443)).rejects.toBeInstanceOf(HostNotAllowed);
  });
});

describe("outage grace, per host", () => {
  /** Several instances with announcements lost: a cached entry is trusted for one second only. */
  const deaf: Freshness = { trustMs: (normal) => Math.min(normal, 1000), listening: false };
  const GRACE = 60_000;

  test("a host read before keeps injecting within the grace, one never read gets 503, and after the grace both do", async () => {
    let clock = 5_000_000;
    const plans = createPlanCache(o.store, o.dataKey, () => ({}), { now: () => clock, freshness: deaf, outageGraceMs: GRACE });
    const before = await plans.plan(big, "svc-40.big.example", 443);
    try {
      o.down(true);
      clock += 2_000;
      // Re-checked (the trust ran out), the store unreachable: the last answer serves, the same plan.
      expect(await plans.plan(big, "svc-40.big.example", 443)).toBe(before);
      expect(await plans.has(big, "svc-40.big.example", 443)).toBe(true);
      await expect(plans.plan(big, "svc-41.big.example", 443)).rejects.toBeInstanceOf(DatabaseUnavailable);
      clock += GRACE;
      await expect(plans.plan(big, "svc-40.big.example", 443)).rejects.toBeInstanceOf(DatabaseUnavailable);
    } finally {
      o.down(false);
    }
    expect(injected(await plans.plan(big, "svc-41.big.example", 443))).toBe(`Bearer ${bigValue(4)}`);
    expectNoValueIn(before, [bigValue(4)]);
  });

  test("while announcements vouch for an entry, the grace counts from the moment they stop", async () => {
    let clock = 9_000_000;
    const feed = { listening: true, trustMs: (normal: number) => (feed.listening ? normal : Math.min(normal, 1000)) };
    const plans = createPlanCache(o.store, o.dataKey, () => ({}), { now: () => clock, freshness: feed, outageGraceMs: GRACE });
    const first = await plans.plan(big, "svc-50.big.example", 443);
    clock += 10 * GRACE; // trusted for long: every hit confirms it
    expect(await plans.plan(big, "svc-50.big.example", 443)).toBe(first);
    feed.listening = false;
    try {
      o.down(true);
      clock += 2_000;
      expect(await plans.plan(big, "svc-50.big.example", 443)).toBe(first);
    } finally {
      o.down(false);
    }
  });
});
