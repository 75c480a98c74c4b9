// Ten agents racing against one budget through two compiled broker instances on one PostgreSQL (issue 38): every
// agent sends chat completions through /proxy, alternating instances, one at a time each, until its budget refuses.
// A token budget can be passed only by what the requests in flight when it was reached used (each is let through
// while what was used before it is under the limit; its tokens are known at its end): the test prints the overshoot
// and checks it is at most ten calls' tokens. A request budget is never passed: exactly its limit goes. Every call the
// upstream answered is counted (the stored usage equals the upstream's own count), and every refusal is the envelope.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startLlmFake, type LlmFake } from "../helpers/llm-fakes.ts";
import { pgMissing, sharedPgCluster, type SharedPgCluster } from "../helpers/postgres.ts";
import { callApi } from "./proxy-fixture.ts";
import { buildFreshBinary, queryDb, spawnInstance, stopAllInstances, type Instance } from "./multi-instance-fixture.ts";

const AGENTS = 10;
const TOKENS_PER_CALL = 100; // 70 in + 30 out, as the fake reports
const TOKEN_LIMIT = 4_000;
const REQUEST_LIMIT = 57;
const SECRET = `sk-race-${crypto.randomUUID()}`;

let cluster: SharedPgCluster;
let dbUrl: string;
let llm: LlmFake;
let a: Instance;
let b: Instance;
let owner: string;
let host: string;
const agents: string[] = [];

async function must(inst: Instance, method: string, path: string, body: unknown, bearer: string, status: number): Promise<any> {
  const r = await callApi(inst.url, method, path, body, bearer);
  if (r.status !== status) throw new Error(`${inst.name}: ${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** Each agent sends calls one after another, alternating instances, until refused; the statuses and envelopes. */
async function race(): Promise<{ ok: number; refused: any[] }> {
  let ok = 0;
  const refused: any[] = [];
  await Promise.all(
    agents.map(async (token, i) => {
      for (let n = 0; n < 1000; n++) {
        const inst = (i + n) % 2 === 0 ? a : b;
        const res = await fetch(`${inst.url}/proxy/${host}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "x-vault": "race", "content-type": "application/json" },
          body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: `agent ${i} call ${n}` }] }),
        });
        const text = await res.text();
        expect(text).not.toContain(SECRET);
        if (res.status === 200) {
          ok++;
          continue;
        }
        expect(res.status).toBe(429);
        refused.push({ ...JSON.parse(text), retryAfter: res.headers.get("retry-after"), code: res.headers.get("x-broker-error") });
        return;
      }
    }),
  );
  return { ok, refused };
}

async function usage(name: string): Promise<Record<string, number>> {
  const [rows] = await queryDb(dbUrl, [
    ["SELECT u.requests, u.input_tokens, u.output_tokens, u.total_tokens FROM budget_usage u JOIN budgets b ON b.id = u.budget_id WHERE b.name = $1", [name]],
  ]);
  const r = rows![0] ?? {};
  return Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Number(v)]));
}

beforeAll(async () => {
  const bin = buildFreshBinary();
  [cluster, llm] = await Promise.all([sharedPgCluster(), startLlmFake({ usage: { input: 70, output: 30 }, firstChunkDelayMs: 15 })]);
  dbUrl = await cluster.createDatabase();
  host = `127.0.0.1:${llm.port}`;
  const spawn = (name: string) => spawnInstance(name, { bin, databaseUrl: dbUrl, upstreamCaPem: llm.caPem! });
  [a, b] = await Promise.all([spawn("a"), spawn("b")]);
  owner = (await must(a, "POST", "/v1/auth/register", { email: "owner@example.com", password: "correct horse battery" }, "", 201)).token;
  await must(a, "POST", "/v1/vaults", { name: "race" }, owner, 201);
  await must(a, "PUT", "/v1/vaults/race/credentials/OPENAI_KEY", { value: SECRET }, owner, 200);
  await must(a, "POST", "/v1/vaults/race/services", { host, auth: { type: "bearer", token: "OPENAI_KEY" } }, owner, 201);
  for (let i = 0; i < AGENTS; i++) {
    const invite = await must(a, "POST", "/v1/vaults/race/agent-invites", { name: `racer-${i}`, role: "proxy" }, owner, 201);
    const redeemed = await fetch(invite.invite_url, { method: "POST" });
    agents.push(((await redeemed.json()) as { token: string }).token);
  }
}, 120_000);

afterAll(async () => {
  await stopAllInstances();
  await llm?.close();
  await cluster?.release();
});

describe.skipIf(pgMissing)("ten agents racing against one budget, two instances, one PostgreSQL", () => {
  test("a token budget is passed by at most the calls in flight when it was reached; every answered call is counted", async () => {
    // Set through instance B, so A learns of it from the change announcement (A answers half the calls).
    await must(b, "PUT", "/v1/vaults/race/budgets/daily-tokens", { scope: "vault", period: "day", limits: { total_tokens: TOKEN_LIMIT } }, owner, 200);
    await Bun.sleep(500);
    const before = llm.requests.length;
    const { ok, refused } = await race();
    const answered = llm.requests.length - before;
    const used = await usage("daily-tokens");
    const overshoot = used.total_tokens! - TOKEN_LIMIT;
    console.log(
      `[budget-race] tokens: limit ${TOKEN_LIMIT}, used ${used.total_tokens} by ${ok} calls (${TOKENS_PER_CALL} each), overshoot ${overshoot} tokens = ${overshoot / TOKENS_PER_CALL} calls; at most ${AGENTS} calls were in flight`,
    );
    expect(ok).toBe(answered);
    expect(used).toMatchObject({ requests: ok, input_tokens: ok * 70, output_tokens: ok * 30, total_tokens: ok * TOKENS_PER_CALL });
    expect(used.total_tokens).toBeGreaterThanOrEqual(TOKEN_LIMIT);
    expect(overshoot).toBeLessThanOrEqual(AGENTS * TOKENS_PER_CALL);
    expect(refused).toHaveLength(AGENTS);
    for (const e of refused) {
      expect(e).toMatchObject({ error: "budget_exceeded", code: "budget_exceeded", budget: "daily-tokens", measure: "total_tokens", limit: TOKEN_LIMIT });
      expect(Number(e.retryAfter)).toBeGreaterThan(0);
    }
  }, 120_000);

  test("a request budget lets exactly its limit through, however the agents race across instances", async () => {
    await must(a, "DELETE", "/v1/vaults/race/budgets/daily-tokens", undefined, owner, 204);
    await must(a, "PUT", "/v1/vaults/race/budgets/hourly-calls", { scope: "vault", period: "hour", limits: { requests: REQUEST_LIMIT } }, owner, 200);
    await Bun.sleep(500);
    const before = llm.requests.length;
    const { ok, refused } = await race();
    const answered = llm.requests.length - before;
    console.log(`[budget-race] requests: limit ${REQUEST_LIMIT}, ${ok} went through two instances, overshoot ${ok - REQUEST_LIMIT}`);
    expect(ok).toBe(REQUEST_LIMIT);
    expect(answered).toBe(REQUEST_LIMIT);
    expect((await usage("hourly-calls")).requests).toBe(REQUEST_LIMIT);
    expect(refused.every((e) => e.error === "budget_exceeded" && e.measure === "requests")).toBe(true);
  }, 120_000);

  test("the credential is in no log line of either instance", () => {
    for (const inst of [a, b]) expect(inst.logs()).not.toContain(SECRET);
  });
});
