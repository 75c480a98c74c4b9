// Budgets and LLM metering as a user runs them (issue 38): the compiled broker, the official `openai` and
// `@anthropic-ai/sdk` clients under `broker vault run` holding placeholder keys, against a local server that answers
// as those APIs do. Every call is counted exactly as the server reported it (streamed and not; the usage the broker
// asks a streamed chat completion for never reaches the agent); a daily token budget lets calls through until it is
// reached, then the SDK surfaces 429 budget_exceeded with the envelope and does not retry; past a soft threshold that
// asks for a person the next call is held (428) until one approves it. No key appears in any output or log line.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { startLlmFake, type LlmFake, type LlmRequest } from "../helpers/llm-fakes.ts";
import { cleanEnv, expectOk, freePort, isolatedBinary, runBinary, startBinaryServer, tempDir, type RunResult, type ServerProcess } from "../helpers/binary.ts";

const ROOT = resolve(import.meta.dir, "..", "..");
const AGENT = join(ROOT, "tests", "e2e", "llm-sdk-agent.ts");
const OPENAI_KEY = `sk-proj-${crypto.randomUUID()}`;
const ANTHROPIC_KEY = `sk-ant-api03-${crypto.randomUUID()}`;
const { bin, dir } = isolatedBinary();
const outputs: string[] = [];
const owner = cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-llm-"), "config") });

let llm: LlmFake;
let server: ServerProcess;
let openaiBase = "";
let anthropicBase = "";

/** Tokens the fake reports: different for every call, so a count that is off by one call shows. */
function usageFor(req: LlmRequest) {
  return { input: 11 + req.seq, output: 3 + (req.seq % 5) };
}

async function cli(args: string[], stdin?: string): Promise<RunResult> {
  const r = await runBinary(bin, args, { env: owner, stdin, cwd: ROOT });
  outputs.push(r.stdout, r.stderr);
  return r;
}

interface StepOut {
  step: string;
  ok: boolean;
  status?: number;
  error?: any;
  headers?: Record<string, string>;
  [k: string]: unknown;
}

/** The SDK agent under `broker vault run`, one JSON line per step. */
async function agent(...steps: string[]): Promise<StepOut[]> {
  const r = await cli(["vault", "run", "--", "env", `OPENAI_BASE_URL=${openaiBase}`, `ANTHROPIC_BASE_URL=${anthropicBase}`, process.execPath, AGENT, ...steps]);
  if (r.exitCode !== 0) throw new Error(`agent exited ${r.exitCode}\n${r.stdout}\n${r.stderr}`);
  return r.stdout
    .trim()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as StepOut);
}

async function logs(): Promise<any[]> {
  await Bun.sleep(400); // the audit writer flushes every 250 ms
  return JSON.parse(expectOk(await cli(["logs", "--json", "--limit", "1000"])).stdout);
}

beforeAll(async () => {
  llm = await startLlmFake({ names: { dns: ["api.openai.test", "api.anthropic.test"] }, usage: usageFor, chunks: 4 });
  openaiBase = `https://api.openai.test:${llm.port}/v1`;
  anthropicBase = `https://api.anthropic.test:${llm.port}`;
  const caFile = join(tempDir("broker-llm-ca-"), "ca.pem");
  writeFileSync(caFile, llm.caPem!);
  const port = freePort();
  server = await startBinaryServer(
    bin,
    cleanEnv({
      BROKER_DATA_DIR: join(tempDir(), "data"),
      BROKER_PORT: String(port),
      BROKER_PUBLIC_URL: `http://127.0.0.1:${port}`,
      BROKER_UPSTREAM_CA_FILE: caFile,
      BROKER_NETWORK_ALLOWLIST: "127.0.0.1",
      BROKER_RESOLVE: `api.openai.test:${llm.port}:127.0.0.1,api.anthropic.test:${llm.port}:127.0.0.1`,
      BROKER_METRICS: "true",
    }),
    dir,
  );
  expectOk(await cli(["auth", "register", "--email", "owner@example.com", "--password-stdin", "--address", server.url], "correct horse battery\n"));
  expectOk(await cli(["vault", "create", "llm"]));
  expectOk(await cli(["vault", "use", "llm"]));
  expectOk(await cli(["credential", "set", "OPENAI_KEY"], `${OPENAI_KEY}\n`));
  expectOk(await cli(["credential", "set", "ANTHROPIC_KEY"], `${ANTHROPIC_KEY}\n`));
  expectOk(await cli(["service", "add", `api.openai.test:${llm.port}`, "--auth", "bearer", "--token", "OPENAI_KEY"]));
  expectOk(await cli(["service", "add", `api.anthropic.test:${llm.port}`, "--auth", "header", "--header", "x-api-key", "--token", "ANTHROPIC_KEY"]));
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await llm?.close();
});

