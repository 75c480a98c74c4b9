// Audit retention as the broker runs it (app/audit-retention.ts), on every backend: the row cap holds within
// a bounded overshoot while rows keep arriving, rows past the age limit go as time passes, every batch is
// bounded in rows and its size follows the time batches take, an outage is waited out quietly, and stop()
// leaves no batch running. Batch times come from a test clock and rows arrive in step with the batches, so
// nothing here depends on how fast the machine is.

import { expect, test } from "bun:test";
import { startAuditRetention, type AuditRetention, type AuditRetentionOptions, type BatchReport } from "../../../src/app/audit-retention.ts";
import { DatabaseUnavailable } from "../../../src/errors.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { pruneAuditBatch, type Db, type Store } from "../../../src/store/index.ts";
import { fillAuditLog } from "../../helpers/audit-fill.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { auditRow } from "../store/conformance-fixtures.ts";

const YEAR = 365 * 86_400_000;

async function rowStats(store: Store): Promise<{ n: number; lowestId: number; highestId: number; oldest: number }> {
  const r = await store.db.get<Record<string, number>>("SELECT COUNT(*) AS n, MIN(id) AS lo, MAX(id) AS hi, MIN(at) AS oldest FROM audit_logs");
  return { n: Number(r?.n), lowestId: Number(r?.lo), highestId: Number(r?.hi), oldest: Number(r?.oldest) };
}

/** A retention loop over `db` with test pacing, whose batch reports can be awaited. */
function observed(db: Db, opts: Partial<AuditRetentionOptions> & Pick<AuditRetentionOptions, "maxRows" | "maxAgeMs">) {
  const log = createMemoryLogger();
  const reports: BatchReport[] = [];
  const waiting: { pred: (r: BatchReport) => boolean; resolve: (r: BatchReport) => void }[] = [];
  const retention: AuditRetention = startAuditRetention(db, {
    now: () => 0,
    log,
    checkEveryMs: 1,
    pauseMs: 0,
    clock: () => 0,
    ...opts,
    onBatch: (r) => {
      reports.push(r);
      opts.onBatch?.(r);
      for (const w of waiting.splice(0)) w.pred(r) ? w.resolve(r) : waiting.push(w);
    },
  });
  return {
    log,
    reports,
    retention,
    /** The next batch report that `pred` accepts. */
    next: (pred: (r: BatchReport) => boolean) => new Promise<BatchReport>((resolve) => waiting.push({ pred, resolve })),
  };
}

