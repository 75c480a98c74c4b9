// `broker doctor`'s checks of the network side (ports, guard, public URL, OIDC issuer); the store's are in
// doctor-store.ts. Each answers ok, warning or problem with the fix, and only reads.

import { readFileSync } from "node:fs";
import ipaddr from "ipaddr.js";
import type { Config } from "../../config.ts";
import { ALWAYS_BLOCKED } from "../../egress/index.ts";

export type Level = "ok" | "warning" | "problem";

export interface Finding {
  readonly check: string;
  readonly level: Level;
  readonly message: string;
  readonly fix?: string;
}

const PROBE_TIMEOUT_MS = 3000;

export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\./.test(host);
}

/** Both listeners' ports: free, or held by a broker that answers /health on the API port. */
export async function checkPorts(config: Config): Promise<Finding[]> {
  const host = config.bindHost === "0.0.0.0" || config.bindHost === "::" ? "127.0.0.1" : config.bindHost;
  const health = await probeHealth(host, config.apiPort);
  return [portFinding("BROKER_PORT", config.bindHost, config.apiPort, health), portFinding("BROKER_PROXY_PORT", config.bindHost, config.proxyPort, health)];
}

function portFinding(name: string, bindHost: string, port: number, health: string | undefined): Finding {
  const check = `port ${name}`;
  if (port === 0) return { check, level: "ok", message: `${name}=0: the system picks a free port` };
  if (isFree(bindHost, port)) return { check, level: "ok", message: `${bindHost}:${port} is free` };
  if (health) return { check, level: "ok", message: `${bindHost}:${port} is held by a running broker (${health})` };
  return {
    check,
    level: "problem",
    message: `${bindHost}:${port} is in use by another program`,
    fix: `stop that program (\`ss -ltnp 'sport = :${port}'\` shows it) or set ${name} to a free port`,
  };
}

function isFree(hostname: string, port: number): boolean {
  try {
    Bun.listen({ hostname, port, socket: { data() {} } }).stop(true);
    return true;
  } catch {
    return false;
  }
}

/** "health ok, version x" when a broker answers /health at host:port, else undefined. */
export async function probeHealth(host: string, port: number): Promise<string | undefined> {
  if (port === 0) return undefined;
  try {
    const res = await fetch(`http://${host.includes(":") ? `[${host}]` : host}:${port}/health`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    const body = (await res.json()) as { status?: unknown; version?: unknown };
    return typeof body.status === "string" ? `health ${body.status}, version ${String(body.version)}` : undefined;
  } catch {
    return undefined;
  }
}

/** The egress guard: private ranges lifted, and allowlist entries covering a cloud metadata address. */
export function checkGuard(config: Pick<Config, "allowPrivateRanges" | "networkAllowlist">): Finding[] {
  const found: Finding[] = [];
  if (config.allowPrivateRanges) {
    found.push({
      check: "network guard",
      level: "warning",
      message: "BROKER_ALLOW_PRIVATE_RANGES=true: agents can reach private, loopback and link-local addresses through the broker",
      fix: "unset it and list only the addresses needed in BROKER_NETWORK_ALLOWLIST",
    });
  }
  for (const entry of config.networkAllowlist) {
    const [range, bits] = ipaddr.parseCIDR(entry);
    const covered = ALWAYS_BLOCKED.filter((m) => {
      const addr = ipaddr.parse(m.text.split("/")[0]!);
      return addr.kind() === range.kind() && addr.match(range, bits);
    });
    if (covered.length === 0) continue;
    found.push({
      check: "network guard",
      level: "problem",
      message: `BROKER_NETWORK_ALLOWLIST entry ${entry} covers ${covered.map((m) => `${m.text.split("/")[0]} (${m.label})`).join(", ")}; the broker keeps those blocked, but an entry this wide is likely a mistake`,
      fix: `narrow ${entry} to the addresses agents need`,
    });
  }
  if (found.length === 0)
    found.push({ check: "network guard", level: "ok", message: `private ranges blocked; allowlist: ${config.networkAllowlist.join(", ") || "(empty)"}` });
  return found;
}

/** As `broker server` warns at start: a non-loopback listener without an https:// public URL. */
export function checkPublicUrl(config: Pick<Config, "bindHost" | "publicUrl">): Finding {
  const check = "public URL";
  if (!isLoopbackHost(config.bindHost) && !config.publicUrl?.startsWith("https://")) {
    return {
      check,
      level: "warning",
      message: `the API listens on ${config.bindHost} over plain HTTP (public URL ${config.publicUrl ?? "unset"}): session tokens and passwords cross the network in clear`,
      fix: "put it behind a TLS-terminating proxy, set BROKER_PUBLIC_URL to its https:// address and BROKER_TRUSTED_PROXIES to the proxy's address",
    };
  }
  return { check, level: "ok", message: config.publicUrl ? `BROKER_PUBLIC_URL ${config.publicUrl}` : `loopback only (${config.bindHost})` };
}

/** The OIDC issuer's discovery document, when sign-in with an identity provider is configured. */
export async function checkOidc(config: Config): Promise<Finding | undefined> {
  if (!config.oidc) return undefined;
  const check = "OIDC issuer";
  const issuer = config.oidc.issuer;
  const url = `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;
  try {
    const ca = config.upstreamCaFile ? readFileSync(config.upstreamCaFile, "utf8") : undefined;
    const res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS * 2), ...(ca && { tls: { ca } }) });
    if (!res.ok)
      return {
        check,
        level: "problem",
        message: `${url} answered ${res.status}`,
        fix: "check BROKER_OIDC_ISSUER (it must be the issuer exactly as the provider names it)",
      };
    const doc = (await res.json()) as { issuer?: unknown };
    if (doc.issuer !== issuer)
      return {
        check,
        level: "problem",
        message: `the provider names its issuer ${String(doc.issuer)}, not ${issuer}`,
        fix: `set BROKER_OIDC_ISSUER=${String(doc.issuer)}`,
      };
    return { check, level: "ok", message: `${issuer} is reachable` };
  } catch (err) {
    return {
      check,
      level: "problem",
      message: `cannot reach ${url}: ${err instanceof Error ? err.message : String(err)}`,
      fix: "check the issuer URL, DNS and outbound access from this machine (and BROKER_UPSTREAM_CA_FILE for a private CA)",
    };
  }
}
