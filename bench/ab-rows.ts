// Two compiled brokers over one upstream, compared row by row in the same run (bench/audit-chain-cost.ts: with and
// without the audit chain; bench/otel-export.ts: export on and off): the tunnel and /proxy keep-alive rows run
// through each in turn, alternating which goes first, in the same repetitions; each repetition's throughput, p50 and
// broker CPU per request kept, and ratios taken as medians of the per-repetition ratios.

import type { BrokerProc } from "./broker.ts";
import { median, runLoad, statsOf, type Target } from "./load.ts";
import { metered, targets, type Env } from "./scenarios.ts";

export interface AbMeasure {
  readonly rps: number;
  readonly p50: number;
  /** Broker CPU ms per request. */
  readonly cpu: number;
}

/** One row: its name, and per repetition what the baseline broker and the changed one measured. */
export interface AbRow {
  readonly name: string;
  readonly base: AbMeasure[];
  readonly changed: AbMeasure[];
}

const ROWS: { name: string; target: (env: Env) => Target; concurrency: number }[] = [
  { name: "tunnel, 16 keep-alive, /small", target: (e) => targets(e).viaTunnel("/small"), concurrency: 16 },
  { name: "tunnel, 1 keep-alive, /small", target: (e) => targets(e).viaTunnel("/small"), concurrency: 1 },
  { name: "/proxy, 16 keep-alive, /small", target: (e) => targets(e).viaProxy("/small"), concurrency: 16 },
  { name: "/proxy, 1 keep-alive, /small", target: (e) => targets(e).viaProxy("/small"), concurrency: 1 },
];

/** Runs every row through both brokers (already warmed), `reps` times alternating; a failed request stops the run. */
export async function runAbRows(
  brokers: { readonly base: BrokerProc; readonly changed: BrokerProc },
  envOf: (b: BrokerProc) => Env,
  size: { readonly requests: number; readonly reps: number },
  log: (s: string) => void,
): Promise<AbRow[]> {
  const rows: AbRow[] = [];
  for (const r of ROWS) {
    log(r.name);
    const row: AbRow = { name: r.name, base: [], changed: [] };
    const requests = r.concurrency === 1 ? Math.ceil(size.requests / 4) : size.requests;
    for (let i = 0; i < size.reps; i++) {
      for (const which of i % 2 === 0 ? (["base", "changed"] as const) : (["changed", "base"] as const)) {
        const b = brokers[which];
        const m = await metered(b.pid, () => runLoad(r.target(envOf(b)), { requests, concurrency: r.concurrency }));
        if (m.value.errors || m.value.non2xx)
          throw new Error(`${r.name} (${which}): ${m.value.errors} errors, ${m.value.non2xx} non-2xx: ${m.value.firstError}`);
        const st = statsOf(m.value);
        row[which].push({ rps: st.rps, p50: st.p50, cpu: m.cpu / requests });
      }
    }
    rows.push(row);
  }
  return rows;
}

/** The median of the per-repetition ratios changed / base of `f`. */
export function abRatio(row: AbRow, f: (m: AbMeasure) => number): number {
  return median(row.changed.map((m, i) => f(m) / f(row.base[i]!)));
}

/** The median of `f` over one side's repetitions. */
export function abMedian(measures: readonly AbMeasure[], f: (m: AbMeasure) => number): number {
  return median(measures.map(f));
}