forEachBackend((backend) => {
  test("the row cap holds within one step's rows while rows keep arriving, then exactly, keeping the newest", async () => {
    const store = await backend.open();
    const CAP = 1_000;
    const STEP = 150; // rows arriving between two batches
    const STEPS = 30;
    await fillAuditLog(store.db, 1, 5 * CAP, { analyze: false });
    let arrived = 0;
    let writes = Promise.resolve();
    const counts: number[] = [];
    const r = observed(store.db, {
      maxRows: CAP,
      maxAgeMs: 10 * YEAR,
      batchRows: { first: 100, max: 400 },
      // Each batch after the rows that arrived since the last one are in: one step between two batches, however busy the machine.
      prune: async (limits, limit) => {
        await writes;
        return pruneAuditBatch(store.db, limits, limit, () => 0);
      },
      onBatch: () => {
        if (arrived >= STEPS * STEP) return;
        arrived += STEP;
        writes = writes.then(async () => {
          await store.audit.insert(Array.from({ length: STEP }, () => auditRow({ at: 1 })));
          counts.push((await rowStats(store)).n);
        });
      },
    });
    await r.next(() => arrived >= STEPS * STEP);
    await writes;
    await r.next((b) => !b.more);
    await r.retention.stop();
    // Caught up from 5x the cap (at most 400 rows a batch, 150 arriving) while rows still arrived; from then
    // on never more than two steps' rows over.
    const caughtUp = counts.findIndex((n) => n <= CAP + 2 * STEP);
    expect(caughtUp).toBeGreaterThanOrEqual(0);
    expect(caughtUp).toBeLessThan(STEPS - 5);
    expect(Math.max(...counts.slice(caughtUp))).toBeLessThanOrEqual(CAP + 2 * STEP);
    expect(r.reports.every((b) => b.removed <= b.limit && b.limit <= 400)).toBe(true);
    const end = await rowStats(store);
    expect(end).toMatchObject({ n: CAP, highestId: 5 * CAP + arrived, lowestId: 5 * CAP + arrived - CAP + 1 });
    expect(r.log.lines).toEqual([]);
  });

  test("rows past the age limit go, and go on going as time passes; younger ones stay", async () => {
    const store = await backend.open();
    await fillAuditLog(store.db, 1, 5_000, { analyze: false }); // row n: at = n
    let now = 4_000 + YEAR;
    const r = observed(store.db, { maxRows: 1_000_000, maxAgeMs: YEAR, now: () => now, batchRows: { first: 300, max: 300 } });
    await r.next((b) => !b.more);
    expect(await rowStats(store)).toMatchObject({ n: 1_001, oldest: 4_000 });
    now = 4_500 + YEAR;
    await r.next((b) => b.removed > 0 && !b.more);
    await r.retention.stop();
    expect(await rowStats(store)).toMatchObject({ n: 501, oldest: 4_500 });
    expect(r.reports.every((b) => b.removed <= 300)).toBe(true);
  });

  test("each batch deletes at most its limit, and the limit follows the time batches take toward the 5 ms target", async () => {
    const store = await backend.open();
    await fillAuditLog(store.db, 1, 20_000, { analyze: false });
    // The test clock says a delete takes 0.5 ms plus 0.02 ms a row: 175 rows fill 80% of the target.
    let clock = 0;
    const timed: Db = {
      ...store.db,
      transaction: (fn) =>
        store.db.transaction((tx) =>
          fn({
            ...tx,
            run: async (sql, params) => {
              const changed = await tx.run(sql, params);
              if (sql.startsWith("DELETE")) clock += 0.5 + 0.02 * changed;
              return changed;
            },
          }),
        ),
    };
    const r = observed(timed, { maxRows: 1_000, maxAgeMs: 10 * YEAR, clock: () => clock, batchRows: { first: 2_000 } });
    await r.next((b) => !b.more);
    await r.retention.stop();
    expect((await rowStats(store)).n).toBe(1_000);
    const full = r.reports.filter((b) => b.removed > 0);
    expect(full.every((b) => b.removed <= b.limit)).toBe(true);
    expect(full[0]).toMatchObject({ limit: 2_000, removed: 2_000, ms: 40.5 }); // too big: shrunk at once
    expect(full.slice(1).every((b) => b.ms <= 5)).toBe(true);
    expect(full.slice(1).every((b) => b.limit >= 150 && b.limit <= 200)).toBe(true);
  });

  test("during a database outage it keeps checking without a word, and catches up when the database is back", async () => {
    const store = await backend.open();
    await fillAuditLog(store.db, 1, 3_000, { analyze: false });
    let down = true;
    let refused = 0;
    const refusedEnough = Promise.withResolvers<void>();
    const flaky: Db = {
      ...store.db,
      transaction: (fn) => {
        if (!down) return store.db.transaction(fn);
        if (++refused === 5) refusedEnough.resolve();
        return Promise.reject(new DatabaseUnavailable("ECONNREFUSED"));
      },
    };
    const r = observed(flaky, { maxRows: 1_000, maxAgeMs: 10 * YEAR });
    await refusedEnough.promise;
    expect(r.reports).toEqual([]);
    expect(r.log.lines).toEqual([]);
    expect((await rowStats(store)).n).toBe(3_000);
    down = false;
    await r.next((b) => !b.more);
    await r.retention.stop();
    expect((await rowStats(store)).n).toBe(1_000);
    expect(r.log.lines).toEqual([]);
  });

  test("any other failure is an error line, and the loop goes on after it", async () => {
    const store = await backend.open();
    await fillAuditLog(store.db, 1, 2_000, { analyze: false });
    let failures = 0;
    const broken: Db = {
      ...store.db,
      transaction: (fn) => (++failures <= 2 ? Promise.reject(new Error("disk I/O error")) : store.db.transaction(fn)),
    };
    const r = observed(broken, { maxRows: 1_000, maxAgeMs: 10 * YEAR });
    await r.next((b) => !b.more);
    await r.retention.stop();
    expect(r.log.lines.map((l) => JSON.parse(l).event)).toEqual(["audit_retention_failed", "audit_retention_failed"]);
    expect((await rowStats(store)).n).toBe(1_000);
  });

  test("stop() waits for the batch under way; none starts after it", async () => {
    const store = await backend.open();
    await fillAuditLog(store.db, 1, 5_000, { analyze: false });
    let started = 0;
    let inBatch = false;
    const counted: Db = {
      ...store.db,
      transaction: async (fn) => {
        started++;
        inBatch = true;
        try {
          return await store.db.transaction(fn);
        } finally {
          inBatch = false;
        }
      },
    };
    const r = observed(counted, { maxRows: 1_000, maxAgeMs: 10 * YEAR, batchRows: { first: 10, max: 10 } });
    await r.next(() => true);
    await r.retention.stop();
    expect(inBatch).toBe(false);
    const atStop = started;
    await Bun.sleep(20); // a batch scheduled before stop() would start in this time
    expect(started).toBe(atStop);
  });
});

test("a batch that waits for a checkpoint is repeated at the check interval, and after waitLimitMs runs without waiting, said in an error line", async () => {
  let clock = 0;
  const seen: (boolean | undefined)[] = [];
  const log = createMemoryLogger();
  const done = Promise.withResolvers<void>();
  const retention = startAuditRetention({} as Db, {
    now: () => clock,
    log,
    maxRows: 1_000,
    maxAgeMs: YEAR,
    checkEveryMs: 1,
    clock: () => 0,
    anchorKey: { keyId: "k", pkcs8: new Uint8Array() },
    waitLimitMs: 1_000,
    prune: async (limits) => {
      seen.push(limits.waitForCheckpoints);
      clock += 400; // each batch comes 400 ms after the last
      if (limits.waitForCheckpoints === false) {
        done.resolve();
        return { removed: 5, more: false, busy: false, ms: 1 };
      }
      return { removed: 0, more: false, busy: false, ms: 1, waiting: true };
    },
  });
  await done.promise;
  await retention.stop();
  // Waiting since the first batch (at 0 ms); the batches at 400 and 800 ms still wait, the one at 1,200 ms does not.
  expect(seen).toEqual([undefined, undefined, undefined, false]);
  expect(log.lines.map((l) => JSON.parse(l).event)).toEqual(["audit_retention_unsigned_removal"]);
});
