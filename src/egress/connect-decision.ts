// What a CONNECT becomes (architecture.md D5), decided once per tunnel: a host one of the vault's
// services matches is intercepted (TLS terminated, each request through the pipeline); any other gets
// a blind tunnel, or under the vault's `unmatched_hosts: deny` is intercepted only to refuse its first
// request, so the agent reads the 403 envelope and its proposal_hint (a refused CONNECT shows clients
// only "tunnel failed"). In report mode (D33) that refusal is "report": the blind tunnel `tunnel` would
// have opened (no interception, no credential, the guard still checking), its record marked would_refuse.

import type { PolicyMode, UnmatchedHosts } from "../store/index.ts";
import type { PlanCache } from "./plan.ts";

export type ConnectDecision = "intercept" | "blind" | "refuse" | "report";

export async function decideConnect(
  plans: PlanCache,
  vault: { readonly id: number; readonly unmatchedHosts: UnmatchedHosts; readonly policyMode?: PolicyMode },
  host: string,
  port: number,
): Promise<ConnectDecision> {
  if (await plans.has(vault, host, port)) return "intercept";
  if (vault.unmatchedHosts !== "deny") return "blind";
  return vault.policyMode === "report" ? "report" : "refuse";
}
