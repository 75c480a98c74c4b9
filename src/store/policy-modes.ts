// Report mode's rows (issue 39 point 5, migration 28): a vault's policy mode and a service's own rules mode, and
// the count of the audit records report mode let through. The columns are read with their rows (vaults.ts,
// services.ts); only their writes and the count live here.

import type { Sql } from "./db.ts";

/** `enforce` refuses; `report` lets through what would be refused, and marks its audit record (WOULD_REFUSE). */
export type PolicyMode = "enforce" | "report";

/** How a record report mode let through begins its `error`: `would_refuse:<code>` (then `,<error>` if it failed otherwise). */
export const WOULD_REFUSE = "would_refuse:";

/**
 * The marked records, as migration 28's partial indexes name them: the same text, character for character, or
 * neither SQLite nor PostgreSQL would see that a query's rows are all in the index.
 */
const PREDICATE = "substr(error, 1, 13) = 'would_refuse:'";
export const WOULD_REFUSE_PREDICATE = PREDICATE;

// Counted in the (vault_id, at) partial index, and never past `cap` rows: the console shows "10,000 or more".
const COUNT_SINCE = `SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM audit_logs WHERE vault_id = ? AND at >= ? AND ${PREDICATE} LIMIT ?) marked`;

export function policyModeRepo(sql: Sql) {
  return {
    async setVaultMode(vaultId: number, mode: PolicyMode): Promise<void> {
      await sql.run("UPDATE vaults SET policy_mode = ? WHERE id = ?", [mode, vaultId]);
    },
    /** A service's own rules mode; null: its vault's. A service put again (a proposal applied) keeps it. */
    async setServiceMode(vaultId: number, host: string, mode: PolicyMode | null): Promise<void> {
      await sql.run("UPDATE services SET rules_mode = ? WHERE vault_id = ? AND host = ?", [mode, vaultId, host]);
    },
    /** Records of the vault marked would_refuse since `since` (ms), counted up to `cap`. */
    async wouldRefuseSince(vaultId: number, since: number, cap: number): Promise<number> {
      const row = await sql.get<{ n: number | string }>(COUNT_SINCE, [vaultId, since, cap]);
      return Number(row?.n ?? 0);
    },
  };
}

export type PolicyModeRepo = ReturnType<typeof policyModeRepo>;
