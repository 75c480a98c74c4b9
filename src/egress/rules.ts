// Applies a service's rules to one request, on both ingress paths and for WebSocket upgrades:
// an ambiguous path is 400, a method or path outside the rules 403 request_not_allowed, and what
// goes upstream is the canonical path that was matched (the query travels unchanged). Every method
// the request claims (method-override.ts) is checked, and decides whether a rule with "approve":
// "each" holds it for a human (held-request.ts).

import { InvalidRequest, RequestNotAllowed } from "../errors.ts";
import { canonicalPath, matchRule, needsApproval, RULE_METHODS } from "../policy/index.ts";
import { describeRules } from "../words/index.ts";
import { claimedMethods } from "./method-override.ts";
import type { EgressPlan } from "./plan.ts";

/**
 * The target to forward: `target` itself without rules, else its canonical path plus the query.
 * Every method the request claims (method-override.ts) must be allowed, `bodyClaims` included.
 */
export function allowedTarget(
  plan: EgressPlan,
  method: string,
  target: string,
  hint: (method: string, path: string) => Record<string, unknown>,
  headers: Iterable<[string, string]> = [],
  bodyClaims: readonly string[] = [],
): string {
  if (!plan.rules) return target;
  const q = target.indexOf("?");
  const path = q < 0 ? target : target.slice(0, q);
  const canon = canonicalPath(path);
  if (!canon.ok) throw new InvalidRequest(`the service for ${plan.service.host} has rules, so ambiguous paths are refused: ${canon.reason}`, "path");
  for (const m of [...claimedMethods(method, headers, target), ...bodyClaims]) {
    if (matchRule(plan.rules, m, canon.segments) < 0)
      throw new RequestNotAllowed(plan.service.host, plan.rules, describeRules(plan.rules), hint(m, canon.path));
  }
  return canon.path + (q < 0 ? "" : target.slice(q));
}

/** `target` as allowedTarget passes it (its canonical path, then the query): what report mode sends on when a rule refused it. */
export function canonicalTarget(target: string): string {
  const q = target.indexOf("?");
  const canon = canonicalPath(q < 0 ? target : target.slice(0, q));
  if (!canon.ok) throw new Error("canonicalTarget: an ambiguous path is refused before any rule is matched");
  return canon.path + (q < 0 ? "" : target.slice(q));
}

/**
 * The methods a POST's body claims (`_method`), checked against the rules for the target allowedTarget
 * already returned: only these, since the request's own and header-claimed methods passed there.
 */
export function allowClaimedMethods(
  plan: EgressPlan,
  allowed: string,
  claims: readonly string[],
  hint: (method: string, path: string) => Record<string, unknown>,
): void {
  if (!plan.rules || claims.length === 0) return;
  const q = allowed.indexOf("?");
  const canon = canonicalPath(q < 0 ? allowed : allowed.slice(0, q)); // canonical already: the same segments allowedTarget matched
  if (!canon.ok) throw new InvalidRequest(`the service for ${plan.service.host} has rules, so ambiguous paths are refused: ${canon.reason}`, "path");
  for (const m of claims) {
    if (matchRule(plan.rules, m, canon.segments) < 0)
      throw new RequestNotAllowed(plan.service.host, plan.rules, describeRules(plan.rules), hint(m, canon.path));
  }
}

const holdsAny = (plan: EgressPlan) => plan.rules?.some((r) => r.approve === "each") ?? false;

/**
 * The segments of the path allowedTarget returned, which is in canonical form already (every escape
 * valid UTF-8), so decoding it needs no second check; null for anything else (held, never waved through).
 */
function segmentsOf(allowed: string): readonly string[] | null {
  const q = allowed.indexOf("?");
  const path = q < 0 ? allowed : allowed.slice(0, q);
  if (!path.startsWith("/")) return null;
  try {
    return path.slice(1).split("/").map(decodeURIComponent);
  } catch {
    return null;
  }
}

/** Whether a rule asks a human to approve this request (`allowed`: the target allowedTarget returned). */
export function heldByRule(
  plan: EgressPlan,
  method: string,
  allowed: string,
  headers: Iterable<[string, string]> = [],
  bodyClaims: readonly string[] = [],
): boolean {
  if (!holdsAny(plan)) return false;
  const segments = segmentsOf(allowed);
  if (!segments) return true; // allowedTarget refused it already; never let an oddity skip the human
  return [...claimedMethods(method, headers, allowed), ...bodyClaims].some((m) => needsApproval(plan.rules!, m, segments));
}

/**
 * Whether a `_method` field in this POST's body could claim a method a rule holds on this path, so
 * the body must be read before the request may go (a POST a rule holds is read anyway).
 */
export function bodyMayClaimHeld(plan: EgressPlan, method: string, allowed: string): boolean {
  if (method !== "POST" || !holdsAny(plan)) return false;
  const segments = segmentsOf(allowed);
  return segments === null || RULE_METHODS.some((m) => m !== "POST" && needsApproval(plan.rules!, m, segments));
}

/** A proposal_hint that keeps the service as it is and adds one rule for exactly this request. */
export function widenRulesHint(base: Record<string, unknown>, plan: EgressPlan, method: string, path: string): Record<string, unknown> {
  const host = plan.service.host;
  return {
    ...base,
    host,
    proposal: {
      services: [
        { action: "set", host, description: `Access to ${host}`, auth: plan.auth, rules: [...(plan.rules ?? []), { methods: [method], paths: [path] }] },
      ],
      credentials: [],
      message: `Needs ${method} ${path} on ${host}, which its rules do not allow.`,
      user_message: `Please allow ${method} on ${path} for ${host} (replace the path with a pattern such as /repos/*/issues/** if more is needed).`,
    },
  };
}
