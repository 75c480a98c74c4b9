// `bun bench/audit-chain-cost.ts [--quick] [--baseline <git revision>]`: what the audit log's hash chain
// and signed checkpoints cost (issue 37, point 5). Two compiled brokers over one upstream: this tree's, and
// one built from the revision before the chain (default da0f75e^, taken with `git archive`, so the working
// tree is untouched); both warmed alike, then the tunnel and /proxy rows run through each in turn,
// alternating which goes first, in the same repetitions. Prints throughput, p50 and broker CPU per request
// and the chain/no-chain ratios (medians of the per-repetition ratios). The chain is written by the audit
// writer off the request path, so what it costs shows as CPU, and as throughput only where CPU is the limit.

import { buildBaseline, ensureBinary, startBroker, type BrokerProc } from "./broker.ts";
import { createBenchPki } from "./pki.ts";
import { abMedian, abRatio, runAbRows, type AbRow } from "./ab-rows.ts";
import { warmUp, type Env } from "./scenarios.ts";
import { startUpstream } from "./upstream.ts";

const quick = process.argv.includes("--quick");
const at = process.argv.indexOf("--baseline");
const baselineRev = at >= 0 ? process.argv[at + 1]! : "da0f75e^";
const size = quick ? { requests: 1000, reps: 3, warm: 2000 } : { requests: 4000, reps: 5, warm: 20_000 };
const log = (s: string) => console.error(`[chain-bench] ${s}`);

log(`building the baseline (${baselineRev})…`);
const baseline = buildBaseline(baselineRev);
const pki = await createBenchPki();
const upstream = startUpstream(pki);
const brokers: Record<"without" | "with", BrokerProc> = {
  without: await startBroker(baseline.bin, pki.caPem, upstream.port),
  with: await startBroker(ensureBinary(log), pki.caPem, upstream.port),
};
const envOf = (b: BrokerProc): Env => ({ broker: b, upstreamPort: upstream.port, upstreamCa: pki.caPem });
let rows: AbRow[] = [];
try {
  for (const which of ["without", "with"] as const) {
    log(`warming the broker ${which} the chain (${size.warm} requests)…`);
    await warmUp(envOf(brokers[which]), size.warm);
  }
  rows = await runAbRows({ base: brokers.without, changed: brokers.with }, envOf, size, log);
} finally {
  await brokers.without.stop();
  await brokers.with.stop();
  upstream.stop();
  baseline.cleanup();
}

console.log(`Audit hash chain and checkpoints: this tree vs ${baselineRev}, ${size.reps} repetitions alternating (medians of per-repetition ratios)\n`);
console.log(
  [
    "| row | without req/s | with req/s | with/without throughput | without CPU ms/req | with CPU ms/req | with/without CPU |",
    "|---|---:|---:|---:|---:|---:|---:|",
    ...rows.map(
      (r) =>
        `| ${r.name} | ${abMedian(r.base, (m) => m.rps).toFixed(0)} | ${abMedian(r.changed, (m) => m.rps).toFixed(0)} | ${(abRatio(r, (m) => m.rps) * 100).toFixed(1)}% | ${abMedian(r.base, (m) => m.cpu).toFixed(3)} | ${abMedian(r.changed, (m) => m.cpu).toFixed(3)} | ${(abRatio(r, (m) => m.cpu) * 100).toFixed(1)}% |`,
    ),
  ].join("\n"),
);
