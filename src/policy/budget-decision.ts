// Whether a budget lets a request through (issue 38): which of a vault's budgets a request counts against (the whole
// vault, its agent, its service, or a set of hosts), and, from what each counted in its current period, whether the
// hard limit is reached (429 budget_exceeded, Retry-After at the period's end) or the soft threshold crossed (a
// webhook, and per-request approval when the budget says so). Pure: the counting is the store's.

import type { BudgetLimits, BudgetRow, BudgetUsage } from "../store/index.ts";
import { periodEnd } from "./budget-periods.ts";

/** What a request is, as budgets see it. */
export interface BudgetSubject {
  /** The agent's id, when an agent (or a session it minted) sends it. */
  readonly agentId: number | null;
  /** The matched service's host pattern. */
  readonly service: string | null;
  /** The host (and port, when not 443) the request goes to. */
  readonly host: string;
}

/** Whether `b` counts requests like this one. */
export function budgetApplies(b: BudgetRow, s: BudgetSubject): boolean {
  switch (b.scope) {
    case "vault":
      return true;
    case "agent":
      return s.agentId !== null && b.scopeRef === String(s.agentId);
    case "service":
      return s.service !== null && b.scopeRef === s.service;
    case "hosts":
      return hostsOf(b).includes(s.host.toLowerCase());
  }
}

function hostsOf(b: BudgetRow): string[] {
  try {
    const list = JSON.parse(b.scopeRef ?? "[]");
    return Array.isArray(list) ? list.filter((h): h is string => typeof h === "string").map((h) => h.toLowerCase()) : [];
  } catch {
    return [];
  }
}

type Measure = keyof BudgetLimits;
const MEASURES: readonly Measure[] = ["requests", "inputTokens", "outputTokens", "totalTokens", "costMicros"];

/** The first limit `used` has reached (used ≥ limit), if any. */
export function limitReached(limits: BudgetLimits, used: BudgetUsage): { measure: Measure; limit: number; used: number } | undefined {
  for (const m of MEASURES) {
    const limit = limits[m];
    if (limit !== null && used[m] >= limit) return { measure: m, limit, used: used[m] };
  }
  return undefined;
}

/** Whether `used` is at or past the soft threshold of any limit. */
export function softCrossed(b: BudgetRow, used: BudgetUsage): boolean {
  if (b.softPercent === null) return false;
  return MEASURES.some((m) => b.limits[m] !== null && used[m] * 100 >= b.limits[m]! * b.softPercent!);
}

export type BudgetVerdict =
  | { readonly kind: "allow"; readonly soft: readonly BudgetRow[] }
  | {
      readonly kind: "exceeded";
      readonly budget: BudgetRow;
      readonly measure: Measure;
      readonly limit: number;
      readonly used: number;
      /** When the budget starts again (the period's end); undefined for a budget without a period. */
      readonly resetsAt: number | undefined;
    };

/**
 * The verdict for a request from the budgets that apply and what each counted this period: the first whose hard
 * limit is reached refuses it; otherwise it goes, with the budgets whose soft threshold it is past.
 */
export function judgeBudgets(budgets: readonly { budget: BudgetRow; used: BudgetUsage }[], now: number): BudgetVerdict {
  const soft: BudgetRow[] = [];
  for (const { budget, used } of budgets) {
    const reached = limitReached(budget.limits, used);
    if (reached) return { kind: "exceeded", budget, ...reached, resetsAt: periodEnd(budget.period, now) };
    if (softCrossed(budget, used)) soft.push(budget);
  }
  return { kind: "allow", soft };
}
