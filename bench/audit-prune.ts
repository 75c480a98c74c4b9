// Audit retention against a log far over its cap: 1M rows (tests/helpers/audit-fill.ts) over a cap of 100k,
// while an audit writer adds rows at a steady rate as the broker's flush does. For each store: the longest
// event-loop stall (the lateness of a 1 ms timer) while the retention loop (app/audit-retention.ts) prunes,
// against the same writer with no pruning, as a ratio measured in the same run; the time to reach the cap;
// the batches' size and time; and how far over the cap the log stays once there. For contrast, the hourly
// one-statement prune it replaces (store.audit.prune) on the same fill. SQLite is a file in WAL mode, as the
// broker opens it; PostgreSQL a throwaway cluster when installed. No assertions.
// `npx bun bench/audit-prune.ts [rows] [cap] [rows/s written]` (defaults 1,000,000, 100,000, 2,000).

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startAuditRetention, type BatchReport } from "../src/app/audit-retention.ts";
import { createMemoryLogger } from "../src/log.ts";
import { createStore, migrate, openPostgres, type Store } from "../src/store/index.ts";
import { openSqliteFile } from "../src/store/sqlite.ts";
import { fillAuditLog } from "../tests/helpers/audit-fill.ts";
import { auditRow } from "../tests/unit/store/conformance-fixtures.ts";
import { startBenchCluster } from "./postgres.ts";

const ROWS = Number(process.argv[2] ?? 1_000_000);
const CAP = Number(process.argv[3] ?? 100_000);
const WRITE_RATE = Number(process.argv[4] ?? 2_000);
/** The baseline's length, and how long the log is watched once at the cap. */
const WINDOW_MS = 3_000;
/** The broker's audit flush interval: the writer adds WRITE_RATE / 4 rows every 250 ms, in one transaction. */
const FLUSH_MS = 250;

/** The longest lateness of a 1 ms timer, and its 99th percentile, from start() to stop(). */
function stallMeter() {
  const gaps: number[] = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const t = performance.now();
    gaps.push(t - last - 1);
    last = t;
  }, 1);
  return {
    stop() {
      clearInterval(timer);
      gaps.sort((a, b) => a - b);
      return { max: gaps.at(-1) ?? 0, p99: gaps[Math.floor(gaps.length * 0.99)] ?? 0 };
    },
  };
}

/** Adds rows at WRITE_RATE as the broker's audit flush would, until stopped. */
function writer(store: Store) {
  const perFlush = Math.max(1, Math.round((WRITE_RATE * FLUSH_MS) / 1000));
  let writing = Promise.resolve();
  const timer = setInterval(() => {
    writing = writing.then(() => store.transaction((tx) => tx.audit.insert(Array.from({ length: perFlush }, () => auditRow({ at: Date.now() })))));
  }, FLUSH_MS);
  return async () => {
    clearInterval(timer);
    await writing;
  };
}

async function rowsHeld(store: Store): Promise<number> {
  const ids = await store.audit.idBounds();
  return ids ? ids.highest - ids.lowest + 1 : 0; // the fill and the writer leave no gaps
}

const ms = (n: number) => `${n.toFixed(1).padStart(8)} ms`;

