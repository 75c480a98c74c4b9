// Migration 28: report mode (issue 39 point 5): a vault's policy mode, a service's own rules mode, and two partial
// indexes over the audit records report mode let through, so their log filter and their count stay index ranges.

import type { Migration } from "./migration.ts";

export const POLICY_MODE_MIGRATIONS: readonly Migration[] = [
  {
    version: 28,
    name: "policy-mode",
    // `enforce` refuses what the rules or the unmatched-host policy refuse; `report` lets it through and marks its
    // audit record (error `would_refuse:<code>`, docs/architecture.md D33). A service's rules_mode overrides its
    // vault's for that service's rules; NULL: the vault's. Only records so marked enter the two indexes (the
    // predicate is the one store/policy-modes.ts and store/audit.ts write, character for character, which is what
    // lets SQLite and PostgreSQL use them).
    sql: `
      ALTER TABLE vaults ADD COLUMN policy_mode TEXT NOT NULL DEFAULT 'enforce' CHECK (policy_mode IN ('enforce', 'report'));
      ALTER TABLE services ADD COLUMN rules_mode TEXT CHECK (rules_mode IN ('enforce', 'report'));
      CREATE INDEX audit_logs_would_refuse ON audit_logs (vault_id, id) WHERE substr(error, 1, 13) = 'would_refuse:';
      CREATE INDEX audit_logs_would_refuse_at ON audit_logs (vault_id, at) WHERE substr(error, 1, 13) = 'would_refuse:';
    `,
  },
];
