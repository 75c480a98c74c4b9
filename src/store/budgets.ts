// Budgets (migration 26, issue 38): their definitions per vault, and per budget and period what was used. Usage is
// only ever added to, in one statement (INSERT … ON CONFLICT DO UPDATE … RETURNING), so instances writing at once
// on one PostgreSQL, or requests at once on SQLite, never lose an increment, and each caller learns the total its
// own increment made.

import type { Sql } from "./db.ts";

export type BudgetScope = "vault" | "agent" | "service" | "hosts";
export type BudgetPeriod = "hour" | "day" | "week" | "month" | "none";
export type SoftAction = "notify" | "approve";

export interface BudgetLimits {
  readonly requests: number | null;
  readonly inputTokens: number | null;
  readonly outputTokens: number | null;
  readonly totalTokens: number | null;
  readonly costMicros: number | null;
}

export interface BudgetRow {
  readonly id: number;
  readonly vaultId: number;
  readonly name: string;
  readonly scope: BudgetScope;
  /** The agent's id, the service's host pattern, or the hosts as a JSON list; null for the whole vault. */
  readonly scopeRef: string | null;
  readonly period: BudgetPeriod;
  readonly limits: BudgetLimits;
  /** Percent of each limit at which the soft threshold is crossed; null: none. */
  readonly softPercent: number | null;
  readonly softAction: SoftAction;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** What a budget counted in one period. */
export interface BudgetUsage {
  readonly requests: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly totalTokens: number;
  readonly costMicros: number;
  /** LLM calls whose model the price table does not name (tokens counted, money not). */
  readonly unpricedCalls: number;
}

export const NO_USAGE: BudgetUsage = { requests: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, costMicros: 0, unpricedCalls: 0 };

const COLUMNS = `id, vault_id AS "vaultId", name, scope, scope_ref AS "scopeRef", period, max_requests AS "maxRequests",
  max_input_tokens AS "maxInputTokens", max_output_tokens AS "maxOutputTokens", max_total_tokens AS "maxTotalTokens",
  max_cost_micros AS "maxCostMicros", soft_percent AS "softPercent", soft_action AS "softAction", created_at AS "createdAt",
  updated_at AS "updatedAt"`;
const USAGE = `requests, input_tokens AS "inputTokens", output_tokens AS "outputTokens", total_tokens AS "totalTokens",
  cost_micros AS "costMicros", unpriced_calls AS "unpricedCalls"`;

type StoredBudget = Omit<BudgetRow, "limits"> & {
  maxRequests: number | null;
  maxInputTokens: number | null;
  maxOutputTokens: number | null;
  maxTotalTokens: number | null;
  maxCostMicros: number | null;
};

const n = (v: unknown): number | null => (v == null ? null : Number(v));

function readBudget(r: StoredBudget): BudgetRow {
  return {
    id: Number(r.id),
    vaultId: Number(r.vaultId),
    name: r.name,
    scope: r.scope,
    scopeRef: r.scopeRef ?? null,
    period: r.period,
    limits: {
      requests: n(r.maxRequests),
      inputTokens: n(r.maxInputTokens),
      outputTokens: n(r.maxOutputTokens),
      totalTokens: n(r.maxTotalTokens),
      costMicros: n(r.maxCostMicros),
    },
    softPercent: n(r.softPercent),
    softAction: r.softAction,
    createdAt: Number(r.createdAt),
    updatedAt: Number(r.updatedAt),
  };
}

function readUsage(r: Record<string, unknown> | undefined): BudgetUsage {
  if (!r) return NO_USAGE;
  return {
    requests: Number(r.requests),
    inputTokens: Number(r.inputTokens),
    outputTokens: Number(r.outputTokens),
    totalTokens: Number(r.totalTokens),
    costMicros: Number(r.costMicros),
    unpricedCalls: Number(r.unpricedCalls),
  };
}

export function budgetRepo(sql: Sql) {
  return {
    /** Creates or replaces the vault's budget of this name (its usage stays). */
    async put(b: Omit<BudgetRow, "id" | "createdAt" | "updatedAt">, now: number): Promise<BudgetRow> {
      const l = b.limits;
      const row = await sql.get<StoredBudget>(
        `INSERT INTO budgets (vault_id, name, scope, scope_ref, period, max_requests, max_input_tokens, max_output_tokens, max_total_tokens,
           max_cost_micros, soft_percent, soft_action, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (vault_id, name) DO UPDATE SET scope = excluded.scope, scope_ref = excluded.scope_ref, period = excluded.period,
           max_requests = excluded.max_requests, max_input_tokens = excluded.max_input_tokens, max_output_tokens = excluded.max_output_tokens,
           max_total_tokens = excluded.max_total_tokens, max_cost_micros = excluded.max_cost_micros, soft_percent = excluded.soft_percent,
           soft_action = excluded.soft_action, updated_at = excluded.updated_at
         RETURNING ${COLUMNS}`,
        [
          b.vaultId,
          b.name,
          b.scope,
          b.scopeRef,
          b.period,
          l.requests,
          l.inputTokens,
          l.outputTokens,
          l.totalTokens,
          l.costMicros,
          b.softPercent,
          b.softAction,
          now,
          now,
        ],
      );
      return readBudget(row!);
    },
    async list(vaultId: number): Promise<BudgetRow[]> {
      return (await sql.all<StoredBudget>(`SELECT ${COLUMNS} FROM budgets WHERE vault_id = ? ORDER BY name`, [vaultId])).map(readBudget);
    },
    async get(vaultId: number, name: string): Promise<BudgetRow | undefined> {
      const row = await sql.get<StoredBudget>(`SELECT ${COLUMNS} FROM budgets WHERE vault_id = ? AND name = ?`, [vaultId, name]);
      return row && readBudget(row);
    },
    async remove(vaultId: number, name: string): Promise<boolean> {
      return (await sql.run("DELETE FROM budgets WHERE vault_id = ? AND name = ?", [vaultId, name])) > 0;
    },
    /** What the budget counted in the period starting at `periodStart`. */
    async usage(budgetId: number, periodStart: number): Promise<BudgetUsage> {
      return readUsage(await sql.get(`SELECT ${USAGE} FROM budget_usage WHERE budget_id = ? AND period_start = ?`, [budgetId, periodStart]));
    },
    /** Adds `delta` to the period's usage in one statement; the totals after this addition. */
    async add(budgetId: number, periodStart: number, delta: BudgetUsage): Promise<BudgetUsage> {
      const d = delta;
      const row = await sql.get(
        `INSERT INTO budget_usage (budget_id, period_start, requests, input_tokens, output_tokens, total_tokens, cost_micros, unpriced_calls)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (budget_id, period_start) DO UPDATE SET requests = budget_usage.requests + excluded.requests,
           input_tokens = budget_usage.input_tokens + excluded.input_tokens, output_tokens = budget_usage.output_tokens + excluded.output_tokens,
           total_tokens = budget_usage.total_tokens + excluded.total_tokens, cost_micros = budget_usage.cost_micros + excluded.cost_micros,
           unpriced_calls = budget_usage.unpriced_calls + excluded.unpriced_calls
         RETURNING ${USAGE}`,
        [budgetId, periodStart, d.requests, d.inputTokens, d.outputTokens, d.totalTokens, d.costMicros, d.unpricedCalls],
      );
      return readUsage(row as Record<string, unknown>);
    },
    /**
     * Takes one request's count back (it was refused or held), never below nothing: a reset may have come between the
     * count and its taking back, and then there is nothing to take.
     */
    async takeBack(budgetId: number, periodStart: number): Promise<void> {
      await sql.run("UPDATE budget_usage SET requests = requests - 1 WHERE budget_id = ? AND period_start = ? AND requests > 0", [budgetId, periodStart]);
    },
    /**
     * Starts the period again from nothing (`broker budget reset`). The budget's row is touched too: every instance
     * hears of it (a change to budgets is announced) and forgets that the budget was spent.
     */
    async reset(budgetId: number, periodStart: number, now: number): Promise<void> {
      await sql.run("DELETE FROM budget_usage WHERE budget_id = ? AND period_start = ?", [budgetId, periodStart]);
      await sql.run("UPDATE budgets SET updated_at = ? WHERE id = ?", [now, budgetId]);
    },
    /**
     * Marks the period's soft threshold as told, once: true for the one caller that marked it (the one that sends the
     * webhook), false for every other.
     */
    async markSoftNotified(budgetId: number, periodStart: number, now: number): Promise<boolean> {
      return (
        (await sql.run("UPDATE budget_usage SET soft_notified_at = ? WHERE budget_id = ? AND period_start = ? AND soft_notified_at IS NULL", [
          now,
          budgetId,
          periodStart,
        ])) > 0
      );
    },
  };
}

export type BudgetRepo = ReturnType<typeof budgetRepo>;
