// Profiling aid: runs one load scenario against a broker started from source under
// `bun --cpu-prof`, so the profile shows where per-request time goes. Usage:
//   bun bench/profile.ts [tunnel|proxy|blind] [requests]   → writes a .cpuprofile under /tmp/broker-prof
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startBroker } from "./broker.ts";
import { runLoad, statsOf } from "./load.ts";
import { createBenchPki } from "./pki.ts";
import { startUpstream } from "./upstream.ts";

const scenario = process.argv[2] ?? "tunnel";
const requests = Number(process.argv[3] ?? 8000);
const dir = "/tmp/broker-prof";
mkdirSync(dir, { recursive: true });
const wrapper = join(dir, "broker-under-profiler");
const root = join(import.meta.dir, "..");
writeFileSync(wrapper, `#!/bin/sh\nexec "${process.execPath}" --cpu-prof --cpu-prof-dir=${dir} "${root}/src/index.ts" "$@"\n`, { mode: 0o755 });

const pki = await createBenchPki();
const upstream = startUpstream(pki);
const broker = await startBroker(wrapper, pki.caPem, upstream.port);
const targets = {
  tunnel: { url: `https://localhost:${upstream.port}/small`, init: { proxy: broker.proxyUrl, tls: { ca: broker.caPem } } },
  proxy: { url: `${broker.apiUrl}/proxy/localhost:${upstream.port}/small`, init: { headers: { authorization: `Bearer ${broker.token}` } } },
  blind: { url: `https://127.0.0.1:${upstream.port}/small`, init: { proxy: broker.proxyUrl, tls: { ca: pki.caPem } } },
} as const;
const target = targets[scenario as keyof typeof targets];
// Warm-up long enough for the JIT to settle (~20k requests): the profile should show a long-running broker.
await runLoad(target, { requests: 20_000, concurrency: 16 });
const result = await runLoad(target, { requests, concurrency: 16 });
const s = statsOf(result);
console.log(`${scenario}: ${requests} requests, ${JSON.stringify(s)}`);
await broker.stop();
upstream.stop();
console.log(`profile written under ${dir}`);
