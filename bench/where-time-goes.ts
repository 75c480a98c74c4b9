// `bun run bench:where` [--requests N]: where each small keep-alive request's CPU goes, for the broker and for
// Squid in the same run (issue 40 asks for this profile wherever a speed target against Squid is missed).
// Both proxies are warmed with 30,000 requests, then for 16 and 1 keep-alive connections:
//   1. a clean run measures CPU per request from /proc (no profiler attached);
//   2. a second run under `perf record -g -p <pid>` splits the process's samples by where they ran: the kernel
//      (and within it each system call, with what it runs on the caller's behalf: a loopback send wakes the
//      peer), the program's own code, JIT-compiled JavaScript, the TLS libraries, libc. Shares times (1) give
//      microseconds per request. Without perf (apt-get install linux-perf) only (1) and (3) are printed.
//   3. the broker's garbage collector, from JavaScriptCore's own log (BUN_JSC_logGC): its cycles' time per request.
// Then a broker run from source under --cpu-prof names the JavaScript functions and runtime calls by self time.
// Writes bench/results/<date>-where.md. No timing is asserted: this is a measuring aid.

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMs, ensureBinary, startBroker, type BrokerProc } from "./broker.ts";
import { runLoad, type Target } from "./load.ts";
import { PLACES_REPORT, splitOf, SYSCALLS_REPORT, type Split } from "./perf-split.ts";
import { createBenchPki } from "./pki.ts";
import { startSquid } from "./squid.ts";
import { startUpstream } from "./upstream.ts";

const ROOT = join(import.meta.dir, "..");
const argv = process.argv.slice(2);
const requestsArg = argv.indexOf("--requests");
const REQUESTS = requestsArg >= 0 ? Number(argv[requestsArg + 1]) : 20_000;
const WARM_UP = 30_000;
const log = (s: string) => console.error(`[where] ${s}`);

