// `bun bench/llm-metering.ts [--quick] [--baseline <git revision>] [--calls N]`: what metering LLM answers and counting
// budgets cost (issue 38), as ratios against baselines measured in the same run. Three compiled brokers: this tree's
// (`now`), a second of this tree's whose vault has a vault-wide request budget (`budget`), and one built from the
// revision before metering and budget counting were wired in (default 5ddc281^, taken with `git archive`, so the
// working tree is untouched). Upstreams: the bench's HTTPS upstream and the LLM fake (tests/helpers/llm-fakes.ts),
// which also answers chat completions at /v1/chat/plain, a path the broker does not meter.
//
// 1. A streamed OpenAI chat completion (stream: true, no stream_options, so the metering broker asks for the usage
//    and takes it out again), one call at a time: the time from sending the request to the first content delta
//    (`"delta":{"content":"…`) and to the end of the stream, through the tunnel of `now` on the metered route and on
//    the unmetered one (the same broker path without metering: the fairest baseline), of the pre-metering broker, of
//    `budget` (metered and counted), and directly; and, to say where metering's time goes, with the agent asking for
//    the usage itself on both routes of `now` (the upstream then sends the same bytes either way, and the broker only
//    meters: it asks for nothing and takes nothing out). Each call goes through every path in turn (the order
//    rotating), in rounds; medians and p90 per round, and the ratios of each round's figures (median [min–max] over
//    the rounds). Twice: the fake answering at once, and paced (a delay before the first token and between tokens, one
//    write per token, where a broker that held the stream would show its first token at the end). Every answer is
//    checked: the reply text whole, the usage there exactly when the agent asked for it, [DONE] at its end.
// 2. Plain GET /small keep-alive rows (bench/ab-rows.ts, as the audit chain and OTLP benches run them): `budget`
//    against `now` (what a vault-wide request budget, counted in the database on every request, costs), and `now`
//    against the pre-metering broker (what the vault without budgets pays now).
// 3. The tokens `now` and `budget` counted (the logs API; the budget's usage) against what the fake reported.
// Then, in this process, the metering's own work on one streamed answer (meterAnswer: the meter and the usage filter).

import { join } from "node:path";
import { abMedian, abRatio, runAbRows, type AbRow } from "./ab-rows.ts";
import { buildBaseline, ensureBinary, startBroker, type BrokerProc } from "./broker.ts";
import { median } from "./load.ts";
import { createBenchPki } from "./pki.ts";
import { warmUp, type Env } from "./scenarios.ts";
import { startUpstream } from "./upstream.ts";
import { countWords, startLlmFake, type LlmFake } from "../tests/helpers/llm-fakes.ts";
import { meterAnswer } from "../src/egress/llm-metering.ts";
import { askForUsage } from "../src/egress/llm-request.ts";
import { llmRouteOf } from "../src/egress/llm-usage.ts";
import { NO_NEEDLES } from "../src/egress/redact.ts";
import { SHIPPED_PRICES } from "../src/policy/index.ts";
import { createLogger } from "../src/log.ts";
import { createBudgetGate } from "../src/workflows/budget-gate.ts";

const args = process.argv.slice(2);
const quick = args.includes("--quick");
const flag = (name: string) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
};
const baselineRev = flag("--baseline") ?? "5ddc281^";
const size = quick
  ? { calls: 60, pacedCalls: 20, rounds: 3, warmCalls: 20, requests: 1000, reps: 3, warm: 2000 }
  : { calls: 300, pacedCalls: 100, rounds: 3, warmCalls: 100, requests: 4000, reps: 5, warm: 20_000 };
if (flag("--calls")) size.calls = Number(flag("--calls"));
const log = (s: string) => console.error(`[llm-metering-bench] ${s}`);

const CHAT = "/v1/chat/completions";
/** Not an LLM route to the broker (llmRouteOf), a chat completion to the fake. */
const PLAIN = "/v1/chat/plain";
const MODEL = "gpt-4o-mini";
const REPLY =
  "Metering reads the usage from the events as they pass and never holds the stream, so the first token of a streamed completion should reach the agent as soon as it would without the broker counting anything at all, which is what this bench measures.";
