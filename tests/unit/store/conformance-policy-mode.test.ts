// On every backend, report mode's rows (migration 28, architecture.md D33): a vault's policy mode and a service's
// own rules mode round-trip (a put keeps the latter), and the audit records report mode marked are listed and
// counted from the two partial indexes over them alone: the log's would_refuse filter (alone or with the other
// filters, either cursor) and the settings page's capped 24-hour count. Plans read with EXPLAIN, no timing.

import { beforeAll, describe, expect, test } from "bun:test";
import { auditListQuery } from "../../../src/store/audit.ts";
import { WOULD_REFUSE_PREDICATE } from "../../../src/store/policy-modes.ts";
import { POLICY_MODE_MIGRATIONS } from "../../../src/store/schema-policy-mode.ts";
import type { AuditFilter, Store } from "../../../src/store/index.ts";
import { fillAuditLog, filledRow, RARE_HOST } from "../../helpers/audit-fill.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { auditRow } from "./conformance-fixtures.ts";

const ROWS = 60_000;
const VAULT = 1;
const OTHER_VAULT = 2;
/** Row n is marked when n % MARK_EVERY === 0 (then `,upstream_unreachable` too when n % (2 * MARK_EVERY) === 0). */
const MARK_EVERY = 1000;
const marked = (n: number) => n % MARK_EVERY === 0;

/** `at` of the marked rows matching `host` (any when absent), newest first (row n has at = n). */
function expectedAts(host?: string): number[] {
  const out: number[] = [];
  for (let n = ROWS; n >= 1; n--) if (marked(n) && (host === undefined || filledRow(n).host === host)) out.push(n);
  return out;
}

test("the migration's partial indexes name the predicate the queries write, character for character", () => {
  const sql = POLICY_MODE_MIGRATIONS[0]!.sql;
  expect(sql).toContain(`audit_logs (vault_id, id) WHERE ${WOULD_REFUSE_PREDICATE};`);
  expect(sql).toContain(`audit_logs (vault_id, at) WHERE ${WOULD_REFUSE_PREDICATE};`);
  expect(auditListQuery({ vaultId: 1, wouldRefuse: true, limit: 1 }).sql).toContain(`AND ${WOULD_REFUSE_PREDICATE}`);
  expect(auditListQuery({ vaultId: 1, wouldRefuse: false, limit: 1 }).sql).not.toContain(WOULD_REFUSE_PREDICATE);
});