const hasPerf = Bun.spawnSync(["perf", "--version"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;

function perfSplit(file: string): Split {
  const report = (args: string[]) =>
    Bun.spawnSync(["perf", "report", "-i", file, "--stdio", "-g", "none", ...args], { stdout: "pipe", stderr: "ignore" }).stdout.toString();
  return splitOf(report(PLACES_REPORT), report(SYSCALLS_REPORT));
}

/** Runs `requests` through `target` with perf attached to `pid` (null without perf). */
async function underPerf(pid: number, target: Target, requests: number, concurrency: number): Promise<Split | null> {
  if (!hasPerf) return null;
  const dir = mkdtempSync(join(tmpdir(), "broker-where-"));
  const file = join(dir, "perf.data");
  const perf = Bun.spawn(["perf", "record", "-g", "-F", "2000", "-p", String(pid), "-o", file], { stdout: "ignore", stderr: "ignore" });
  await Bun.sleep(500);
  await runLoad(target, { requests, concurrency });
  perf.kill("SIGINT");
  await perf.exited;
  try {
    return perfSplit(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** CPU milliseconds per request of `pid` over a clean run (no profiler). */
async function cpuPerRequest(pid: number, target: Target, requests: number, concurrency: number): Promise<{ ms: number; rps: number }> {
  const before = cpuMs(pid);
  const res = await runLoad(target, { requests, concurrency });
  if (res.errors || res.non2xx) throw new Error(`${res.errors} errors, ${res.non2xx} non-2xx: ${res.firstError}`);
  return { ms: (cpuMs(pid) - before) / requests, rps: requests / (res.elapsedMs / 1000) };
}

/** Sum of JavaScriptCore's GC cycle times in a stretch of the broker's stderr (BUN_JSC_logGC=1). */
function gcMs(logText: string): { ms: number; cycles: number } {
  let ms = 0;
  let cycles = 0;
  for (const m of logText.matchAll(/cycle ([\d.]+)ms END/g)) {
    ms += Number(m[1]);
    cycles++;
  }
  return { ms, cycles };
}

const us = (ms: number) => (ms * 1000).toFixed(1);

interface Measured {
  readonly name: string;
  readonly conns: number;
  readonly cpu: { ms: number; rps: number };
  readonly split: Split | null;
  readonly gc?: { ms: number; cycles: number };
}

async function measure(name: string, pid: number, target: Target, conns: number, broker?: BrokerProc): Promise<Measured> {
  const logFrom = broker?.logs().length ?? 0;
  const cpu = await cpuPerRequest(pid, target, REQUESTS, conns);
  const gc = broker ? gcMs(broker.logs().slice(logFrom)) : undefined;
  const split = await underPerf(pid, target, REQUESTS, conns);
  log(`${name}, ${conns} conn: ${us(cpu.ms)} µs CPU/request, ${Math.round(cpu.rps)} req/s`);
  return { name, conns, cpu, split, ...(gc && { gc }) };
}

function splitTable(rows: Measured[]): string {
  const places = [...new Set(rows.flatMap((r) => [...(r.split?.places.keys() ?? [])]))].sort();
  const calls = ["all system calls", "sendto", "write", "recvfrom", "read", "epoll_pwait2", "epoll_wait", "epoll_ctl", "pwrite64", "futex", "madvise"];
  const head = `| | ${rows.map((r) => `${r.name}, ${r.conns} conn`).join(" | ")} |\n|---|${rows.map(() => "---:").join("|")}|\n`;
  const line = (label: string, f: (r: Measured) => string) => `| ${label} | ${rows.map(f).join(" | ")} |\n`;
  let out = head;
  out += line("**CPU per request (µs, clean run)**", (r) => `**${us(r.cpu.ms)}**`);
  out += line("requests/s (clean run)", (r) => String(Math.round(r.cpu.rps)));
  const part = (r: Measured, pct: number | undefined) => (pct === undefined ? "–" : `${((r.cpu.ms * 1000 * pct) / 100).toFixed(1)} (${pct.toFixed(0)}%)`);
  for (const p of places) out += line(p, (r) => part(r, r.split?.places.get(p)));
  for (const c of calls) {
    if (rows.some((r) => (r.split?.syscalls.get(c) ?? 0) >= 0.3))
      out += line(c === "all system calls" ? "kernel: all system calls" : `kernel: ${c}()`, (r) => part(r, r.split?.syscalls.get(c)));
  }
  out += line("garbage collector cycles", (r) => (r.gc ? `${((r.gc.ms * 1000) / REQUESTS).toFixed(1)} (${r.gc.cycles} cycles)` : "–"));
  return out;
}

/** Self time by function (source file and line, or the runtime's name for a native call) from a .cpuprofile. */
function topFunctions(file: string, limit: number): string {
  const p = JSON.parse(readFileSync(file, "utf8")) as {
    nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
    samples: number[];
    timeDeltas: number[];
  };
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  p.samples.forEach((id, i) => {
    const cf = byId.get(id)!.callFrame;
    const where = cf.url ? `${cf.url.replace(`${ROOT}/`, "")}:${cf.lineNumber + 1}` : "runtime (native)";
    const key = `${cf.functionName || "(anonymous)"} — ${where}`;
    const t = p.timeDeltas[i] ?? 0;
    self.set(key, (self.get(key) ?? 0) + t);
    total += t;
  });
  const rows = [...self].filter(([k]) => !k.startsWith("(idle)") && !k.startsWith("(program)")).sort((a, b) => b[1] - a[1]);
  return rows
    .slice(0, limit)
    .map(([k, t]) => `| ${((100 * t) / total).toFixed(1)}% | \`${k}\` |`)
    .join("\n");
}

/** A broker from source under --cpu-prof (function names and source lines), warmed, then `REQUESTS` at 16 connections. */
async function jsProfile(pki: Awaited<ReturnType<typeof createBenchPki>>, upstreamPort: number): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "broker-where-prof-"));
  const wrapper = join(dir, "broker-from-source");
  writeFileSync(wrapper, `#!/bin/sh\ncd "${ROOT}"\nexec "${process.execPath}" --cpu-prof --cpu-prof-dir=${dir} "${ROOT}/src/index.ts" "$@"\n`, { mode: 0o755 });
  const broker = await startBroker(wrapper, pki.caPem, upstreamPort);
  const target = { url: `https://localhost:${upstreamPort}/small`, init: { proxy: broker.proxyUrl, tls: { ca: broker.caPem } } };
  await runLoad(target, { requests: WARM_UP, concurrency: 16 });
  await runLoad(target, { requests: REQUESTS * 2, concurrency: 16 });
  await broker.stop();
  const profile = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
  const out = profile ? topFunctions(join(dir, profile), 30) : "(no profile written)";
  rmSync(dir, { recursive: true, force: true });
  return out;
}

const bin = ensureBinary(log);
const pki = await createBenchPki();
const upstream = startUpstream(pki);
const broker = await startBroker(bin, pki.caPem, upstream.port, { BUN_JSC_logGC: "1" });
const squid = await startSquid({ upstreamCaPem: pki.caPem, authorization: broker.authorization, log });
const url = `https://localhost:${upstream.port}/small`;
const viaBroker: Target = { url, init: { proxy: broker.proxyUrl, tls: { ca: broker.caPem } } };
const viaSquid: Target = { url, init: { proxy: squid.proxyUrl, tls: { ca: squid.caPem } } };
const rows: Measured[] = [];
try {
  log(`warming each proxy with ${WARM_UP} requests`);
  await runLoad(viaBroker, { requests: WARM_UP, concurrency: 16 });
  await runLoad(viaSquid, { requests: WARM_UP, concurrency: 16 });
  for (const conns of [16, 1]) {
    rows.push(await measure("broker", broker.pid, viaBroker, conns, broker));
    rows.push(await measure(`Squid ${squid.version}`, squid.pid, viaSquid, conns));
  }
} finally {
  await broker.stop();
  await squid.stop();
}
log("profiling a broker run from source (--cpu-prof)");
const js = await jsProfile(pki, upstream.port);
upstream.stop();

const date = new Date().toISOString().slice(0, 10);
const cpus = readFileSync("/proc/cpuinfo", "utf8").match(/^processor/gm)?.length ?? 0;
const report = `# Where a keep-alive request's CPU goes, broker and Squid (${date})

\`bun run bench:where\` (bench/where-time-goes.ts): ${cpus} cores, Bun ${Bun.version}, ${REQUESTS} requests of GET /small per row after ${WARM_UP} warm-up requests per proxy; the same upstream, client (Bun fetch, certificates verified) and Squid set-up as \`bun run bench --peers\`.
Each cell is microseconds of the process's CPU per request (its share of the perf samples in parentheses); CPU per request is measured in a run without the profiler, the split in a second run under \`perf record -g\`${hasPerf ? "" : " (perf is not installed here: apt-get install linux-perf)"}.
A kernel line for a system call counts everything the kernel does for it, including, for a send on loopback, delivering the bytes and waking the process that receives them.
The broker's TLS (BoringSSL), SQLite and JavaScriptCore's runtime are inside its own binary ("program's own code"); Squid's TLS is OpenSSL's shared libraries.

${splitTable(rows)}
## The broker's JavaScript, by self time (from source, --cpu-prof, 16 connections, warm-up included)

"runtime (native)" entries are the runtime's own functions called from JavaScript (socket and file writes, SQLite, JSON). This profiler samples the JavaScript thread by the clock, and natives that enter the kernel come out larger here than in perf's CPU samples above: the audit journal's \`writeSync\` shows as a tenth of the thread, yet a copy of the broker with that write removed, measured beside an unchanged one in five alternating repetitions (2026-11-29), used the same CPU per request within the noise (88 against 87 µs). Read this table for which JavaScript runs, perf's for what it costs.

| self | function — where |
|---:|---|
${js}
`;
const out = join(ROOT, "bench", "results", `${date}-where.md`);
mkdirSync(join(ROOT, "bench", "results"), { recursive: true });
writeFileSync(out, report);
console.log(report);
log(`written to ${out}`);
