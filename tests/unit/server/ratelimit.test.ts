// Rate limits through the real API routes, in process, on a movable clock: the AUTH tier (per client IP) on
// login, the AUTHED tier (per principal) on authenticated CRUD, profiles chosen by BROKER_RATELIMIT_PROFILE,
// the owner settings API (lock, validation, immediate effect), and the Argon2id hashing gate's bounds under
// 200 concurrent logins. The same load at the real Argon2id parameters, with the RSS it costs, is a bench:
// `bun bench/logins.ts`.

import { describe, expect, test } from "bun:test";
import { loadConfig } from "../../../src/config.ts";
import { createLoginThrottle, createRateLimiter, resolveSettings } from "../../../src/ratelimit/index.ts";
import type { HashGate } from "../../../src/crypto/index.ts";
import { createTestApi, type TestApi } from "../../helpers/api.ts";

const PASSWORD = "correct horse battery";
type Res = { status: number; body: any; headers: Headers };

/**
 * A harness whose limiter is built exactly as the server builds it: from BROKER_* variables through loadConfig.
 * These tests count the tiers with repeated bad logins, so the login throttle (which would step in after five
 * failures per account; tests/unit/server/login-throttle.test.ts) is given thresholds it never reaches.
 */
function apiWith(env: Record<string, string>): Promise<TestApi> {
  const { rateLimit: r } = loadConfig({ BROKER_DATA_DIR: "/nonexistent/broker-ratelimit-unit", ...env });
  return createTestApi({
    rateLimiter: (now) => createRateLimiter(resolveSettings(r.profile, r.overrides, r.locked), now),
    loginThrottle: (now) => createLoginThrottle({ now, accountFailures: Number.POSITIVE_INFINITY, addressFailures: Number.POSITIVE_INFINITY }),
  });
}

const badLogin = (api: TestApi, ip = "203.0.113.7") =>
  api.call("POST", "/v1/auth/login", { body: { email: "nobody@example.com", password: "wrong password" }, ip });

async function register(api: TestApi, email: string, ip = "198.51.100.1"): Promise<string> {
  const res = await api.call("POST", "/v1/auth/register", { body: { email, password: PASSWORD }, ip });
  expect(res.status).toBe(201);
  return res.body.token;
}

/** The 429 contract: envelope, integer Retry-After (also in the body), RateLimit-* headers of the tier. */
function expectLimited(res: Res, limit: number, reset?: number): number {
  expect(res.status).toBe(429);
  expect(res.body.error).toBe("rate_limited");
  expect(typeof res.body.message).toBe("string");
  expect(res.headers.get("x-broker-error")).toBe("rate_limited");
  const retry = res.headers.get("retry-after") ?? "";
  expect(retry).toMatch(/^[1-9]\d*$/);
  expect(res.body.retry_after).toBe(Number(retry));
  expect(res.headers.get("ratelimit-limit")).toBe(String(limit));
  expect(res.headers.get("ratelimit-remaining")).toBe("0");
  expect(res.headers.get("ratelimit-reset")).toMatch(/^\d+$/);
  if (reset !== undefined) expect(res.headers.get("ratelimit-reset")).toBe(String(reset));
  return Number(retry);
}

/** Calls until the first non-`okStatus` answer (at most `max` calls); returns how many passed and that answer. */
async function spend(call: () => Promise<Res>, okStatus: number, max: number): Promise<{ passed: number; last: Res | undefined }> {
  for (let i = 0; i < max; i++) {
    const res = await call();
    if (res.status !== okStatus) return { passed: i, last: res };
  }
  return { passed: max, last: undefined };
}

// Default AUTH 5/s burst 20, AUTHED 20/s burst 100; strict halves, loose doubles (src/ratelimit/settings.ts).
const PROFILES = [
  { profile: "default", auth: { rps: 5, burst: 20 }, authed: { rps: 20, burst: 100 } },
  { profile: "strict", auth: { rps: 2.5, burst: 10 }, authed: { rps: 10, burst: 50 } },
  { profile: "loose", auth: { rps: 10, burst: 40 }, authed: { rps: 40, burst: 200 } },
] as const;

