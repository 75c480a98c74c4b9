// The outbound network guard (contract "Authentication" 11, architecture.md D4 and D13): compiles the policy once,
// classifies addresses by their bytes, resolves a host and checks every answer. Never caches an answer (a cached
// answer is what DNS rebinding exploits) and never dials: the caller connects only to the addresses returned here.
// A BROKER_RESOLVE mapping replaces the DNS answer only, never the checks.

import { lookup } from "node:dns/promises";
import { networkInterfaces } from "node:os";
import { BrokerError, EgressBlocked, UpstreamUnreachable } from "../errors.ts";
import {
  ALWAYS_BLOCKED,
  DEFAULT_BLOCKED,
  LOOPBACK,
  UNSPECIFIED,
  findCidr,
  findEmbeddedIpv4,
  parseCidr,
  parseIp,
  type Cidr,
  type Embedded,
  type Ip,
} from "./ip-ranges.ts";

export interface NetPolicyInput {
  readonly allowPrivateRanges: boolean;
  /** CIDRs or bare addresses exempted from the default block (never from the always-blocked ranges). */
  readonly allowlist: readonly string[];
  /** the broker's own listeners, never dialled */
  readonly ownListeners?: readonly { host: string; port: number }[];
  /** This machine's addresses, on which a wildcard listener also answers; defaults to the interfaces at compile time. */
  readonly localAddresses?: readonly string[];
  /** BROKER_RESOLVE: host:port dialled at this address instead of the DNS answer (host lower case, no trailing dot). */
  readonly hostMappings?: readonly { host: string; port: number; address: string }[];
}

/** Compiled by compileNetPolicy; treat as opaque. */
export interface NetPolicy {
  readonly allowPrivateRanges: boolean;
  readonly allowlist: readonly Cidr[];
  /** port → the addresses that reach a broker listener on it */
  readonly listeners: ReadonlyMap<number, readonly Cidr[]>;
  /** "host:port" → the address to dial instead of resolving host; still classified like any answer */
  readonly mapped: ReadonlyMap<string, string>;
}

export type Verdict = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

export type Resolver = (host: string) => Promise<string[]>;

const ALLOWED: Verdict = Object.freeze({ allowed: true });

export function compileNetPolicy(input: NetPolicyInput): NetPolicy {
  const listeners = new Map<number, Cidr[]>();
  for (const { host, port } of input.ownListeners ?? []) {
    listeners.set(port, [...(listeners.get(port) ?? []), ...findListenerAddresses(host, input.localAddresses)]);
  }
  const mapped = new Map((input.hostMappings ?? []).map((m) => [mappingKey(m.host, m.port), m.address] as const));
  return Object.freeze({ allowPrivateRanges: input.allowPrivateRanges, allowlist: input.allowlist.map(parseCidr), listeners, mapped });
}

/** Classifies one address (any textual IPv4/IPv6 form ipaddr.js accepts) for a destination port. */
export function checkAddress(ip: string, port: number, policy: NetPolicy): Verdict {
  const parsed = parseIp(ip);
  return parsed.ok ? classify(parsed.ip, port, policy) : deny(parsed.reason);
}

export const systemResolver: Resolver = async (host) => {
  const answers = await lookup(host, { all: true, verbatim: true });
  return answers.map((a) => a.address);
};

/**
 * Resolves host (or takes its BROKER_RESOLVE address, or an IP literal as is), checks EVERY address; throws
 * EgressBlocked(host, reason) if any is blocked or UpstreamUnreachable if none resolve. Returns the checked
 * addresses in resolver order.
 */