describe("LLM calls through the broker with the official SDKs", () => {
  test("every call is counted exactly as the server reported it, streamed and not, and the agent gets what it would have", async () => {
    const before = llm.requests.length;
    const steps = [
      "openai.chat",
      "openai.chat.stream",
      "openai.chat.stream.usage",
      "openai.responses",
      "openai.responses.stream",
      "openai.embeddings",
      "anthropic.messages",
      "anthropic.stream",
    ];
    const out = await agent(...steps);
    expect(out.map((o) => [o.step, o.ok, o.message ?? ""])).toEqual(steps.map((s) => [s, true, ""]));
    const sent = llm.requests.slice(before);
    expect(sent).toHaveLength(steps.length);
    // The keys went in; the agent held placeholders.
    expect(sent.map((r) => r.credential)).toEqual([...Array(6).fill(OPENAI_KEY), ANTHROPIC_KEY, ANTHROPIC_KEY]);

    // The agent that did not ask for a stream's usage: the broker asked, and took it out again.
    const quiet = out[1]!;
    expect(sent[1]!.includeUsage).toBe(true);
    expect(quiet).toMatchObject({ usageFields: 0, text: sent[1]!.text });
    // The agent that asked gets it, as the server reported it.
    expect(out[2]!.usage).toMatchObject({ prompt_tokens: sent[2]!.usage!.input, completion_tokens: sent[2]!.usage!.output });
    expect(out[0]!.usage).toMatchObject({ prompt_tokens: sent[0]!.usage!.input, completion_tokens: sent[0]!.usage!.output });

    // The audit log, as `broker logs` shows it: each call's tokens equal what the server reported.
    const records = (await logs()).filter((r) => r.method === "POST").slice(-steps.length);
    // (An embedding has no output: the API reports input tokens only.)
    const reported = (r: LlmRequest) => [r.usage!.input, r.endpoint === "embeddings" ? 0 : r.usage!.output];
    expect(records.map((r) => [r.llm?.input_tokens, r.llm?.output_tokens])).toEqual(sent.map(reported));
    expect(records.map((r) => r.llm?.model)).toEqual(sent.map((r) => r.model));
    // Priced by the shipped table (gpt-4o-mini: 0.15 / 0.60 USD per million tokens), rounded up to a micro-unit.
    const first = sent[0]!.usage!;
    expect(records[0]!.llm.cost).toBe(Math.ceil(0.15 * first.input + 0.6 * first.output) / 1e6);
    expect(records[0]!.llm.currency).toBe("USD");
    const table = expectOk(await cli(["logs", "--limit", "20"])).stdout;
    expect(table).toContain("TOKENS");
    expect(table).toContain(`${first.input}+${first.output}`);

    // /metrics: tokens by vault, agent, service and model.
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const inputs = sent.filter((r) => r.model === "gpt-4o-mini").reduce((n, r) => n + r.usage!.input, 0);
    const line = metrics
      .split("\n")
      .find((l) => l.startsWith("broker_llm_tokens_total{") && l.includes('model="gpt-4o-mini"') && l.includes('direction="input"'));
    expect(line).toBeDefined();
    expect(Number(line!.split(" ").at(-1))).toBe(inputs);
    outputs.push(metrics, JSON.stringify(out));
  }, 120_000);

  test("a daily token budget lets calls through until it is reached, then the SDK surfaces 429 budget_exceeded and does not retry", async () => {
    expectOk(await cli(["budget", "set", "daily-tokens", "--period", "day", "--tokens", "60"]));
    const before = llm.requests.length;
    const out = await agent("openai.chat", "anthropic.messages", "openai.chat", "openai.chat", "openai.chat", "openai.chat");
    const went = out.filter((o) => o.ok).length;
    const sent = llm.requests.slice(before);
    expect(sent.length).toBe(went); // no refused call reached the server, and the SDK did not retry one
    const counted = sent.reduce((n, r) => n + r.usage!.input + r.usage!.output, 0); // chat and messages: output is reported
    expect(counted).toBeGreaterThanOrEqual(60);
    expect(counted - (sent.at(-1)!.usage!.input + sent.at(-1)!.usage!.output)).toBeLessThan(60); // the last call was let in under the limit
    const refused = out.filter((o) => !o.ok);
    expect(refused.length).toBe(out.length - went);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.status).toBe(429);
      expect(JSON.stringify(r.error)).toContain("budget_exceeded");
      expect(r.headers!["x-broker-error"]).toBe("budget_exceeded");
      expect(Number(r.headers!["retry-after"])).toBeGreaterThan(0);
      expect(r.headers!["x-should-retry"]).toBe("false");
    }
    // The OpenAI SDK keeps the body's `error` field (the code) and every header; the Anthropic SDK the whole envelope.
    for (const r of refused) expect(r.error === "budget_exceeded" || r.error?.error === "budget_exceeded").toBe(true);
    const anthropic = refused.find((r) => r.step === "anthropic.messages") ?? (await agent("anthropic.messages"))[0]!;
    expect(anthropic).toMatchObject({ ok: false, status: 429 });
    expect(anthropic.error).toMatchObject({ error: "budget_exceeded", budget: "daily-tokens", measure: "total_tokens", limit: 60 });
    expect(anthropic.error.used).toBeGreaterThanOrEqual(60);
    expect(Date.parse(anthropic.error.resets_at)).toBeGreaterThan(Date.now());
    expect(anthropic.message).toContain('budget "daily-tokens" has reached its limit of 60 tokens');
    const list = JSON.parse(expectOk(await cli(["budget", "list", "--json"])).stdout);
    expect(list[0] ?? list.budgets?.[0]).toMatchObject({ name: "daily-tokens", state: "exceeded", used: { total_tokens: counted, requests: went } });
  }, 120_000);

  test("past a soft threshold that asks for a person, the next call is held (428) until one approves it", async () => {
    await cli(["budget", "remove", "daily-tokens"]);
    expectOk(await cli(["budget", "set", "careful", "--period", "day", "--tokens", "100000", "--requests", "4", "--soft", "50", "--soft-action", "approve"]));
    const first = await agent("openai.chat", "openai.chat", "openai.chat.stream");
    expect(first.map((o) => o.ok)).toEqual([true, true, false]);
    const held = first[2]!;
    expect(held.status).toBe(428);
    // The OpenAI SDK keeps only the body's `error` field (the code); the approval's id and link are in the headers.
    expect(held.error).toBe("approval_required");
    expect(held.headers!["x-broker-error"]).toBe("approval_required");
    const id = held.headers!["x-broker-approval-id"];
    expect(id).toMatch(/^apr_/);
    expect(held.headers!["x-broker-approval-url"]).toContain(id!);
    // A person approves it, as the CLI has people do.
    expect(expectOk(await cli(["request", "approve", id!])).stdout).toContain("Approved");
    // The same call again, now approved: it goes, and is counted.
    const again = await agent("openai.chat.stream");
    expect(again[0]).toMatchObject({ ok: true, usageFields: 0 });
    const list = JSON.parse(expectOk(await cli(["budget", "list", "--json"])).stdout);
    expect((list[0] ?? list.budgets?.[0]).used.requests).toBe(3);
  }, 120_000);

  test("neither key appears in any output, log line or audit record", async () => {
    const audit = JSON.stringify(await logs());
    for (const key of [OPENAI_KEY, ANTHROPIC_KEY]) {
      for (const o of outputs) expect(o).not.toContain(key);
      expect(server.logs()).not.toContain(key);
      expect(audit).not.toContain(key);
    }
  });
});
