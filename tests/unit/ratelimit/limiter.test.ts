// The tiered limiter on a fake clock: every tier under every profile (exact burst, denial, refill), strict = half,
// loose = double, off never denies; isolation between principals; one PROXY budget per (principal, vault);
// the GLOBAL in-flight ceiling and backstop; run-time updates and the lock.

import { describe, expect, test } from "bun:test";
import { InvalidRequest, toErrorResponse } from "../../../src/errors.ts";
import {
  createRateLimiter,
  proxyKey,
  RateLimitsLocked,
  resolveSettings,
  type RateDecision,
  type RateLimiter,
  type RateProfile,
} from "../../../src/ratelimit/index.ts";

function makeClock(start = 5_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

function countAllowed(take: () => RateDecision, max = 100_000): number {
  let n = 0;
  while (n < max && take().ok) n++;
  return n;
}

const EXPECTED: Record<Exclude<RateProfile, "off">, Record<"AUTH" | "AUTHED" | "PROXY", { rps: number; burst: number }>> = {
  default: { AUTH: { rps: 5, burst: 20 }, AUTHED: { rps: 20, burst: 100 }, PROXY: { rps: 50, burst: 200 } },
  strict: { AUTH: { rps: 2.5, burst: 10 }, AUTHED: { rps: 10, burst: 50 }, PROXY: { rps: 25, burst: 100 } },
  loose: { AUTH: { rps: 10, burst: 40 }, AUTHED: { rps: 40, burst: 200 }, PROXY: { rps: 100, burst: 400 } },
};

const takeFor = (l: RateLimiter, tier: "AUTH" | "AUTHED" | "PROXY", key: string) => () =>
  tier === "PROXY" ? l.checkProxy(key, "vault-1") : l.check(tier, key);

describe("tiers under each profile", () => {
  for (const [profile, tiers] of Object.entries(EXPECTED) as [RateProfile, (typeof EXPECTED)["default"]][]) {
    for (const [tier, { rps, burst }] of Object.entries(tiers) as ["AUTH" | "AUTHED" | "PROXY", { rps: number; burst: number }][]) {
      test(`${profile} ${tier}: burst ${burst} allowed, next denied with Retry-After, refill at ${rps}/s`, () => {
        const clock = makeClock();
        const l = createRateLimiter(resolveSettings(profile), clock.now);
        const take = takeFor(l, tier, "k");
        expect(countAllowed(take)).toBe(burst);
        const denied = take();
        expect(denied.ok).toBe(false);
        if (!denied.ok) {
          expect(Number.isInteger(denied.retryAfterSec)).toBe(true);
          expect(denied.retryAfterSec).toBeGreaterThanOrEqual(1);
          expect(denied.limit).toBe(burst);
        }
        clock.advance(2_000); // two seconds earn exactly 2 x rps tokens
        expect(countAllowed(take)).toBe(2 * rps);
      });
    }
  }

  test("strict is half of default and loose is double, knob by knob (GLOBAL included)", () => {
    const d = resolveSettings("default");
    const s = resolveSettings("strict");
    const x = resolveSettings("loose");
    for (const tier of ["auth", "authed", "proxy"] as const) {
      expect(s[tier]).toEqual({ rps: d[tier].rps / 2, burst: d[tier].burst / 2 });
      expect(x[tier]).toEqual({ rps: d[tier].rps * 2, burst: d[tier].burst * 2 });
    }
    expect(s.global).toEqual({ rps: d.global.rps / 2, inflight: d.global.inflight / 2 });
    expect(x.global).toEqual({ rps: d.global.rps * 2, inflight: d.global.inflight * 2 });
  });

  test("off never denies, on any tier, and holds no keys", () => {
    const l = createRateLimiter(resolveSettings("off"), makeClock().now);
    for (let i = 0; i < 50_000; i++) {
      expect(l.check("AUTH", "1.2.3.4").ok && l.check("AUTHED", "u").ok && l.checkProxy("a", "v").ok).toBe(true);
      expect(l.enterGlobal().ok).toBe(true);
    }
    expect(l.stats()).toEqual({ auth: 0, authed: 0, proxy: 0, inflight: 0 });
  });

  test("defaults let an agent fan out: 40 parallel calls, then 40/s for a minute, are never throttled", () => {
    const clock = makeClock();
    const l = createRateLimiter(resolveSettings("default"), clock.now);
    const held = Array.from({ length: 40 }, () => l.enterGlobal());
    expect(held.every((e) => e.ok)).toBe(true);
    for (let i = 0; i < 40; i++) expect(l.checkProxy("agent", "v").ok).toBe(true);
    for (let s = 0; s < 60; s++) {
      clock.advance(1_000);
      for (let i = 0; i < 40; i++) expect(l.checkProxy("agent", "v").ok).toBe(true);
    }
  });
});

describe("keys", () => {
  test("one principal's exhaustion does not affect another, on AUTHED and PROXY", () => {
    const l = createRateLimiter(resolveSettings("default"), makeClock().now);
    countAllowed(() => l.check("AUTHED", "alice"));
    countAllowed(() => l.checkProxy("alice", "v1"));
    expect(l.check("AUTHED", "alice").ok).toBe(false);
    expect(l.checkProxy("alice", "v1").ok).toBe(false);
    expect(countAllowed(() => l.check("AUTHED", "bob"))).toBe(100);
    expect(countAllowed(() => l.checkProxy("bob", "v1"))).toBe(200);
    expect(countAllowed(() => l.checkProxy("alice", "v2"))).toBe(200); // another vault is another budget
  });

  test("tiers are separate budgets: an exhausted AUTH IP does not block AUTHED or PROXY", () => {
    const l = createRateLimiter(resolveSettings("default"), makeClock().now);
    countAllowed(() => l.check("AUTH", "alice"));
    expect(l.check("AUTHED", "alice").ok).toBe(true);
    expect(l.checkProxy("alice", "v").ok).toBe(true);
  });

  test("/proxy and the tunnel share one PROXY budget: the key is only (principal, vault)", () => {
    const l = createRateLimiter(resolveSettings("default"), makeClock().now);
    const viaProxyRoute = () => l.checkProxy("agent-7", 3);
    const viaTunnel = () => l.checkProxy("agent-7", "3");
    let allowed = 0;
    for (let i = 0; i < 300; i++) if ((i % 2 ? viaTunnel : viaProxyRoute)().ok) allowed++;
    expect(allowed).toBe(200);
    expect(l.stats().proxy).toBe(1);
  });

  test("the PROXY key cannot be forged by ids containing the separator", () => {
    expect(proxyKey("a|b", "c")).not.toBe(proxyKey("a", "b|c"));
    expect(proxyKey("a", 1)).toBe(proxyKey("a", "1"));
  });

  test("100,000 distinct client IPs keep each tier's key map within its bound", () => {
    const l = createRateLimiter(resolveSettings("default"), makeClock().now);
    let largest = 0;
    for (let i = 0; i < 100_000; i++) {
      l.check("AUTH", `2001:db8::${i.toString(16)}`);
      if (i % 101 === 0) largest = Math.max(largest, l.stats().auth);
    }
    expect(Math.max(largest, l.stats().auth)).toBeLessThanOrEqual(10_000);
  });
});

describe("GLOBAL", () => {
  test("the in-flight ceiling refuses the next request until one is released", () => {
    const settings = resolveSettings("default", { global: { inflight: 3 } });
    const l = createRateLimiter(settings, makeClock().now);
    const entries = [l.enterGlobal(), l.enterGlobal(), l.enterGlobal()];
    expect(entries.every((e) => e.ok)).toBe(true);
    const refused = l.enterGlobal();
    expect(refused).toMatchObject({ ok: false, reason: "inflight", retryAfterSec: 1, limit: 3 });
    const first = entries[0]!;
    if (first.ok) {
      first.release();
      first.release(); // idempotent: must not free a second slot
    }
    expect(l.stats().inflight).toBe(2);
    expect(l.enterGlobal().ok).toBe(true);
    expect(l.enterGlobal().ok).toBe(false);
  });

  test("the requests-per-second backstop holds one second of traffic and frees the slot it refused", () => {
    const clock = makeClock();
    const l = createRateLimiter(resolveSettings("default", { global: { rps: 10 } }), clock.now);
    let allowed = 0;
    for (let i = 0; i < 20; i++) {
      const e = l.enterGlobal();
      if (e.ok) {
        allowed++;
        e.release();
      } else expect(e).toMatchObject({ reason: "rate", retryAfterSec: 1 });
    }
    expect(allowed).toBe(10);
    expect(l.stats().inflight).toBe(0);
    clock.advance(500);
    expect(
      countAllowed(() => {
        const e = l.enterGlobal();
        if (e.ok) e.release();
        return e.ok ? e.decision : e;
      }),
    ).toBe(5);
  });
});

describe("run-time settings", () => {
  test("update changes limits at once, validates and names the field", () => {
    const l = createRateLimiter(resolveSettings("default"), makeClock().now);
    const next = l.update({ proxy: { burst: 5 } });
    expect(next.proxy).toEqual({ rps: 50, burst: 5 });
    expect(countAllowed(() => l.checkProxy("a", "v"))).toBe(5);
    expect(l.update({ profile: "strict" }).proxy).toEqual({ rps: 25, burst: 100 });
    expect(l.update({ profile: "loose", auth: { rps: 1 } }).auth).toEqual({ rps: 1, burst: 40 });
    for (const bad of [
      { proxy: { rps: 0 } },
      { proxy: { rps: Infinity } },
      { auth: { burst: 2.5 } },
      { global: { inflight: 1e9 } },
      { authed: { rps: "9" } },
      { global: { burst: 3 } },
      { profile: "fast" },
    ] as never[]) {
      expect(() => l.update(bad)).toThrow(InvalidRequest);
    }
    try {
      l.update({ proxy: { rps: -1 } });
    } catch (err) {
      expect((err as InvalidRequest).field).toBe("proxy.rps");
    }
    expect(l.settings().auth).toEqual({ rps: 1, burst: 40 }); // a refused update changes nothing
  });

  test("switching to off and back works, and in-flight counts stay consistent", () => {
    const l = createRateLimiter(resolveSettings("default", { global: { inflight: 1 } }), makeClock().now);
    l.update({ profile: "off", global: { inflight: 1 } });
    const a = l.enterGlobal();
    const b = l.enterGlobal();
    l.update({ profile: "default", global: { inflight: 1 } });
    if (a.ok) a.release();
    if (b.ok) b.release();
    expect(l.stats().inflight).toBe(0);
    expect(l.enterGlobal().ok).toBe(true);
    expect(l.enterGlobal().ok).toBe(false);
  });

  test("locked settings refuse every update with a 403 naming BROKER_RATELIMIT_LOCK", async () => {
    const l = createRateLimiter(resolveSettings("strict", {}, true), makeClock().now);
    expect(l.settings().locked).toBe(true);
    expect(() => l.update({ proxy: { rps: 1000 } })).toThrow(RateLimitsLocked);
    expect(() => l.update({})).toThrow(RateLimitsLocked);
    expect(l.settings().proxy).toEqual({ rps: 25, burst: 100 });
    const res = toErrorResponse(new RateLimitsLocked());
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({ error: "forbidden", message: "rate limits are pinned by BROKER_RATELIMIT_LOCK" });
  });
});
