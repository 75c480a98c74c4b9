// The workers row (issue 40): the tunnel's 16 keep-alive connections through a broker of one process and through one
// of `--workers 2`, alternating in the same repetitions (which goes first alternates too), each warmed first. CPU is
// each broker's whole process tree (the supervisor and its workers); the ratio is 2 workers / 1 process.

import type { BrokerProc } from "./broker.ts";
import { median, runLoad, statsOf } from "./load.ts";
import { metered, summarise, targets, type Env, type Rep, type Row } from "./scenarios.ts";

export async function workersScenario(env: Env, two: BrokerProc, o: { requests: number; concurrency: number; reps: number; warm: number }): Promise<Row> {
  const path = "/small";
  const t = targets(env);
  const one = env.broker;
  const via = { one: t.viaTunnel(path), two: targets({ ...env, broker: two }).viaTunnel(path) };
  const warmed = await runLoad(via.two, { requests: o.warm, concurrency: 16 });
  if (warmed.errors) throw new Error(`workers warm-up failed: ${warmed.firstError}`);
  const reps: Rep[] = [];
  const single = { rps: [] as number[], cpu: [] as number[] };
  const run = (which: "one" | "two") => metered((which === "one" ? one : two).pid, () => runLoad(via[which], o));
  for (let i = 0; i < o.reps; i++) {
    const d = await runLoad(t.direct(path), o);
    const first = i % 2 === 0 ? "one" : "two";
    const a = await run(first);
    const b = await run(first === "one" ? "two" : "one");
    const [s, w] = first === "one" ? [a, b] : [b, a];
    single.rps.push(statsOf(s.value).rps);
    single.cpu.push(s.cpu / o.requests);
    reps.push({
      direct: statsOf(d),
      broker: statsOf(w.value),
      errors: d.errors + s.value.errors + w.value.errors,
      non2xx: d.non2xx + s.value.non2xx + w.value.non2xx,
      requests: o.requests,
      cpuMs: w.cpu,
      peakRss: w.peak,
      growth: w.growth,
      firstError: w.value.firstError ?? s.value.firstError ?? d.firstError,
    });
  }
  const ratios = reps.map((r, i) => r.broker.rps / single.rps[i]!);
  const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
  const note = [
    `${o.concurrency} conn; 2 workers / 1 process throughput ${pct(median(ratios))} (per repetition ${pct(Math.min(...ratios))}–${pct(Math.max(...ratios))})`,
    `1 process in the same repetitions: ${median(single.rps).toFixed(0)} req/s, CPU ${median(single.cpu).toFixed(3)} ms/req`,
    "the load generator, the upstream and the broker share this machine's cores",
  ].join("; ");
  return {
    ...summarise("tunnel, 16 keep-alive, /small, --workers 2", reps, note),
    workers: { ratio: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) },
  };
}
