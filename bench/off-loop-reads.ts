// What a large read costs everyone else (issue 35 point 4): a SQLite file store with a million audit rows
// and 10,000 services in one vault, one client reading it (log pages, filtered pages of 1000, the service
// list, the overview's counts) as fast as it can, one request per event-loop turn as HTTP requests
// arrive, while a 1 ms setInterval on the same loop measures how late it fires: the longest stall is what
// a request on any other vault waited. Each workload runs in-thread (the main connection, as before) and
// through the read worker (openStore's readWorker, as the server now runs), as ratios in the same run. The
// server keeps service reads in-thread (store/index.ts OFF_LOOP_READS): their rows are shown read through
// a worker anyway, to show why (the main thread's cost is rebuilding the rows, which it does either way).
// The interval's lateness is wall-clock and counts every other process on the machine too, so each pair
// runs ROUNDS times (medians shown) and the main thread's own CPU time per call is shown beside it (Linux
// schedstat of the main thread alone: what the loop could not spend on anyone else, whatever the load).
// No assertions. `npx bun bench/off-loop-reads.ts [rows] [services]` (default 1,000,000 and 10,000).

import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStore, type Store } from "../src/store/index.ts";
import { serviceRepo } from "../src/store/services.ts";
import { createSqliteReader } from "../src/store/sqlite-reader.ts";
import { fillAuditLog, RARE_HOST, RARE_STATUS } from "../tests/helpers/audit-fill.ts";

