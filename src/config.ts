// The only reader of BROKER_* settings. `loadConfig` is pure: it takes an environment, validates
// every setting, reports all problems at once (each naming its variable) and returns a frozen Config.
// `takeMasterPassword` reads BROKER_MASTER_PASSWORD and deletes it so no child process inherits it.

import ipaddr from "ipaddr.js";
import { LOG_LEVELS, type LogLevel } from "./log.ts";
import { RATE_LIMIT_SETTINGS, readRateLimitEnv, type RateLimitOverrides } from "./ratelimit/index.ts";
import { Secret } from "./secret.ts";
import { readOidcConfig, type OidcConfig } from "./config-oidc.ts";
import { readMasterPassword } from "./config-master-password.ts";
import { normaliseHostName, readHostMappings, type HostMapping } from "./config-host.ts";
import { CONNECT_PREFIX, readConnectApps, type ConnectApp } from "./config-connect.ts";
import { readOtelConfig, type OtelConfig } from "./config-otel.ts";
import { readWorkerRole, readWorkers, WORKER_ENV, type WorkerRole } from "./config-workers.ts";

export type Env = Record<string, string | undefined>;
import { RATE_PROFILES, type RateProfile } from "./ratelimit/index.ts";
import { SETTINGS } from "./config-settings.ts";

export { RATE_PROFILES, type RateProfile };
export type { OidcConfig } from "./config-oidc.ts";
export { MAX_WORKERS, WORKER_ENV, type WorkerRole } from "./config-workers.ts";
export type { OtelConfig, OtlpProtocol, OtlpSignalConfig } from "./config-otel.ts";
export { normaliseHostName, type HostMapping } from "./config-host.ts";
export { connectEnvId, type ClientAuthMethod, type ConnectApp } from "./config-connect.ts";

export interface Config {
  readonly dataDir: string;
  /** BROKER_DATABASE_URL: PostgreSQL shared by several instances; undefined keeps the embedded SQLite file. */
  readonly database: DatabaseConfig | undefined;
  readonly bindHost: string;
  readonly apiPort: number;
  readonly proxyPort: number;
  /** Explicit BROKER_PUBLIC_URL, or undefined: the server then uses the address it actually bound. */
  readonly publicUrl: string | undefined;
  /** BROKER_SECRET_STORE_TOKEN_FILES: the only files a secret store connection's JWT or Kubernetes sign-in may read. */
  readonly secretStoreTokenFiles: readonly string[];
  /** BROKER_ALLOWED_HOSTS, normalised (see normaliseHostName): more names the API answers to. */
  readonly allowedHosts: readonly string[];
  /** BROKER_TRUSTED_PROXIES, as CIDRs: reverse proxies whose X-Forwarded-For names the client address. */
  readonly trustedProxies: readonly string[];
  readonly allowPrivateRanges: boolean;
  readonly networkAllowlist: readonly string[];
  /** BROKER_RESOLVE: host:port pairs dialled at a fixed address instead of the DNS answer; the guard checks it alike. */
  readonly hostMappings: readonly HostMapping[];
  readonly upstreamCaFile: string | undefined;
  readonly rateLimit: { readonly profile: RateProfile; readonly locked: boolean; readonly overrides: RateLimitOverrides };
  readonly logLevel: LogLevel;
  /** Body caps in bytes for proxied traffic; 0 means no cap. */
  readonly maxRequestBytes: number;
  readonly maxResponseBytes: number;
  readonly upstreamTimeoutMs: number;
  /** How soon after fetching a workload issuer's keys an unknown `kid` may fetch them again (issue 39, D27). */
  readonly workloadJwksCooldownMs: number;
  /** Open tunnels one principal may hold at once. */
  readonly maxTunnelsPerPrincipal: number;
  readonly auditRetentionDays: number;
  readonly auditMaxRows: number;
  /** BROKER_AUDIT_CHECKPOINT_RECORDS: a signed checkpoint of the audit chains once this many records were written since the last. */
  readonly auditCheckpointRecords: number;
  /** BROKER_AUDIT_CHECKPOINT_SECONDS: a signed checkpoint once this long has passed since the last, when a record was written. */
  readonly auditCheckpointSeconds: number;
  /** How long a SIGTERM/SIGINT waits for in-flight requests and open tunnels before cutting them. */
  readonly shutdownGraceMs: number;
  /** GET /metrics: undefined when off; with a token (SECRET: never log) a bearer token is required. */
  readonly metrics: { readonly token: Secret | undefined } | undefined;
  /** Identity-provider sign-in; undefined when BROKER_OIDC_ISSUER is unset (the feature is off). */
  readonly oidc: OidcConfig | undefined;
  /** BROKER_CONNECT_<ID>_*: OAuth apps for connecting accounts, one per template id; empty when none is set. */
  readonly connect: readonly ConnectApp[];
  /** BROKER_LLM_PRICES_FILE: the operator's LLM price table (issue 38), read and checked at start (app/); undefined: the shipped one. */
  readonly pricesFile?: string;
  /** Live export of traces and audit records over OTLP/HTTP; undefined (off, nothing runs) without BROKER_OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly otel?: OtelConfig;
  /** Unknown BROKER_* names: likely typos, shown as warnings rather than ignored silently. */
  readonly warnings: readonly string[];
  /** BROKER_WORKERS (issue 40): processes serving both ports together; 1 serves alone. */
  readonly workers: number;
  /** Inside a worker the supervisor started: which one, of how many (ports shared with SO_REUSEPORT). */
  readonly worker?: WorkerRole;
}

