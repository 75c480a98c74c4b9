// Per-knob environment overrides: parsing, problems naming the variable, resolution over each profile,
// and the documentation rows for `broker server --help`.

import { describe, expect, test } from "bun:test";
import { RATE_LIMIT_ENV_NAMES, RATE_LIMIT_SETTINGS, readRateLimitEnv, resolveSettings } from "../../../src/ratelimit/index.ts";

describe("readRateLimitEnv", () => {
  test("reads every knob", () => {
    const problems: string[] = [];
    const env = {
      BROKER_RATELIMIT_AUTH_RPS: "1.5",
      BROKER_RATELIMIT_AUTH_BURST: "6",
      BROKER_RATELIMIT_AUTHED_RPS: "7",
      BROKER_RATELIMIT_AUTHED_BURST: "8",
      BROKER_RATELIMIT_PROXY_RPS: " 90 ",
      BROKER_RATELIMIT_PROXY_BURST: "300",
      BROKER_RATELIMIT_GLOBAL_RPS: "5000",
      BROKER_RATELIMIT_GLOBAL_INFLIGHT: "64",
    };
    expect(readRateLimitEnv(env, problems)).toEqual({
      auth: { rps: 1.5, burst: 6 },
      authed: { rps: 7, burst: 8 },
      proxy: { rps: 90, burst: 300 },
      global: { rps: 5000, inflight: 64 },
    });
    expect(problems).toEqual([]);
  });

  test("absent and empty variables are no override", () => {
    const problems: string[] = [];
    expect(readRateLimitEnv({ BROKER_RATELIMIT_PROXY_RPS: "", HOME: "/x" }, problems)).toEqual({});
    expect(problems).toEqual([]);
  });

  test("each invalid value is a problem naming its variable, and all are reported at once", () => {
    const bad: Record<string, string> = {
      BROKER_RATELIMIT_AUTH_RPS: "0",
      BROKER_RATELIMIT_AUTH_BURST: "2.5",
      BROKER_RATELIMIT_AUTHED_RPS: "-3",
      BROKER_RATELIMIT_AUTHED_BURST: "lots",
      BROKER_RATELIMIT_PROXY_RPS: "1e3",
      BROKER_RATELIMIT_PROXY_BURST: "99999999999",
      BROKER_RATELIMIT_GLOBAL_RPS: "Infinity",
      BROKER_RATELIMIT_GLOBAL_INFLIGHT: "0x10",
    };
    const problems: string[] = [];
    expect(readRateLimitEnv(bad, problems)).toEqual({});
    expect(problems.length).toBe(8);
    for (const name of Object.keys(bad)) expect(problems.some((p) => p.startsWith(`${name}: `))).toBe(true);
    expect(problems.join("\n")).not.toContain("lots"); // the value itself is never echoed
  });

  test("overrides are absolute: they replace the profile's value, the other knobs follow the profile", () => {
    const overrides = readRateLimitEnv({ BROKER_RATELIMIT_PROXY_RPS: "80", BROKER_RATELIMIT_GLOBAL_INFLIGHT: "100" }, []);
    const strict = resolveSettings("strict", overrides, true);
    expect(strict).toMatchObject({ profile: "strict", locked: true, proxy: { rps: 80, burst: 100 }, global: { rps: 1000, inflight: 100 } });
    expect(resolveSettings("loose", overrides).proxy).toEqual({ rps: 80, burst: 400 });
    expect(Object.isFrozen(strict) && Object.isFrozen(strict.proxy)).toBe(true);
  });
});

describe("documentation rows", () => {
  test("one row per knob, each with a default and a description", () => {
    expect(RATE_LIMIT_SETTINGS.map((s) => s.name)).toEqual([...RATE_LIMIT_ENV_NAMES]);
    expect(RATE_LIMIT_ENV_NAMES.length).toBe(8);
    const proxyRps = RATE_LIMIT_SETTINGS.find((s) => s.name === "BROKER_RATELIMIT_PROXY_RPS");
    expect(proxyRps?.default).toBe("50 (strict 25, loose 100)");
    for (const s of RATE_LIMIT_SETTINGS) expect(s.description.length).toBeGreaterThan(10);
  });
});
