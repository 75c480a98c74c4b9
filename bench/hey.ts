// `hey` (Debian package hey) as an independent client: 16 keep-alive connections through the
// CONNECT proxy vs direct. Go reads SSL_CERT_FILE, so hey verifies certificates against a file
// holding the broker CA and the upstream CA (no insecure mode).

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMs, sampleRss } from "./broker.ts";
import { median } from "./load.ts";
import type { Env, Row } from "./scenarios.ts";

interface HeyRun {
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  other: number;
  errors: number;
}

/** hey sends floor(n / c) requests per worker. */
function parseHey(out: string, n: number, c = 16): HeyRun {
  const expected = Math.floor(n / c) * c;
  const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? NaN);
  const ok = [...out.matchAll(/\[(\d{3})\]\s+(\d+) responses/g)].reduce((a, m) => a + (m[1]!.startsWith("2") ? Number(m[2]) : 0), 0);
  const all = [...out.matchAll(/\[(\d{3})\]\s+(\d+) responses/g)].reduce((a, m) => a + Number(m[2]), 0);
  return {
    rps: num(/Requests\/sec:\s+([\d.]+)/),
    p50: num(/50%+ in ([\d.]+) secs/) * 1000,
    p99: num(/99%+ in ([\d.]+) secs/) * 1000,
    ok,
    other: all - ok,
    errors: expected - all,
  };
}

async function runHey(args: string[], certFile: string, n: number): Promise<HeyRun & { out: string }> {
  const p = Bun.spawn(["hey", ...args], { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", SSL_CERT_FILE: certFile }, stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { ...parseHey(out, n, n < 16 ? n : 16), out: out + err };
}

export async function heyScenario(env: Env, n: number, reps: number): Promise<Row | string> {
  if (!Bun.which("hey")) return "hey not installed (apt-get install -y hey): skipped";
  const dir = mkdtempSync(join(tmpdir(), "broker-bench-hey-"));
  const certFile = join(dir, "roots.pem");
  writeFileSync(certFile, `${env.broker.caPem}\n${env.upstreamCa}`);
  const url = `https://localhost:${env.upstreamPort}/small`;
  const direct = ["-n", String(n), "-c", "16", url];
  const proxied = ["-n", String(n), "-c", "16", "-x", env.broker.proxyUrl, url];
  try {
    const probe = await runHey(["-n", "16", "-c", "16", "-x", env.broker.proxyUrl, url], certFile, 16);
    if (probe.ok !== 16)
      return `hey could not complete verified requests through the proxy: skipped (${
        probe.out
          .split("\n")
          .find((l) => /error|\[\d{3}\]/i.test(l))
          ?.trim() ?? "no output"
      })`;
    const rows: { d: HeyRun; b: HeyRun; cpu: number; peak: number }[] = [];
    for (let i = 0; i < reps; i++) {
      const d = await runHey(direct, certFile, n);
      const c0 = cpuMs(env.broker.pid);
      const s = sampleRss(env.broker.pid);
      const b = await runHey(proxied, certFile, n);
      rows.push({ d, b, cpu: cpuMs(env.broker.pid) - c0, peak: s.stop().peak });
    }
    const m = (f: (r: (typeof rows)[number]) => number) => median(rows.map(f));
    return {
      name: "hey: tunnel, 16 keep-alive, /small",
      requests: Math.floor(n / 16) * 16 * reps,
      errors: rows.reduce((a, r) => a + r.b.errors + r.d.errors, 0),
      non2xx: rows.reduce((a, r) => a + r.b.other + r.d.other, 0),
      directRps: m((r) => r.d.rps),
      brokerRps: m((r) => r.b.rps),
      ratio: m((r) => r.b.rps / r.d.rps),
      addedP50: m((r) => r.b.p50 - r.d.p50),
      addedP99: m((r) => r.b.p99 - r.d.p99),
      brokerP50: m((r) => r.b.p50),
      brokerP99: m((r) => r.b.p99),
      cpuMsPerReq: m((r) => r.cpu / (Math.floor(n / 16) * 16)),
      peakRssMb: m((r) => r.peak) / (1024 * 1024),
      note: "hey verifies via SSL_CERT_FILE",
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
