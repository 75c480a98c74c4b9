// The pipeline's budget stage (architecture.md §3, issue 38), after the rules and before the credential goes in: the
// request is counted against the vault's budgets that apply (or refused, 429 budget_exceeded), and a budget past its
// soft threshold that asks for a person holds it (428) until this exact request is approved, as a rule's hold does.
// A request that is held or refused here is not counted.

import type { Exchange } from "./exchange.ts";
import { awaitApproval, readHeldBody } from "./held-request.ts";
import type { EgressPlan } from "./plan.ts";
import type { Ruled } from "./stage-rules.ts";

export async function chargeBudgets(x: Exchange, plan: EgressPlan, ruled: Ruled): Promise<Ruled> {
  const { input, deps } = x;
  if (!deps.budgets) return ruled;
  const ticket = await deps.budgets.admit({ vault: input.vault, principal: input.principal, service: plan.service.host, host: input.host, port: input.port });
  if (!ticket) return ruled;
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
