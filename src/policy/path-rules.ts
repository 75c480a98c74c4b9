// Service rules: which methods and paths an agent may use on a service. Matching runs on one
// canonical form of the path, and that form is what is forwarded, so the upstream serves exactly
// the path that was checked. Forms that servers read differently (dot segments, encoded slashes,
// `;` parameters, backslashes, bad escapes, inner empty segments) are refused, not guessed at.

import { InvalidRequest } from "../errors.ts";

export interface ServiceRule {
  readonly methods: readonly string[];
  readonly paths: readonly string[];
  /** "each": every request this rule matches waits for a human's approval of that exact request. */
  readonly approve?: "each";
}
export type Rules = readonly ServiceRule[];

export const RULE_METHODS: readonly string[] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
/** How many rules a service holds, entries a rule lists, and characters a path pattern has, at most. */
export const RULE_LIMITS = { rules: 32, perRule: 16, pathChars: 512 } as const;

export type CanonicalPath =
  | { readonly ok: true; readonly path: string; readonly segments: readonly string[] }
  | { readonly ok: false; readonly reason: string };

/** Characters a path segment keeps literally (RFC 3986 pchar minus `;`); everything else is %XX. */
const LITERAL = /^[A-Za-z0-9\-._~!$&'()*+,=:@]$/;
// ignoreBOM keeps a leading U+FEFF as a character: stripped, "/%EF%BB%BFa" would be sent as "/a".
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const ENCODER = new TextEncoder();

/** Decodes and checks a request path (without its query); see the module comment for what is refused. */
export function canonicalPath(raw: string): CanonicalPath {
  if (!raw.startsWith("/")) return refuse("the path must start with /");
  const parts = raw.slice(1).split("/");
  const segments: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    const decoded = decodeSegment(parts[i]!);
    if (typeof decoded !== "string") return decoded;
    if (decoded === "" && i < parts.length - 1) return refuse("empty path segments (//) are ambiguous");
    if (decoded === "." || decoded === "..") return refuse("dot segments (. and ..) are ambiguous");
    segments.push(decoded);
  }
  return { ok: true, path: "/" + segments.map(encodeSegment).join("/"), segments };
}

function refuse(reason: string): { ok: false; reason: string } {
  return { ok: false, reason };
}

function decodeSegment(part: string): string | { ok: false; reason: string } {
  const bytes: number[] = [];
  for (let i = 0; i < part.length; i++) {
    const c = part.charCodeAt(i);
    if (c === 0x25) {
      const hex = part.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return refuse("malformed percent escape");
      const b = parseInt(hex, 16);
      if (b === 0x2f || b === 0x5c) return refuse("encoded / or \\ in a path segment is ambiguous");
      if (b < 0x20 || b === 0x7f) return refuse("encoded control characters (such as %00) are not allowed");
      if (b === 0x3b) return refuse("; path parameters are ambiguous");
      bytes.push(b);
      i += 2;
    } else if (c === 0x5c) {
      return refuse("backslashes in the path are ambiguous");
    } else if (c === 0x3b) {
      return refuse("; path parameters are ambiguous");
    } else if (c === 0x23 || c === 0x3f) {
      return refuse("# and ? do not belong in a path");
    } else if (c < 0x21 || c > 0x7e) {
      return refuse("the path must be printable ASCII (percent-encode the rest)");
    } else {
      bytes.push(c);
    }
  }
  try {
    return UTF8.decode(new Uint8Array(bytes));
  } catch {
    return refuse("percent escapes that are not UTF-8 are ambiguous");
  }
}

function encodeSegment(segment: string): string {
  let out = "";
  for (const ch of segment) {
    if (LITERAL.test(ch)) out += ch;
    else for (const b of ENCODER.encode(ch)) out += `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** A compiled path pattern: literal segments (decoded), `*` (one non-empty segment) or `**` (any number). */
type PatternSegment = { readonly kind: "literal"; readonly value: string } | { readonly kind: "one" } | { readonly kind: "any" };

const compiled = new WeakMap<ServiceRule, PatternSegment[][]>();

/** A path pattern's segments; a pattern that is not one throws the broker's 400 naming `field`. */
export function compilePattern(pattern: string, field: string): PatternSegment[] {
  if (typeof pattern !== "string" || pattern.length === 0 || pattern.length > RULE_LIMITS.pathChars || !pattern.startsWith("/")) {
    throw new InvalidRequest(`${field} must be a path pattern starting with / (at most ${RULE_LIMITS.pathChars} characters)`, field);
  }
  const parts = pattern.slice(1).split("/");
  return parts.map((part, i) => {
    if (part === "*") return { kind: "one" };
    if (part === "**") return { kind: "any" };
    if (part.includes("*")) throw new InvalidRequest(`${field}: * and ** stand for whole segments (between slashes), not parts of one`, field);
    const decoded = decodeSegment(part);
    if (typeof decoded !== "string") throw new InvalidRequest(`${field}: ${decoded.reason}`, field);
    if (decoded === "" && i < parts.length - 1) throw new InvalidRequest(`${field}: empty segments (//) are not allowed`, field);
    if (decoded === "." || decoded === "..") throw new InvalidRequest(`${field}: dot segments are not allowed`, field);
    return { kind: "literal", value: decoded };
  });
}

