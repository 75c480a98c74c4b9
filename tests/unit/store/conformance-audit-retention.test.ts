// On every backend: a retention batch deletes at most its limit, the right rows (outside the newest ids, or
// older than the age limit, lowest first), says whether more is left, and reads only the primary key: the id
// bounds are two probes (never a count) and the delete one id range, with and without planner statistics.
// On PostgreSQL an instance finding another's batch under way does nothing (pg_try_advisory_xact_lock).
// Plans read with EXPLAIN; no timing.

import { describe, expect, test } from "bun:test";
import { RETENTION_STATEMENTS } from "../../../src/store/audit.ts";
import { PRUNE_LOCK } from "../../../src/store/audit-retention.ts";
import { pruneAuditBatch, type PruneBatch, type Store } from "../../../src/store/index.ts";
import { fillAuditLog } from "../../helpers/audit-fill.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const ROWS = 20_000;

/** Row count and lowest and highest `at` (row n has at = n = id after the fill). */
async function span(store: Store): Promise<{ n: number; lo: number; hi: number }> {
  const r = await store.db.get<{ n: number; lo: number; hi: number }>("SELECT COUNT(*) AS n, MIN(at) AS lo, MAX(at) AS hi FROM audit_logs");
  return { n: Number(r?.n), lo: Number(r?.lo), hi: Number(r?.hi) };
}

