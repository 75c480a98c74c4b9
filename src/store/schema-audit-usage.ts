// Migration 27: the LLM usage of each audit record (issue 38), covered by the record's hash (docs/audit-chain.md, v2).

import type { Migration } from "./migration.ts";

export const AUDIT_USAGE_MIGRATIONS: readonly Migration[] = [
  {
    version: 27,
    name: "audit-usage",
    // What an LLM call used (issue 38, docs/architecture.md D26): the model, the token counts the provider reported and
    // the cost in integer micro-units of the price table's currency. Nullable: null on records that are not LLM calls
    // (and on every record written before), and a null cost on a call the price table does not know.
    sql: `
      ALTER TABLE audit_logs ADD COLUMN llm_model TEXT;
      ALTER TABLE audit_logs ADD COLUMN input_tokens BIGINT;
      ALTER TABLE audit_logs ADD COLUMN output_tokens BIGINT;
      ALTER TABLE audit_logs ADD COLUMN total_tokens BIGINT;
      ALTER TABLE audit_logs ADD COLUMN cost_micros BIGINT;
    `,
  },
];
