// Report mode (architecture.md D33, issue 39 point 5): where a vault or one service's rules are set to `report`,
// a refusal of the rules (403 request_not_allowed) or of the tunnel's unmatched-host policy (403 forbidden) is not
// answered: the request goes on as if allowed, its one audit record says `would_refuse:<code>` in `error` (its
// status is the upstream's), and /metrics counts it. What is never passed: a hold for a person (not a refusal), an
// ambiguous path (the rules cannot say what it is), budgets, the network guard, and /proxy to a host no service
// matches (plan.ts: there is no credential to add and nowhere the broker was told to send it).

import { RequestNotAllowed } from "../errors.ts";
import { WOULD_REFUSE, type PolicyMode } from "../store/index.ts";
import type { EgressPlan } from "./plan.ts";

/** The vault as the ingress admitted it: its policy mode travels with it (absent: enforce). */
export interface ModedVault {
  readonly name: string;
  readonly policyMode?: PolicyMode;
}

/** A refusal report mode let through, for /metrics: `service` is "none" for a host no service matches. */
export interface WouldRefuseObservation {
  readonly vault: string;
  readonly service: string;
  readonly code: string;
}

/** A refusal report mode let through: told once per request, to the record and the counter. */
export type Reporter = (code: string) => void;

/** The mode a service's rules run in: the service's own, else its vault's. */
export function rulesModeOf(plan: Pick<EgressPlan, "rulesMode">, vault: ModedVault): PolicyMode {
  return plan.rulesMode ?? vault.policyMode ?? "enforce";
}

/**
 * Runs `check`; when `report` is given (report mode), a refusal of the rules is told to it and `passed()` is what
 * the request goes on with. Anything else `check` throws (an ambiguous path's 400) stays thrown.
 */
export function unlessReported<T>(report: Reporter | undefined, check: () => T, passed: () => T): T {
  if (!report) return check();
  try {
    return check();
  } catch (err) {
    if (!(err instanceof RequestNotAllowed)) throw err;
    report(err.code);
    return passed();
  }
}

/**
 * The reporter for one request in report mode (callers ask only then, so enforce mode allocates nothing): the
 * first refusal it is told is the one recorded (`noted`) and counted by vault, service and code.
 */
export function reporterFor(
  vault: string,
  service: string,
  metrics: { wouldRefuse?(o: WouldRefuseObservation): void } | undefined,
  noted: (code: string) => void,
): Reporter {
  let told = false;
  return (code) => {
    if (told) return;
    told = true;
    noted(code);
    metrics?.wouldRefuse?.({ vault, service, code });
  };
}

/** The record's `error`: `would_refuse:<code>` for a request report mode let through, then what else failed. */
export function recordedError(error: string | null, wouldRefuse: string | undefined): string | null {
  if (!wouldRefuse) return error;
  return error ? `${WOULD_REFUSE}${wouldRefuse},${error}` : `${WOULD_REFUSE}${wouldRefuse}`;
}

/** recordedError's inverse: the refusal report mode let through, and the error otherwise (what telemetry calls error.type). */
export function splitRecordedError(error: string | null): { wouldRefuse?: string; error: string | null } {
  if (!error?.startsWith(WOULD_REFUSE)) return { error };
  const [code = "", ...rest] = error.slice(WOULD_REFUSE.length).split(",");
  return { wouldRefuse: code, error: rest.length ? rest.join(",") : null };
}