export interface DatabaseConfig {
  /** The URL holds the database password: kept wrapped so no log line or error can print it. */
  readonly url: Secret;
  readonly poolSize: number;
  /** How long cached sessions and credentials keep serving proxied requests while the database is unreachable. */
  readonly outageGraceMs: number;
  /** Longest wait for one statement before the database counts as away (a frozen server answers nothing). */
  readonly statementTimeoutMs: number;
}

export { SETTINGS, type SettingDoc } from "./config-settings.ts";

/** BROKER_* names that belong to the CLI or to `broker vault run` children, not to the server. */
const CLIENT_SETTINGS = ["BROKER_ADDR", "BROKER_SESSION_TOKEN", "BROKER_VAULT", "BROKER_CONFIG_DIR", "BROKER_IDENTITY_TOKEN_FILE"];

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}

export interface LoadOptions {
  /** Home directory for the default data directory; taken from HOME when absent. */
  readonly homeDir?: string;
}

export function loadConfig(env: Env, opts: LoadOptions = {}): Config {
  const problems: string[] = [];
  const home = opts.homeDir ?? env.HOME;
  const dataDir = readDataDir(env.BROKER_DATA_DIR, home, problems);
  const bindHost = readHost(env.BROKER_HOST, problems);
  const apiPort = readPort("BROKER_PORT", env.BROKER_PORT, 14321, problems);
  const proxyPort = readPort("BROKER_PROXY_PORT", env.BROKER_PROXY_PORT, 14322, problems);
  if (apiPort === proxyPort && apiPort !== 0) problems.push(`BROKER_PROXY_PORT: must differ from BROKER_PORT (both ${apiPort})`);
  const publicUrl = readPublicUrl(env.BROKER_PUBLIC_URL, problems);
  const config: Config = {
    dataDir,
    database: readDatabase(env, problems),
    bindHost,
    apiPort,
    proxyPort,
    publicUrl,
    allowedHosts: Object.freeze(readHostList("BROKER_ALLOWED_HOSTS", env.BROKER_ALLOWED_HOSTS, problems)),
    secretStoreTokenFiles: Object.freeze(readPathList("BROKER_SECRET_STORE_TOKEN_FILES", env.BROKER_SECRET_STORE_TOKEN_FILES, problems)),
    trustedProxies: Object.freeze(readTrustedProxies(env.BROKER_TRUSTED_PROXIES, problems)),
    allowPrivateRanges: readBool("BROKER_ALLOW_PRIVATE_RANGES", env.BROKER_ALLOW_PRIVATE_RANGES, false, problems),
    networkAllowlist: Object.freeze(readCidrList("BROKER_NETWORK_ALLOWLIST", env.BROKER_NETWORK_ALLOWLIST, problems)),
    hostMappings: Object.freeze(readHostMappings(env.BROKER_RESOLVE, problems)),
    upstreamCaFile: readOptionalPath("BROKER_UPSTREAM_CA_FILE", env.BROKER_UPSTREAM_CA_FILE, problems),
    rateLimit: Object.freeze({
      profile: readOneOf("BROKER_RATELIMIT_PROFILE", env.BROKER_RATELIMIT_PROFILE, RATE_PROFILES, "default", problems),
      locked: readBool("BROKER_RATELIMIT_LOCK", env.BROKER_RATELIMIT_LOCK, false, problems),
      overrides: readRateLimitEnv(env, problems),
    }),
    logLevel: readOneOf("BROKER_LOG_LEVEL", env.BROKER_LOG_LEVEL, LOG_LEVELS, "info", problems),
    maxRequestBytes: readInt("BROKER_MAX_REQUEST_BYTES", env.BROKER_MAX_REQUEST_BYTES, 4 * 1024 ** 3, 0, Number.MAX_SAFE_INTEGER, problems),
    maxResponseBytes: readInt("BROKER_MAX_RESPONSE_BYTES", env.BROKER_MAX_RESPONSE_BYTES, 0, 0, Number.MAX_SAFE_INTEGER, problems),
    // Generous by default: a model API can think for minutes before its first byte.
    maxTunnelsPerPrincipal: readInt("BROKER_MAX_TUNNELS_PER_PRINCIPAL", env.BROKER_MAX_TUNNELS_PER_PRINCIPAL, 2000, 1, 20_000, problems),
    upstreamTimeoutMs: readInt("BROKER_UPSTREAM_TIMEOUT_MS", env.BROKER_UPSTREAM_TIMEOUT_MS, 300_000, 100, 3_600_000, problems),
    workloadJwksCooldownMs: readInt("BROKER_WORKLOAD_JWKS_COOLDOWN_MS", env.BROKER_WORKLOAD_JWKS_COOLDOWN_MS, 30_000, 0, 3_600_000, problems),
    auditRetentionDays: readInt("BROKER_AUDIT_RETENTION_DAYS", env.BROKER_AUDIT_RETENTION_DAYS, 30, 1, 3650, problems),
    auditMaxRows: readInt("BROKER_AUDIT_MAX_ROWS", env.BROKER_AUDIT_MAX_ROWS, 1_000_000, 1000, 1_000_000_000, problems),
    auditCheckpointRecords: readInt("BROKER_AUDIT_CHECKPOINT_RECORDS", env.BROKER_AUDIT_CHECKPOINT_RECORDS, 1000, 1, 100_000_000, problems),
    auditCheckpointSeconds: readInt("BROKER_AUDIT_CHECKPOINT_SECONDS", env.BROKER_AUDIT_CHECKPOINT_SECONDS, 300, 1, 86_400, problems),
    shutdownGraceMs: readInt("BROKER_SHUTDOWN_GRACE_S", env.BROKER_SHUTDOWN_GRACE_S, 30, 0, 3600, problems) * 1000,
    metrics: readMetrics(env, problems),
    oidc: readOidcConfig(env, problems),
    connect: Object.freeze(readConnectApps(env, problems)),
    otel: readOtelConfig(env, problems),
    ...(env.BROKER_LLM_PRICES_FILE ? { pricesFile: readOptionalPath("BROKER_LLM_PRICES_FILE", env.BROKER_LLM_PRICES_FILE, problems) } : {}),
    warnings: Object.freeze(findUnknownSettings(env)),
    workers: readWorkers(env.BROKER_WORKERS, problems),
    ...(env[WORKER_ENV] ? { worker: readWorkerRole(env[WORKER_ENV], problems) } : {}),
  };
  if (problems.length) throw new ConfigError(problems);
  return Object.freeze(config);
}