async function measure(label: string, open: () => Promise<Store>): Promise<void> {
  let store = await open();
  let t = performance.now();
  await fillAuditLog(store.db, 1, ROWS, { analyze: false });
  console.log(
    `\n${label}: ${ROWS.toLocaleString("en")} rows (filled in ${((performance.now() - t) / 1000).toFixed(1)} s), cap ${CAP.toLocaleString("en")}, writer ${WRITE_RATE.toLocaleString("en")} rows/s`,
  );

  // Baseline: the writer alone, no pruning.
  let stopWriter = writer(store);
  let meter = stallMeter();
  await Bun.sleep(WINDOW_MS);
  await stopWriter();
  const base = meter.stop();
  console.log(`  no pruning (baseline)            longest stall ${ms(base.max)}   p99 ${ms(base.p99)}`);

  // The retention loop, with the broker's defaults, until it reports the cap reached; then WINDOW_MS at the cap.
  const batches: BatchReport[] = [];
  let reached!: () => void;
  const atCap = new Promise<void>((resolve) => (reached = resolve));
  stopWriter = writer(store);
  meter = stallMeter();
  t = performance.now();
  const retention = startAuditRetention(store.db, {
    maxRows: CAP,
    // The fill's rows are dated 1970 (at = n): only the cap is measured, so nothing counts as too old.
    maxAgeMs: 0,
    now: () => 0,
    log: createMemoryLogger(),
    onBatch: (b) => {
      batches.push(b);
      if (!b.more) reached();
    },
  });
  await atCap;
  const toCap = performance.now() - t;
  await Bun.sleep(5);
  const during = meter.stop();
  meter = stallMeter();
  let over = 0;
  for (const until = performance.now() + WINDOW_MS; performance.now() < until; await Bun.sleep(50)) over = Math.max(over, (await rowsHeld(store)) - CAP);
  const steady = meter.stop();
  await retention.stop();
  await stopWriter();
  const work = batches.filter((b) => b.removed > 0);
  const times = work.map((b) => b.ms).sort((a, b) => a - b);
  const sizes = work.map((b) => b.limit).sort((a, b) => a - b);
  const ratio = (a: number, b: number) => `${(a / b).toFixed(2).padStart(6)}x`;
  console.log(
    `  continuous pruning, to the cap   longest stall ${ms(during.max)}   p99 ${ms(during.p99)}   ${ratio(during.max, base.max)} (p99 ${ratio(during.p99, base.p99)}) the baseline's`,
  );
  console.log(
    `  continuous pruning, at the cap   longest stall ${ms(steady.max)}   p99 ${ms(steady.p99)}   ${ratio(steady.max, base.max)} (p99 ${ratio(steady.p99, base.p99)})`,
  );
  const pct = (xs: number[], q: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? 0;
  console.log(
    `  reached the cap in ${(toCap / 1000).toFixed(1)} s: ${work.length} batches, ${work.reduce((n, b) => n + b.removed, 0).toLocaleString("en")} rows; ` +
      `batch size ${sizes[0]}-${sizes.at(-1)} rows (median ${pct(sizes, 0.5)}); batch time median ${pct(times, 0.5).toFixed(2)} ms, p99 ${pct(times, 0.99).toFixed(2)} ms, longest ${times.at(-1)?.toFixed(2)} ms`,
  );
  console.log(`  at the cap for ${WINDOW_MS / 1000} s with the writer on: at most ${over.toLocaleString("en")} rows over`);
  store.close();

  // The hourly single-statement prune this replaces, on a fresh fill.
  store = await open();
  await fillAuditLog(store.db, 1, ROWS, { analyze: false });
  meter = stallMeter();
  t = performance.now();
  await store.audit.prune(0, CAP);
  const oneShot = performance.now() - t;
  await Bun.sleep(5); // the timer's first tick after the DELETE is the one that measures it
  const old = meter.stop();
  console.log(
    `  one DELETE (the hourly prune)    longest stall ${ms(old.max)}   ${(old.max / base.max).toFixed(2).padStart(6)}x the baseline's longest; took ${(oneShot / 1000).toFixed(2)} s`,
  );
  store.close();
}

const dir = mkdtempSync(join(tmpdir(), "broker-bench-prune-"));
try {
  let n = 0;
  await measure("SQLite (file, WAL)", async () => {
    const db = openSqliteFile(join(dir, String(n++)));
    await migrate(db);
    return createStore(db);
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const cluster = await startBenchCluster();
if (typeof cluster === "string") console.log(`\n${cluster}`);
else {
  try {
    await measure("PostgreSQL (local throwaway cluster)", async () => {
      const db = openPostgres(await cluster.createDatabase(), { max: 4 });
      await migrate(db);
      return createStore(db);
    });
  } finally {
    await cluster.destroy();
  }
}
