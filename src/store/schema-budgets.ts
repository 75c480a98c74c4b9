// Migration 26: budgets (issue 38): what a vault's agents may spend per period, and what each budget counted.

import type { Migration } from "./migration.ts";

export const BUDGET_MIGRATIONS: readonly Migration[] = [
  {
    version: 26,
    name: "budgets",
    // Budgets (issue 38, docs/architecture.md D26): a limit on a vault's requests, LLM tokens and money per period,
    // for the whole vault, one agent, one service or a set of hosts, with an optional soft threshold; and per budget
    // and period what was used, added to atomically by every instance (INSERT … ON CONFLICT DO UPDATE), so the total
    // overshoots a limit by at most the requests in flight. Money in integer micro-units of the price table's currency.
    sql: `
      CREATE TABLE budgets (
        id {{id}},
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        scope TEXT NOT NULL,
        scope_ref TEXT,
        period TEXT NOT NULL,
        max_requests BIGINT,
        max_input_tokens BIGINT,
        max_output_tokens BIGINT,
        max_total_tokens BIGINT,
        max_cost_micros BIGINT,
        soft_percent INTEGER,
        soft_action TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        UNIQUE (vault_id, name)
      );
      CREATE TABLE budget_usage (
        budget_id BIGINT NOT NULL REFERENCES budgets (id) ON DELETE CASCADE,
        period_start BIGINT NOT NULL,
        requests BIGINT NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        total_tokens BIGINT NOT NULL,
        cost_micros BIGINT NOT NULL,
        unpriced_calls BIGINT NOT NULL,
        soft_notified_at BIGINT,
        PRIMARY KEY (budget_id, period_start)
      );
    `,
    // Every instance caches a vault's budgets (workflows/budget-gate.ts): a change to them is announced like a change
    // to its services. Usage is not cached, so its writes announce nothing.
    postgresOnly: [
      "CREATE TRIGGER budgets_announce AFTER INSERT OR UPDATE OR DELETE ON budgets FOR EACH ROW EXECUTE FUNCTION broker_announce('vault', 'vault_id')",
    ],
  },
];
