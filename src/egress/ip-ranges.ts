// IP addresses as bytes for the network guard: a strict text parser, CIDR matching on 32-bit words, the IPv4
// addresses embedded in IPv6 transition forms, and the range tables. Pure data and functions; never resolves names.

import ipaddr from "ipaddr.js";

/** An address as 32-bit words in network order: one word for IPv4, four for IPv6. */
export interface Ip {
  readonly family: 4 | 6;
  readonly words: readonly number[];
}

export interface Cidr {
  readonly text: string;
  readonly family: 4 | 6;
  readonly words: readonly number[];
  readonly masks: readonly number[];
}

export interface LabelledCidr extends Cidr {
  readonly label: string;
}

/** An IPv4 found inside an IPv6 address, with the transition form it came from (for the refusal reason). */
export interface Embedded {
  readonly ip: Ip;
  readonly via: string;
}

export type Parsed = { readonly ok: true; readonly ip: Ip; readonly canonical: string } | { readonly ok: false; readonly reason: string };

// Only plain dotted decimal without leading zeros: "0177.0.0.1", "0x7f.1", "127.1" and "2130706433" mean 127.0.0.1
// to inet_aton but something else (or nothing) to other parsers, and that disagreement is how SSRF guards get bypassed.
const DOTTED_QUAD = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const LOOSE_IPV4 = /^[0-9a-fx.]+$/i;
const HEX_GROUP = /^[0-9a-f]{1,4}$/i;
// Interface names and numeric scope ids; checked here because the zone is stripped before ipaddr.js sees the text.
const ZONE = /^[0-9a-z._-]{1,32}$/i;

/** Parses one textual address (brackets and an IPv6 zone allowed) to bytes, refusing every ambiguous form. */
export function parseIp(text: string): Parsed {
  const bare = text.startsWith("[") && text.endsWith("]") && text.includes(":") ? text.slice(1, -1) : text;
  if (!bare.includes(":")) {
    if (DOTTED_QUAD.test(bare)) return toParsed(ipaddr.IPv4.parse(bare), "");
    return refuse(LOOSE_IPV4.test(bare) && ipaddr.IPv4.isValid(bare) ? "ambiguous IPv4 notation (only dotted decimal is accepted)" : "not a valid IP address");
  }
  const pct = bare.indexOf("%");
  const zone = pct === -1 ? "" : bare.slice(pct + 1);
  if (pct !== -1 && !ZONE.test(zone)) return refuse("not a valid IP address");
  const hex = toHexOnly(pct === -1 ? bare : bare.slice(0, pct));
  if (hex === undefined || !ipaddr.IPv6.isValid(hex)) return refuse("not a valid IP address");
  return toParsed(ipaddr.IPv6.parse(hex), zone);
}

/** Parses a CIDR or bare address (as config normalises them); IPv4-mapped IPv6 ranges become the IPv4 range they mean. */
export function parseCidr(text: string): Cidr {
  const [addr, bits] = text.includes("/") ? ipaddr.parseCIDR(text) : [ipaddr.parse(text), -1];
  const bytes = addr.toByteArray();
  let family: 4 | 6 = addr.kind() === "ipv4" ? 4 : 6;
  let prefix = bits === -1 ? bytes.length * 8 : bits;
  let words = toWords(bytes);
  // Addresses are judged by the IPv4 inside a mapped form, so "::ffff:127.0.0.1/128" must mean 127.0.0.1/32.
  if (family === 6 && prefix >= 96 && words[0] === 0 && words[1] === 0 && words[2] === 0xffff) {
    family = 4;
    prefix -= 96;
    words = [words[3]!];
  }
  const masks = words.map((_, i) => maskOf(prefix - 32 * i));
  const network = words.map((w, i) => (w & masks[i]!) >>> 0);
  return { text: `${describe(network)}/${prefix}`, family, words: network, masks };
}

