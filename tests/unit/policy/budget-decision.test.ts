// Whether a budget lets a request through (src/policy/budget-decision.ts): which budgets a request counts against,
// the first hard limit reached refuses it with when the budget starts again, and the soft threshold per measure.

import { expect, test } from "bun:test";
import { budgetApplies, judgeBudgets, limitReached, softCrossed } from "../../../src/policy/budget-decision.ts";
import { NO_USAGE, type BudgetRow } from "../../../src/store/index.ts";

const budget = (over: Partial<BudgetRow>): BudgetRow => ({
  id: 1,
  vaultId: 1,
  name: "b",
  scope: "vault",
  scopeRef: null,
  period: "day",
  limits: { requests: null, inputTokens: null, outputTokens: null, totalTokens: null, costMicros: null },
  softPercent: null,
  softAction: "notify",
  createdAt: 0,
  updatedAt: 0,
  ...over,
});

test("which budgets a request counts against", () => {
  const s = { agentId: 7, service: "api.openai.com", host: "api.openai.com" };
  expect(budgetApplies(budget({ scope: "vault" }), s)).toBe(true);
  expect(budgetApplies(budget({ scope: "agent", scopeRef: "7" }), s)).toBe(true);
  expect(budgetApplies(budget({ scope: "agent", scopeRef: "8" }), s)).toBe(false);
  expect(budgetApplies(budget({ scope: "agent", scopeRef: "7" }), { ...s, agentId: null })).toBe(false);
  expect(budgetApplies(budget({ scope: "service", scopeRef: "api.openai.com" }), s)).toBe(true);
  expect(budgetApplies(budget({ scope: "service", scopeRef: "*.anthropic.com" }), s)).toBe(false);
  expect(budgetApplies(budget({ scope: "hosts", scopeRef: '["API.openai.com","api.anthropic.com"]' }), s)).toBe(true);
  expect(budgetApplies(budget({ scope: "hosts", scopeRef: "not json" }), s)).toBe(false);
});

test("a hard limit is reached at the limit; the first reached refuses, with when the period ends", () => {
  const limits = { requests: 10, inputTokens: null, outputTokens: null, totalTokens: 1000, costMicros: null };
  expect(limitReached(limits, { ...NO_USAGE, requests: 9, totalTokens: 999 })).toBeUndefined();
  expect(limitReached(limits, { ...NO_USAGE, requests: 9, totalTokens: 1000 })).toEqual({ measure: "totalTokens", limit: 1000, used: 1000 });
  const now = Date.parse("2026-11-29T10:00:00Z");
  const daily = budget({ name: "daily", limits });
  const monthly = budget({ name: "monthly", period: "month", limits: { ...limits, requests: 100 } });
  const v = judgeBudgets(
    [
      { budget: monthly, used: { ...NO_USAGE, requests: 50 } },
      { budget: daily, used: { ...NO_USAGE, requests: 10 } },
    ],
    now,
  );
  expect(v).toEqual({ kind: "exceeded", budget: daily, measure: "requests", limit: 10, used: 10, resetsAt: Date.parse("2026-11-30T00:00:00Z") });
  expect(judgeBudgets([{ budget: budget({ period: "none", limits }), used: { ...NO_USAGE, requests: 10 } }], now)).toMatchObject({
    kind: "exceeded",
    resetsAt: undefined,
  });
});

test("the soft threshold: any limited measure at or past its percent", () => {
  const b = budget({ softPercent: 80, limits: { requests: 10, inputTokens: null, outputTokens: null, totalTokens: null, costMicros: 1_000_000 } });
  expect(softCrossed(b, { ...NO_USAGE, requests: 7, costMicros: 799_999 })).toBe(false);
  expect(softCrossed(b, { ...NO_USAGE, requests: 8 })).toBe(true);
  expect(softCrossed(b, { ...NO_USAGE, costMicros: 800_000 })).toBe(true);
  expect(softCrossed(budget({ limits: b.limits }), { ...NO_USAGE, requests: 9 })).toBe(false); // no threshold set
  expect(judgeBudgets([{ budget: b, used: { ...NO_USAGE, requests: 9 } }], 0)).toEqual({ kind: "allow", soft: [b] });
  expect(judgeBudgets([], 0)).toEqual({ kind: "allow", soft: [] });
});