function readMetrics(env: Env, problems: string[]): Config["metrics"] {
  const open = readBool("BROKER_METRICS", env.BROKER_METRICS, false, problems);
  const token = env.BROKER_METRICS_TOKEN;
  if (token !== undefined && token.length < 16) problems.push("BROKER_METRICS_TOKEN: must be at least 16 characters");
  if (token) return { token: new Secret(token) };
  return open ? { token: undefined } : undefined;
}

/** BROKER_MASTER_PASSWORD (deleted once read) or BROKER_MASTER_PASSWORD_FILE; a bad file is a ConfigError. */
export function takeMasterPassword(env: Env = process.env): Secret | undefined {
  const problems: string[] = [];
  const password = readMasterPassword(env, problems);
  if (problems.length) throw new ConfigError(problems);
  return password;
}

function findUnknownSettings(env: Env): string[] {
  const known = new Set([...SETTINGS.map((s) => s.name), ...RATE_LIMIT_SETTINGS.map((s) => s.name), ...CLIENT_SETTINGS, WORKER_ENV]);
  // BROKER_CONNECT_<ID>_* names are read (and a wrong one refused) by config-connect.ts.
  return Object.keys(env)
    .filter((k) => k.startsWith("BROKER_") && !k.startsWith(CONNECT_PREFIX) && !known.has(k))
    .map((k) => `${k} is not a broker setting and is ignored`);
}

