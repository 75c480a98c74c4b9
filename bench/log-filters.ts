// The audit log's filtered pages at scale: 1M rows in one vault (tests/helpers/audit-fill.ts, one
// recursive INSERT), then the newest page of 100 filtered by host, status and principal (a rare value,
// a common one and one nobody has) against the unfiltered page, as ratios measured in the same run, on
// the embedded SQLite store and, when PostgreSQL is installed, on a throwaway cluster. Each time is the
// median of REPS calls of store.audit.list (what GET /v1/vaults/:vault/logs runs). No assertions.
// `npx bun bench/log-filters.ts [rows]` (default 1,000,000).

import { createStore, migrate, openMemoryStore, openPostgres, type AuditFilter, type Store } from "../src/store/index.ts";
import { fillAuditLog, RARE_HOST, RARE_PRINCIPAL, RARE_STATUS } from "../tests/helpers/audit-fill.ts";
import { startBenchCluster } from "./postgres.ts";

const ROWS = Number(process.argv[2] ?? 1_000_000);
const REPS = 31;
const LIMIT = 100;

const CASES: { name: string; f: Omit<AuditFilter, "vaultId" | "limit"> }[] = [
  { name: "unfiltered (baseline)", f: {} },
  { name: `host=${RARE_HOST} (1 in 5000)`, f: { host: RARE_HOST } },
  { name: "host=mid.example (1 in 10)", f: { host: "mid.example" } },
  { name: "host=nomatch", f: { host: "nomatch.example" } },
  { name: `status=${RARE_STATUS} (1 in 5000)`, f: { status: RARE_STATUS } },
  { name: "status=500 (1 in 10)", f: { status: 500 } },
  { name: `principal=${RARE_PRINCIPAL} (1 in 5000)`, f: { principal: RARE_PRINCIPAL } },
  { name: "principal=agent:1 (1 in 2)", f: { principal: "agent:1" } },
  { name: `host+status (rare)`, f: { host: RARE_HOST, status: RARE_STATUS } },
  { name: "status=418, older page (before=ROWS/2)", f: { status: RARE_STATUS, before: Math.floor(ROWS / 2) } },
];

async function median(fn: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(REPS / 2)]!;
}

async function measure(label: string, store: Store): Promise<void> {
  const t = performance.now();
  await fillAuditLog(store.db, 1, ROWS);
  console.log(
    `\n${label}: ${ROWS.toLocaleString("en")} rows filled and analyzed in ${((performance.now() - t) / 1000).toFixed(1)} s; page of ${LIMIT}, median of ${REPS}`,
  );
  let base = 0;
  for (const c of CASES) {
    const list = () => store.audit.list({ vaultId: 1, limit: LIMIT, ...c.f });
    const rows = (await list()).length;
    const ms = await median(list);
    if (!base) base = ms;
    console.log(`  ${c.name.padEnd(42)} ${ms.toFixed(3).padStart(9)} ms  ${(ms / base).toFixed(2).padStart(6)}x  (${rows} rows)`);
  }
}

const sqlite = await openMemoryStore();
await measure("SQLite (in memory)", sqlite);
sqlite.close();

const cluster = await startBenchCluster();
if (typeof cluster === "string") console.log(`\n${cluster}`);
else {
  try {
    const db = openPostgres(await cluster.createDatabase(), { max: 2 });
    await migrate(db);
    const store = createStore(db);
    await measure("PostgreSQL (local throwaway cluster)", store);
    store.close();
  } finally {
    await cluster.destroy();
  }
}
