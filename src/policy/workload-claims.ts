// A workload binding's claim conditions (docs/architecture.md D27): a claim path names a value in a token's claims,
// a pattern is an exact string or a glob (`*` any run of characters, `?` one), and every condition must match.
// Pure: reads claims it is handed, never a token.

import type { ClaimCondition } from "../store/index.ts";

/** RFC 8693's names, which the exchange endpoint reads and answers with. */
export const TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
export const JWT_TOKEN_TYPES = ["urn:ietf:params:oauth:token-type:jwt", "urn:ietf:params:oauth:token-type:id_token"] as const;
export const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";

/** At most this many conditions per binding, patterns per condition, and characters per path or pattern. */
export const CLAIM_LIMITS = { conditions: 20, patterns: 50, pathChars: 200, patternChars: 500 } as const;

/** A key set given as a document (an issuer the broker cannot reach): at most this many characters and keys. */
export const JWKS_MAX_CHARS = 65_536;
export const JWKS_MAX_KEYS = 20;

/**
 * The values a claim path names. A path is claim names joined by `/`; since claim names may hold `/` themselves
 * (Kubernetes' legacy flat `kubernetes.io/serviceaccount/namespace`), each step tries the longest run of segments
 * that names a key first, so `kubernetes.io/serviceaccount/name` finds `{"kubernetes.io": {"serviceaccount":
 * {"name": …}}}` and the flat legacy claim alike. A string, number or boolean is one value; a list of them (`groups`,
 * `aud`) is each of its items; an object or anything else is none.
 */
export function claimValues(claims: unknown, path: string): string[] {
  return walk(claims, path.split("/"));
}

function walk(node: unknown, segments: readonly string[]): string[] {
  if (segments.length === 0) return leafValues(node);
  if (node === null || typeof node !== "object" || Array.isArray(node)) return [];
  const obj = node as Record<string, unknown>;
  for (let take = segments.length; take >= 1; take--) {
    const key = segments.slice(0, take).join("/");
    if (Object.hasOwn(obj, key)) {
      const found = walk(obj[key], segments.slice(take));
      if (found.length) return found;
    }
  }
  return [];
}

function leafValues(v: unknown): string[] {
  if (typeof v === "string") return [v];
  if (typeof v === "number" || typeof v === "boolean") return [String(v)];
  if (Array.isArray(v)) return v.filter((x) => typeof x === "string" || typeof x === "number" || typeof x === "boolean").map(String);
  return [];
}

/** Whether `value` matches `pattern`: exact, or a glob where `*` is any run of characters (`/` and `:` too) and `?` one. */
export function globMatches(pattern: string, value: string): boolean {
  if (!pattern.includes("*") && !pattern.includes("?")) return pattern === value;
  // Iterative match with one backtrack point per `*`: linear in practice, no regular expression built from input.
  let p = 0;
  let v = 0;
  let star = -1;
  let mark = 0;
  while (v < value.length) {
    if (p < pattern.length && pattern[p] === "*") {
      star = p++;
      mark = v;
    } else if (p < pattern.length && (pattern[p] === "?" || pattern[p] === value[v])) {
      p++;
      v++;
    } else if (star !== -1) {
      p = star + 1;
      v = ++mark;
    } else return false;
  }
  while (p < pattern.length && pattern[p] === "*") p++;
  return p === pattern.length;
}

/** Whether one condition holds: some value the path names matches some pattern. */
export function conditionHolds(claims: unknown, path: string, condition: ClaimCondition): boolean {
  const patterns = typeof condition === "string" ? [condition] : condition;
  return claimValues(claims, path).some((v) => patterns.some((p) => globMatches(p, v)));
}

/** Whether every condition holds (an empty set never does: a binding must say which workloads it admits). */
export function conditionsHold(claims: unknown, conditions: Readonly<Record<string, ClaimCondition>>): boolean {
  const entries = Object.entries(conditions);
  return entries.length > 0 && entries.every(([path, c]) => conditionHolds(claims, path, c));
}
