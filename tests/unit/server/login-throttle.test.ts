// The login throttle through the real routes, in process, on a movable clock: 200 wrong passwords from one
// address, lock-out expiry and reset, unknown emails throttled exactly like known ones, the per-address
// threshold, no Argon2id while locked, change-password and the approval page's sign-in, and
// BROKER_RATELIMIT_PROFILE=off leaving it on.

import { describe, expect, test } from "bun:test";
import { loadConfig } from "../../../src/config.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createRateLimiter, resolveSettings } from "../../../src/ratelimit/index.ts";
import { createApi } from "../../../src/server/app.ts";
import { createTestApi, type TestApi } from "../../helpers/api.ts";
import { createVault, fileAgentProposal, headerPairs } from "./fixtures.ts";

const PASSWORD = "correct horse battery";
type Res = { status: number; body: any; headers: Headers };

async function register(api: TestApi, email: string): Promise<string> {
  const res = await api.call("POST", "/v1/auth/register", { body: { email, password: PASSWORD }, ip: "198.51.100.1" });
  expect(res.status).toBe(201);
  return res.body.token;
}

const login = (api: TestApi, email: string, password: string, ip = "203.0.113.7") => api.call("POST", "/v1/auth/login", { body: { email, password }, ip });

/** Counts password checks that reach Argon2id. */
function countHashing(api: TestApi): { count: number } {
  const counter = { count: 0 };
  const gate = api.domain.hashing;
  (api.domain as { hashing: typeof gate }).hashing = { run: (work) => ((counter.count += 1), gate.run(work)) };
  return counter;
}

function expectThrottled(res: Res): number {
  expect(res.status).toBe(429);
  expect(res.body).toMatchObject({ error: "rate_limited", message: "too many failed sign-in attempts; wait before trying again" });
  expect(res.headers.get("x-broker-error")).toBe("rate_limited");
  const retry = res.headers.get("retry-after") ?? "";
  expect(retry).toMatch(/^[1-9]\d*$/);
  expect(res.body.retry_after).toBe(Number(retry));
  return Number(retry);
}

describe("per account", () => {
  test("200 wrong passwords from one address: 5 get 401, the other 195 get 429 without hashing", async () => {
    const api = await createTestApi();
    await register(api, "owner@example.com");
    const hashing = countHashing(api);
    const statuses: number[] = [];
    let last: Res | undefined;
    for (let i = 0; i < 200; i++) {
      last = await login(api, "owner@example.com", `wrong password ${i}`);
      statuses.push(last.status);
    }
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses.slice(5).every((s) => s === 429)).toBe(true);
    expect(hashing.count).toBe(5);
    expect(expectThrottled(last!)).toBe(1);
    expect(JSON.stringify(last!.body)).not.toContain("wrong password");
    // Even the right password waits out the lock (otherwise a 200 would confirm a guess at once).
    expectThrottled(await login(api, "owner@example.com", PASSWORD));
  });

  test("after the lock the right password succeeds and resets the count; each further lock doubles", async () => {
    const api = await createTestApi();
    await register(api, "owner@example.com");
    for (let i = 0; i < 5; i++) expect((await login(api, "owner@example.com", "wrong password")).status).toBe(401);
    const wait = expectThrottled(await login(api, "owner@example.com", PASSWORD));
    api.clock.advance(wait * 1000);
    expect((await login(api, "owner@example.com", PASSWORD)).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await login(api, "owner@example.com", "wrong password")).status).toBe(401);
    expect(expectThrottled(await login(api, "owner@example.com", "wrong password"))).toBe(1);
    api.clock.advance(1000);
    expect((await login(api, "owner@example.com", "wrong password")).status).toBe(401); // the probe after the lock
    expect(expectThrottled(await login(api, "owner@example.com", "wrong password"))).toBe(2);
    api.clock.advance(2000);
    expect((await login(api, "owner@example.com", PASSWORD)).status).toBe(200);
  });

  test("an unknown email is throttled exactly like a known one: same statuses, bodies, headers and waits", async () => {
    const api = await createTestApi();
    await register(api, "owner@example.com");
    const run = async (email: string, ip: string) => {
      const out: [number, unknown, [string, string][]][] = [];
      for (let i = 0; i < 8; i++) {
        const res = await login(api, email, "wrong password", ip);
        out.push([res.status, res.body, headerPairs(res.headers)]);
      }
      return out;
    };
    const known = await run("owner@example.com", "203.0.113.1");
    const unknown = await run("nobody@example.com", "203.0.113.2");
    expect(known.map(([s]) => s)).toEqual([401, 401, 401, 401, 401, 429, 429, 429]);
    expect(unknown).toEqual(known);
  });

  test("the email is normalised: case and surrounding spaces do not make a new account key", async () => {
    const api = await createTestApi();
    await register(api, "owner@example.com");
    for (const email of ["owner@example.com", "OWNER@example.com", " Owner@Example.COM ", "owner@EXAMPLE.com", "oWnEr@example.com"]) {
      expect((await login(api, email, "wrong password")).status).toBe(401);
    }
    expectThrottled(await login(api, "Owner@example.com", "wrong password"));
  });
});

