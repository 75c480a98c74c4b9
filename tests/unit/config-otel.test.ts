// BROKER_OTEL_EXPORTER_OTLP_ENDPOINT and the OTEL_* variables the export reads (config-otel.ts): off by
// default and with OTEL_SDK_DISABLED, the signal paths, the spec's precedence (signal-specific over
// general; OTEL_SERVICE_NAME over the resource's service.name), problems that never repeat a header
// value, and every setting in the README's table.

import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ConfigError, loadConfig, SETTINGS, type Env } from "../../src/config.ts";
import { RATE_LIMIT_SETTINGS } from "../../src/ratelimit/index.ts";

const HOME: Env = { HOME: "/home/test" };
const ON: Env = { ...HOME, BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: "https://collector.example:4318/" };

function problems(env: Env): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe("OTLP export settings", () => {
  test("off unless BROKER_OTEL_EXPORTER_OTLP_ENDPOINT is set; the standard endpoint alone turns nothing on", () => {
    expect(loadConfig(HOME).otel).toBeUndefined();
    expect(loadConfig({ ...HOME, OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_EXPORTER_OTLP_HEADERS: "a=b" }).otel).toBeUndefined();
    expect(loadConfig({ ...ON, OTEL_SDK_DISABLED: "true" }).otel).toBeUndefined();
  });

  test("defaults: http/protobuf, 10 s, no compression, service.name broker; the signal paths join the base", () => {
    const otel = loadConfig(ON).otel!;
    expect(otel.traces).toMatchObject({ url: "https://collector.example:4318/v1/traces", protocol: "http/protobuf", timeoutMs: 10_000, compression: "none" });
    expect(otel.logs.url).toBe("https://collector.example:4318/v1/logs");
    expect(otel.serviceName).toBe("broker");
    expect(loadConfig({ ...ON, BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318/otlp" }).otel!.traces.url).toBe(
      "http://127.0.0.1:4318/otlp/v1/traces",
    );
  });

  test("signal-specific settings win; headers add up; values are percent-decoded Secrets", () => {
    const otel = loadConfig({
      ...ON,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_LOGS_PROTOCOL: "http/protobuf",
      OTEL_EXPORTER_OTLP_TIMEOUT: "2500",
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "700",
      OTEL_EXPORTER_OTLP_COMPRESSION: "gzip",
      OTEL_EXPORTER_OTLP_HEADERS: "Authorization=Bearer%20general,x-team=a",
      OTEL_EXPORTER_OTLP_LOGS_HEADERS: "x-team=logs",
    }).otel!;
    expect(otel.traces).toMatchObject({ protocol: "http/json", timeoutMs: 700, compression: "gzip" });
    expect(otel.logs).toMatchObject({ protocol: "http/protobuf", timeoutMs: 2500, compression: "gzip" });
    const reveal = (m: ReadonlyMap<string, { reveal(): string }>) => Object.fromEntries([...m].map(([k, v]) => [k, v.reveal()]));
    expect(reveal(otel.traces.headers)).toEqual({ authorization: "Bearer general", "x-team": "a" });
    expect(reveal(otel.logs.headers)).toEqual({ authorization: "Bearer general", "x-team": "logs" });
    expect(JSON.stringify(otel)).not.toContain("general");
  });

  test("OTEL_SERVICE_NAME wins over the resource's service.name, which is not kept twice", () => {
    const env = { ...ON, OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attrs,deployment.environment.name=prod%20eu" };
    expect(loadConfig(env).otel).toMatchObject({ serviceName: "from-attrs", resourceAttributes: { "deployment.environment.name": "prod eu" } });
    expect(loadConfig({ ...env, OTEL_SERVICE_NAME: "edge-broker" }).otel!.serviceName).toBe("edge-broker");
  });

  test("bad values are reported together, each naming its variable, never quoting a header's value", () => {
    const found = problems({
      ...HOME,
      BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: "https://user:pw-sentinel@collector.example",
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      OTEL_EXPORTER_OTLP_TIMEOUT: "soon",
      OTEL_EXPORTER_OTLP_COMPRESSION: "zstd",
      OTEL_EXPORTER_OTLP_HEADERS: "novalue-sentinel,bad header=x,ok=line%0Abreak-sentinel",
    }).join("\n");
    for (const name of ["BROKER_OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_COMPRESSION"]) {
      expect(found).toContain(name);
    }
    expect(found).toContain("gRPC is not supported");
    expect(found.match(/OTEL_EXPORTER_OTLP_HEADERS/g)?.length).toBeGreaterThanOrEqual(3);
    for (const secret of ["pw-sentinel", "novalue-sentinel", "break-sentinel"]) expect(found).not.toContain(secret);
  });

  test("a relative or schemeless endpoint is refused", () => {
    expect(problems({ ...HOME, BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })[0]).toContain("BROKER_OTEL_EXPORTER_OTLP_ENDPOINT");
    expect(problems({ ...HOME, BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/?x=1" })[0]).toContain("BROKER_OTEL_EXPORTER_OTLP_ENDPOINT");
  });
});

test("every server setting `broker server --help` lists is a row of the README's configuration table", () => {
  const readme = readFileSync(resolve(import.meta.dir, "..", "..", "README.md"), "utf8");
  const missing = [...SETTINGS, ...RATE_LIMIT_SETTINGS].map((s) => s.name).filter((name) => !readme.includes(`| \`${name}\` |`));
  expect(missing).toEqual([]);
});
