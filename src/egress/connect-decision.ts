// What a CONNECT becomes (architecture.md D5), decided once per tunnel: a host one of the vault's
// services matches is intercepted (TLS terminated, each request through the pipeline); any other gets
// a blind tunnel, or under the vault's `unmatched_hosts: deny` is intercepted only to refuse its first
// request, so the agent reads the 403 envelope and its proposal_hint (a refused CONNECT shows clients
// only "tunnel failed").

import type { PlanCache } from "./plan.ts";

export type ConnectDecision = "intercept" | "blind" | "refuse";

export async function decideConnect(
  plans: PlanCache,
  vault: { readonly id: number; readonly unmatchedHosts: "tunnel" | "deny" },
  host: string,
  port: number,
): Promise<ConnectDecision> {
  if (await plans.has(vault, host, port)) return "intercept";
  return vault.unmatchedHosts === "deny" ? "refuse" : "blind";
}
