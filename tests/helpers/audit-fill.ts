// A large audit log in one statement (a recursive CTE, the same SQL on SQLite and PostgreSQL), for the
// index and query-plan tests and bench/log-filters.ts. Row n (1-based, in id order) is a pure function of
// n, so a test can compute which rows a filter must return. Then ANALYZE, so the planner has statistics
// (the broker never runs ANALYZE on SQLite: its plans come from SQLite's heuristics).

import type { Db } from "../../src/store/index.ts";

/** Every RARE_EVERYth row has the rare host, status and principal (each at a different offset). */
export const RARE_EVERY = 5000;
export const RARE_HOST = "rare.example";
export const RARE_STATUS = 418;
export const RARE_PRINCIPAL = "agent:9";

/** What fillAuditLog writes as row n (1-based). */
export function filledRow(n: number): { host: string; status: number; principal: string } {
  return {
    host: n % RARE_EVERY === 0 ? RARE_HOST : n % 10 === 1 ? "mid.example" : "api.example",
    status: n % RARE_EVERY === 1 ? RARE_STATUS : n % 10 === 3 ? 500 : 200,
    principal: n % RARE_EVERY === 2 ? RARE_PRINCIPAL : n % 2 === 0 ? "agent:1" : "user:1",
  };
}

/** Rows 1..count in vault `vaultId` (`at` = n), in chunks so one statement stays modest; then ANALYZE unless told not to. */
export async function fillAuditLog(db: Db, vaultId: number, count: number, opts: { analyze?: boolean } = {}): Promise<void> {
  const chunk = 100_000;
  for (let from = 1; from <= count; from += chunk) {
    const to = Math.min(count, from + chunk - 1);
    await db.run(
      `INSERT INTO audit_logs (at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by)
       WITH RECURSIVE n(i) AS (SELECT CAST(? AS BIGINT) UNION ALL SELECT i + 1 FROM n WHERE i < ?)
       SELECT i,
         CASE WHEN i % ${RARE_EVERY} = 2 THEN '${RARE_PRINCIPAL}' WHEN i % 2 = 0 THEN 'agent:1' ELSE 'user:1' END,
         CAST(? AS BIGINT), 'bench', 'proxy', 'GET',
         CASE WHEN i % ${RARE_EVERY} = 0 THEN '${RARE_HOST}' WHEN i % 10 = 1 THEN 'mid.example' ELSE 'api.example' END,
         '/v1/items', 'api', 'TOKEN',
         CASE WHEN i % ${RARE_EVERY} = 1 THEN ${RARE_STATUS} WHEN i % 10 = 3 THEN 500 ELSE 200 END,
         120, 2048, 3, NULL, 0, NULL
       FROM n`,
      [from, to, vaultId],
    );
  }
  if (opts.analyze !== false) await db.exec("ANALYZE");
}
