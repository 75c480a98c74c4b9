// The pipeline's rules stage (architecture.md §3, stage 3): the service's rules allow or refuse the
// method and path, once; a POST whose body could claim (`_method`) a method a rule holds is read
// first so its claims are checked too; a request a rule holds for a person waits (428) until this
// exact request is approved, its body read whole so what goes out is what was approved. In report mode
// (report-mode.ts) a method or path the rules refuse goes on, marked; a hold still holds.

import { headerValues } from "../http/index.ts";
import type { Exchange } from "./exchange.ts";
import { awaitApproval, readHeldBody } from "./held-request.ts";
import { claimedInBody } from "./method-override.ts";
import type { EgressPlan } from "./plan.ts";
import { reporterFor, rulesModeOf, unlessReported } from "./report-mode.ts";
import { allowClaimedMethods, allowedTarget, bodyMayClaimHeld, canonicalTarget, heldByRule, widenRulesHint } from "./rules.ts";

export interface Ruled {
  /** The target the rules allowed, in the canonical form they checked (what is sent and audited). */
  readonly target: string;
  /** The body, when this stage had to read it whole (its claims, or a person's approval), or a later one changed it. */
  readonly body?: Uint8Array;
  /** The agent's body when a later stage read part of it (what it read, then the rest); else the agent's own stream. */
  readonly stream?: ReadableStream<Uint8Array> | null;
  /** The agent's headers as a later stage changed them (metering asks for no content coding); else the agent's own. */
  readonly headers?: readonly [string, string][];
  /** What cancels the upstream exchange, when not the agent's own signal (metering lets the usage through first). */
  readonly signal?: AbortSignal;
}

/**
 * `pre`: the request as metering already shaped it (llm-request.ts: a chat body asked for its usage), so a person
 * approves the request exactly as it will be sent.
 */
export async function applyRules(x: Exchange, plan: EgressPlan, pre: Omit<Ruled, "target"> = {}): Promise<Ruled> {
  const { input, deps } = x;
  const hint = (method: string, path: string) => widenRulesHint(deps.plans.hintFor(input.host, input.port), plan, method, path);
  const report =
    rulesModeOf(plan, input.vault) !== "report" ? undefined : reporterFor(input.vault.name, plan.service.host, deps.metrics, (code) => (x.wouldRefuse = code));
  const target = unlessReported(
    report,
    () => allowedTarget(plan, input.method, input.target, hint, input.headers),
    () => canonicalTarget(input.target),
  );
  const source = pre.stream === undefined ? input.body : pre.stream;
  const headers = pre.headers ?? input.headers;
  let body = pre.body;
  let claims: string[] = [];
  if (bodyMayClaimHeld(plan, input.method, target)) {
    body ??= await readHeldBody(
      source,
      input.bodyLength,
      "a POST to a path where a rule holds other methods for a human (its body is read for a _method field)",
    );
    x.bytesIn = body.byteLength;
    claims = claimedInBody(body, headerValues(input.headers, "content-type")[0]);
    unlessReported(
      report,
      () => allowClaimedMethods(plan, target, claims, hint),
      () => undefined,
    );
  }
  if (heldByRule(plan, input.method, target, headers, claims)) {
    body ??= await readHeldBody(source, input.bodyLength);
    x.bytesIn = body.byteLength;
    x.approvedBy = await awaitApproval(deps.approvals, { ...input, headers, target, body }, plan, plan.needles, input.signal);
  }
  return { ...pre, target, ...(body && { body }) };
}
