// Applies a service's rules to one request, on both ingress paths and for WebSocket upgrades:
// an ambiguous path is 400, a method or path outside the rules 403 request_not_allowed, and what
// goes upstream is the canonical path that was matched (the query travels unchanged).

import { InvalidRequest, RequestNotAllowed } from "../errors.ts";
import { canonicalPath, describeRules, matchRule, needsApproval } from "../vault/index.ts";
import type { EgressPlan } from "./plan.ts";

/**
 * Headers by which many frameworks (Google APIs, Rails, Laravel, Express's method-override) let a POST
 * act as another method: a rule allowing POST must not become a way to DELETE.
 */
const METHOD_OVERRIDES = new Set(["x-http-method-override", "x-http-method", "x-method-override"]);

/** The target to forward: `target` itself without rules, else its canonical path plus the query. */
export function allowedTarget(
  plan: EgressPlan,
  method: string,
  target: string,
  hint: (method: string, path: string) => Record<string, unknown>,
  headers: Iterable<[string, string]> = [],
): string {
  if (!plan.rules) return target;
  const q = target.indexOf("?");
  const path = q < 0 ? target : target.slice(0, q);
  const canon = canonicalPath(path);
  if (!canon.ok) throw new InvalidRequest(`the service for ${plan.service.host} has rules, so ambiguous paths are refused: ${canon.reason}`, "path");
  for (const m of claimedMethods(method, headers)) {
    if (matchRule(plan.rules, m, canon.segments) < 0) throw new RequestNotAllowed(plan.service.host, plan.rules, describeRules(plan.rules), hint(m, canon.path));
  }
  return canon.path + (q < 0 ? "" : target.slice(q));
}

/** The method and every method an override header claims (each is checked, each can need approval). */
function claimedMethods(method: string, headers: Iterable<[string, string]>): string[] {
  const methods = [method];
  for (const [name, value] of headers) if (METHOD_OVERRIDES.has(name.toLowerCase())) methods.push(value.trim().toUpperCase());
  return methods;
}

/** Whether a rule asks a human to approve this request (`allowed`: the target allowedTarget returned). */
export function heldByRule(plan: EgressPlan, method: string, allowed: string, headers: Iterable<[string, string]> = []): boolean {
  if (!plan.rules?.some((r) => r.approve === "each")) return false;
  const q = allowed.indexOf("?");
  const canon = canonicalPath(q < 0 ? allowed : allowed.slice(0, q));
  if (!canon.ok) return true; // allowedTarget refused it already; never let an oddity skip the human
  return claimedMethods(method, headers).some((m) => needsApproval(plan.rules!, m, canon.segments));
}

/** A proposal_hint that keeps the service as it is and adds one rule for exactly this request. */
export function widenRulesHint(base: Record<string, unknown>, plan: EgressPlan, method: string, path: string): Record<string, unknown> {
  const host = plan.service.host;
  return {
    ...base,
    host,
    proposal: {
      services: [{ action: "set", host, description: `Access to ${host}`, auth: plan.auth, rules: [...(plan.rules ?? []), { methods: [method], paths: [path] }] }],
      credentials: [],
      message: `Needs ${method} ${path} on ${host}, which its rules do not allow.`,
      user_message: `Please allow ${method} on ${path} for ${host} (replace the path with a pattern such as /repos/*/issues/** if more is needed).`,
    },
  };
}
