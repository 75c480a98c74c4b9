// Two compiled broker processes on one PostgreSQL, proxying hundreds of requests for the same vault at once:
// the vault keeps one hash chain (seq 1..N, no gap, no duplicate, every prev the previous hash, every hash
// recomputed here from the rows with auditRecordHash, ids rising with seq), the instances made exactly one signing
// key between them, and the checkpoints both instances signed (during the load, and each one's last at graceful
// shutdown) verify with the published public key through node:crypto, their heads being records of the chain.
// The vault's JSON webhook receives the checkpoints made while running, each verifying alike.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac, verify as nodeVerify } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { auditRecordHash } from "../../src/store/index.ts";
import { pgMissing, sharedPgCluster, type SharedPgCluster } from "../helpers/postgres.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { callApi } from "./proxy-fixture.ts";
import { buildFreshBinary, queryDb, spawnInstance, stopAllInstances, waitForQuietDatabase, type Instance } from "./multi-instance-fixture.ts";

const WAVES = 4; // bursts a little over a poll apart, so checkpoints are also made while both write
const PER_WAVE = 100; // requests per instance per wave
const PER_INSTANCE = WAVES * PER_WAVE;
const CONCURRENCY = 25; // requests in flight per instance
const EVERY_RECORDS = 50;
const GENESIS = "0".repeat(64);

let cluster: SharedPgCluster;
let dbUrl: string;
let upstream: TestUpstream;
let receiver: ReturnType<typeof Bun.serve>;
const delivered: { body: string; signature: string; event: string }[] = [];
let bin: string;
let a: Instance;
let b: Instance;
let owner: string;
let token: string;
let hookSecret: string;
let vaultId: number;
let hostIp: string;

function answer(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ ok: true, url: req.url }));
}

async function must(inst: Instance, method: string, path: string, body: unknown, bearer: string, status: number): Promise<any> {
  const r = await callApi(inst.url, method, path, body, bearer);
  if (r.status !== status) throw new Error(`${inst.name}: ${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** `n` proxied GETs through `inst`, at most CONCURRENCY at once; their statuses. */
async function load(inst: Instance, tag: string, n: number): Promise<number[]> {
  const statuses: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) {
        const i = next++;
        const res = await fetch(`${inst.url}/proxy/${hostIp}/${tag}/${i}`, { headers: { authorization: `Bearer ${token}` } });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
    }),
  );
  return statuses;
}

/** The vault's audit rows, in chain order, as the database holds them. */
async function chainRows(): Promise<Record<string, any>[]> {
  return (await queryDb(dbUrl, [[`SELECT * FROM audit_logs WHERE vault_id = $1 ORDER BY chain_seq, id`, [vaultId]]]))[0]!;
}

async function waitForRows(n: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const [rows] = await queryDb(dbUrl, [[`SELECT count(*)::int AS n FROM audit_logs WHERE vault_id = $1`, [vaultId]]]);
    if (rows![0]!.n >= n || Date.now() > deadline) return;
    await Bun.sleep(100);
  }
}

/** Waits until a checkpoint signed the vault's current head (the chain's mark caught up with it). */
async function waitForCheckpointed(): Promise<boolean> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const [rows] = await queryDb(dbUrl, [[`SELECT head_seq, checkpoint_seq FROM audit_chains WHERE vault_id = $1`, [vaultId]]]);
    const row = rows![0];
    if (row && Number(row.head_seq) > 0 && Number(row.checkpoint_seq) === Number(row.head_seq)) return true;
    if (Date.now() > deadline) return false;
    await Bun.sleep(50);
  }
}

/** The ids of the checkpoints `inst` made, from its log lines (debug: "audit_checkpoint"). */
function checkpointsBy(inst: Instance): number[] {
  return inst
    .logs()
    .split("\n")
    .filter((l) => l.includes('"event":"audit_checkpoint"'))
    .map((l) => JSON.parse(l).id as number);
}

function signatureValid(pem: string, c: { id: number; at: number; key_id: string; heads: [number, number, string][]; signature: string }): boolean {
  const message = JSON.stringify(["broker-audit-checkpoint-v1", c.id, c.at, c.key_id, c.heads]);
  return nodeVerify(null, Buffer.from(message), pem, Buffer.from(c.signature, "base64url"));
}

beforeAll(async () => {
  bin = buildFreshBinary();
  [cluster, upstream] = await Promise.all([sharedPgCluster(), startUpstream(answer)]);
  receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      delivered.push({ body: await req.text(), signature: req.headers.get("broker-signature") ?? "", event: req.headers.get("broker-event") ?? "" });
      return new Response("ok");
    },
  });
  dbUrl = await cluster.createDatabase();
  hostIp = `127.0.0.1:${upstream.port}`;
  const env = { BROKER_AUDIT_CHECKPOINT_RECORDS: String(EVERY_RECORDS), BROKER_AUDIT_CHECKPOINT_SECONDS: "3600", BROKER_LOG_LEVEL: "debug" };
  // Both at the same moment on the empty database: the signing key's creation race is part of every run.
  const spawn = (name: string) => spawnInstance(name, { bin, databaseUrl: dbUrl, upstreamCaPem: upstream.pki.caPem, env });
  [a, b] = await Promise.all([spawn("a"), spawn("b")]);
  owner = (await must(a, "POST", "/v1/auth/register", { email: "owner@example.com", password: "correct horse battery" }, "", 201)).token;
  await must(a, "POST", "/v1/vaults", { name: "chained" }, owner, 201);
  await must(a, "PUT", "/v1/vaults/chained/credentials/API_KEY", { value: `sk-chain-${crypto.randomUUID()}` }, owner, 200);
  await must(a, "POST", "/v1/vaults/chained/services", { host: hostIp, auth: { type: "bearer", token: "API_KEY" } }, owner, 201);
  hookSecret = (await must(a, "POST", "/v1/vaults/chained/webhooks", { url: `http://127.0.0.1:${receiver.port}/hook` }, owner, 201)).secret;
  token = (await must(a, "POST", "/v1/sessions", { vault: "chained", role: "proxy" }, owner, 201)).token;
  vaultId = Number((await queryDb(dbUrl, ["SELECT id FROM vaults WHERE name = 'chained'"]))[0]![0]!.id);
}, 90_000);