describe("AUTH tier (per client IP) on /v1/auth/login", () => {
  for (const p of PROFILES) {
    test(`${p.profile}: burst ${p.auth.burst} from one IP, then 429; other IPs unaffected; the clock refills ${p.auth.rps}/s`, async () => {
      const api = await apiWith({ BROKER_RATELIMIT_PROFILE: p.profile });
      const { passed, last } = await spend(() => badLogin(api), 401, p.auth.burst + 5);
      expect(passed).toBe(p.auth.burst);
      // One token at rps/s is under a second away; the full bucket is burst/rps = 4 s away in every profile.
      expect(expectLimited(last!, p.auth.burst, 4)).toBe(1);
      expectLimited(await badLogin(api), p.auth.burst);
      expect((await badLogin(api, "203.0.113.8")).status).toBe(401);
      expect((await badLogin(api, "2001:db8::1")).status).toBe(401);
      api.clock.advance(999);
      const partial = Math.floor((p.auth.rps * 999) / 1000);
      expect((await spend(() => badLogin(api), 401, 100)).passed).toBe(partial);
      api.clock.advance(1000);
      const again = await spend(() => badLogin(api), 401, 100);
      expect(again.passed).toBe(Math.floor(p.auth.rps * 1.999) - partial);
      expectLimited(again.last!, p.auth.burst);
      api.clock.advance(60_000); // long idle: refills to the burst, never beyond
      expect((await spend(() => badLogin(api), 401, 100)).passed).toBe(p.auth.burst);
    });
  }

  test("the workload token exchange (anonymous, like sign-in) shares the IP's AUTH budget", async () => {
    const api = await apiWith({ BROKER_RATELIMIT_AUTH_BURST: "2", BROKER_RATELIMIT_AUTH_RPS: "1" });
    const body = {
      grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
      subject_token: "a.b.c",
      subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
    };
    const exchange = () => api.call("POST", "/v1/sessions/exchange", { body, ip: "203.0.113.9" });
    expect((await exchange()).status).toBe(400);
    expect((await badLogin(api, "203.0.113.9")).status).toBe(401);
    expectLimited(await exchange(), 2);
  });

  test("registration shares the IP's AUTH budget with login", async () => {
    const api = await apiWith({ BROKER_RATELIMIT_AUTH_BURST: "3", BROKER_RATELIMIT_AUTH_RPS: "1" });
    await register(api, "owner@example.com", "203.0.113.7");
    expect((await badLogin(api)).status).toBe(401);
    expect((await badLogin(api)).status).toBe(401);
    const res = await api.call("POST", "/v1/auth/register", { body: { email: "second@example.com", password: PASSWORD }, ip: "203.0.113.7" });
    expectLimited(res, 3);
  });

  test("off never limits the AUTH tier and sends no RateLimit headers (the login throttle stays on: see its own tests)", async () => {
    const api = await apiWith({ BROKER_RATELIMIT_PROFILE: "off", BROKER_RATELIMIT_AUTH_BURST: "1" });
    for (let i = 0; i < 150; i++) {
      const res = await badLogin(api);
      expect(res.status).toBe(401);
      expect(res.headers.get("ratelimit-limit")).toBeNull();
    }
  });
});

describe("AUTHED tier (per principal) on authenticated CRUD", () => {
  for (const p of PROFILES) {
    test(`${p.profile}: burst ${p.authed.burst} per principal, then 429; another principal unaffected; refills ${p.authed.rps}/s`, async () => {
      const api = await apiWith({ BROKER_RATELIMIT_PROFILE: p.profile });
      const owner = await register(api, "owner@example.com", "198.51.100.1");
      const other = await register(api, "other@example.com", "198.51.100.2");
      expect((await api.call("POST", "/v1/vaults", { token: owner, body: { name: "v1" } })).status).toBe(201);
      const { passed, last } = await spend(() => api.call("GET", "/v1/vaults", { token: owner }), 200, p.authed.burst + 5);
      expect(passed).toBe(p.authed.burst - 1); // the POST above spent one
      expect(expectLimited(last!, p.authed.burst)).toBe(1);
      // A write is refused too, before it runs.
      expectLimited(await api.call("POST", "/v1/vaults", { token: owner, body: { name: "v2" } }), p.authed.burst);
      expect((await api.call("GET", "/v1/vaults", { token: owner })).status).toBe(429);
      expect((await api.call("GET", "/v1/vaults", { token: other })).status).toBe(200);
      expect((await api.call("POST", "/v1/vaults", { token: other, body: { name: "v2" } })).status).toBe(201);
      api.clock.advance(1000);
      const again = await spend(() => api.call("GET", "/v1/vaults", { token: owner }), 200, 1000);
      expect(again.passed).toBe(Math.floor(p.authed.rps));
      expectLimited(again.last!, p.authed.burst);
    });
  }

  test("a 429 on AUTHED does not spend the login IP's AUTH budget, and vice versa", async () => {
    const api = await apiWith({ BROKER_RATELIMIT_AUTHED_BURST: "2", BROKER_RATELIMIT_AUTHED_RPS: "1", BROKER_RATELIMIT_AUTH_BURST: "3" });
    const owner = await register(api, "owner@example.com", "203.0.113.7");
    expect((await spend(() => api.call("GET", "/v1/vaults", { token: owner }), 200, 10)).passed).toBe(2);
    expect((await badLogin(api)).status).toBe(401); // 2 AUTH tokens were left after registering
    expect((await badLogin(api)).status).toBe(401);
    expectLimited(await badLogin(api), 3);
    api.clock.advance(1000);
    expect((await api.call("GET", "/v1/vaults", { token: owner })).status).toBe(200);
  });

  test("off never limits authenticated CRUD", async () => {
    const api = await apiWith({ BROKER_RATELIMIT_PROFILE: "off", BROKER_RATELIMIT_AUTHED_BURST: "1" });
    const owner = await register(api, "owner@example.com");
    for (let i = 0; i < 250; i++) expect((await api.call("GET", "/v1/vaults", { token: owner })).status).toBe(200);
  });
});

