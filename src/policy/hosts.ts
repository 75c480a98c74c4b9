// Host names of services (architecture.md D14): exact `name` or `name:port` (443 when absent), or
// `*.domain` matching exactly one extra label and never the bare domain; `*` and a wildcard over a
// public suffix (`*.com`, `*.co.uk`, `*.github.io`) are rejected. Names compare lower-cased, without
// a trailing dot, in punycode.

import ipaddr from "ipaddr.js";
import { getPublicSuffix } from "tldts";
import { InvalidRequest } from "../errors.ts";

export interface HostPattern {
  /** Canonical text: what is stored and shown. */
  readonly text: string;
  readonly wildcard: boolean;
  /** Host name (punycode) or IP literal, without `*.` and without brackets. */
  readonly name: string;
  readonly port: number;
}

export interface HostRules {
  /** Services set by humans may name IP literals; proposals from agents may not. */
  readonly allowIp: boolean;
  /** Only for naming a row already stored, to remove it: a wildcard over a public suffix saved before that
   *  rule existed must stay removable. Never set where a pattern is created or changed. */
  readonly acceptPublicSuffixWildcard?: boolean;
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** Whether a pattern's name (brackets already gone) is an IP address rather than a host name. */
export function isIpName(name: string): boolean {
  return ipaddr.isValid(name);
}

export function parseHostPattern(input: unknown, rules: HostRules, field = "host"): HostPattern {
  const bad = (why: string) => new InvalidRequest(`${field}: ${why}`, field);
  if (typeof input !== "string" || input.length === 0 || input.length > 300) throw bad("must be a host name");
  let rest = input.trim().toLowerCase();
  let port = 443;
  const portMatch = /^(.*?)(?::(\d{1,5}))$/.exec(rest);
  const colons = rest.split(":").length - 1;
  // A port follows the last ':' only in `name:port` or `[v6]:port`; a bare IPv6 literal has no port.
  if (portMatch && (colons === 1 || rest.startsWith("["))) {
    port = Number(portMatch[2]);
    rest = portMatch[1]!;
    if (port < 1 || port > 65535) throw bad("port must be 1-65535");
  }
  if (rest.startsWith("[") && rest.endsWith("]")) rest = rest.slice(1, -1);
  rest = rest.replace(/\.$/, "");
  const wildcard = rest.startsWith("*.");
  const body = wildcard ? rest.slice(2) : rest;
  if (body.includes("*")) throw bad("a wildcard is allowed only as a leading '*.' label");

  let name: string;
  if (ipaddr.isValid(body)) {
    if (wildcard) throw bad("a wildcard cannot prefix an IP address");
    if (!rules.allowIp) throw bad("IP addresses are not allowed here; use a host name");
    if (ipaddr.IPv4.isValid(body) && !ipaddr.IPv4.isValidFourPartDecimal(body)) throw bad("IPv4 addresses must be written as four decimal parts");
    name = ipaddr.parse(body).toString();
  } else {
    name = toPunycode(body, bad);
    const labels = name.split(".");
    if (!labels.every((l) => LABEL.test(l))) throw bad("must be a valid host name");
    if (/^\d+$/.test(labels.at(-1)!)) throw bad("must be a valid host name");
    if (wildcard && !rules.acceptPublicSuffixWildcard && isPublicSuffix(name)) {
      const what = name.includes(".") ? "public suffix" : "top-level domain";
      throw bad(`*.${name} would match every site under the ${what} ${name}, whose names belong to different owners; name the host, e.g. you.${name}`);
    }
  }
  return { text: patternText(name, wildcard, port), wildcard, name, port };
}

function patternText(name: string, wildcard: boolean, port: number): string {
  const hostText = name.includes(":") ? `[${name}]` : name;
  return `${wildcard ? "*." : ""}${hostText}${port === 443 ? "" : `:${port}`}`;
}

/**
 * The texts, as stored, of the only patterns that can cover `host` (canonical) on `port`: the host's
 * own, and the one-level wildcard over its parent (none for a single label). One indexed look-up of
 * these finds a request's service (egress/plan.ts); hostMatches still decides.
 */
export function coveringPatternTexts(host: string, port: number): { readonly exact: string; readonly wildcard?: string } {
  const exact = patternText(host, false, port);
  const dot = host.indexOf(".");
  return dot > 0 ? { exact, wildcard: patternText(host.slice(dot + 1), true, port) } : { exact };
}

function toPunycode(name: string, bad: (why: string) => Error): string {
  if (name.length === 0) throw bad("must be a host name");
  // Only letters, digits, '-' and '.': URL-shaped input (user@, /path, ?q, #f, %xx, '\\', ':') is
  // refused outright rather than "fixed" by a URL parser into some other host.
  if (!/^[\p{L}\p{M}\p{N}.-]+$/u.test(name)) throw bad("must be a valid host name");
  if (/^[a-z0-9.-]+$/.test(name)) return name;
  try {
    const converted = new URL(`https://${name}/`).hostname;
    if (!converted || converted.includes("%")) throw new Error("bad");
    return converted;
  } catch {
    throw bad("must be a valid host name");
  }
}

/**
 * Is `name` itself a public suffix (Public Suffix List, ICANN and private sections, e.g. `com`, `co.uk`,
 * `github.io`)? Names under one are registered by unrelated parties, so a wildcard over it would send a
 * credential to all of them. A name the list does not know is judged by its default rule: its last label is
 * the suffix, so `*.internal` is refused too. An exact host that is a suffix (`github.io`) stays allowed: it
 * names one site.
 */
function isPublicSuffix(name: string): boolean {
  return getPublicSuffix(name, { allowPrivateDomains: true, extractHostname: false }) === name;
}

/** Does `pattern` cover a request to `host` (canonical, lower-case, no trailing dot) on `port`? */
export function hostMatches(pattern: HostPattern, host: string, port: number): boolean {
  if (pattern.port !== port) return false;
  if (!pattern.wildcard) return pattern.name === host;
  const dot = host.indexOf(".");
  return dot > 0 && host.slice(dot + 1) === pattern.name;
}