afterAll(async () => {
  await stopAllInstances();
  receiver?.stop(true);
  await upstream?.close();
  await cluster?.release();
});

describe.skipIf(pgMissing)("two instances on one PostgreSQL writing one vault's audit log at once", () => {
  test("one chain, one signing key, and every checkpoint either instance signed verifies with the public key", async () => {
    // Hundreds of proxied requests through both instances at the same time.
    const statuses: number[] = [];
    for (let w = 0; w < WAVES; w++) {
      const t0 = performance.now();
      const [viaA, viaB] = await Promise.all([load(a, `a/${w}`, PER_WAVE), load(b, `b/${w}`, PER_WAVE)]);
      console.log(
        `[audit-checkpoints] wave ${w + 1}: ${2 * PER_WAVE} proxied requests through both instances at once in ${Math.round(performance.now() - t0)} ms`,
      );
      statuses.push(...viaA, ...viaB);
      // Written, then signed by whichever instance takes the turn (each looks every second), before the next wave.
      await waitForRows(2 * PER_WAVE * (w + 1));
      expect(await waitForCheckpointed()).toBe(true);
    }
    expect(statuses.length).toBe(2 * PER_INSTANCE);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    await waitForRows(2 * PER_INSTANCE);

    // Each one's last checkpoint at graceful shutdown: a few more records through A, A stops; then through B, B stops.
    expect(await load(a, "a-last", 3)).toEqual([200, 200, 200]);
    await waitForRows(2 * PER_INSTANCE + 3);
    expect(await a.kill("SIGTERM")).toBe(0);
    expect(await load(b, "b-last", 3)).toEqual([200, 200, 200]);
    await waitForRows(2 * PER_INSTANCE + 6);
    const pem = (await callApi(b.url, "GET", "/v1/audit/public-key")).body.public_key_pem as string;
    expect(await b.kill("SIGTERM")).toBe(0);
    await waitForQuietDatabase(dbUrl);
    const total = 2 * PER_INSTANCE + 6;

    // One chain: seq 1..N without gap or duplicate, each prev the previous hash, each hash recomputed from the row.
    const rows = await chainRows();
    expect(rows.length).toBe(total);
    expect(rows.map((r) => Number(r.chain_seq))).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    let prev = GENESIS;
    const bySeq = new Map<number, string>();
    const broken: string[] = [];
    for (const r of rows) {
      const seq = Number(r.chain_seq);
      const hash = auditRecordHash({
        vaultId: Number(r.vault_id),
        seq,
        prev: r.chain_prev,
        at: Number(r.at),
        principal: r.principal,
        vault: r.vault,
        ingress: r.ingress,
        method: r.method,
        host: r.host,
        path: r.path,
        service: r.service,
        credentialKeys: r.credential_keys,
        credentialRefs: r.credential_refs,
        status: Number(r.status),
        bytesIn: Number(r.bytes_in),
        bytesOut: Number(r.bytes_out),
        durationMs: Number(r.duration_ms),
        error: r.error,
        contained: Number(r.contained) === 1,
        approvedBy: r.approved_by,
      });
      if (r.chain_prev !== prev) broken.push(`seq ${seq}: prev is not the hash of seq ${seq - 1}`);
      if (r.chain_hash !== hash) broken.push(`seq ${seq}: stored hash differs from the recomputed one`);
      prev = r.chain_hash;
      bySeq.set(seq, r.chain_hash);
    }
    expect(broken).toEqual([]);
    // Ids rise with seq (the head lock orders the writers), and both instances' requests are in the one chain.
    const ids = rows.map((r) => Number(r.id));
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect(rows.filter((r) => String(r.path).startsWith("/a/")).length).toBe(PER_INSTANCE);
    expect(rows.filter((r) => String(r.path).startsWith("/b/")).length).toBe(PER_INSTANCE);
    const [chains] = await queryDb(dbUrl, [[`SELECT head_seq, head_hash, checkpoint_seq FROM audit_chains WHERE vault_id = $1`, [vaultId]]]);
    const head = chains![0]!;
    expect([Number(head.head_seq), head.head_hash, Number(head.checkpoint_seq)]).toEqual([total, prev, total]);

    // One signing key, the one both instances publish.
    const [keys] = await queryDb(dbUrl, ["SELECT key_id, public_key_pem FROM audit_signing_keys"]);
    expect(keys!.length).toBe(1);
    expect(keys![0]!.public_key_pem).toBe(pem);
    expect([a, b].filter((i) => i.logs().includes('"event":"audit_signing_key_created"')).length).toBe(1);

    // Every checkpoint verifies, covers the vault at a record of the chain, and the last signs the chain's head.
    const [stored] = await queryDb(dbUrl, ["SELECT id, at, key_id, heads, signature FROM audit_checkpoints ORDER BY id"]);
    const checkpoints = stored!.map((c) => ({
      id: Number(c.id),
      at: Number(c.at),
      key_id: c.key_id as string,
      heads: JSON.parse(c.heads),
      signature: c.signature,
    }));
    expect(checkpoints.length).toBeGreaterThanOrEqual(WAVES + 2);
    for (const c of checkpoints) {
      expect({ id: c.id, valid: signatureValid(pem, c), key: c.key_id }).toEqual({ id: c.id, valid: true, key: keys![0]!.key_id });
      const [[vault, seq, hash]] = c.heads;
      expect({ id: c.id, vault, hash }).toEqual({ id: c.id, vault: vaultId, hash: bySeq.get(seq) });
    }
    const seqs = checkpoints.map((c) => c.heads[0][1] as number);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
    expect(seqs.at(-1)).toBe(total);
    // Both instances signed some: during the load (whichever took the turn) and each at its shutdown.
    const byA = checkpointsBy(a);
    const byB = checkpointsBy(b);
    console.log(`[audit-checkpoints] ${checkpoints.length} checkpoints: ${byA.length} by A, ${byB.length} by B (records per checkpoint: ${EVERY_RECORDS})`);
    expect(byA.length).toBeGreaterThan(0);
    expect(byB.length).toBeGreaterThan(0);
    expect([...byA, ...byB].sort((x, y) => x - y)).toEqual(checkpoints.map((c) => c.id));
    // The last two are the shutdown ones: A's, then B's.
    expect(byA).toContain(checkpoints.at(-2)!.id);
    expect(byB).toContain(checkpoints.at(-1)!.id);

    // The vault's webhook got the checkpoints made while the instances ran (HMAC-signed and Ed25519-signed).
    const events = delivered.filter((d) => d.event === "audit.checkpoint");
    expect(events.length).toBeGreaterThan(0);
    for (const d of events) {
      const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(d.signature)!;
      expect(createHmac("sha256", hookSecret).update(`${m[1]}.${d.body}`).digest("hex")).toBe(m[2]!);
      const e = JSON.parse(d.body);
      expect(e.vault).toBe("chained");
      expect(e.checkpoint.heads).toEqual([{ vault_id: vaultId, seq: expect.any(Number), hash: bySeq.get(e.checkpoint.heads[0].seq) }]);
      const heads = e.checkpoint.signed_heads.map((h: any) => [h.vault_id, h.seq, h.hash]);
      expect(signatureValid(pem, { ...e.checkpoint, heads })).toBe(true);
    }
  }, 180_000);
});
