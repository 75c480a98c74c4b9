// /metrics with `broker server --workers N` (issue 40): a scrape reaches one worker (the kernel picks its connection),
// so each worker writes its registry as JSON to the data directory every SNAPSHOT_MS and the worker that is asked
// answers for all: every series once per worker with a `worker` label, and once without it, summed over the workers
// (a gauge read from the store, the same in each, is taken once: its aggregator is "max"). A worker's own numbers are
// live; the others' are at most SNAPSHOT_MS old. Names and numbers only, as the registry holds.

import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AggregatorRegistry, type Registry } from "prom-client";
import type { WorkerRole } from "../config.ts";
import type { Logger } from "../log.ts";
import type { Metrics } from "../server/index.ts";

const SNAPSHOT_MS = 2000;
/** A snapshot older than this is a worker that stopped (or is being restarted): left out. */
const STALE_MS = 10_000;

/** A registry as `getMetricsAsJSON` gives it: what AggregatorRegistry.aggregate takes. */
type Snapshot = Awaited<ReturnType<Registry["getMetricsAsJSON"]>>;

export function snapshotDir(dataDir: string): string {
  return join(dataDir, "workers");
}

/** The worker's metrics, answering for every worker; `stop` ends the snapshots. */
export function shareWorkerMetrics(metrics: Metrics, opts: { dataDir: string; worker: WorkerRole; log: Logger }): { metrics: Metrics; stop(): void } {
  const dir = snapshotDir(opts.dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const fileOf = (id: number) => join(dir, `metrics-${id}.json`);
  let failedOnce = false;
  const write = async () => {
    try {
      const tmp = `${fileOf(opts.worker.id)}.tmp`;
      writeFileSync(tmp, JSON.stringify(await metrics.registry.getMetricsAsJSON()), { mode: 0o600 });
      renameSync(tmp, fileOf(opts.worker.id)); // whole: a reader never sees half a snapshot
    } catch (err) {
      if (!failedOnce) opts.log.warn("worker_metrics_unwritten", { err, detail: "other workers' /metrics leave this worker out until it can write again" });
      failedOnce = true;
    }
  };
  void write();
  const timer = setInterval(() => void write(), SNAPSHOT_MS);
  timer.unref?.();

  const readOther = (id: number): Snapshot | undefined => {
    try {
      if (Date.now() - statSync(fileOf(id)).mtimeMs > STALE_MS) return undefined;
      return JSON.parse(readFileSync(fileOf(id), "utf8")) as Snapshot;
    } catch {
      return undefined; // not written yet, or being replaced
    }
  };

  return {
    stop: () => clearInterval(timer),
    metrics: {
      ...metrics,
      async render() {
        const own = await metrics.registry.getMetricsAsJSON();
        const each: [number, Snapshot][] = [[opts.worker.id, own]];
        for (let id = 1; id <= opts.worker.count; id++) {
          if (id === opts.worker.id) continue;
          const other = readOther(id);
          if (other) each.push([id, other]);
        }
        const labelled = each.map(([id, snap]) =>
          snap.map((m) => ({ ...m, values: m.values.map((v) => ({ ...v, labels: { ...v.labels, worker: String(id) } })) })),
        );
        const combined = AggregatorRegistry.aggregate([...each.map(([, snap]) => snap), ...labelled]);
        return { body: await combined.metrics(), contentType: combined.contentType };
      },
    },
  };
}