/** Where the store lives, for logs and messages: the PostgreSQL URL without its password, or the SQLite file. */
export function describeStore(config: Pick<Config, "dataDir" | "database">): string {
  if (!config.database) return `${config.dataDir}/broker.db (SQLite)`;
  return maskDatabaseUrl(config.database.url.reveal()); // reveal: only to print it without the password
}

export function maskDatabaseUrl(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.password) u.password = "***";
    for (const k of [...u.searchParams.keys()]) if (/pass|secret|key/i.test(k)) u.searchParams.set(k, "***");
    return u.toString();
  } catch {
    return "(unparseable database URL)";
  }
}

function readDatabase(env: Env, problems: string[]): DatabaseConfig | undefined {
  const raw = env.BROKER_DATABASE_URL?.trim();
  const poolSize = readInt("BROKER_DATABASE_POOL_SIZE", env.BROKER_DATABASE_POOL_SIZE, 10, 1, 500, problems);
  const graceSec = readInt("BROKER_DATABASE_OUTAGE_GRACE_SECONDS", env.BROKER_DATABASE_OUTAGE_GRACE_SECONDS, 300, 0, 86_400, problems);
  const statementTimeoutMs = readInt("BROKER_DATABASE_STATEMENT_TIMEOUT_MS", env.BROKER_DATABASE_STATEMENT_TIMEOUT_MS, 2000, 100, 600_000, problems);
  if (!raw) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    // The message never repeats the value: it carries a password.
    problems.push("BROKER_DATABASE_URL: not a URL; expected postgres://user:password@host:5432/database");
    return undefined;
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    problems.push(`BROKER_DATABASE_URL: only PostgreSQL is supported (postgres://…), got ${url.protocol}//…; leave it unset for the embedded SQLite store`);
  } else if (!url.hostname && !url.searchParams.get("host")) {
    problems.push("BROKER_DATABASE_URL: names no host; expected postgres://user:password@host:5432/database");
  }
  return { url: new Secret(raw), poolSize, outageGraceMs: graceSec * 1000, statementTimeoutMs };
}

function readDataDir(raw: string | undefined, home: string | undefined, problems: string[]): string {
  if (raw !== undefined && raw.trim() !== "") {
    if (!raw.startsWith("/")) problems.push(`BROKER_DATA_DIR: must be an absolute path, got a relative one`);
    return raw.replace(/\/+$/, "") || "/";
  }
  if (!home) {
    problems.push("BROKER_DATA_DIR: not set and HOME is unknown; set BROKER_DATA_DIR to an absolute path");
    return "";
  }
  return `${home.replace(/\/+$/, "")}/.broker`;
}

function readHost(raw: string | undefined, problems: string[]): string {
  const value = raw?.trim() || "127.0.0.1";
  const hostname = /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
  const ambiguousV4 = /^[0-9.x]+$/i.test(value) && !ipaddr.IPv4.isValidFourPartDecimal(value);
  if (ambiguousV4 || (!ipaddr.isValid(value) && !hostname.test(value))) problems.push(`BROKER_HOST: "${value}" is not an IP address or host name`);
  return value;
}

