// The pipeline's budget stage (architecture.md §3, issue 38), after the rules and before the credential goes in: the
// request is counted against the vault's budgets that apply (or refused, 429 budget_exceeded), and a budget past its
// soft threshold that asks for a person holds it (428) until this exact request is approved, as a rule's hold does.
// A request that is held or refused here is not counted; nor is a chat completion a token or money budget must refuse
// because the broker could not ask it for its usage (llm-request.ts).

import { InvalidRequest, PayloadTooLarge } from "../errors.ts";
import type { Exchange } from "./exchange.ts";
import { MAX_REWRITTEN_BODY, type MeterPlan } from "./llm-request.ts";
import { awaitApproval, readHeldBody } from "./held-request.ts";
import type { EgressPlan } from "./plan.ts";
import type { Ruled } from "./stage-rules.ts";
import type { BudgetGate } from "../workflows/index.ts";

/** Why an LLM call whose usage the broker could not see must not go under a token or money budget, in words. */
export function unmeteredRefusal(why: NonNullable<MeterPlan["unasked"]>): PayloadTooLarge | InvalidRequest {
  switch (why) {
    case "too-large":
      return new PayloadTooLarge(
        `an LLM request under a token or money budget may carry at most ${MAX_REWRITTEN_BODY} bytes of body (the broker reads it to see how it will be answered)`,
      );
    case "background":
      return new InvalidRequest(
        "a background response under a token or money budget is not allowed: its usage is read later, where the broker does not see it",
      );
    case "batch":
      return new InvalidRequest("a batch under a token or money budget is not allowed: its usage is never in an answer the broker sees");
    case "websocket":
      return new InvalidRequest(
        "a WebSocket under a token or money budget is not allowed: the broker does not read usage from its frames (use HTTP, or a request budget)",
      );
    default:
      return new InvalidRequest(
        "an LLM request under a token or money budget must be a JSON object without a Content-Encoding, its `stream` a plain boolean and its keys spelled as the API names them (the broker reads it to see how it will be answered)",
      );
  }
}

export function chargeBudgets(x: Exchange, plan: EgressPlan, ruled: Ruled, meter?: MeterPlan): Ruled | Promise<Ruled> {
  const budgets = x.deps.budgets;
  // Most vaults have no budgets: known from the gate's cache, the request goes on without a promise made for it.
  if (!budgets || budgets.knownWithout?.(x.input.vault.id)) return ruled;
  return charge(x, budgets, plan, ruled, meter);
}

async function charge(x: Exchange, budgets: BudgetGate, plan: EgressPlan, ruled: Ruled, meter?: MeterPlan): Promise<Ruled> {
  const { input, deps } = x;
  const ticket = await budgets.admit({ vault: input.vault, principal: input.principal, service: plan.service.host, host: input.host, port: input.port });
  if (!ticket) return ruled;
  if (meter?.unasked && ticket.countsUsage) {
    // A streamed chat completion the broker could not ask for its usage would spend tokens no budget sees.
    ticket.release();
    throw unmeteredRefusal(meter.unasked);
  }
  x.budget = ticket;
  // A request a person already approved (a rule's hold) is not asked about twice.
  if (ticket.holdFor === undefined || x.approvedBy !== null) return ruled;
  try {
    const body = ruled.body ?? (await readHeldBody(ruled.stream === undefined ? input.body : ruled.stream, input.bodyLength));
    x.bytesIn = body.byteLength;
    x.approvedBy = await awaitApproval(
      deps.approvals,
      { ...input, headers: ruled.headers ?? input.headers, target: ruled.target, body },
      plan,
      plan.needles,
      input.signal,
    );
    return { ...ruled, body };
  } catch (err) {
    ticket.release();
    x.budget = undefined;
    throw err;
  }
}
