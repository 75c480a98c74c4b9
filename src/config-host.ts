// Host names and addresses as settings spell them: the normal form the API's host check compares, and
// BROKER_RESOLVE (curl's --resolve: host:port:address). Pure; reports problems, never reads the environment.
// A mapping only says where to dial: the network guard still judges the address (architecture.md D4).

import { domainToASCII } from "node:url";
import ipaddr from "ipaddr.js";

/** One BROKER_RESOLVE entry: connections to host:port go to address instead of what DNS answers. */
export interface HostMapping {
  /** Lower case, no trailing dot, punycode: as the egress core names hosts. */
  readonly host: string;
  readonly port: number;
  /** An IP literal in canonical form (IPv6 without brackets). */
  readonly address: string;
}

/**
 * A host name or IP literal as the API's host check compares it: lower case, one trailing dot dropped,
 * international names in punycode, IPv6 without brackets in canonical form. Undefined if it is neither
 * (a port, a path, a wildcard or user info makes it invalid).
 */
export function normaliseHostName(raw: string): string | undefined {
  let host = raw.trim();
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  if (host.includes(":")) return ipaddr.IPv6.isValid(host) && !host.includes("%") ? ipaddr.IPv6.parse(host).toString() : undefined;
  host = host.toLowerCase().replace(/\.$/, "");
  if (/[^\x00-\x7f]/.test(host)) host = domainToASCII(host);
  return host.length <= 253 && HOST_NAME.test(host) ? host : undefined;
}

/** Dot-separated labels; `_` is tolerated because internal DNS names carry it. */
const HOST_NAME = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

// A last label of digits (or 0x…) is read as an address by some parser somewhere; the guard never resolves
// such a host (netguard.ts), so a mapping for it would never apply.
const NUMERIC_LAST_LABEL = /(^|\.)(\d+|0x[0-9a-f]*)$/i;

const NAME = "BROKER_RESOLVE";

/** BROKER_RESOLVE: comma-separated host:port:address entries; every bad entry is one problem naming it. */
export function readHostMappings(raw: string | undefined, problems: string[]): HostMapping[] {
  if (raw === undefined || raw.trim() === "") return [];
  const out: HostMapping[] = [];
  for (const item of raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const parsed = parseEntry(item);
    if (typeof parsed === "string") problems.push(`${NAME}: "${item}" ${parsed}`);
    else if (out.some((m) => m.host === parsed.host && m.port === parsed.port))
      problems.push(`${NAME}: "${item}" maps ${parsed.host}:${parsed.port} a second time; give one address per host and port`);
    else out.push(parsed);
  }
  return out;
}

/** The mapping, or what is wrong with the entry (a phrase that follows the quoted entry). */
function parseEntry(item: string): HostMapping | string {
  const first = item.indexOf(":");
  const second = item.indexOf(":", first + 1);
  if (first < 0 || second < 0 || item.includes("/")) return "is not host:port:address (e.g. api.github.com:443:127.0.0.1)";
  const host = readHost(item.slice(0, first));
  if (typeof host !== "object") return host;
  const port = readPort(item.slice(first + 1, second));
  if (typeof port !== "object") return port;
  const address = readAddress(item.slice(second + 1));
  if (typeof address !== "object") return address;
  return Object.freeze({ host: host.value, port: port.value, address: address.value });
}

function readHost(raw: string): { value: string } | string {
  if (raw === "") return "names no host";
  if (raw.includes("*")) return "has a wildcard host; name each host";
  if (raw.startsWith("[") || ipaddr.isValid(raw) || NUMERIC_LAST_LABEL.test(raw.replace(/\.$/, ""))) return "maps an IP address; the host must be a DNS name";
  const host = normaliseHostName(raw);
  return host === undefined ? `has "${raw}" for a host, which is not a DNS name` : { value: host };
}

function readPort(raw: string): { value: number } | string {
  const n = Number(raw);
  return /^\d{1,5}$/.test(raw) && n >= 1 && n <= 65535 ? { value: n } : "has no valid port; it must be a number from 1 to 65535";
}

function readAddress(raw: string): { value: string } | string {
  if (raw === "") return "names no address";
  if (raw.startsWith("[") && raw.endsWith("]")) {
    const inner = raw.slice(1, -1);
    return ipaddr.IPv6.isValid(inner) && !inner.includes("%")
      ? { value: ipaddr.IPv6.parse(inner).toString() }
      : `has "${raw}" for an address, which is not an IPv6 address`;
  }
  if (raw.includes(":"))
    return ipaddr.IPv6.isValid(raw)
      ? "has an IPv6 address without brackets; write it as [address], e.g. [::1]"
      : "is not host:port:address (e.g. api.github.com:443:127.0.0.1)";
  // inet_aton spellings (010.0.0.1, 127.1, 2130706433) are refused: the address dialled must be the one written.
  if (ipaddr.IPv4.isValidFourPartDecimal(raw)) return { value: ipaddr.IPv4.parse(raw).toString() };
  return `has "${raw}" for an address, which is not an IP address (a host name is not accepted; write IPv4 as four decimal parts)`;
}
