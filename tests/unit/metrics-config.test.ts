// BROKER_METRICS and BROKER_METRICS_TOKEN: off by default, open with true, token-protected with a token.

import { expect, test } from "bun:test";
import { loadConfig } from "../../src/config.ts";
import { statusClass } from "../../src/server/kit/metrics.ts";

const base = { BROKER_DATA_DIR: "/tmp/broker-metrics-config" };

test("metrics are off unless BROKER_METRICS=true or a token is set", () => {
  expect(loadConfig(base).metrics).toBeUndefined();
  expect(loadConfig({ ...base, BROKER_METRICS: "false" }).metrics).toBeUndefined();
  expect(loadConfig({ ...base, BROKER_METRICS: "true" }).metrics).toEqual({ token: undefined });
  const token = "0123456789abcdef-token";
  const on = loadConfig({ ...base, BROKER_METRICS_TOKEN: token }).metrics;
  expect(on?.token?.reveal()).toBe(token);
  expect(JSON.stringify(on)).not.toContain(token);
});

test("a short token or a bad boolean is a configuration problem naming its variable, never the token", () => {
  expect(() => loadConfig({ ...base, BROKER_METRICS_TOKEN: "short-secret" })).toThrow(/BROKER_METRICS_TOKEN: must be at least 16 characters/);
  try {
    loadConfig({ ...base, BROKER_METRICS_TOKEN: "short-secret" });
  } catch (err) {
    expect(String(err)).not.toContain("short-secret");
  }
  expect(() => loadConfig({ ...base, BROKER_METRICS: "yes please" })).toThrow(/BROKER_METRICS/);
});

test("status classes", () => {
  expect([101, 200, 204, 301, 404, 429, 500, 503].map(statusClass)).toEqual(["1xx", "2xx", "2xx", "3xx", "4xx", "4xx", "5xx", "5xx"]);
});