forEachBackend((backend) => {
  async function filled(analyze = false): Promise<Store> {
    const store = await backend.open();
    await fillAuditLog(store.db, 1, ROWS, { analyze });
    return store;
  }

  async function plan(store: Store, sql: string, params: number[]): Promise<string> {
    if (backend.name === "sqlite") {
      const rows = await store.db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, params);
      return rows.map((r) => r.detail).join("\n");
    }
    const rows = await store.db.all<Record<string, string>>(`EXPLAIN ${sql}`, params);
    return rows.map((r) => r["QUERY PLAN"]).join("\n");
  }

  test("idBounds: the lowest and highest id; none on an empty log", async () => {
    const store = await filled();
    expect(await store.audit.idBounds()).toEqual({ lowest: 1, highest: ROWS });
    expect(await (await backend.open()).audit.idBounds()).toBeUndefined();
  });

  test("deletePrunable: only rows inside the id range, and of those only the ones over the cap or too old", async () => {
    const store = await filled();
    // 1..1000 over the cap; 1..1999 too old; the range stops at 1500.
    expect((await store.audit.deletePrunable(1, 1_500, 1_000, 1)).removed).toBe(1_000);
    expect((await store.audit.deletePrunable(1_001, 1_500, 1_000, 1_201)).removed).toBe(200);
    expect((await store.audit.deletePrunable(1_201, 1_500, 1_000, 2_000)).removed).toBe(300);
    expect(await span(store)).toEqual({ n: ROWS - 1_500, lo: 1_501, hi: ROWS });
  });

  test("batches over the cap: never more than the limit each, lowest ids first, until the newest `keepRows` are left", async () => {
    const store = await filled();
    const batches: PruneBatch[] = [];
    for (let more = true; more; ) {
      const b = await pruneAuditBatch(store.db, { keepRows: 15_000, olderThan: 0 }, 1_000);
      batches.push(b);
      more = b.more;
    }
    // The fifth batch ends at the cap but was full, so the rows after it might be too old: one more look finds none.
    expect(batches.map((b) => b.removed)).toEqual([1000, 1000, 1000, 1000, 1000, 0]);
    expect(batches.map((b) => b.more)).toEqual([true, true, true, true, true, false]);
    expect(await span(store)).toEqual({ n: 15_000, lo: 5_001, hi: ROWS });
  });

  test("batches by age: never more than the limit each, oldest first, none at or after the limit", async () => {
    const store = await filled();
    const removed: number[] = [];
    for (let more = true; more; ) {
      const b = await pruneAuditBatch(store.db, { keepRows: ROWS, olderThan: 3_000 }, 700);
      removed.push(b.removed);
      more = b.more;
    }
    expect(removed).toEqual([700, 700, 700, 700, 199]);
    expect(await span(store)).toEqual({ n: ROWS - 2_999, lo: 3_000, hi: ROWS });
  });

  test("both limits at once: a batch takes what either says, within one limit", async () => {
    const store = await filled();
    const limits = { keepRows: 15_000, olderThan: 8_000 }; // 5,000 rows over the cap, then 2,999 more too old
    const removed: number[] = [];
    for (let more = true; more; ) {
      const b = await pruneAuditBatch(store.db, limits, 1_500);
      removed.push(b.removed);
      more = b.more;
    }
    expect(removed).toEqual([1500, 1500, 1500, 1500, 1500, 499]);
    expect(await span(store)).toEqual({ n: ROWS - 7_999, lo: 8_000, hi: ROWS });
  });

  test("a batch says what it cost: the whole transaction on SQLite (the event loop's time), the DELETE on PostgreSQL", async () => {
    const store = await filled();
    // A clock that ticks once per reading: SQLite reads it before and after the transaction and the DELETE
    // between, so its batch spans 3 ticks; PostgreSQL's reading spans only the DELETE, 1 tick.
    let ticks = 0;
    const b = await pruneAuditBatch(store.db, { keepRows: 15_000, olderThan: 0 }, 100, () => ticks++);
    expect(b).toEqual({ removed: 100, more: true, busy: false, ms: backend.name === "sqlite" ? 3 : 1 });
  });

  test("nothing over either limit, or an empty log: nothing deleted, nothing more", async () => {
    const store = await filled();
    expect(await pruneAuditBatch(store.db, { keepRows: ROWS, olderThan: 1 }, 500)).toMatchObject({ removed: 0, more: false, busy: false });
    expect((await span(store)).n).toBe(ROWS);
    const empty = await backend.open();
    expect(await pruneAuditBatch(empty.db, { keepRows: 10, olderThan: Date.now() }, 500)).toMatchObject({ removed: 0, more: false, busy: false });
  });

  describe.each([false, true])("with planner statistics: %p", (analyze) => {
    test("the id bounds are two probes of the primary key, never a scan or a count", async () => {
      const store = await filled(analyze);
      const p = await plan(store, RETENTION_STATEMENTS.idBounds, []);
      if (backend.name === "sqlite") expect(p.split("\n").filter((l) => l.includes("audit_logs"))).toEqual(["SEARCH audit_logs", "SEARCH audit_logs"]);
      else {
        expect(p).toMatch(/Limit[^\n]*\n\s*->\s+Index Only Scan using audit_logs_pkey/);
        expect(p).toMatch(/Limit[^\n]*\n\s*->\s+Index Only Scan Backward using audit_logs_pkey/);
      }
      expectNoScan(p);
    });

    test("a batch's statements read its id range on the primary key, never audit_logs_at or the whole table", async () => {
      const store = await filled(analyze);
      for (const [toId, throughId, olderThan] of [
        [500, 100, 50],
        [2_000, ROWS - 15_000, 8_000],
        [1_000, 0, ROWS], // every row too old: still the range
      ]) {
        // Where the prefix ends (the first row that must stay), then the prefix's delete, and each vault's new anchor.
        for (const [sql, params] of [
          [RETENTION_STATEMENTS.firstKept, [1, toId!, throughId!, olderThan!]],
          [RETENTION_STATEMENTS.deleteRange, [1, toId!]],
          [RETENTION_STATEMENTS.anchorsIn, [1, toId!]],
        ] as const) {
          const p = await plan(store, sql, [...params]);
          // The id range on the primary key (or, grouping by vault, on (vault_id, id), each vault's part of the range).
          if (backend.name === "sqlite")
            expect(p.split("\n")[0]).toMatch(
              /^SEARCH audit_logs USING (INTEGER PRIMARY KEY \(rowid>\? AND rowid<\?\)|(COVERING )?INDEX audit_logs_vault \(ANY\(vault_id\) AND id>\? AND id<\?\))$/,
            );
          else
            expect(p).toMatch(
              /(Index Scan using|Index Only Scan using|Bitmap Index Scan on) audit_logs_(pkey|vault)[^\n]*\n\s*Index Cond: \([^\n]*\(id >= 1\) AND \(id <= \d+\)/,
            );
          expect(p).not.toContain("audit_logs_at");
          // Grouping a batch's rows by vault may sort them (a batch, not the table).
          if (sql !== RETENTION_STATEMENTS.anchorsIn) expectNoScan(p);
        }
      }
    });
  });

  function expectNoScan(p: string): void {
    if (backend.name === "sqlite") {
      expect(p).not.toMatch(/\bSCAN audit_logs\b/);
      expect(p).not.toContain("TEMP B-TREE");
    } else {
      expect(p).not.toContain("Seq Scan");
      expect(p).not.toMatch(/\bSort\b/);
    }
  }

  if (backend.name === "postgres")
    test("PostgreSQL: while another instance's batch runs, a batch deletes nothing and says so; then it takes its turn", async () => {
      const store = await filled();
      const limits = { keepRows: 15_000, olderThan: 1 };
      // The other instance: a transaction holding the batch lock (the pool gives the batch a connection of its own).
      const during = await store.db.transaction(async (tx) => {
        await tx.get("SELECT pg_advisory_xact_lock(?)", [PRUNE_LOCK]);
        return pruneAuditBatch(store.db, limits, 1_000);
      });
      expect(during).toEqual({ removed: 0, more: false, busy: true, ms: 0 });
      expect((await span(store)).n).toBe(ROWS);
      expect(await pruneAuditBatch(store.db, limits, 1_000)).toMatchObject({ removed: 1_000, more: true, busy: false });
    });
});
