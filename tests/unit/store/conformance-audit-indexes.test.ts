// On every backend: a filtered audit page (host, status, principal, any mix, with the id cursor either
// way) is an index range scan in id order (migration 19), never a scan of the vault's whole log. 120k
// rows in one vault (one recursive INSERT, then ANALYZE) so the planner's choice is the one it makes at
// scale; the plans are read with SQLite's EXPLAIN QUERY PLAN and PostgreSQL's EXPLAIN. No timing.

import { beforeAll, describe, expect, test } from "bun:test";
import { auditListQuery } from "../../../src/store/audit.ts";
import { numberPlaceholders } from "../../../src/store/postgres.ts";
import type { AuditFilter, Store } from "../../../src/store/index.ts";
import { fillAuditLog, filledRow, RARE_EVERY, RARE_HOST, RARE_PRINCIPAL, RARE_STATUS } from "../../helpers/audit-fill.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { auditRow } from "./conformance-fixtures.ts";

const ROWS = 120_000;
const VAULT = 1;
const OTHER_VAULT = 2;

type Filter = Pick<AuditFilter, "host" | "status" | "principal">;
const RARE: Record<"host" | "status" | "principal", Filter> = {
  host: { host: RARE_HOST },
  status: { status: RARE_STATUS },
  principal: { principal: RARE_PRINCIPAL },
};
const INDEX = { host: "audit_logs_vault_host", status: "audit_logs_vault_status", principal: "audit_logs_vault_principal" };

/** `at` of the filled rows matching `f`, newest first (row n has at = n). */
function expectedAts(f: Filter): number[] {
  const out: number[] = [];
  for (let n = ROWS; n >= 1; n--) {
    const r = filledRow(n);
    if (
      (f.host === undefined || r.host === f.host) &&
      (f.status === undefined || r.status === f.status) &&
      (f.principal === undefined || r.principal === f.principal)
    ) {
      out.push(n);
    }
  }
  return out;
}

/** Every subset of the three filters (rare values), the empty one first. */
const SHAPES: Filter[] = Array.from({ length: 8 }, (_, bits) => ({
  ...(bits & 1 ? RARE.host : {}),
  ...(bits & 2 ? RARE.status : {}),
  ...(bits & 4 ? RARE.principal : {}),
}));

