// The client address the AUTH tier and the sign-in throttle key on: the socket peer, or, when that peer is
// one of BROKER_TRUSTED_PROXIES, the rightmost X-Forwarded-For entry that no trusted proxy wrote. Never the
// leftmost entry: the client writes whatever it likes there. `Forwarded` (RFC 7239) is not read: a header the
// operator's proxy does not write passes through from the client untouched, so reading both would let a
// client spoof whichever one the proxy leaves alone.

import ipaddr from "ipaddr.js";
import type { Context, MiddlewareHandler } from "hono";
import { getConnInfo } from "hono/bun";

type Ip = ipaddr.IPv4 | ipaddr.IPv6;

/** True if the address belongs to a trusted reverse proxy. */
export type TrustCheck = (ip: Ip) => boolean;

/** Compiles BROKER_TRUSTED_PROXIES (CIDRs as config.ts normalised them) into a membership test. */
export function compileTrustedProxies(cidrs: readonly string[]): TrustCheck {
  const ranges = cidrs.map((cidr) => ipaddr.parseCIDR(cidr));
  return (ip) => ranges.some(([net, bits]) => net.kind() === ip.kind() && ip.match(net, bits));
}

/**
 * One address as a proxy writes it into X-Forwarded-For: `192.0.2.1`, `192.0.2.1:443`, `2001:db8::1`,
 * `[2001:db8::1]` or `[2001:db8::1]:443`. IPv4-mapped IPv6 becomes IPv4, so `::ffff:10.0.0.1` matches
 * 10.0.0.0/8. Undefined for anything else (`unknown`, a host name, an inet_aton spelling, a zone).
 */
export function parseForwardedAddress(raw: string): Ip | undefined {
  const v = raw.trim();
  const bracketed = /^\[([^\]]*)\](?::\d{1,5})?$/.exec(v);
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3})(?::\d{1,5})?$/.exec(v);
  const text = bracketed?.[1] ?? v4?.[1] ?? v;
  if (text.includes(":") ? !ipaddr.IPv6.isValid(text) || text.includes("%") : !ipaddr.IPv4.isValidFourPartDecimal(text)) return undefined;
  return ipaddr.process(text);
}

/**
 * The rightmost-untrusted rule. From a peer outside the trusted set, the peer, whatever X-Forwarded-For says.
 * From a trusted peer, the list is walked from the right past trusted addresses; the first untrusted one is
 * the client. An entry that does not parse before that point (or no header at all) means the chain cannot
 * be followed: the peer. All entries trusted: the leftmost, an internal client behind the proxies.
 * `forwardedFor` is the header as Headers.get gives it: several X-Forwarded-For headers joined by commas, in order.
 */
export function pickClientAddress(peer: string, forwardedFor: string | null | undefined, isTrusted: TrustCheck): string {
  const peerIp = parseForwardedAddress(peer);
  if (!peerIp || !isTrusted(peerIp) || !forwardedFor) return peer;
  const entries = forwardedFor.split(",").filter((e) => e.trim() !== ""); // empty list elements are allowed (RFC 9110 §5.6.1)
  let last: Ip | undefined;
  for (let i = entries.length - 1; i >= 0; i--) {
    const ip = parseForwardedAddress(entries[i]!);
    if (!ip) return peer;
    if (!isTrusted(ip)) return ip.toString();
    last = ip;
  }
  return last?.toString() ?? peer;
}

/** The socket peer's address; "unknown" for in-process requests (tests), which have no socket. */
export function readPeerAddress(c: Context): string {
  try {
    return getConnInfo(c).remote.address ?? "unknown";
  } catch {
    return "unknown";
  }
}

/** Resolves the client address once per request into `c.var.clientIp`, where clientIp() (limits.ts) finds it. */
export function resolveClientAddress(trusted: readonly string[]): MiddlewareHandler {
  const isTrusted = compileTrustedProxies(trusted);
  return async (c, next) => {
    c.set("clientIp", pickClientAddress(readPeerAddress(c), c.req.header("x-forwarded-for"), isTrusted));
    await next();
  };
}
