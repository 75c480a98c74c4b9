// The request pipeline shared by both ingress paths (architecture.md §3): named stages over one
// Exchange, each decision made once. Refuse what never goes out (TRACE, an oversized declared body),
// match the service, apply its rules (and a person's approval), plan an LLM call's metering
// (llm-request.ts), count it against the vault's budgets (stage-budget.ts), inject and send (stage-send.ts),
// shape the answer (shape-response.ts), and write one audit record however the exchange ends.
// Takes plain values and streams; never imports Hono or listens on sockets.

import { BrokerError, Internal, MethodNotAllowed, PayloadTooLarge } from "../errors.ts";
import type { Answer } from "./answer.ts";
import { auditExchange, observeExchange, openExchange, type EgressDeps, type EgressInput, type Exchange } from "./exchange.ts";
import { redactText } from "./redact-headers.ts";
import { shapeResponse } from "./shape-response.ts";
import { meterAnswer } from "./llm-metering.ts";
import { SHIPPED_PRICES } from "../policy/index.ts";
import { planMetering } from "./llm-request.ts";
import { chargeBudgets } from "./stage-budget.ts";
import { applyRules } from "./stage-rules.ts";
import { sendUpstream } from "./stage-send.ts";

export type { EgressDeps, EgressInput, EgressMetrics, ExchangeObservation, Settling, UsageObservation } from "./exchange.ts";
export { createSettling } from "./exchange.ts";

const REFUSED_METHODS = new Set(["TRACE", "TRACK", "CONNECT"]);

export async function egress(input: EgressInput, deps: EgressDeps): Promise<Answer> {
  const x = openExchange(input, deps);
  try {
    refuseUpfront(x);
    const plan = (x.plan = await deps.plans.plan(input.vault, input.host, input.port));
    // Metering first: a chat body it asks for its usage is the body a rule's hold shows a person and sends.
    const metering = await planMetering(x, { target: input.target });
    const ruled = await applyRules(x, plan, metering.ruled);
    const charged = await chargeBudgets(x, plan, ruled, metering.meter);
    const sent = await sendUpstream(x, plan, charged);
    const { needles, ranged } = sent;
    const metered = metering.meter && meterAnswer(sent.answer, metering.meter, needles, deps.prices?.current() ?? SHIPPED_PRICES);
    const answer = metered ? metered.answer : sent.answer;
    // A metered answer is audited (and its budgets settled) once its usage is known, however the body ended: an
    // agent that hangs up or an upstream cut off is charged what the answer reported (llm-metering.ts).
    const ended = (bytesOut: number, error: string | null) => {
      if (!metered) return auditExchange(x, answer.status, bytesOut, error);
      const recorded = metered.settled().then((call) => {
        x.call = call;
        // A call that went (2xx) and never said what it used is charged an estimate; the record says nothing.
        if (!call && answer.status >= 200 && answer.status < 300) x.estimate = metered.estimate(x.bytesIn);
        auditExchange(x, answer.status, bytesOut, error);
      });
      deps.settling?.track(recorded);
    };
    const res = await shapeResponse(answer, needles, input.ingress, deps, ended, ranged);
    observeExchange(x, res.status);
    return res;
  } catch (caught) {
    // A request body that failed (malformed chunking, client gone) is the client's fault, not the upstream's.
    // A body cut off at the size cap, or one that failed on the client's side, explains whatever the
    // upstream exchange then reported.
    const overCap = deps.maxRequestBytes > 0 && x.bytesIn > deps.maxRequestBytes;
    const err = x.bodyFailure instanceof BrokerError ? x.bodyFailure : overCap ? new PayloadTooLarge("request body exceeded the broker's limit") : caught;
    if (err instanceof BrokerError) {
      auditExchange(x, err.status, 0, err.code);
      observeExchange(x, err.status);
      throw err;
    }
    // An unexpected error's message may quote what the upstream sent (which can echo the injected
    // value): it is logged here once, scrubbed, and never rethrown, so no later handler logs it raw.
    const text = err instanceof Error ? err.message : String(err);
    const message = x.plan ? redactText(text, x.plan.needles) : text;
    deps.log.error("egress_failed", { error: err instanceof Error ? err.name : "error", message, host: input.host });
    auditExchange(x, 500, 0, "internal");
    observeExchange(x, 500);
    throw new Internal();
  }
}

/** What never goes out, whatever the service: TRACE and its kind, and a body declared over the cap. */
function refuseUpfront({ input, deps }: Exchange): void {
  if (REFUSED_METHODS.has(input.method)) throw new MethodNotAllowed(`${input.method} is not allowed through the broker`);
  if (deps.maxRequestBytes && input.bodyLength !== null && input.bodyLength > deps.maxRequestBytes) {
    throw new PayloadTooLarge(`request body is larger than the broker's limit of ${deps.maxRequestBytes} bytes`);
  }
}