export function matchCidr(ip: Ip, cidr: Cidr): boolean {
  if (ip.family !== cidr.family) return false;
  for (let i = 0; i < cidr.words.length; i++) if ((ip.words[i]! & cidr.masks[i]!) >>> 0 !== cidr.words[i]) return false;
  return true;
}

export function findCidr<T extends Cidr>(ip: Ip, cidrs: readonly T[]): T | undefined {
  for (const c of cidrs) if (matchCidr(ip, c)) return c;
  return undefined;
}

/**
 * The IPv4 addresses an IPv6 address carries in its transition forms. Traffic to these ends up at the IPv4, so each
 * one is classified as well as the outer address.
 */
export function findEmbeddedIpv4(ip: Ip): Embedded[] {
  if (ip.family === 4) return [];
  const [a, b, c, d] = ip.words as [number, number, number, number];
  const v4 = (w: number, via: string): Embedded => ({ ip: { family: 4, words: [w >>> 0] }, via });
  if (a === 0 && b === 0 && c === 0xffff) return [v4(d, "an IPv4-mapped address")];
  // :: and ::1 are judged as themselves (unspecified, loopback); the rest of ::/96 is the old IPv4-compatible form.
  if (a === 0 && b === 0 && c === 0 && d > 1) return [v4(d, "an IPv4-compatible address")];
  if (a === 0x0064ff9b && b === 0 && c === 0) return [v4(d, "a NAT64 address")];
  if (a === 0x0064ff9b && b >>> 16 === 0x0001) return findLocalNat64(ip).map((w) => v4(w, "a local-use NAT64 address"));
  if (a >>> 16 === 0x2002) return [v4(((a & 0xffff) << 16) | (b >>> 16), "a 6to4 address")];
  if (a === 0x20010000) return [v4(d ^ 0xffffffff, "the client field of a Teredo address"), v4(b, "the server field of a Teredo address")];
  return [];
}

// RFC 6052 §2.2: within 64:ff9b:1::/48 the operator picks a prefix length of 48, 56, 64 or 96, which decides where
// the IPv4 sits (byte 8, the "u" octet, is always skipped and zero). The length is not visible in the address, so
// every layout whose reserved bits are zero is read, and the address is refused if any reading is blocked.
const LOCAL_NAT64_STARTS = [6, 7, 9, 12] as const;

function findLocalNat64(ip: Ip): number[] {
  const bytes = toBytes(ip.words);
  const found: number[] = [];
  for (const start of LOCAL_NAT64_STARTS) {
    const at: number[] = [];
    for (let i: number = start; at.length < 4; i++) if (i !== 8) at.push(i);
    const suffixZero = bytes.slice(at[3]! + 1).every((x) => x === 0) && bytes[8] === 0;
    if (start === 12 || suffixZero) found.push(at.reduce((w, i) => w * 256 + bytes[i]!, 0));
  }
  return found;
}

function labelled(kind: string, cidrs: readonly string[]): LabelledCidr[] {
  return cidrs.map((text) => {
    const cidr = parseCidr(text);
    const single = cidr.text.endsWith(cidr.family === 4 ? "/32" : "/128");
    return { ...cidr, label: `${kind} ${single ? "address" : "range"}` };
  });
}

/** An endpoint that hands out instance or workload credentials, labelled with whose it is. */
function endpoint(cidr: string, whose: string): LabelledCidr {
  return { ...parseCidr(cidr), label: `cloud metadata endpoint (${whose})` };
}

/**
 * Contract: blocked even when allowlisted or private ranges are allowed. Each of these answers an unauthenticated
 * request from the machine with credentials of the machine or the workload, so a broker that dialled one would hand
 * an agent a cloud role. They are matched before the allowlist, so no CIDR covering them (169.254.0.0/16, fd00::/8,
 * 0.0.0.0/0) can unblock them.
 */