/** Whether `pattern` matches all of `segments` (dynamic programming: no backtracking blow-up). */
function matches(pattern: readonly PatternSegment[], segments: readonly string[]): boolean {
  // can[j] = pattern[0..i) matches segments[0..j)
  let can = new Array<boolean>(segments.length + 1).fill(false);
  can[0] = true;
  for (const p of pattern) {
    const next = new Array<boolean>(segments.length + 1).fill(false);
    for (let j = 0; j <= segments.length; j++) {
      if (p.kind === "any") next[j] = can[j]! || (j > 0 && next[j - 1]!);
      else if (j > 0 && can[j - 1]) next[j] = p.kind === "one" ? segments[j - 1] !== "" : segments[j - 1] === p.value;
    }
    can = next;
  }
  return can[segments.length]!;
}

/** Index of the first rule allowing (method, segments), or -1. */
export function matchRule(rules: Rules, method: string, segments: readonly string[]): number {
  return rules.findIndex((rule) => ruleMatches(rule, method, segments));
}

/**
 * Whether any rule that matches (method, segments) asks for a human's approval. Any, not the first:
 * a broad rule listed before a narrow approval rule must not let the request past the human.
 *
 * An approval rule matches loosely, as the servers behind it route: a path that servers commonly
 * send to the same handler is held too. Literal segments compare case-insensitively (Express,
 * ASP.NET), a trailing slash is ignored (Express, Django, Rails), as are a format suffix on the last
 * segment (Rails' `.json`), trailing dots (IIS) and spaces around it; and HEAD is held where GET is
 * (Express and Rails run the GET handler for it). Holding one request too many asks a person once
 * more; one too few would send a refund nobody approved.
 */
export function needsApproval(rules: Rules, method: string, segments: readonly string[]): boolean {
  const methods = method === "HEAD" ? ["HEAD", "GET"] : [method];
  const holding = rules.filter((r) => r.approve === "each" && methods.some((m) => r.methods.includes(m)));
  if (holding.length === 0) return false;
  const shapes = looseShapes(segments);
  return holding.some((rule) => foldedPatterns(rule).some((p) => shapes.some((s) => matches(p, s))));
}

/** Lower-cased: the path as given, then without a trailing slash, then without a format suffix, dots or spaces ending it. */
function looseShapes(segments: readonly string[]): (readonly string[])[] {
  const given = segments.map((s) => s.toLowerCase());
  const trimmed = given.length > 1 && given.at(-1) === "" ? given.slice(0, -1) : given;
  // Stripped until nothing changes: `refunds.json .` loses its dot, space and suffix alike.
  let bare = trimmed.at(-1) ?? "";
  for (let before = ""; before !== bare; ) {
    before = bare;
    bare = bare
      .trim()
      .replace(/\.+$/, "")
      .replace(/(?<=.)\.[a-z0-9]{1,10}$/, "");
  }
  const shapes: (readonly string[])[] = [given];
  if (trimmed !== given) shapes.push(trimmed);
  if (bare !== trimmed.at(-1)) shapes.push([...trimmed.slice(0, -1), bare]);
  return shapes;
}

const folded = new WeakMap<ServiceRule, PatternSegment[][]>();

/** A rule's patterns with literal segments lower-cased (compared with looseShapes' lower-cased paths). */
function foldedPatterns(rule: ServiceRule): PatternSegment[][] {
  let patterns = folded.get(rule);
  if (!patterns) {
    patterns = rule.paths.map((p, j) =>
      compilePattern(p, `paths[${j}]`).map((seg) => (seg.kind === "literal" ? { kind: "literal", value: seg.value.toLowerCase() } : seg)),
    );
    folded.set(rule, patterns);
  }
  return patterns;
}

function ruleMatches(rule: ServiceRule, method: string, segments: readonly string[]): boolean {
  if (!rule.methods.includes(method)) return false;
  let patterns = compiled.get(rule);
  if (!patterns) compiled.set(rule, (patterns = rule.paths.map((p, j) => compilePattern(p, `paths[${j}]`))));
  return patterns.some((p) => matches(p, segments));
}