const PROMPT = "Say something about metering a streamed completion as it passes through the broker.";
const BODY = JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: PROMPT }] });
/** The same call with the agent asking for the usage itself: the broker meters it and takes nothing out. */
const BODY_ASKED = JSON.stringify({ model: MODEL, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: PROMPT }] });
/** A content delta as the fake writes it (the role chunk before it carries `"delta":{"role":…,"content":""`). */
const FIRST_TOKEN = '"delta":{"content":"';
const SETTINGS = [
  { name: "answered at once", chunks: 24, firstChunkDelayMs: 0, chunkDelayMs: 0, calls: () => size.calls },
  { name: "paced: 10 ms to the first token, 1 ms between 16 tokens", chunks: 16, firstChunkDelayMs: 10, chunkDelayMs: 1, calls: () => size.pacedCalls },
] as const;

async function api(b: BrokerProc, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${b.apiUrl}${path}`, {
    method,
    headers: { "content-type": "application/json", authorization: `Bearer ${b.ownerToken}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** Waits until the broker has written every audit record it queued (at most 30 s). */
async function drainAudit(b: BrokerProc): Promise<void> {
  const t0 = performance.now();
  for (;;) {
    const h = (await fetch(`${b.apiUrl}/health`).then((r) => r.json())) as { database?: { audit_queued?: number } };
    if (!h.database?.audit_queued || performance.now() - t0 > 30_000) return;
    await Bun.sleep(10);
  }
}

// ---- 1. first token ----

interface Path {
  readonly key: "direct" | "before" | "plain" | "plainAsked" | "meteredAsked" | "metered" | "budget";
  readonly label: string;
  readonly url: string;
  readonly init: RequestInit & { proxy?: string; tls?: { ca: string } };
  /** The agent asks for the usage (stream_options.include_usage) and gets it. */
  readonly asked?: boolean;
}

interface Call {
  readonly first: number;
  readonly total: number;
}

/** One streamed completion: ms to the first content delta and to the end; the answer checked. */
async function streamOnce(p: Path): Promise<Call> {
  const t0 = performance.now();
  const res = await fetch(p.url, { ...p.init, method: "POST", headers: { "content-type": "application/json" }, body: p.asked ? BODY_ASKED : BODY });
  if (res.status !== 200 || !res.body) throw new Error(`${p.label}: HTTP ${res.status} ${await res.text()}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let first = Number.NaN;
  for (;;) {
    const next = await reader.read();
    if (next.done) break;
    const from = Math.max(0, text.length - FIRST_TOKEN.length);
    text += decoder.decode(next.value, { stream: true });
    if (Number.isNaN(first) && text.indexOf(FIRST_TOKEN, from) >= 0) first = performance.now() - t0;
  }
  const total = performance.now() - t0;
  text += decoder.decode();
  checkStream(p, text);
  return { first, total };
}

/** The agent got the reply whole, and the usage exactly when it asked for it. */
function checkStream(p: Path, text: string): void {
  if (!p.asked && text.includes('"usage"')) throw new Error(`${p.label}: the stream carries usage the agent did not ask for:\n${text.slice(-400)}`);
  if (p.asked && !text.includes('"usage":{"prompt_tokens"')) throw new Error(`${p.label}: the usage asked for is missing:\n${text.slice(-400)}`);
  if (!text.endsWith("data: [DONE]\n\n")) throw new Error(`${p.label}: the stream does not end with [DONE]:\n${text.slice(-400)}`);
  let reply = "";
  for (const line of text.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const chunk = JSON.parse(line.slice(6)) as { choices: { delta: { content?: string } }[]; usage?: unknown };
    if (p.asked && chunk.choices.length === 0 && chunk.usage) continue;
    if (chunk.choices.length !== 1) throw new Error(`${p.label}: a chunk with ${chunk.choices.length} choices: ${line}`);
    reply += chunk.choices[0]!.delta.content ?? "";
  }
  if (reply !== REPLY) throw new Error(`${p.label}: the reply arrived as ${JSON.stringify(reply)}`);
}

interface RoundStats {
  firstP50: number;
  firstP90: number;
  totalP50: number;
  totalP90: number;
}

function quantile(xs: number[], q: number): number {
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

/** Runs `calls` calls on every path, rotating which goes first, `rounds` times; per round and path, its figures. */
async function firstTokenRounds(paths: readonly Path[], calls: number, rounds: number, warmCalls: number): Promise<Map<Path["key"], RoundStats[]>> {
  for (let i = 0; i < warmCalls; i++) for (const p of paths) await streamOnce(p);
  const out = new Map<Path["key"], RoundStats[]>(paths.map((p) => [p.key, []]));
  for (let r = 0; r < rounds; r++) {
    const got = new Map<Path["key"], Call[]>(paths.map((p) => [p.key, []]));
    for (let i = 0; i < calls; i++) {
      const shift = (i + r) % paths.length;
      for (const p of [...paths.slice(shift), ...paths.slice(0, shift)]) got.get(p.key)!.push(await streamOnce(p));
    }
    for (const p of paths) {
      const c = got.get(p.key)!;
      const firsts = c.map((x) => x.first);
      const totals = c.map((x) => x.total);
      out
        .get(p.key)!
        .push({ firstP50: quantile(firsts, 0.5), firstP90: quantile(firsts, 0.9), totalP50: quantile(totals, 0.5), totalP90: quantile(totals, 0.9) });
    }
  }
  return out;
}

const ms = (x: number) => x.toFixed(3);
/** median [min–max] of per-round values. */
const spread = (xs: number[], f: (x: number) => string) => `${f(median(xs))} [${f(Math.min(...xs))}–${f(Math.max(...xs))}]`;
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

function firstTokenReport(setting: string, paths: readonly Path[], stats: Map<Path["key"], RoundStats[]>, calls: number, rounds: number): string {
  const fields = ["firstP50", "firstP90", "totalP50", "totalP90"] as const;
  const lines = [
    `### Streamed chat completion, ${setting}: ${calls} calls per path per round, ${rounds} rounds, one call at a time`,
    "",
    "ms, median [min–max] of the rounds' figures",
    "",
    "| path | first token p50 | first token p90 | whole stream p50 | whole stream p90 | first token / whole (p50) |",
    "|---|---:|---:|---:|---:|---:|",
    ...paths.map((p) => {
      const s = stats.get(p.key)!;
      const cells = fields.map((f) =>
        spread(
          s.map((x) => x[f]),
          ms,
        ),
      );
      return `| ${p.label} | ${cells.join(" | ")} | ${pct(median(s.map((x) => x.firstP50 / x.totalP50)))} |`;
    }),
    "",
    "ratios of the same round's figures, median [min–max] over the rounds",
    "",
    "| ratio | first token p50 | first token p90 | whole stream p50 | whole stream p90 |",
    "|---|---:|---:|---:|---:|",
  ];
  const ratio = (label: string, a: Path["key"], b: Path["key"]) => {
    const sa = stats.get(a)!;
    const sb = stats.get(b)!;
    const cells = fields.map((f) =>
      spread(
        sa.map((x, i) => x[f] / sb[i]![f]),
        pct,
      ),
    );
    lines.push(`| ${label} | ${cells.join(" | ")} |`);
  };
  ratio("metered / unmetered route, same broker", "metered", "plain");
  ratio("metered / pre-metering broker", "metered", "before");
  ratio("metered + vault budget / metered", "budget", "metered");
  ratio("unmetered route / direct", "plain", "direct");
  ratio("metered / direct", "metered", "direct");
  lines.push("| *where it goes:* | | | | |");
  ratio("the upstream's usage bytes: unmetered, agent asked / unmetered", "plainAsked", "plain");
  ratio("the meter: metered / unmetered, both asked by the agent", "meteredAsked", "plainAsked");
  ratio("asking and taking the usage out: metered / metered asked by the agent", "metered", "meteredAsked");
  return lines.join("\n");
}

// ---- 3. counted tokens ----

/** Input and output tokens and calls in the broker's logs for metered calls (the `llm` field). */
async function loggedUsage(b: BrokerProc): Promise<{ calls: number; input: number; output: number; unmeteredChat: number }> {
  await drainAudit(b);
  let before: string | null = null;
  const sum = { calls: 0, input: 0, output: 0, unmeteredChat: 0 };
  for (;;) {
    const page = await api(b, "GET", `/v1/vaults/${b.vault}/logs?limit=1000${before ? `&before=${before}` : ""}`);
    for (const r of page.logs as { path: string; llm?: { input_tokens: number; output_tokens: number } | null }[]) {
      if (r.llm) {
        sum.calls++;
        sum.input += r.llm.input_tokens;
        sum.output += r.llm.output_tokens;
      } else if (r.path === CHAT) sum.unmeteredChat++;
    }
    before = page.next_cursor;
    if (!before) return sum;
  }
}

/** What the fake reported to the broker holding `authorization`, in answers that carried usage (asked for). */
function reported(fake: LlmFake, authorization: string): { calls: number; input: number; output: number } {
  const sum = { calls: 0, input: 0, output: 0 };
  for (const r of fake.requests) {
    if (r.path !== CHAT || r.headers.authorization !== authorization || !r.includeUsage || !r.usage || !r.finished) continue;
    sum.calls++;
    sum.input += r.usage.input;
    sum.output += r.usage.output;
  }
  return sum;
}

// ---- in-process: the metering's own work on one answer, and what a request that is no LLM call now passes ----

/** µs per call of `f`, after a warm-up; the median of three runs. */
async function micro(n: number, f: () => unknown): Promise<number> {
  const runs: number[] = [];
  for (let r = 0; r < 3; r++) {
    for (let i = 0; i < Math.min(n, 1000); i++) await f();
    const t0 = Bun.nanoseconds();
    for (let i = 0; i < n; i++) await f();
    runs.push((Bun.nanoseconds() - t0) / n / 1000);
  }
  return median(runs);
}

async function inProcess(): Promise<string> {
  // The bytes the fake sends for the call once the broker asked for the usage.
  const fake = await startLlmFake({ text: REPLY, chunks: SETTINGS[0].chunks });
  const askedFor = askForUsage(new TextEncoder().encode(BODY));
  if (askedFor.kind !== "asked") throw new Error("in-process: the bench's body was not asked for its usage");
  const asked = askedFor.body;
  const res = await fake.fetch(`${fake.url}${CHAT}`, { method: "POST", headers: { "content-type": "application/json" }, body: Buffer.from(asked) });
  const sse = await res.text();
  await fake.close();
  const events = sse.split(/(?<=\n\n)/).map((e) => new TextEncoder().encode(e));
  const headers: [string, string][] = [["content-type", "text/event-stream; charset=utf-8"]];
  const drain = async (body: ReadableStream<Uint8Array>) => {
    const reader = body.getReader();
    for (;;) if ((await reader.read()).done) return;
  };
  const n = quick ? 2000 : 20_000;
  const rows: string[] = [];
  for (const [how, chunks] of [
    [`${events.length} chunks, one per event (a paced stream)`, events],
    ["one chunk (an answer that came at once)", [new TextEncoder().encode(sse)]],
  ] as const) {
    const streamOf = () =>
      new ReadableStream<Uint8Array>({
        start(c) {
          for (const e of chunks) c.enqueue(e);
          c.close();
        },
      });
    const asItIs = await micro(n, () => drain(streamOf()));
    const metered = await micro(n, async () => {
      const m = meterAnswer({ status: 200, statusText: "OK", headers, body: streamOf() }, { provider: "openai", stripUsage: true }, NO_NEEDLES, SHIPPED_PRICES);
      await drain(m.answer.body as ReadableStream<Uint8Array>);
      if (!(await m.settled())) throw new Error("in-process: no usage metered");
    });
    rows.push(`| ${how} | ${asItIs.toFixed(1)} | ${metered.toFixed(1)} | ${(metered - asItIs).toFixed(1)} |`);
  }
  const body = new TextEncoder().encode(BODY);
  const ask = await micro(n * 5, () => askForUsage(body));
  // A request that is no LLM call, in a vault without budgets: the route check and the budget gate's cached answer.
  const gate = createBudgetGate({ now: () => Date.now(), store: { budgets: { list: async () => [] } } } as unknown as Parameters<typeof createBudgetGate>[0], {
    trustMs: (normal) => normal,
    log: createLogger({ level: "error" }),
  });
  const charge = { vault: { id: 1, name: "bench" }, principal: "agent:1", service: "localhost:1", host: "localhost", port: 1 };
  await gate.admit(charge);
  const plainRequest = await micro(n * 5, async () => {
    if (llmRouteOf("GET", "/small") !== undefined) throw new Error("a GET metered");
    if ((await gate.admit(charge)) !== undefined) throw new Error("a ticket without budgets");
  });
  return [
    `### In-process: the metering's own work on one streamed answer (${events.length} events, ${sse.length} bytes as the fake sends it when asked for the usage)`,
    "",
    "| the answer arrives as | read as it is, µs | through meterAnswer (meter + usage filter), µs | metering, µs per call |",
    "|---|---:|---:|---:|",
    ...rows,
    "",
    `asking for the usage (askForUsage on the ${body.length}-byte request): ${ask.toFixed(2)} µs; a request that is no LLM call, in a vault without budgets (llmRouteOf and the budget gate's cached answer, awaited): ${plainRequest.toFixed(2)} µs`,
  ].join("\n");
}

// ---- the run ----

log(`building the pre-metering broker (${baselineRev})…`);
const baseline = buildBaseline(baselineRev);
const pki = await createBenchPki();
const upstream = startUpstream(pki, { countAuth: true });
const fake = await startLlmFake({ text: REPLY, aliases: { [PLAIN]: CHAT } });
const caPem = `${pki.caPem}\n${fake.caPem}`;
const ports = [upstream.port, fake.port];
const bin = ensureBinary(log);
const brokers = {
  before: await startBroker(baseline.bin, caPem, ports),
  now: await startBroker(bin, caPem, ports),
  budget: await startBroker(bin, caPem, ports),
};
const envOf = (b: BrokerProc): Env => ({ broker: b, upstreamPort: upstream.port, upstreamCa: pki.caPem });
const output: string[] = [];
try {
  await api(brokers.budget, "PUT", `/v1/vaults/${brokers.budget.vault}/budgets/everything`, { scope: "vault", period: "none", limits: { requests: 1e15 } });

  // 1.
  const via = (b: BrokerProc, path: string): Pick<Path, "url" | "init"> => ({
    url: `https://localhost:${fake.port}${path}`,
    init: { proxy: b.proxyUrl, tls: { ca: b.caPem } },
  });
  const paths: Path[] = [
    { key: "direct", label: "direct (no broker)", url: `https://localhost:${fake.port}${CHAT}`, init: { tls: { ca: fake.caPem! } } },
    { key: "before", label: `pre-metering broker (${baselineRev})`, ...via(brokers.before, CHAT) },
    { key: "plain", label: "this broker, unmetered route", ...via(brokers.now, PLAIN) },
    { key: "plainAsked", label: "this broker, unmetered route, the agent asks for usage", ...via(brokers.now, PLAIN), asked: true },
    { key: "meteredAsked", label: "this broker, metered, the agent asks for usage (nothing taken out)", ...via(brokers.now, CHAT), asked: true },
    { key: "metered", label: "this broker, metered", ...via(brokers.now, CHAT) },
    { key: "budget", label: "this broker, metered, vault budget", ...via(brokers.budget, CHAT) },
  ];
  for (const s of SETTINGS) {
    Object.assign(fake.config, { chunks: s.chunks, firstChunkDelayMs: s.firstChunkDelayMs, chunkDelayMs: s.chunkDelayMs });
    log(`streamed completions, ${s.name}…`);
    const stats = await firstTokenRounds(paths, s.calls(), size.rounds, s === SETTINGS[0] ? size.warmCalls : 10);
    output.push(firstTokenReport(s.name, paths, stats, s.calls(), size.rounds));
  }

  // 3. (before the plain rows, so the logs read hold the streamed calls only)
  const lines = ["### Tokens counted vs reported by the fake (every metered call of this run)", ""];
  for (const which of ["now", "budget"] as const) {
    const b = brokers[which];
    const counted = await loggedUsage(b);
    const fakeSaid = reported(fake, b.authorization);
    const ok = counted.calls === fakeSaid.calls && counted.input === fakeSaid.input && counted.output === fakeSaid.output;
    lines.push(
      `- ${which}: logs ${counted.calls} metered calls, ${counted.input} input + ${counted.output} output tokens; the fake reported ${fakeSaid.calls} calls, ${fakeSaid.input} + ${fakeSaid.output}: ${ok ? "equal" : "DIFFERENT"}${counted.unmeteredChat ? ` (${counted.unmeteredChat} chat calls logged without usage)` : ""}`,
    );
    if (which === "budget") {
      const used = (await api(b, "GET", `/v1/vaults/${b.vault}/budgets`)).budgets[0].used;
      const same = used.input_tokens === fakeSaid.input && used.output_tokens === fakeSaid.output;
      lines.push(
        `- the vault budget's usage: ${used.input_tokens} input + ${used.output_tokens} output tokens: ${same ? "equal to the fake's" : "DIFFERENT from the fake's"}`,
      );
    }
  }
  const words = countWords(REPLY);
  lines.push(`- (each reply is ${words} words, so ${words} output tokens by the fake's count; input ${countWords(PROMPT)} tokens)`);

  // 2.
  for (const which of ["before", "now", "budget"] as const) {
    log(`warming the ${which} broker (${size.warm} requests)…`);
    await warmUp(envOf(brokers[which]), size.warm);
  }
  log("plain requests: vault budget vs none");
  const budgetRows = await runAbRows({ base: brokers.now, changed: brokers.budget }, envOf, size, log);
  log("plain requests: this broker vs the pre-metering one");
  const beforeRows = await runAbRows({ base: brokers.before, changed: brokers.now }, envOf, size, log);
  const table = (title: string, base: string, changed: string, rows: AbRow[]) =>
    [
      `### ${title}, ${size.reps} repetitions alternating (medians of per-repetition ratios)`,
      "",
      `| row | ${base} req/s | ${changed} req/s | throughput ${changed}/${base} | ${base} p50 ms | ${changed} p50 ms | ${base} CPU ms/req | ${changed} CPU ms/req | CPU ${changed}/${base} |`,
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
      ...rows.map(
        (r) =>
          `| ${r.name} | ${abMedian(r.base, (m) => m.rps).toFixed(0)} | ${abMedian(r.changed, (m) => m.rps).toFixed(0)} | ${pct(abRatio(r, (m) => m.rps))} | ${abMedian(r.base, (m) => m.p50).toFixed(3)} | ${abMedian(r.changed, (m) => m.p50).toFixed(3)} | ${abMedian(r.base, (m) => m.cpu).toFixed(3)} | ${abMedian(r.changed, (m) => m.cpu).toFixed(3)} | ${pct(abRatio(r, (m) => m.cpu))} |`,
      ),
    ].join("\n");
  output.push(table("Plain GET /small: a vault-wide request budget vs no budget (this broker)", "none", "budget", budgetRows));
  output.push(table(`Plain GET /small, no budgets: this broker vs the pre-metering one (${baselineRev})`, "before", "now", beforeRows));

  const used = (await api(brokers.budget, "GET", `/v1/vaults/${brokers.budget.vault}/budgets`)).budgets[0].used;
  const sent = fake.requests.filter((r) => r.headers.authorization === brokers.budget.authorization).length + upstream.authCount(brokers.budget.authorization);
  lines.push(
    `- the vault budget counted ${used.requests} requests; ${sent} reached the upstreams with the budget broker's credential: ${used.requests === sent ? "equal" : "DIFFERENT"}`,
  );
  output.push(lines.join("\n"));
} finally {
  await Promise.all(Object.values(brokers).map((b) => b.stop()));
  upstream.stop();
  await fake.close();
  baseline.cleanup();
}
output.push(await inProcess());
console.log(output.join("\n\n"));