export const ALWAYS_BLOCKED: readonly LabelledCidr[] = [
  endpoint("169.254.169.254/32", "AWS, GCP, Azure and OCI instance metadata"),
  endpoint("fd00:ec2::254/128", "AWS instance metadata over IPv6"),
  endpoint("169.254.170.2/32", "ECS task credentials"),
  endpoint("169.254.170.23/32", "EKS pod identity"),
  endpoint("fd00:ec2::23/128", "EKS pod identity over IPv6"),
  endpoint("100.100.100.200/32", "Alibaba Cloud instance metadata"),
  endpoint("192.0.0.192/32", "Oracle Cloud instance metadata"),
];

/** Blocked unless private ranges are allowed or the allowlist covers the address. The contract's list plus (design
 *  architecture.md D13) the rest of 0.0.0.0/8, ::, multicast, broadcast, reserved 240/4 and the deprecated site-local fec0::/10. */
export const DEFAULT_BLOCKED: readonly LabelledCidr[] = [
  ...labelled("private", ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]),
  ...labelled("loopback", ["127.0.0.0/8", "::1/128"]),
  ...labelled("link-local", ["169.254.0.0/16", "fe80::/10"]),
  ...labelled("unique local", ["fc00::/7"]),
  ...labelled("shared address space (CGNAT)", ["100.64.0.0/10"]),
  ...labelled("unspecified", ["0.0.0.0/8", "::/128"]),
  ...labelled("multicast", ["224.0.0.0/4", "ff00::/8"]),
  ...labelled("broadcast", ["255.255.255.255/32"]),
  ...labelled("reserved", ["240.0.0.0/4"]),
  ...labelled("site-local (deprecated)", ["fec0::/10"]),
];

export const LOOPBACK: readonly Cidr[] = ["127.0.0.0/8", "::1/128"].map(parseCidr);
export const UNSPECIFIED: readonly Cidr[] = ["0.0.0.0/32", "::/128"].map(parseCidr);

/** Rewrites a trailing dotted quad as two hex groups, so ipaddr.js never reads it with its lenient IPv4 rules
 *  ("::ffff:0177.0.0.1" would become 177.0.0.1, "::1.2.3.4" the mapped form). Undefined when not strict IPv6 text. */
function toHexOnly(text: string): string | undefined {
  let hex = text;
  const lastColon = text.lastIndexOf(":");
  const tail = text.slice(lastColon + 1);
  if (tail.includes(".")) {
    if (!DOTTED_QUAD.test(tail)) return undefined;
    const [p, q, r, s] = tail.split(".").map(Number) as [number, number, number, number];
    hex = `${text.slice(0, lastColon + 1)}${((p << 8) | q).toString(16)}:${((r << 8) | s).toString(16)}`;
  }
  const halves = hex.split("::");
  if (halves.length > 2) return undefined;
  for (const half of halves) if (half !== "" && !half.split(":").every((g) => HEX_GROUP.test(g))) return undefined;
  return hex;
}

function toParsed(addr: ipaddr.IPv4 | ipaddr.IPv6, zone: string): Parsed {
  const words = toWords(addr.toByteArray());
  const family = words.length === 1 ? 4 : 6;
  const canonical = describe(words) + (zone ? `%${zone}` : "");
  return { ok: true, ip: { family, words }, canonical };
}

function refuse(reason: string): Parsed {
  return { ok: false, reason };
}

function toWords(bytes: readonly number[]): number[] {
  const words: number[] = [];
  for (let i = 0; i < bytes.length; i += 4) words.push(((bytes[i]! << 24) | (bytes[i + 1]! << 16) | (bytes[i + 2]! << 8) | bytes[i + 3]!) >>> 0);
  return words;
}

function toBytes(words: readonly number[]): number[] {
  return words.flatMap((w) => [w >>> 24, (w >>> 16) & 0xff, (w >>> 8) & 0xff, w & 0xff]);
}

function maskOf(bits: number): number {
  if (bits <= 0) return 0;
  if (bits >= 32) return 0xffffffff;
  return (0xffffffff << (32 - bits)) >>> 0;
}

function describe(words: readonly number[]): string {
  return ipaddr.fromByteArray(toBytes(words)).toString();
}
