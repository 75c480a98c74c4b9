// The API's Host check: it answers only to the names it is configured for (the BROKER_PUBLIC_URL host, the
// bind address, localhost and loopback, BROKER_ALLOWED_HOSTS); any other Host gets 421 misdirected_request.
// A page that rebinds its own DNS name to the broker's address still sends its own name, so this closes
// DNS rebinding from a browser. Never echoes the Host header it refuses.

import ipaddr from "ipaddr.js";
import type { MiddlewareHandler } from "hono";
import { normaliseHostName } from "../../config.ts";
import { MisdirectedRequest, toErrorResponse } from "../../errors.ts";

/** Names every broker answers to: a browser or CLI on the same machine. */
export const LOOPBACK_HOSTS: readonly string[] = ["localhost", "127.0.0.1", "::1"];

/** Addresses that mean "every interface": a bind address, never a name a client uses. */
const WILDCARD_BINDS = new Set(["0.0.0.0", "::"]);

export interface HostCheckOptions {
  /** Host names or IP literals (any spelling normaliseHostName accepts); invalid ones are ignored. */
  readonly hosts: readonly string[];
  /**
   * Also accept any IP literal. Set when bound to a wildcard address: the broker cannot know which of its
   * addresses (or which NAT or port-mapped one) a client dialled, and an IP-literal Host cannot come from
   * DNS rebinding, which always carries the attacker's name.
   */
  readonly anyIpLiteral?: boolean;
}

export function isWildcardBind(host: string): boolean {
  return WILDCARD_BINDS.has(normaliseHostName(host) ?? host);
}

/** The names the API answers to, for a bind address, a public URL and BROKER_ALLOWED_HOSTS. */
export function listApiHosts(bindHost: string, publicUrl: string | undefined, allowed: readonly string[]): string[] {
  const fromUrl = publicUrl ? new URL(publicUrl).hostname : undefined;
  return [...LOOPBACK_HOSTS, bindHost, ...(fromUrl ? [fromUrl] : []), ...allowed].filter((h) => !isWildcardBind(h));
}

/**
 * The host part of a Host header value (`name`, `name:port`, `[v6]`, `[v6]:port`), normalised; undefined
 * if the value is not of that shape (two Host headers joined by a comma, user info, a path…).
 */
export function hostOfHeader(value: string): string | undefined {
  const v = value.trim();
  const m = v.startsWith("[") ? /^(\[[^\]]*\])(:\d{0,5})?$/.exec(v) : /^([^:]*)(:\d{0,5})?$/.exec(v);
  return m ? normaliseHostName(m[1]!) : undefined;
}

const ACCEPTED_HOSTS_KEPT = 256;

export function hostCheck(opts: HostCheckOptions): MiddlewareHandler {
  const allowed = new Set(opts.hosts.map((h) => normaliseHostName(h)).filter((h): h is string => h !== undefined && !WILDCARD_BINDS.has(h)));
  // Header values already accepted, verbatim: clients repeat the same Host on every request, and
  // normalising it each time was a measurable share of a /proxy request. Bounded, refusals never kept.
  const accepted = new Set<string>();
  return async (c, next) => {
    // Browsers always send Host; a request without one (HTTP/1.0) names nothing a page could have rebound.
    const raw = c.req.header("host") ?? urlHost(c.req.url);
    if (raw === undefined || raw === "" || accepted.has(raw)) return next();
    const host = hostOfHeader(raw);
    if (host !== undefined && (allowed.has(host) || (opts.anyIpLiteral && isIpLiteral(host)))) {
      if (accepted.size >= ACCEPTED_HOSTS_KEPT) accepted.clear();
      accepted.add(raw);
      return next();
    }
    return toErrorResponse(new MisdirectedRequest());
  };
}

/** Dotted-quad IPv4 or (normalised, so only valid) IPv6: not the inet_aton spellings a name could imitate. */
function isIpLiteral(host: string): boolean {
  return host.includes(":") || ipaddr.IPv4.isValidFourPartDecimal(host);
}

function urlHost(url: string): string | undefined {
  try {
    return new URL(url).host;
  } catch {
    return undefined; // Bun gives a bare path when the request carried no Host
  }
}