export async function resolveChecked(host: string, port: number, policy: NetPolicy, resolver: Resolver): Promise<string[]> {
  // A mapped host skips DNS, never the checks below: the operator's address is judged exactly as an answer
  // would be, so a mapping cannot open loopback, private or metadata addresses the settings keep closed.
  const mapped = policy.mapped.get(mappingKey(host, port));
  const answers = mapped !== undefined ? [mapped] : isIpLiteral(host) ? [host] : await resolveAll(host, resolver);
  if (answers.length === 0) throw new UpstreamUnreachable(`${host} did not resolve to any address`);
  // Every answer is checked, not only the first: the dialler falls back along the list, and a mixed answer
  // (one public address beside a private one) is a known way around guards that check one.
  const checked: string[] = [];
  for (const answer of answers) {
    const parsed = parseIp(answer);
    const verdict = parsed.ok ? classify(parsed.ip, port, policy) : deny(parsed.reason);
    if (!verdict.allowed) throw new EgressBlocked(host, verdict.reason);
    if (parsed.ok) checked.push(parsed.canonical);
  }
  return checked;
}

function classify(ip: Ip, port: number, policy: NetPolicy): Verdict {
  // The outer address and every IPv4 it carries are judged alike: traffic to ::ffff:127.0.0.1 or 2002:7f00:1::
  // ends up at 127.0.0.1, so the request is refused when any of them is blocked.
  const candidates: Embedded[] = [{ ip, via: "" }, ...findEmbeddedIpv4(ip)];
  for (const c of candidates) {
    const hit = findCidr(c.ip, ALWAYS_BLOCKED);
    if (hit) return deny(`${hit.label} ${hit.text}${describeVia(c)}`);
  }
  // The broker never dials itself, whatever the settings: a loop would let an agent reach the API as the broker.
  const own = policy.listeners.get(port);
  if (own) {
    for (const c of candidates) if (findCidr(c.ip, own)) return deny(`the broker's own listener (port ${port})${describeVia(c)}`);
  }
  if (policy.allowPrivateRanges) return ALLOWED;
  for (const c of candidates) {
    const hit = findCidr(c.ip, DEFAULT_BLOCKED);
    if (hit && !findCidr(c.ip, policy.allowlist)) return deny(`${hit.label} ${hit.text}${describeVia(c)}`);
  }
  return ALLOWED;
}

/** Names compare as the egress core and the config spell them: lower case, without a trailing dot. */
function mappingKey(host: string, port: number): string {
  return `${host.toLowerCase().replace(/\.$/, "")}:${port}`;
}

function deny(reason: string): Verdict {
  return { allowed: false, reason };
}

function describeVia(c: Embedded): string {
  return c.via ? ` (the IPv4 inside ${c.via})` : "";
}

// A host that some parser would read as an address is classified as one and never handed to DNS: getaddrinfo
// turns "0177.0.0.1" or "2130706433" into 127.0.0.1, while parseIp refuses such forms outright.
const NUMERIC_LAST_LABEL = /(^|\.)(\d+|0x[0-9a-f]*)\.?$/i;

function isIpLiteral(host: string): boolean {
  return host.includes(":") || host.startsWith("[") || NUMERIC_LAST_LABEL.test(host);
}

async function resolveAll(host: string, resolver: Resolver): Promise<string[]> {
  try {
    return await resolver(host);
  } catch (err) {
    if (err instanceof BrokerError) throw err;
    throw new UpstreamUnreachable(`could not resolve ${host}`);
  }
}

/** The addresses on which a listener bound to host answers. */
function findListenerAddresses(host: string, localAddresses: readonly string[] | undefined): Cidr[] {
  const parsed = parseIp(host);
  const isLocalhost = host.toLowerCase() === "localhost";
  if (isLocalhost || (parsed.ok && findCidr(parsed.ip, LOOPBACK))) return [...LOOPBACK, ...UNSPECIFIED];
  if (parsed.ok && !findCidr(parsed.ip, UNSPECIFIED)) return [parseCidr(parsed.canonical.replace(/%.*$/, "")), ...UNSPECIFIED];
  // A wildcard bind ("0.0.0.0", "::"), or a host name whose addresses are not known here: treat as every local address.
  const local = localAddresses ?? listInterfaceAddresses();
  return [...LOOPBACK, ...UNSPECIFIED, ...local.flatMap((a) => toHostCidr(a))];
}

function listInterfaceAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
}

function toHostCidr(address: string): Cidr[] {
  const parsed = parseIp(address);
  return parsed.ok ? [parseCidr(parsed.canonical.replace(/%.*$/, ""))] : [];
}
