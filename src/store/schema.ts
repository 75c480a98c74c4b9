// The schema's history: every migration, in order, embedded in the binary (the SQL itself is in
// schema-foundation.ts and schema-additions.ts). Applied by migrations.ts.
// The SQL is portable; the two spellings that differ between SQLite and PostgreSQL are written as {{id}}
// (auto-increment primary key) and {{bytes}} (binary); what cannot be portable sits in postgresOnly / sqliteOnly.

import { ADDITIONS } from "./schema-additions.ts";
import { AUDIT_CHAIN_MIGRATIONS } from "./schema-audit-chain.ts";
import { AUDIT_USAGE_MIGRATIONS } from "./schema-audit-usage.ts";
import { BUDGET_MIGRATIONS } from "./schema-budgets.ts";
import { FOUNDATION } from "./schema-foundation.ts";
import { VAULT_CODE_MIGRATIONS } from "./schema-vault-code.ts";
import { POLICY_MODE_MIGRATIONS } from "./schema-policy-mode.ts";
import { WORKLOAD_MIGRATIONS } from "./schema-workload.ts";
import { WORKLOAD_KEYS_MIGRATIONS } from "./schema-workload-keys.ts";
import { CHANGE_LOG_MIGRATIONS } from "./schema-change-log.ts";
import { WORKLOAD_TOKEN_ID_MIGRATIONS } from "./schema-workload-token-ids.ts";
import type { Migration } from "./migration.ts";

export type { Migration };

/** The channel on which PostgreSQL announces committed changes to every instance (see store/changes.ts). */
export const CHANGES_CHANNEL = "broker_changes";

export const MIGRATIONS: readonly Migration[] = [
  ...FOUNDATION,
  ...ADDITIONS,
  ...AUDIT_CHAIN_MIGRATIONS,
  ...BUDGET_MIGRATIONS,
  ...AUDIT_USAGE_MIGRATIONS,
  ...POLICY_MODE_MIGRATIONS,
  ...VAULT_CODE_MIGRATIONS,
  ...WORKLOAD_MIGRATIONS,
  ...WORKLOAD_KEYS_MIGRATIONS,
  ...CHANGE_LOG_MIGRATIONS,
  ...WORKLOAD_TOKEN_ID_MIGRATIONS,
];