/** Comma-separated absolute paths, each once. */
function readPathList(name: string, raw: string | undefined, problems: string[]): string[] {
  const out: string[] = [];
  for (const item of (raw ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    if (!item.startsWith("/")) problems.push(`${name}: "${item}" is not an absolute path`);
    else if (!out.includes(item)) out.push(item);
  }
  return out;
}

function readHostList(name: string, raw: string | undefined, problems: string[]): string[] {
  if (raw === undefined || raw.trim() === "") return [];
  const out: string[] = [];
  for (const item of raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const host = normaliseHostName(item);
    if (host === undefined) problems.push(`${name}: "${item}" is not a host name or IP address (no scheme, port, path or wildcard)`);
    else if (!out.includes(host)) out.push(host);
  }
  return out;
}

function readPort(name: string, raw: string | undefined, fallback: number, problems: string[]): number {
  if (raw === undefined || raw.trim() === "") return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || n > 65535) {
    problems.push(`${name}: must be a port number 0-65535`);
    return fallback;
  }
  return n;
}

/** An http(s) URL without credentials, query or fragment, trailing slashes dropped; undefined if not one. */
export function normaliseHttpUrl(raw: string): string | undefined {
  try {
    const url = new URL(raw.trim());
    if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
    if (url.search || url.hash || url.username || url.password) return undefined;
    return url.href.replace(/\/+$/, "");
  } catch {
    return undefined;
  }
}

function readPublicUrl(raw: string | undefined, problems: string[]): string | undefined {
  if (raw === undefined || raw.trim() === "") return undefined;
  const url = normaliseHttpUrl(raw);
  if (url === undefined) problems.push("BROKER_PUBLIC_URL: must be an http(s) URL without credentials, query or fragment");
  return url ?? "";
}

function readInt(name: string, raw: string | undefined, fallback: number, min: number, max: number, problems: string[]): number {
  if (raw === undefined || raw.trim() === "") return fallback;
  const n = Number(raw.trim());
  if (!/^\d+$/.test(raw.trim()) || n < min || n > max) {
    problems.push(`${name}: must be an integer from ${min} to ${max}`);
    return fallback;
  }
  return n;
}

function readBool(name: string, raw: string | undefined, fallback: boolean, problems: string[]): boolean {
  if (raw === undefined || raw.trim() === "") return fallback;
  const v = raw.trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(v)) return true;
  if (["false", "0", "no", "off"].includes(v)) return false;
  problems.push(`${name}: must be true or false`);
  return fallback;
}

function readOneOf<T extends string>(name: string, raw: string | undefined, allowed: readonly T[], fallback: T, problems: string[]): T {
  if (raw === undefined || raw.trim() === "") return fallback;
  const v = raw.trim().toLowerCase();
  if ((allowed as readonly string[]).includes(v)) return v as T;
  problems.push(`${name}: must be one of ${allowed.join(", ")}`);
  return fallback;
}

function readCidrList(name: string, raw: string | undefined, problems: string[]): string[] {
  if (raw === undefined || raw.trim() === "") return [];
  const out: string[] = [];
  for (const item of raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const addressPart = item.split("/")[0]!;
    // inet_aton spellings (010.0.0.0, 10.1, 167772161) would silently allowlist a different range.
    if (!addressPart.includes(":") && !ipaddr.IPv4.isValidFourPartDecimal(addressPart)) {
      problems.push(`${name}: "${item}" is not a CIDR or IP address (write IPv4 as four decimal parts)`);
      continue;
    }
    try {
      if (item.includes("/")) {
        const [addr, bits] = ipaddr.parseCIDR(item);
        out.push(`${addr.toString()}/${bits}`);
      } else {
        const addr = ipaddr.parse(item);
        out.push(`${addr.toString()}/${addr.kind() === "ipv4" ? 32 : 128}`);
      }
    } catch {
      problems.push(`${name}: "${item}" is not a CIDR or IP address`);
    }
  }
  return out;
}

function readTrustedProxies(raw: string | undefined, problems: string[]): string[] {
  const cidrs = readCidrList("BROKER_TRUSTED_PROXIES", raw, problems);
  // Trusting every address lets the walk reach the leftmost X-Forwarded-For entry, which the client writes.
  const everything = cidrs.filter((c) => c.endsWith("/0"));
  for (const c of everything)
    problems.push(`BROKER_TRUSTED_PROXIES: "${c}" trusts every address, so any client could name its own; list the proxies' addresses`);
  return everything.length ? [] : cidrs;
}

function readOptionalPath(name: string, raw: string | undefined, problems: string[]): string | undefined {
  if (raw === undefined || raw.trim() === "") return undefined;
  if (!raw.startsWith("/")) problems.push(`${name}: must be an absolute path`);
  return raw;
}
