// A noisy neighbour's edits (issue 35 point 3): one vault of N services (default 10,000, a credential
// per 10 services) is edited every 250 ms through the API, alternately a service's rules and a
// credential's value, while a quiet vault's agent sends /proxy requests to the bench upstream; the
// quiet vault's p50/p99/max, alone and during the edits, and the edited vault's own requests during
// them. The compiled broker runs as a subprocess (as users run it) on the SQLite store. No assertions.
// `bun bench/vault-edits.ts [services] [seconds] [--bin path/to/broker]` (default 10000, 15 s, dist/broker).

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchEnv, ensureBinary, freePort, proxyAccepts } from "./broker.ts";
import { percentile } from "./load.ts";
import { createBenchPki } from "./pki.ts";
import { startUpstream } from "./upstream.ts";

const args = process.argv.slice(2);
const binAt = args.indexOf("--bin");
const bin = binAt >= 0 ? args.splice(binAt, 2)[1]! : ensureBinary(console.log);
const SERVICES = Number(args[0] ?? 10_000);
const SECONDS = Number(args[1] ?? 15);
const EDIT_EVERY_MS = 250;
const CONCURRENCY = 4;
const PER_CREDENTIAL = 10;

const pki = await createBenchPki();
const upstream = startUpstream(pki);
const dir = mkdtempSync(join(tmpdir(), "broker-vault-edits-"));
writeFileSync(join(dir, "upstream-ca.pem"), pki.caPem);
const [apiPort, proxyPort] = [freePort(), freePort()];
const proc = Bun.spawn([bin, "server"], {
  env: {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    ...benchEnv(dir, join(dir, "upstream-ca.pem")),
    BROKER_PORT: String(apiPort),
    BROKER_PROXY_PORT: String(proxyPort),
  },
  stdin: "ignore",
  stdout: "ignore",
  stderr: "inherit",
});
const apiUrl = `http://127.0.0.1:${apiPort}`;

async function call(method: string, path: string, token: string | undefined, body?: unknown): Promise<any> {
  const res = await fetch(`${apiUrl}${path}`, {
    method,
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : undefined;
}

/** Runs `fn(i)` for i in [0, n) with `width` in flight. */
async function each(n: number, width: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (let i = next++; i < n; i = next++) await fn(i);
    }),
  );
}

interface Run {
  readonly latencies: number[];
  readonly failures: number;
}

/** `CONCURRENCY` agents of `vault` sending GET /small through /proxy for `ms`. */
async function load(token: string, ms: number): Promise<Run> {
  const latencies: number[] = [];
  let failures = 0;
  const until = performance.now() + ms;
  const url = `${apiUrl}/proxy/localhost:${upstream.port}/small`;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < until) {
        const t = performance.now();
        const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
        await res.arrayBuffer();
        if (res.status !== 200) failures++;
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { latencies, failures };
}

/** Edits the noisy vault every EDIT_EVERY_MS until stopped: a service's rules, then a credential's value. */
function editEvery(owner: string, vault: string): { stop(): Promise<number[]> } {
  const took: number[] = [];
  let i = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      const n = i++;
      const host = `svc-${(n * 7919) % SERVICES}.noisy.example`;
      if (n % 2 === 0) await call("PATCH", `/v1/vaults/${vault}/services/${host}`, owner, { rules: [{ methods: ["GET"], paths: [`/edit-${n}/*`] }] });
      else await call("PUT", `/v1/vaults/${vault}/credentials/K${n % (SERVICES / PER_CREDENTIAL)}`, owner, { value: `sk-edit-${n}-${crypto.randomUUID()}` });
      took.push(performance.now() - started);
      await Bun.sleep(Math.max(0, EDIT_EVERY_MS - (performance.now() - started)));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return took;
    },
  };
}

function row(name: string, r: Run, seconds: number): string {
  const s = Float64Array.from(r.latencies).sort();
  const f = (x: number) => x.toFixed(1).padStart(7);
  const slow = s.filter((x) => x > 50).length;
  return `  ${name.padEnd(40)} ${String(Math.round(s.length / seconds)).padStart(6)} req/s  p50 ${f(percentile(s, 50))}  p99 ${f(percentile(s, 99))}  p99.9 ${f(percentile(s, 99.9))}  max ${f(s[s.length - 1] ?? NaN)} ms  ${slow} over 50 ms${r.failures ? `  (${r.failures} not 200)` : ""}`;
}

try {
  const deadline = Date.now() + 20_000;
  while (
    !(
      (await fetch(`${apiUrl}/health`).then(
        (r) => r.ok,
        () => false,
      )) && (await proxyAccepts(proxyPort))
    )
  ) {
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error("the broker did not start");
    await Bun.sleep(25);
  }
  const owner = (await call("POST", "/v1/auth/register", undefined, { email: "bench@example.com", password: `pw-${crypto.randomUUID()}` })).token as string;
  const sessionFor = async (vault: string, services: number) => {
    await call("POST", "/v1/vaults", owner, { name: vault });
    await call("PUT", `/v1/vaults/${vault}/credentials/UPSTREAM`, owner, { value: `sk-${vault}-${crypto.randomUUID()}` });
    await call("POST", `/v1/vaults/${vault}/services`, owner, { host: `localhost:${upstream.port}`, auth: { type: "bearer", token: "UPSTREAM" } });
    const t0 = performance.now();
    await each(services / PER_CREDENTIAL, 8, (k) => call("PUT", `/v1/vaults/${vault}/credentials/K${k}`, owner, { value: `sk-${k}-${crypto.randomUUID()}` }));
    await each(services, 8, (i) =>
      call("POST", `/v1/vaults/${vault}/services`, owner, {
        host: `svc-${i}.noisy.example`,
        auth: { type: "bearer", token: `K${Math.floor(i / PER_CREDENTIAL)}` },
      }),
    );
    const listed = (await call("GET", `/v1/vaults/${vault}/services`, owner)).services.length;
    if (services)
      console.log(`vault ${vault}: ${listed} services, ${services / PER_CREDENTIAL} credentials, set up in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    return (await call("POST", "/v1/sessions", owner, { vault, role: "proxy", ttl_seconds: 3600 })).token as string;
  };
  const quiet = await sessionFor("quiet", 0);
  const noisy = await sessionFor("noisy", SERVICES);
  await load(quiet, 2_000); // warm-up (JIT, connections, the needle set)
  await load(noisy, 1_000);
  console.log(`\n${bin}: ${CONCURRENCY} agents per row, ${SECONDS} s each; edits every ${EDIT_EVERY_MS} ms of the ${SERVICES}-service vault`);
  console.log(row("quiet vault alone (baseline)", await load(quiet, SECONDS * 1000), SECONDS));
  let edits = editEvery(owner, "noisy");
  console.log(row("quiet vault while the other is edited", await load(quiet, SECONDS * 1000), SECONDS));
  let took = (await edits.stop()).sort((a, b) => a - b);
  console.log(`  (${took.length} edits, each answered in p50 ${took[took.length >> 1]?.toFixed(1)} ms, max ${took.at(-1)?.toFixed(1)} ms)`);
  edits = editEvery(owner, "noisy");
  console.log(row("edited vault's own requests meanwhile", await load(noisy, SECONDS * 1000), SECONDS));
  took = (await edits.stop()).sort((a, b) => a - b);
  console.log(`  (${took.length} edits, each answered in p50 ${took[took.length >> 1]?.toFixed(1)} ms, max ${took.at(-1)?.toFixed(1)} ms)`);
} finally {
  proc.kill("SIGTERM");
  await proc.exited;
  upstream.stop();
  rmSync(dir, { recursive: true, force: true });
}