describe("per client address", () => {
  test("20 failures over 20 emails lock the address; another address still signs in", async () => {
    const api = await createTestApi();
    await register(api, "owner@example.com");
    for (let i = 0; i < 20; i++) expect((await login(api, `user${i}@example.com`, "wrong password")).status).toBe(401);
    expectThrottled(await login(api, "owner@example.com", PASSWORD));
    expect((await login(api, "owner@example.com", PASSWORD, "203.0.113.99")).status).toBe(200);
  });
});

describe("with BROKER_RATELIMIT_PROFILE=off", () => {
  test("the throttle is not a rate-limit profile: it still answers 429", async () => {
    const { rateLimit: r } = loadConfig({ BROKER_DATA_DIR: "/nonexistent/broker-throttle-unit", BROKER_RATELIMIT_PROFILE: "off" });
    const api = await createTestApi({ rateLimiter: (now) => createRateLimiter(resolveSettings(r.profile, r.overrides, r.locked), now) });
    await register(api, "owner@example.com");
    const statuses: number[] = [];
    for (let i = 0; i < 50; i++) statuses.push((await login(api, "owner@example.com", "wrong password")).status);
    expect(statuses.filter((s) => s === 401).length).toBe(5);
    expect(statuses.filter((s) => s === 429).length).toBe(45);
  });
});

describe("every password check", () => {
  test("change-password: five wrong current passwords, then 429 (even with the right one) until the lock ends", async () => {
    const api = await createTestApi();
    const token = await register(api, "owner@example.com");
    const change = (current: string) =>
      api.call("POST", "/v1/auth/change-password", { token, body: { current_password: current, new_password: "a brand new password" }, ip: "203.0.113.7" });
    for (let i = 0; i < 5; i++) expect((await change("not my password")).status).toBe(401);
    const wait = expectThrottled(await change(PASSWORD));
    // Login shares the account's count: the guesses above were against the same password.
    expectThrottled(await login(api, "owner@example.com", PASSWORD, "203.0.113.8"));
    api.clock.advance(wait * 1000);
    expect((await change(PASSWORD)).status).toBe(200);
  });

  test("the approval page's sign-in: 429 with Retry-After and a page that says how long to wait", async () => {
    const api = await createTestApi();
    const h = { ...api, responses: [], tokens: new Set<string>() };
    const owner = await register(api, "owner@example.com");
    await createVault(h, owner, "v1");
    const proposal = await fileAgentProposal(h, owner, "v1");
    const token = proposal.token;
    const page = createApi({ domain: api.domain, log: createMemoryLogger() });
    const opened = await page.request(proposal.path);
    const csrf = /broker_csrf=([^;]+)/.exec(opened.headers.get("set-cookie") ?? "")![1]!;
    const signIn = (password: string) =>
      page.request(`/approve/${proposal.id}/login`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          cookie: `broker_csrf=${csrf}`,
          origin: "http://localhost",
          "sec-fetch-site": "same-origin",
        },
        body: new URLSearchParams({ token, csrf, email: "owner@example.com", password }).toString(),
      });
    for (let i = 0; i < 5; i++) expect((await signIn("wrong password")).status).toBe(403);
    const limited = await signIn(PASSWORD);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("1");
    expect(limited.headers.getSetCookie().some((c) => c.startsWith("broker_session="))).toBe(false);
    expect(await limited.text()).toContain("Too many failed sign-in attempts. Try again in 1 second.");
    api.clock.advance(1000);
    const ok = await signIn(PASSWORD);
    expect(ok.status).toBe(303);
    expect(ok.headers.getSetCookie().some((c) => c.startsWith("broker_session="))).toBe(true);
  });
});