forEachBackend((backend) => {
  let store: Store;

  /** The plan list() gets for `f`, one line per node (PostgreSQL: the custom plan, for these values). */
  async function plan(f: AuditFilter): Promise<string> {
    const q = auditListQuery(f);
    if (backend.name === "sqlite") {
      const rows = await store.db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${q.sql}`, q.params);
      return rows.map((r) => r.detail).join("\n");
    }
    const rows = await store.db.all<Record<string, string>>(`EXPLAIN ${q.sql}`, q.params);
    return rows.map((r) => r["QUERY PLAN"]).join("\n");
  }

  /** PostgreSQL's generic plan for `f`, as a named prepared statement gets after five runs: blind to the values. */
  async function genericPlan(f: AuditFilter): Promise<string> {
    const q = auditListQuery(f);
    const literal = (v: unknown) => (typeof v === "string" ? `'${v.replaceAll("'", "''")}'` : String(v));
    return store.db.transaction(async (tx) => {
      await tx.run("SET LOCAL plan_cache_mode = force_generic_plan");
      await tx.run(`PREPARE audit_page AS ${numberPlaceholders(q.sql)}`);
      const rows = await tx.all<Record<string, string>>(`EXPLAIN EXECUTE audit_page(${q.params.map(literal).join(", ")})`);
      await tx.run("DEALLOCATE audit_page");
      return rows.map((r) => r["QUERY PLAN"]).join("\n");
    });
  }

  /** The plan of a statement prepared on one connection and executed six times first, as the store reuses it. */
  async function reusedPlan(f: AuditFilter): Promise<string> {
    const q = auditListQuery(f);
    const literal = (v: unknown) => (typeof v === "string" ? `'${v.replaceAll("'", "''")}'` : String(v));
    const args = q.params.map(literal).join(", ");
    return store.db.transaction(async (tx) => {
      await tx.run(`PREPARE audit_reused AS ${numberPlaceholders(q.sql)}`);
      for (let i = 0; i < 6; i++) await tx.all(`EXECUTE audit_reused(${args})`);
      const rows = await tx.all<Record<string, string>>(`EXPLAIN EXECUTE audit_reused(${args})`);
      await tx.run("DEALLOCATE audit_reused");
      return rows.map((r) => r["QUERY PLAN"]).join("\n");
    });
  }

  /**
   * A range scan of audit_logs in the requested order, stopped at LIMIT: no full (table or index) scan,
   * no sort. Unfiltered, the id range itself (rowid / primary key) is as good as (vault_id, id) when the
   * statistics say one vault holds nearly every row, as here; `index`, when given, must be the one used.
   */
  function expectRangeScan(p: string, index?: string) {
    if (backend.name === "sqlite") {
      expect(p).toMatch(/^SEARCH audit_logs USING (COVERING INDEX audit_logs_vault|INDEX audit_logs_vault|INTEGER PRIMARY KEY)/);
      expect(p).not.toMatch(/\bSCAN audit_logs\b/);
      expect(p).not.toContain("TEMP B-TREE");
    } else {
      expect(p).toMatch(/Index Scan( Backward)? using audit_logs_(vault\w*|pkey) on audit_logs/);
      expect(p).not.toContain("Seq Scan");
      expect(p).not.toContain("Bitmap");
      expect(p).not.toMatch(/\bSort\b/);
    }
    if (index) expect(p).toMatch(new RegExp(`\\b${index}\\b`));
  }

  /** Each shape's plan with every cursor: newest page, an older page, following. */
  const cursors = (f: Filter): AuditFilter[] => [
    { vaultId: VAULT, ...f, limit: 50 },
    { vaultId: VAULT, ...f, before: ROWS / 2, limit: 50 },
    { vaultId: VAULT, ...f, after: ROWS / 2, limit: 50 },
  ];
  /** SQLite's plans before ANALYZE: how the broker, which never analyzes, runs them. */
  const heuristicPlans: { f: AuditFilter; plan: string }[] = [];

  beforeAll(async () => {
    store = await backend.open();
    await fillAuditLog(store.db, VAULT, ROWS, { analyze: false });
    // The same rare values in another vault: never in vault 1's pages.
    await store.audit.insert([auditRow({ at: 1, vaultId: OTHER_VAULT, host: RARE_HOST, status: RARE_STATUS, principal: RARE_PRINCIPAL })]);
    if (backend.name === "sqlite") for (const f of SHAPES.flatMap(cursors)) heuristicPlans.push({ f, plan: await plan(f) });
    await store.db.exec("ANALYZE");
  }, 120_000);

  test("the fill: every row in the vault, the rare values where filledRow puts them", async () => {
    const count = await store.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM audit_logs WHERE vault_id = ?", [VAULT]);
    expect(Number(count?.n)).toBe(ROWS);
    expect(expectedAts(RARE.status).length).toBe(ROWS / RARE_EVERY);
  });

  describe.each(Object.keys(RARE) as (keyof typeof RARE)[])("filter by %s", (name) => {
    const f = RARE[name];
    const all = expectedAts(f);

    test("pages newest first with the id cursor, then follows oldest first, only the vault's rows", async () => {
      const first = await store.audit.list({ vaultId: VAULT, ...f, limit: 10 });
      expect(first.map((r) => r.at)).toEqual(all.slice(0, 10));
      expect(first.every((r) => r.vaultId === VAULT)).toBe(true);
      const second = await store.audit.list({ vaultId: VAULT, ...f, before: first.at(-1)!.id, limit: 10 });
      expect(second.map((r) => r.at)).toEqual(all.slice(10, 20));
      const following = await store.audit.list({ vaultId: VAULT, ...f, after: second.at(-1)!.id, limit: 5 });
      expect(following.map((r) => r.at)).toEqual(all.slice(14, 19).reverse());
      const everything = await store.audit.list({ vaultId: VAULT, ...f, limit: 1000 });
      expect(everything.map((r) => r.at)).toEqual(all);
    });

    test(`newest, older and following pages are range scans of ${INDEX[name]}`, async () => {
      const middle = all[Math.floor(all.length / 2)]!;
      expectRangeScan(await plan({ vaultId: VAULT, ...f, limit: 100 }), INDEX[name]);
      expectRangeScan(await plan({ vaultId: VAULT, ...f, before: middle, limit: 100 }), INDEX[name]);
      expectRangeScan(await plan({ vaultId: VAULT, ...f, after: middle, limit: 100 }), INDEX[name]);
    });
  });

  test("a value nobody has: an empty page from the index", async () => {
    expect(await store.audit.list({ vaultId: VAULT, host: "nomatch.example", limit: 100 })).toEqual([]);
    expectRangeScan(await plan({ vaultId: VAULT, host: "nomatch.example", limit: 100 }), INDEX.host);
    expect(await store.audit.list({ vaultId: VAULT, status: 599, limit: 100 })).toEqual([]);
    expectRangeScan(await plan({ vaultId: VAULT, status: 599, limit: 100 }), INDEX.status);
  });

  test("every mix of filters, with and without a cursor, is a range scan of a filter's index and returns the right rows", async () => {
    for (const f of SHAPES) {
      const want = expectedAts(f);
      expect((await store.audit.list({ vaultId: VAULT, ...f, limit: 50 })).map((r) => r.at)).toEqual(want.slice(0, 50));
      const filtered = f.host !== undefined || f.status !== undefined || f.principal !== undefined;
      for (const q of cursors(f)) {
        const p = await plan(q);
        expectRangeScan(p);
        if (filtered) expect(p).toMatch(/audit_logs_vault_(host|status|principal)\b/);
      }
    }
  });

  test.if(backend.name === "sqlite")("without statistics (the broker never runs ANALYZE), each filter still uses its index", () => {
    expect(heuristicPlans.length).toBe(SHAPES.length * 3);
    for (const { f, plan: p } of heuristicPlans) {
      const used = f.host !== undefined ? INDEX.host : f.status !== undefined ? INDEX.status : f.principal !== undefined ? INDEX.principal : "audit_logs_vault";
      expectRangeScan(p);
      // With two or three filters one of their indexes (the others filter); alone, the filter's own.
      const filters = [f.host, f.status, f.principal].filter((v) => v !== undefined).length;
      if (filters <= 1) expectRangeScan(p, used);
      else expect(p).toMatch(/audit_logs_vault_(host|status|principal)\b/);
    }
  });

  test("the unfiltered page: newest first from an id-ordered range", async () => {
    expectRangeScan(await plan({ vaultId: VAULT, limit: 100 }));
    expect((await store.audit.list({ vaultId: VAULT, limit: 3 })).map((r) => r.at)).toEqual([ROWS, ROWS - 1, ROWS - 2]);
  });

  // The store's connections plan each call with its values (plan_cache_mode = force_custom_plan, set at
  // connect in src/store/postgres.ts): a reused generic plan would estimate `host = $4` as a third of the
  // rows and walk the primary key back through the vault (~65-180 ms at 1M rows, bench/log-filters.ts).
  if (backend.name === "postgres")
    test("PostgreSQL: a statement run many times on one connection still uses the filter's index", async () => {
      expect((await store.db.get<{ plan_cache_mode: string }>("SHOW plan_cache_mode"))?.plan_cache_mode).toBe("force_custom_plan");
      for (const name of Object.keys(RARE) as (keyof typeof RARE)[])
        expectRangeScan(await reusedPlan({ vaultId: VAULT, ...RARE[name], limit: 100 }), INDEX[name]);
      // The check bites: the same statement under a forced generic plan does not use the index.
      expect(await genericPlan({ vaultId: VAULT, ...RARE.host, limit: 100 })).not.toContain(INDEX.host);
    });
});