forEachBackend((backend) => {
  describe("modes", () => {
    test("a vault's policy mode and a service's rules mode round-trip; a put keeps the rules mode; NULL is the vault's", async () => {
      const store = await backend.open();
      const v = await store.vaults.create("v", 1);
      expect(v.policyMode).toBe("enforce");
      await store.policyModes.setVaultMode(v.id, "report");
      expect((await store.vaults.byId(v.id))?.policyMode).toBe("report");
      expect((await store.vaults.list())[0]?.policyMode).toBe("report");
      const row = {
        vaultId: v.id,
        host: "api.example.com",
        description: "",
        authType: "bearer" as const,
        authKey: "K",
        authHeader: null,
        authPrefix: null,
        authUsername: null,
        enabled: true,
      };
      await store.services.put(row, 2);
      expect((await store.services.get(v.id, "api.example.com"))?.rulesMode).toBeNull();
      await store.policyModes.setServiceMode(v.id, "api.example.com", "enforce");
      await store.services.put({ ...row, description: "changed", rules: '[{"methods":["GET"],"paths":["/**"]}]' }, 3);
      expect(await store.services.get(v.id, "api.example.com")).toMatchObject({ description: "changed", rulesMode: "enforce" });
      expect((await store.services.forHost(v.id, "api.example.com", undefined))[0]?.rulesMode).toBe("enforce");
      await store.policyModes.setServiceMode(v.id, "api.example.com", null);
      expect((await store.services.get(v.id, "api.example.com"))?.rulesMode).toBeNull();
      // The columns refuse anything else.
      await expect(store.policyModes.setVaultMode(v.id, "loose" as never)).rejects.toThrow();
      await expect(store.policyModes.setServiceMode(v.id, "api.example.com", "loose" as never)).rejects.toThrow();
    });
  });

  describe("marked records", () => {
    let store: Store;
    /** SQLite's plans before ANALYZE: how the broker, which never analyzes, runs them. */
    const heuristic: string[] = [];

    async function plan(sql: string, params: unknown[]): Promise<string> {
      if (backend.name === "sqlite") {
        const rows = await store.db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, params as never);
        return rows.map((r) => r.detail).join("\n");
      }
      const rows = await store.db.all<Record<string, string>>(`EXPLAIN ${sql}`, params as never);
      return rows.map((r) => r["QUERY PLAN"]).join("\n");
    }
    const listPlan = (f: AuditFilter) => {
      const q = auditListQuery(f);
      return plan(q.sql, q.params);
    };
    /** An index range scan (no table scan, no sort); `index`, when given, is the one used. */
    function expectIndexRange(p: string, index?: string) {
      if (backend.name === "sqlite") {
        expect(p).toMatch(/^SEARCH audit_logs USING (COVERING )?INDEX audit_logs_\w+/m); // the count's subquery is a co-routine first
        expect(p).not.toMatch(/\bSCAN audit_logs\b/);
        expect(p).not.toContain("TEMP B-TREE");
      } else {
        expect(p).toMatch(/Index (Only )?Scan( Backward)? using audit_logs_\w+ on audit_logs/);
        expect(p).not.toContain("Seq Scan");
        expect(p).not.toMatch(/\bSort\b/);
      }
      if (index) expect(p).toMatch(new RegExp(`\\b${index}\\b`));
    }
    const cursors = (f: Partial<AuditFilter>): AuditFilter[] => [
      { vaultId: VAULT, ...f, limit: 50 },
      { vaultId: VAULT, ...f, before: ROWS / 2, limit: 50 },
      { vaultId: VAULT, ...f, after: ROWS / 2, limit: 50 },
    ];
    const COUNT =
      "SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM audit_logs WHERE vault_id = ? AND at >= ? AND " + WOULD_REFUSE_PREDICATE + " LIMIT ?) marked";

    beforeAll(async () => {
      store = await backend.open();
      await fillAuditLog(store.db, VAULT, ROWS, { analyze: false });
      await store.db.run(`UPDATE audit_logs SET error = 'would_refuse:request_not_allowed' WHERE at % ${MARK_EVERY} = 0`);
      await store.db.run(`UPDATE audit_logs SET error = 'would_refuse:forbidden,upstream_unreachable' WHERE at % ${2 * MARK_EVERY} = 0`);
      // Errors that are no mark, and a marked record of another vault: never on vault 1's pages.
      await store.db.run(`UPDATE audit_logs SET error = 'request_not_allowed' WHERE at % ${MARK_EVERY} = 7`);
      await store.audit.insert([auditRow({ at: 10, vaultId: OTHER_VAULT, error: "would_refuse:request_not_allowed" })]);
      if (backend.name === "sqlite") {
        for (const f of [...cursors({ wouldRefuse: true }), ...cursors({ wouldRefuse: true, status: 200 })]) heuristic.push(await listPlan(f));
        heuristic.push(await plan(COUNT, [VAULT, ROWS - 10_000, 10_000]));
      }
      await store.db.exec("ANALYZE");
    }, 120_000);

    test("the filter pages newest first with the id cursor and follows oldest first, only the vault's marked records", async () => {
      const all = expectedAts();
      expect(all.length).toBe(ROWS / MARK_EVERY);
      const first = await store.audit.list({ vaultId: VAULT, wouldRefuse: true, limit: 10 });
      expect(first.map((r) => r.at)).toEqual(all.slice(0, 10));
      expect(first.every((r) => r.vaultId === VAULT && r.error!.startsWith("would_refuse:"))).toBe(true);
      const second = await store.audit.list({ vaultId: VAULT, wouldRefuse: true, before: first.at(-1)!.id, limit: 10 });
      expect(second.map((r) => r.at)).toEqual(all.slice(10, 20));
      const following = await store.audit.list({ vaultId: VAULT, wouldRefuse: true, after: second.at(-1)!.id, limit: 5 });
      expect(following.map((r) => r.at)).toEqual(all.slice(14, 19).reverse());
      expect((await store.audit.list({ vaultId: VAULT, wouldRefuse: true, limit: 1000 })).map((r) => r.at)).toEqual(all);
      expect((await store.audit.list({ vaultId: VAULT, wouldRefuse: true, host: "mid.example", limit: 1000 })).map((r) => r.at)).toEqual(
        expectedAts("mid.example"),
      );
      expect(await store.audit.list({ vaultId: VAULT, wouldRefuse: true, host: RARE_HOST, status: 404, limit: 10 })).toEqual([]);
    });

    test("alone, with either cursor, it is a range of audit_logs_would_refuse; with other filters, a range of an index", async () => {
      for (const f of cursors({ wouldRefuse: true })) expectIndexRange(await listPlan(f), "audit_logs_would_refuse");
      for (const extra of [{ host: "mid.example" }, { status: 200 }, { principal: "agent:1" }, { host: "api.example", status: 200, principal: "user:1" }])
        for (const f of cursors({ wouldRefuse: true, ...extra })) expectIndexRange(await listPlan(f));
    });

    test.if(backend.name === "sqlite")("without statistics (the broker never runs ANALYZE) the filter and the count still use the partial indexes", () => {
      expect(heuristic.length).toBe(7);
      for (const p of heuristic.slice(0, 3)) expectIndexRange(p, "audit_logs_would_refuse");
      for (const p of heuristic.slice(3, 6)) expectIndexRange(p);
      expectIndexRange(heuristic[6]!, "audit_logs_would_refuse_at");
    });

    test("the count since a time: marked records of the vault only, never past the cap, from audit_logs_would_refuse_at", async () => {
      expect(await store.policyModes.wouldRefuseSince(VAULT, 0, 10_000)).toBe(ROWS / MARK_EVERY);
      expect(await store.policyModes.wouldRefuseSince(VAULT, ROWS - 10_000 + 1, 10_000)).toBe(10);
      expect(await store.policyModes.wouldRefuseSince(VAULT, 0, 25)).toBe(25);
      expect(await store.policyModes.wouldRefuseSince(OTHER_VAULT, 0, 10_000)).toBe(1);
      expect(await store.policyModes.wouldRefuseSince(3, 0, 10_000)).toBe(0);
      expectIndexRange(await plan(COUNT, [VAULT, ROWS - 10_000, 10_000]), "audit_logs_would_refuse_at");
    });
  });
});