describe("owner settings API for rate limits", () => {
  test("locked: PATCH is 403 naming BROKER_RATELIMIT_LOCK and nothing changes; GET shows locked", async () => {
    const api = await apiWith({ BROKER_RATELIMIT_LOCK: "true", BROKER_RATELIMIT_PROXY_RPS: "7" });
    const owner = await register(api, "owner@example.com");
    const res = await api.call("PATCH", "/v1/owner/settings", { token: owner, body: { rate_limits: { proxy: { rps: 100 } } } });
    expect(res.status).toBe(403);
    expect(res.headers.get("x-broker-error")).toBe(res.body.error);
    expect(res.body.message).toContain("BROKER_RATELIMIT_LOCK");
    const got = await api.call("GET", "/v1/owner/settings", { token: owner });
    expect(got.body.rate_limits).toMatchObject({ locked: true, proxy: { rps: 7, burst: 200 } });
    expect(await api.store.settings.get("rate_limits")).toBeUndefined();
  });

  test("unlocked: 200, the new numbers apply at once, and are saved", async () => {
    const api = await apiWith({});
    const owner = await register(api, "owner@example.com", "198.51.100.1");
    const res = await api.call("PATCH", "/v1/owner/settings", { token: owner, body: { rate_limits: { proxy: { rps: 100 }, auth: { burst: 2, rps: 1 } } } });
    expect(res.status).toBe(200);
    expect(res.body.rate_limits).toMatchObject({ profile: "default", locked: false, proxy: { rps: 100, burst: 200 }, auth: { rps: 1, burst: 2 } });
    expect(await api.store.settings.get("rate_limits")).toMatchObject({ proxy: { rps: 100 }, auth: { burst: 2 } });
    expect((await badLogin(api)).status).toBe(401);
    expect((await badLogin(api)).status).toBe(401);
    expectLimited(await badLogin(api), 2);
    // Switching to off lifts every limit at once.
    expect((await api.call("PATCH", "/v1/owner/settings", { token: owner, body: { rate_limits: { profile: "off" } } })).status).toBe(200);
    for (let i = 0; i < 10; i++) expect((await badLogin(api)).status).toBe(401);
  });

  test("an invalid knob is 400 naming the field, and changes nothing", async () => {
    const api = await apiWith({});
    const owner = await register(api, "owner@example.com");
    const cases: [unknown, string][] = [
      [{ proxy: { rps: -1 } }, "proxy.rps"],
      [{ proxy: { burst: 1.5 } }, "proxy.burst"],
      [{ global: { burst: 5 } }, "global.burst"],
      [{ authed: { speed: 5 } }, "authed.speed"],
      [{ auth: { rps: "fast" } }, "auth.rps"],
      [{ profile: "turbo" }, "profile"],
      ["strict", "rate_limits"],
    ];
    for (const [rate_limits, field] of cases) {
      const res = await api.call("PATCH", "/v1/owner/settings", { token: owner, body: { rate_limits } });
      expect(res.status).toBe(400);
      expect(res.body.error).toBe("invalid_request");
      expect(`${res.body.field ?? ""} ${res.body.message}`).toContain(field);
    }
    const got = await api.call("GET", "/v1/owner/settings", { token: owner });
    expect(got.body.rate_limits).toMatchObject({ profile: "default", proxy: { rps: 50, burst: 200 } });
  });

  test("only the owner may change them", async () => {
    const api = await apiWith({});
    await register(api, "owner@example.com");
    const other = await register(api, "other@example.com", "198.51.100.2");
    const res = await api.call("PATCH", "/v1/owner/settings", { token: other, body: { rate_limits: { proxy: { rps: 1 } } } });
    expect(res.status).toBe(403);
    expect(res.body.message).not.toContain("BROKER_RATELIMIT_LOCK");
  });
});

