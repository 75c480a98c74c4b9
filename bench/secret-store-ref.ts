// The cost of a credential by reference (issue 36): the same tunnel keep-alive request, sent with the
// bench credential stored in the vault and then with the very same value read from a secret store (the
// Vault KV v2 test server), in the same repetitions. Resolution is off the request path, so the ratio
// (reference / stored throughput) should be 1 within the run's noise.

import { startVaultServer } from "../tests/helpers/secret-stores/vault-server.ts";
import { runLoad, statsOf } from "./load.ts";
import { metered, summarise, targets, type Env, type Rep, type Row } from "./scenarios.ts";

async function api(env: Env, method: string, path: string, body: unknown): Promise<void> {
  const res = await fetch(`${env.broker.apiUrl}${path}`, {
    method,
    headers: { "content-type": "application/json", authorization: `Bearer ${env.broker.ownerToken}` },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
}

export async function referenceScenario(env: Env, o: { requests: number; concurrency: number; reps: number }): Promise<Row> {
  const store = await startVaultServer();
  try {
    const value = env.broker.authorization.slice("Bearer ".length); // the upstream checks it: the same value either way
    store.put("bench/upstream", { token: value });
    store.addToken("bench-vault-token");
    const vault = env.broker.vault;
    await api(env, "POST", "/v1/secret-stores", {
      name: "bench-kv",
      kind: "vault",
      address: store.address,
      ca_pem: store.pki.caPem,
      auth: { method: "token", token: "bench-vault-token" },
      refresh_seconds: 60,
    });
    await api(env, "PUT", `/v1/secret-stores/bench-kv/vaults/${vault}`, undefined);
    const stored = () => api(env, "PUT", `/v1/vaults/${vault}/credentials/BENCH_TOKEN`, { value });
    const referenced = () => api(env, "PUT", `/v1/vaults/${vault}/credentials/BENCH_TOKEN`, { ref: "bench-kv:bench/upstream#token" });
    const target = targets(env).viaTunnel("/small");
    const warm = Math.min(500, o.requests);
    const reps: Rep[] = [];
    const measure = async (set: () => Promise<void>) => {
      await set();
      await runLoad(target, { requests: warm, concurrency: o.concurrency });
      return metered(env.broker.pid, () => runLoad(target, o));
    };
    for (let i = 0; i < o.reps; i++) {
      // Alternating which goes first, so drift within a repetition (GC, the machine) favours neither.
      const first = i % 2 === 0 ? await measure(stored) : await measure(referenced);
      const second = i % 2 === 0 ? await measure(referenced) : await measure(stored);
      const [s, r] = i % 2 === 0 ? [first.value, second] : [second.value, first];
      reps.push({
        direct: statsOf(s),
        broker: statsOf(r.value),
        errors: s.errors + r.value.errors,
        non2xx: s.non2xx + r.value.non2xx,
        requests: o.requests,
        cpuMs: r.cpu,
        peakRss: r.peak,
        growth: r.growth,
        firstError: r.value.firstError ?? s.firstError,
      });
    }
    await stored();
    const reads = store.counts.reads;
    return summarise(
      "tunnel, 16 keep-alive, /small: value from a secret store / stored value",
      reps,
      `${o.concurrency} conn; ratio = throughput with the reference / with the stored value (same run); store reads ${reads}`,
    );
  } finally {
    await store.close();
  }
}