const ROWS = Number(process.argv[2] ?? 1_000_000);
const SERVICES = Number(process.argv[3] ?? 10_000);
/** Each workload runs this long per path and round (client calls back to back, one per loop turn). */
const RUN_MS = 2000;
const ROUNDS = 3;
const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`;

type Reads = Pick<Store, "audit" | "services" | "vaultCounts">;

interface Workload {
  readonly name: string;
  /** Called with a counter, so a walk through pages can move its cursor. */
  readonly call: (store: Reads, vaultId: number, i: number) => Promise<unknown>;
}

const WORKLOADS: readonly Workload[] = [
  { name: "log page of 100, walking back", call: (s, v, i) => s.audit.list({ vaultId: v, limit: 100, before: ROWS - ((i * 100) % ROWS) + 1 }) },
  { name: "log page of 1000 (the most asked)", call: (s, v, i) => s.audit.list({ vaultId: v, limit: 1000, before: ROWS - ((i * 1000) % ROWS) + 1 }) },
  { name: "filtered pages of 1000 (host, status, who)", call: (s, v, i) => s.audit.list({ vaultId: v, limit: 1000, ...FILTERS[i % FILTERS.length] }) },
  {
    name: "host=api.example&status=418 (no match)",
    call: (s, v) => s.audit.list({ vaultId: v, limit: 100, host: "api.example", status: RARE_STATUS }),
  },
  { name: `rare host, whole log (${RARE_HOST})`, call: (s, v) => s.audit.list({ vaultId: v, limit: 1000, host: RARE_HOST }) },
  { name: `all ${SERVICES.toLocaleString("en")} services (kept in-thread)`, call: (s, v) => s.services.allOfVault(v) },
  { name: "a page of 100 services (kept in-thread)", call: (s, v, i) => s.services.page(v, `svc-${String((i * 100) % SERVICES).padStart(5, "0")}`, 100) },
  { name: "overview counts", call: (s, v, i) => s.vaultCounts.of(v, i) },
];
const FILTERS = [{ host: "mid.example" }, { status: 500 }, { principal: "agent:1" }, { host: "api.example", status: 500 }];

interface Measure {
  readonly calls: number;
  readonly medianMs: number;
  /** Lateness of the 1 ms interval: the longest, and the 99th percentile. */
  readonly stallMaxMs: number;
  readonly stallP99Ms: number;
  /** The main thread's CPU time per call (NaN where schedstat is missing). */
  readonly mainCpuMs: number;
}

/** The main thread's CPU time so far, in ms (Linux); NaN elsewhere. */
function mainThreadCpuMs(): number {
  return existsSync(SCHEDSTAT) ? Number(readFileSync(SCHEDSTAT, "utf8").split(" ")[0]) / 1e6 : Number.NaN;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function measure(store: Reads, vaultId: number, w: Workload): Promise<Measure> {
  for (let i = 0; i < 3; i++) await w.call(store, vaultId, i); // warm: statements prepared, pages cached
  const lateness: number[] = [];
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    lateness.push(Math.max(0, now - last - 1));
    last = now;
  }, 1);
  const times: number[] = [];
  const cpuBefore = mainThreadCpuMs();
  const end = performance.now() + RUN_MS;
  for (let i = 0; performance.now() < end; i++) {
    const t = performance.now();
    await w.call(store, vaultId, i);
    times.push(performance.now() - t);
    await turn();
  }
  clearInterval(ticker);
  const mainCpuMs = (mainThreadCpuMs() - cpuBefore) / times.length;
  times.sort((a, b) => a - b);
  lateness.sort((a, b) => a - b);
  return {
    calls: times.length,
    medianMs: times[Math.floor(times.length / 2)] ?? 0,
    stallMaxMs: lateness.at(-1) ?? 0,
    stallP99Ms: lateness[Math.floor(lateness.length * 0.99)] ?? 0,
    mainCpuMs,
  };
}

/** The same baseline for both paths: the 1 ms interval's lateness with nothing else to do. */
async function idleStall(): Promise<Measure> {
  return measure(undefined as unknown as Reads, 0, { name: "idle", call: () => Bun.sleep(1) });
}

const dir = mkdtempSync(join(tmpdir(), "broker-bench-reads-"));
try {
  const t = performance.now();
  const seed = await openStore({ dataDir: dir });
  const vault = await seed.vaults.create("bench", 1);
  await fillAuditLog(seed.db, vault.id, ROWS, { analyze: false }); // the broker never runs ANALYZE on SQLite
  await seed.transaction(async (tx) => {
    for (let i = 0; i < SERVICES; i++) {
      await tx.services.put(
        {
          vaultId: vault.id,
          host: `svc-${String(i).padStart(5, "0")}.example.com`,
          description: "a service",
          authType: "bearer",
          authKey: "TOKEN",
          authHeader: null,
          authPrefix: null,
          authUsername: null,
          enabled: true,
          rules: JSON.stringify([{ methods: ["GET"], paths: ["/v1/**"] }]),
        },
        1,
      );
    }
  });
  seed.close();
  console.log(
    `SQLite file store: ${ROWS.toLocaleString("en")} audit rows and ${SERVICES.toLocaleString("en")} services in one vault, made in ${((performance.now() - t) / 1000).toFixed(1)} s; ${RUN_MS / 1000} s per workload and path`,
  );
  const idle = await idleStall();
  console.log(`idle loop: 1 ms interval late by at most ${idle.stallMaxMs.toFixed(1)} ms (p99 ${idle.stallP99Ms.toFixed(2)} ms)\n`);

  const inThread = await openStore({ dataDir: dir });
  const offLoopStore = await openStore({ dataDir: dir }, { readWorker: {} });
  const reader = createSqliteReader(join(dir, "broker.db"));
  await reader.ready;
  const offLoop: Reads = { ...offLoopStore, services: serviceRepo(reader) };
  console.log(`medians of ${ROUNDS} rounds; in-thread → worker\n`);
  console.log(
    `${"workload".padEnd(48)} ${"longest stall".padStart(20)} ${"ratio".padStart(6)}  ${"p99 stall".padStart(16)}  ${"main CPU per call".padStart(20)} ${"ratio".padStart(6)}  ${"call median".padStart(18)}`,
  );
  for (const w of WORKLOADS) {
    const rounds: { before: Measure; after: Measure }[] = [];
    for (let r = 0; r < ROUNDS; r++) rounds.push({ before: await measure(inThread, vault.id, w), after: await measure(offLoop, vault.id, w) });
    const mid = (pick: (m: Measure) => number, side: "before" | "after") => median(rounds.map((r) => pick(r[side])));
    const pair = (pick: (m: Measure) => number, digits: number) => `${mid(pick, "before").toFixed(digits)} → ${mid(pick, "after").toFixed(digits)} ms`;
    const ratio = (pick: (m: Measure) => number) => `${(mid(pick, "after") / mid(pick, "before")).toFixed(2)}x`;
    console.log(
      `${w.name.padEnd(48)} ${pair((m) => m.stallMaxMs, 1).padStart(20)} ${ratio((m) => m.stallMaxMs).padStart(6)}  ${pair((m) => m.stallP99Ms, 1).padStart(16)}  ${pair((m) => m.mainCpuMs, 3).padStart(20)} ${ratio((m) => m.mainCpuMs).padStart(6)}  ${pair((m) => m.medianMs, 2).padStart(18)}`,
    );
  }
  inThread.close();
  reader.close();
  offLoopStore.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