describe("Argon2id behind the AUTH tier", () => {
  // The harness's gate is the server's (createHashGate, 2 at once, 64 waiting). Each hash it lets through is
  // held until the test lets it go, so the bounds show whatever the KDF costs: cheap parameters here; the
  // real ones, and the RSS they cost, in bench/logins.ts (`bun bench/logins.ts`).
  test("200 concurrent logins: at most 2 hash at once, 64 wait, the excess get 503 at once without hashing, none 500", async () => {
    const api = await apiWith({ BROKER_RATELIMIT_AUTH_BURST: "10000", BROKER_RATELIMIT_AUTH_RPS: "1000" });
    await register(api, "owner@example.com");
    const gate = api.domain.hashing;
    let arrived = 0;
    let hashing = 0;
    let peak = 0;
    let hashed = 0;
    const holds: (() => void)[] = [];
    let open = false;
    const watched: HashGate = {
      run(work) {
        arrived++;
        return gate.run(async () => {
          peak = Math.max(peak, ++hashing);
          try {
            if (!open) await new Promise<void>((r) => holds.push(r));
            return await work();
          } finally {
            hashing--;
            hashed++;
          }
        });
      },
    };
    Object.assign(api.domain, { hashing: watched });
    const until = async (done: () => boolean) => {
      for (const deadline = Date.now() + 10_000; !done() && Date.now() < deadline; ) await Bun.sleep(1);
    };
    const login = (i: number) =>
      api.call("POST", "/v1/auth/login", {
        body: { email: i % 2 ? "owner@example.com" : `nobody${i}@example.com`, password: "wrong password" },
        ip: `10.0.${i >> 8}.${i & 255}`,
      });
    const early: Res[] = [];
    const pending = Array.from({ length: 200 }, async (_, i) => {
      const res = await login(i);
      if (hashed === 0) early.push(res);
      return res;
    });
    // Every login has asked the gate, and the refusals are answered, while no hash has finished.
    await until(() => arrived === 200 && early.length >= 134);
    expect(arrived).toBe(200);
    expect(hashing).toBe(2);
    expect(hashed).toBe(0);
    expect(early.length).toBe(134);
    expect(early.every((r) => r.status === 503)).toBe(true);
    // One hash ends and hands its slot to the first waiter; a login arriving then waits in the freed queue place.
    holds.shift()!();
    await until(() => hashed === 1 && hashing === 2);
    const straggler = login(200);
    await until(() => arrived === 201);
    expect({ arrived, hashing, hashed }).toEqual({ arrived: 201, hashing: 2, hashed: 1 });
    open = true;
    for (const go of holds.splice(0)) go();
    const results = await Promise.all(pending);
    expect((await straggler).status).toBe(401);
    const counts: Record<number, number> = {};
    for (const r of results) counts[r.status] = (counts[r.status] ?? 0) + 1;
    expect(counts[500]).toBeUndefined();
    expect(
      Object.keys(counts)
        .map(Number)
        .every((s) => s === 401 || s === 503 || s === 429),
    ).toBe(true);
    // 2 hashing + 64 queued are served; everything beyond is refused without hashing.
    expect(counts[401]).toBe(66);
    expect(counts[503]).toBe(134);
    for (const r of results.filter((r) => r.status === 503)) {
      expect(r.body.error).toBe("unavailable");
      expect(r.headers.get("x-broker-error")).toBe("unavailable");
    }
    // Never more than 2 Argon2id at once (what bounds the memory), and only the admitted (66 + the straggler) hashed.
    expect(peak).toBe(2);
    expect(hashed).toBe(67);
  });
});
