// Live export to an OpenTelemetry collector (OTLP/HTTP): BROKER_OTEL_EXPORTER_OTLP_ENDPOINT turns it on,
// and the standard OTEL_* variables that apply to an OTLP/HTTP exporter shape it. Read here so config.ts
// stays the only reader of the environment: the SDK's own environment readers are never called.
// Header values (collector API keys) travel as Secrets and no problem message repeats one.

import { Secret } from "./secret.ts";

type Env = Record<string, string | undefined>;

export const OTLP_PROTOCOLS = ["http/protobuf", "http/json"] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** How one signal (traces or logs) is sent. */
export interface OtlpSignalConfig {
  /** The base endpoint with the signal's path appended (`/v1/traces`, `/v1/logs`), as the OTLP exporter spec says. */
  readonly url: string;
  readonly protocol: OtlpProtocol;
  /** SECRET values: collector API keys. Names are lower-case. */
  readonly headers: ReadonlyMap<string, Secret>;
  readonly timeoutMs: number;
  readonly compression: "gzip" | "none";
}

export interface OtelConfig {
  readonly traces: OtlpSignalConfig;
  readonly logs: OtlpSignalConfig;
  /** The resource's service.name: OTEL_SERVICE_NAME, else service.name in OTEL_RESOURCE_ATTRIBUTES, else "broker". */
  readonly serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES, decoded (service.name taken out: it is serviceName). */
  readonly resourceAttributes: Readonly<Record<string, string>>;
}

const SIGNALS = { traces: "TRACES", logs: "LOGS" } as const;
/** Spec default for OTEL_EXPORTER_OTLP_TIMEOUT. */
const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * Undefined (export off) when BROKER_OTEL_EXPORTER_OTLP_ENDPOINT is unset or OTEL_SDK_DISABLED is true. The
 * standard OTEL_EXPORTER_OTLP_ENDPOINT never turns it on: it is often set machine-wide for other programs,
 * and this export ships the audit log, which an operator turns on by its own name.
 */
export function readOtelConfig(env: Env, problems: string[]): OtelConfig | undefined {
  const raw = env.BROKER_OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!raw) return undefined;
  const base = readEndpoint(raw, problems);
  const resource = readResourceAttributes(env.OTEL_RESOURCE_ATTRIBUTES, problems);
  const { "service.name": fromAttributes, ...resourceAttributes } = resource;
  const config: OtelConfig = {
    traces: readSignal(env, "traces", base, problems),
    logs: readSignal(env, "logs", base, problems),
    serviceName: env.OTEL_SERVICE_NAME?.trim() || fromAttributes || "broker",
    resourceAttributes: Object.freeze(resourceAttributes),
  };
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  return config;
}

function readSignal(env: Env, signal: keyof typeof SIGNALS, base: string, problems: string[]): OtlpSignalConfig {
  const name = (what: string) => {
    const specific = `OTEL_EXPORTER_OTLP_${SIGNALS[signal]}_${what}`;
    return env[specific] !== undefined && env[specific]!.trim() !== "" ? specific : `OTEL_EXPORTER_OTLP_${what}`;
  };
  const protocolVar = name("PROTOCOL");
  const timeoutVar = name("TIMEOUT");
  const compressionVar = name("COMPRESSION");
  // Per the spec, the signal-specific headers are added to the general ones (and win on a shared name).
  const headers = new Map([
    ...readHeaders("OTEL_EXPORTER_OTLP_HEADERS", env.OTEL_EXPORTER_OTLP_HEADERS, problems),
    ...readHeaders(`OTEL_EXPORTER_OTLP_${SIGNALS[signal]}_HEADERS`, env[`OTEL_EXPORTER_OTLP_${SIGNALS[signal]}_HEADERS`], problems),
  ]);
  return {
    url: `${base}/v1/${signal}`,
    protocol: readProtocol(protocolVar, env[protocolVar], problems),
    headers,
    timeoutMs: readTimeout(timeoutVar, env[timeoutVar], problems),
    compression: readCompression(compressionVar, env[compressionVar], problems),
  };
}

/** An http(s) URL without credentials, query or fragment; a trailing slash dropped so the signal path joins it. */
function readEndpoint(raw: string, problems: string[]): string {
  try {
    const url = new URL(raw);
    if ((url.protocol === "http:" || url.protocol === "https:") && !url.username && !url.password && !url.search && !url.hash) {
      return url.href.replace(/\/+$/, "");
    }
  } catch {
    // reported below
  }
  // Not repeated: a mistyped value may hold a key someone meant for the headers.
  problems.push(
    "BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: must be an http(s) URL without credentials, query or fragment (the collector's base, e.g. http://127.0.0.1:4318)",
  );
  return "http://invalid";
}

function readProtocol(name: string, raw: string | undefined, problems: string[]): OtlpProtocol {
  const v = raw?.trim().toLowerCase();
  if (!v) return "http/protobuf";
  if ((OTLP_PROTOCOLS as readonly string[]).includes(v)) return v as OtlpProtocol;
  problems.push(`${name}: must be http/protobuf or http/json (gRPC is not supported)`);
  return "http/protobuf";
}

function readTimeout(name: string, raw: string | undefined, problems: string[]): number {
  const v = raw?.trim();
  if (!v) return DEFAULT_TIMEOUT_MS;
  if (!/^\d+$/.test(v) || Number(v) < 100 || Number(v) > 600_000) {
    problems.push(`${name}: must be milliseconds from 100 to 600000`);
    return DEFAULT_TIMEOUT_MS;
  }
  return Number(v);
}

function readCompression(name: string, raw: string | undefined, problems: string[]): "gzip" | "none" {
  const v = raw?.trim().toLowerCase();
  if (!v || v === "none") return "none";
  if (v === "gzip") return "gzip";
  problems.push(`${name}: must be gzip or none`);
  return "none";
}

/** W3C Baggage-style `key=value` pairs, comma-separated, percent-decoded (the OTLP exporter spec's format). */
function readPairs(name: string, raw: string | undefined, problems: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (const item of (raw ?? "").split(",")) {
    if (!item.trim()) continue;
    const eq = item.indexOf("=");
    let key = "";
    let value = "";
    try {
      key = decodeURIComponent(item.slice(0, eq).trim());
      value = decodeURIComponent(item.slice(eq + 1).trim());
    } catch {
      key = "";
    }
    // The entry is never quoted back: a header's value is a collector's API key.
    if (eq <= 0 || !key) problems.push(`${name}: entry ${out.length + 1} is not key=value (percent-encoded)`);
    else out.push([key, value]);
  }
  return out;
}

function readHeaders(name: string, raw: string | undefined, problems: string[]): [string, Secret][] {
  return readPairs(name, raw, problems).flatMap(([k, v]): [string, Secret][] => {
    // A header the transport would refuse (or that could split the request) is refused here, at start.
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(k) || /[\r\n\0]/.test(v)) {
      problems.push(`${name}: "${k.replace(/[^\x20-\x7e]/g, "?").slice(0, 40)}" is not a valid header`);
      return [];
    }
    return [[k.toLowerCase(), new Secret(v)]];
  });
}

function readResourceAttributes(raw: string | undefined, problems: string[]): Record<string, string> {
  return Object.fromEntries(readPairs("OTEL_RESOURCE_ATTRIBUTES", raw, problems));
}
