// Attacks on per-vault budgets and LLM metering, round 2 (issue 38): the fixes of round 1 (budget-attacks.test.ts)
// attacked in turn, by a hostile agent and a hostile upstream, against an in-process broker (/proxy and the tunnel)
// and a local HTTPS server that answers as OpenAI, Anthropic and OpenAI-compatible servers do.
//
// The upstream speaks as one of several real servers, chosen per request by the test header x-upstream (a test
// device only, like round 1's x-pause-ms): "json" reads a body as JSON.parse does (OpenAI-style strict keys); "go" as
// Go's encoding/json does (keys matched case-insensitively, the last one wins: Ollama, one-api/new-api and other Go
// gateways); "lax" as pydantic's lax mode does (`1`, `"true"`, `"yes"` are true: vLLM, SGLang, LiteLLM). Its router
// finds the path as the server named in x-route does: "decode" (uvicorn/Starlette decode every escape, %2F included),
// "slash" (Express's default non-strict routing ignores a trailing slash), "ci" (case-insensitive routers).
//
// Round 2 found each of these open; each is closed now, and its test says what the broker does instead:
// - a key another server reads as `stream` / `stream_options` / `include_usage` but spelled otherwise, or a `stream`
//   that is not a plain boolean: not guessed (refused under a token or money budget);
// - paths the upstream routes but the meter did not match (%2F, a trailing slash, upper case): matched loosely;
// - an agent that hangs up long before the stream's end: charged an estimate (the record keeps none);
// - an answer in a content coding: decoded as it passes, so a cut stream keeps its usage, a large one its edges;
// - OpenAI background responses and batches, and WebSocket upgrades: refused under a token or money budget;
// - a budget raised or reset while a request is being judged: no longer remembered as spent on the old limit, and a
//   count taken back never goes below nothing;
// - a graceful shutdown waits for the records of answers whose usage is being drained;
// - a hostile upstream's 1-byte chunks: copied into one growing buffer, not held one object each.
// DEFENDED (each passes now, and would fail without the defence it names): see the describe blocks below.

import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as http2 from "node:http2";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGzip, constants as zc, gzipSync } from "node:zlib";
import type { IncomingMessage, ServerResponse } from "node:http";
import { heapStats } from "bun:jsc";
import fc from "fast-check";
import { loadConfig } from "../../src/config.ts";
import { createMemoryLogger } from "../../src/log.ts";
import { startServer, type RunningServer } from "../../src/app/start.ts";
import { topLevelMembers } from "../../src/egress/json-members.ts";
import { askForUsage } from "../../src/egress/llm-request.ts";
import { createUsageMeter } from "../../src/egress/llm-usage.ts";
import { CHEAP_KDF } from "../helpers/api.ts";
import { h2Tls } from "../helpers/h2-frames.ts";
import { pgMissing, sharedPgCluster } from "../helpers/postgres.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";
import { basicProxyAuth, dialProxy, openTunnel, sendConnect } from "./tunnel-fixture.ts";

const SECRET = `sk-proj-${crypto.randomUUID()}${crypto.randomUUID()}`.slice(0, 72);

let broker: Broker;
let upstream: TestUpstream;
let ws: ReturnType<typeof Bun.serve>;
let hooks: ReturnType<typeof Bun.serve>;
let hp = "";
let wsHp = "";
let caPem = "";
const hookBodies: string[] = [];

/** What the upstream saw of each LLM call, as the server it played read it. */
interface Seen {
  path: string;
  stream: boolean;
  includeUsage: boolean;
  started: number;
  closed?: number;
  cut: boolean;
}
const seen: Seen[] = [];
const wsUpgrades: string[] = [];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------------------
// The upstream
// ---------------------------------------------------------------------------------------------------------------

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** A member of an object as Go's encoding/json finds it for a struct field: keys matched case-insensitively, last wins. */
function goMember(o: unknown, key: string): unknown {
  let found: unknown;
  if (o && typeof o === "object" && !Array.isArray(o)) for (const [k, v] of Object.entries(o)) if (k.toLowerCase() === key) found = v;
  return found;
}

/** A bool as pydantic's lax mode reads it. */
function laxBool(v: unknown): boolean {
  return v === true || v === 1 || (typeof v === "string" && ["1", "true", "yes", "on", "t", "y"].includes(v.toLowerCase()));
}

/** The path the server in x-route routes on. */
function routed(url: string, how: string): string {
  let p = url.split("?")[0]!;
  if (how.includes("decode")) p = decodeURIComponent(p);
  if (how.includes("slash")) p = p.replace(/(.)\/+$/, "$1");
  if (how.includes("ci")) p = p.toLowerCase();
  return p;
}

const USAGE = { prompt_tokens: 40, completion_tokens: 10, total_tokens: 50 };

async function handle(req: IncomingMessage, res: ServerResponse, raw: Buffer): Promise<void> {
  const path = routed(req.url ?? "/", header(req, "x-route") ?? "");
  const parser = header(req, "x-upstream") ?? "json";
  let body: any;
  try {
    body = JSON.parse(raw.toString("utf8"));
  } catch {
    body = undefined;
  }
  const read =
    parser === "go"
      ? { stream: goMember(body, "stream") === true, includeUsage: goMember(goMember(body, "stream_options"), "include_usage") === true }
      : parser === "lax"
        ? { stream: laxBool(body?.stream), includeUsage: laxBool(body?.stream_options?.include_usage) }
        : { stream: body?.stream === true, includeUsage: body?.stream_options?.include_usage === true };
  const entry: Seen = { path, ...read, started: Date.now(), cut: false };
  res.on("close", () => {
    entry.closed = Date.now();
    if (!res.writableFinished) entry.cut = true;
  });
  const pauseMs = Number(header(req, "x-pause-ms") ?? 0);
  const headDelay = Number(header(req, "x-head-delay") ?? 0);
  const gzip = header(req, "x-gzip") === "1" && /gzip/.test(header(req, "accept-encoding") ?? "");

  if (path === "/v1/chat/completions" && req.method === "POST") {
    seen.push(entry);
    if (headDelay) await sleep(headDelay);
    const model = header(req, "x-model") ?? "gpt-4o-mini";
    if (!read.stream) {
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          id: "chatcmpl-1",
          object: "chat.completion",
          model,
          choices: [{ index: 0, message: { role: "assistant", content: "hi" } }],
          usage: USAGE,
        }),
      );
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
    const line = (x: object) => `data: ${JSON.stringify(x)}\n\n`;
    const base = { id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model };
    const nul = read.includeUsage ? { usage: null } : {};
    const pieces = Number(header(req, "x-pieces") ?? 3);
    const every = Number(header(req, "x-every-ms") ?? 0);
    for (let i = 0; i < pieces; i++) {
      if (res.destroyed) return;
      res.write(line({ ...base, choices: [{ index: 0, delta: { content: `word${i} ` }, finish_reason: null }], ...nul }));
      if (every) await sleep(every);
    }
    res.write(line({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }], ...nul }));
    if (pauseMs) await sleep(pauseMs);
    if (res.destroyed) return;
    if (read.includeUsage) res.write(line({ ...base, choices: [], usage: USAGE }));
    res.end("data: [DONE]\n\n");
    return;
  }

  if (path === "/v1/messages" && req.method === "POST") {
    // Anthropic's stream; gzip-coded when the agent accepts it and x-gzip asks (a server or CDN that compresses
    // event streams, flushing each event).
    seen.push(entry);
    const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const head: Record<string, string> = { "content-type": "text/event-stream; charset=utf-8" };
    let write = (s: string) => void res.write(s);
    let end = (s: string) => void res.end(s);
    if (gzip) {
      head["content-encoding"] = "gzip";
      const z = createGzip();
      z.on("data", (d: Buffer) => res.write(d));
      z.on("end", () => res.end());
      res.on("close", () => z.destroy());
      write = (s) => {
        z.write(s);
        z.flush(zc.Z_SYNC_FLUSH);
      };
      end = (s) => void z.end(s);
    }
    res.writeHead(200, head);
    write(
      ev("message_start", {
        message: {
          id: "msg_1",
          type: "message",
          role: "assistant",
          model: "claude-sonnet-4-5-20250929",
          content: [],
          usage: { input_tokens: 25, output_tokens: 1 },
        },
      }),
    );
    write(ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "The whole answer." } }));
    if (header(req, "x-cut")) {
      await sleep(50);
      res.destroy();
      return;
    }
    write(ev("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 15 } }));
    if (pauseMs) await sleep(pauseMs);
    if (res.destroyed) return;
    end(ev("message_stop", {}));
    return;
  }

  if (path === "/v1/embeddings" && req.method === "POST") {
    // base64 float32 vectors (encoding_format: "base64", what the OpenAI SDKs ask for by default): they barely compress.
    seen.push(entry);
    const n = Array.isArray(body?.input) ? body.input.length : 1;
    const vectors: string[] = [];
    for (let i = 0; i < n; i++) {
      const v = Buffer.alloc(1536 * 4);
      for (let j = 0; j < 1536; j++) v.writeFloatLE((Math.random() - 0.5) / 10, j * 4);
      vectors.push(`{"object":"embedding","index":${i},"embedding":"${v.toString("base64")}"}`);
    }
    const text = `{"object":"list","data":[${vectors.join(",")}],"model":"text-embedding-3-small","usage":{"prompt_tokens":${n * 100},"total_tokens":${n * 100}}}`;
    const bytes = gzip ? gzipSync(text) : Buffer.from(text);
    res.writeHead(200, { "content-type": "application/json", "content-length": bytes.length, ...(gzip && { "content-encoding": "gzip" }) });
    res.end(bytes);
    return;
  }

  if (path === "/v1/responses" && req.method === "POST") {
    seen.push(entry);
    res.setHeader("content-type", "application/json");
    if (body?.background === true) {
      // Background mode: the model runs on the provider's side whatever the connection does; the usage is read later.
      res.end(JSON.stringify({ id: "resp_bg1", object: "response", status: "queued", background: true, model: "gpt-4.1-2025-04-14", output: [], usage: null }));
      return;
    }
    res.end(
      JSON.stringify({
        id: "resp_1",
        object: "response",
        status: "completed",
        model: "gpt-4.1-2025-04-14",
        output: [],
        usage: { input_tokens: 1000, output_tokens: 500, total_tokens: 1500 },
      }),
    );
    return;
  }
  if (path === "/v1/responses/resp_bg1" && req.method === "GET") {
    res.setHeader("content-type", "application/json");
    res.end(
      JSON.stringify({
        id: "resp_bg1",
        object: "response",
        status: "completed",
        background: true,
        model: "gpt-4.1-2025-04-14",
        output: [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "The long report." }] }],
        usage: { input_tokens: 1000, output_tokens: 500, total_tokens: 1500 },
      }),
    );
    return;
  }

  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ ok: true, path }));
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

const budgetPath = (b: Broker, name: string) => `/v1/vaults/${b.vault}/budgets/${name}`;

async function setBudget(name: string, body: Record<string, unknown>, b: Broker = broker): Promise<void> {
  const r = await b.api("PUT", budgetPath(b, name), { scope: "vault", period: "day", ...body }, b.userToken);
  if (r.status !== 200 && r.status !== 201) throw new Error(`PUT budget ${name}: ${r.status} ${JSON.stringify(r.body)}`);
}

async function removeBudget(name: string, b: Broker = broker): Promise<void> {
  await b.api("DELETE", budgetPath(b, name), undefined, b.userToken);
}

/** The budget's usage this period, once `settled` holds of it (or `waitMs` passed: whatever it is then). */
async function used(name: string, settled: (u: any) => boolean = () => true, b: Broker = broker, waitMs = 2500): Promise<any> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const r = await b.api("GET", `/v1/vaults/${b.vault}/budgets`, undefined, b.userToken);
    const found = r.status === 200 ? r.body.budgets.find((x: { name: string }) => x.name === name) : undefined;
    if (!found) throw new Error(`GET budgets (${name}): ${r.status} ${JSON.stringify(r.body)}`);
    if (settled(found.used) || Date.now() > deadline) return found.used;
    await sleep(50);
  }
}

async function withBudget<T>(name: string, body: Record<string, unknown>, fn: () => Promise<T>): Promise<T> {
  await setBudget(name, body);
  try {
    return await fn();
  } finally {
    await removeBudget(name);
  }
}

function chat(path: string, body: object | string | Uint8Array, headers: Record<string, string> = {}, init: RequestInit = {}): Promise<Response> {
  const payload = typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body);
  return broker.proxy(hp, path, { method: "POST", body: payload as BodyInit, headers: { "content-type": "application/json", ...headers }, ...init });
}

const MESSAGES = [{ role: "user", content: "hi" }];
const STREAMED = { model: "gpt-4o-mini", messages: MESSAGES, stream: true };

/** A streamed call: answered in full and counted exactly (50 tokens), or refused before it reached the upstream. */
async function countedOrRefused(name: string, send: () => Promise<Response>): Promise<{ status: number; upstreamStreamed: boolean; counted: number }> {
  const before = seen.length;
  const res = await send();
  await res.text().catch(() => "");
  const reached = seen.length > before;
  // These streams end normally: their usage, when there is any, is settled within milliseconds.
  const u = await used(name, (x) => x.total_tokens > 0, broker, reached ? 1000 : 0);
  return { status: res.status, upstreamStreamed: reached && seen.at(-1)!.stream, counted: reached ? u.total_tokens : 50 };
}

/** Reads a stream until `stop(text)` holds, then hangs up. */
async function readThenDrop(res: Response, ctrl: AbortController, stop: (text: string) => boolean): Promise<string> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += dec.decode(value, { stream: true });
    if (stop(text)) {
      ctrl.abort();
      await reader.cancel().catch(() => {});
      return text;
    }
  }
}

/** How many audit records there are once those of earlier requests are written (the writer flushes every 250 ms). */
async function auditMark(): Promise<number> {
  await sleep(400);
  return (await broker.auditLogs()).length;
}

/** The records written since `mark` (auditMark). */
async function auditSince(mark: number): Promise<any[]> {
  await sleep(400);
  const all = await broker.auditLogs(); // newest first
  return all.slice(0, all.length - mark);
}

const proxyPort = () => Number(broker.proxyAddress!.split(":").at(-1));
const proxyAuth = () => basicProxyAuth(broker.sessionToken, broker.vault);

async function brokerCa(): Promise<string> {
  return await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text();
}

beforeAll(async () => {
  upstream = await startUpstream((req, res, body) => {
    handle(req, res, body).catch((err) => {
      res.destroy();
      console.error("upstream handler failed", err);
    });
  });
  caPem = upstream.pki.caPem;
  ws = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    tls: { cert: upstream.pki.certPem, key: upstream.pki.keyPem },
    fetch(req, srv) {
      wsUpgrades.push(new URL(req.url).pathname);
      return srv.upgrade(req, { data: undefined }) ? undefined : new Response("upgrade required", { status: 426 });
    },
    websocket: {
      // The Realtime API's shape: each response ends with response.done, carrying its usage.
      message(socket) {
        socket.send(
          JSON.stringify({ type: "response.done", response: { status: "completed", usage: { total_tokens: 5000, input_tokens: 4000, output_tokens: 1000 } } }),
        );
      },
    },
  });
  hooks = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      hookBodies.push(`${JSON.stringify([...req.headers])}\n${await req.text()}`);
      return new Response("ok");
    },
  });
  broker = await startBroker({ caPem, tunnel: true, env: { BROKER_METRICS: "true" } });
  broker.dns.set("upstream.test", ["127.0.0.1"]);
  hp = `upstream.test:${upstream.port}`;
  wsHp = `upstream.test:${ws.port}`;
  await broker.setCredential("OPENAI_KEY", SECRET);
  for (const h of [hp, wsHp]) await broker.addService(h, { type: "bearer", token: "OPENAI_KEY" });
}, 60_000);

afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
  ws?.stop(true);
  hooks?.stop(true);
});

// ---------------------------------------------------------------------------------------------------------------
// HOLES: streamed chat completions the broker does not ask for their usage
// ---------------------------------------------------------------------------------------------------------------

describe("a stream the upstream reads from a body the broker reads otherwise", () => {
  test("keys a Go server matches case-insensitively ('Stream', 'Stream_Options', 'Include_Usage') stream without the usage", async () => {
    await withBudget("go-keys", { limits: { total_tokens: 1_000_000 } }, async () => {
      const bodies = [
        // The broker sees no `stream`; Go's encoding/json sets Stream from "Stream".
        `{"model":"gpt-4o-mini","messages":[],"Stream":true}`,
        // The broker adds stream_options first; Go keeps the last key that folds to it.
        `{"model":"gpt-4o-mini","messages":[],"stream":true,"Stream_Options":{"include_usage":false}}`,
        // JSON.parse keeps include_usage: true (nothing to ask); Go keeps the last spelling, false.
        `{"model":"gpt-4o-mini","messages":[],"stream":true,"stream_options":{"include_usage":true,"Include_Usage":false}}`,
      ];
      const got = [];
      for (const body of bodies) {
        await removeBudget("go-keys");
        await setBudget("go-keys", { limits: { total_tokens: 1_000_000 } });
        got.push(await countedOrRefused("go-keys", () => chat("/v1/chat/completions", body, { "x-upstream": "go" })));
      }
      // Should: each is asked for its usage (keys compared as the upstream may compare them: case-folded, every
      // spelling rewritten) and counted 50, or refused as unreadable. Now: the upstream streams, no usage, 0 counted.
      expect(got.map((g) => g.counted)).toEqual([50, 50, 50]);
    });
  }, 30_000);

  test('lax booleans ("stream": 1, "true", "yes") stream without the usage on a pydantic server', async () => {
    await withBudget("lax-bools", { limits: { total_tokens: 1_000_000 } }, async () => {
      const got = [];
      for (const v of ["1", '"true"', '"yes"']) {
        await removeBudget("lax-bools");
        await setBudget("lax-bools", { limits: { total_tokens: 1_000_000 } });
        got.push(
          await countedOrRefused("lax-bools", () =>
            chat("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[],"stream":${v}}`, { "x-upstream": "lax" }),
          ),
        );
      }
      expect(got.every((g) => g.upstreamStreamed || g.status >= 400)).toBe(true);
      // Should: any `stream` that is not literally false or null is treated as a stream (asked, or refused under a
      // token budget). Now: only the literal `true` is.
      expect(got.map((g) => g.counted)).toEqual([50, 50, 50]);
    });
  }, 30_000);

  test("chat completion paths the upstream routes but the meter does not match (%2F, trailing slash, upper case)", async () => {
    const got: Record<string, number> = {};
    for (const [path, route] of [
      ["/v1/chat%2Fcompletions", "decode"], // uvicorn/Starlette (vLLM, LiteLLM, SGLang) decode %2F before routing
      ["/v1/chat/completions/", "slash"], // Express's default routing
      ["/V1/CHAT/COMPLETIONS", "ci"], // case-insensitive routers
    ] as const) {
      await withBudget("spelled", { limits: { total_tokens: 1_000_000 } }, async () => {
        got[path] = (await countedOrRefused("spelled", () => chat(path, STREAMED, { "x-route": route }))).counted;
      });
    }
    // Should: a path that names a metered route in any spelling a server routes is metered (or refused under a token
    // budget when the broker cannot tell). Now: 0 tokens each.
    expect(got).toEqual({ "/v1/chat%2Fcompletions": 50, "/v1/chat/completions/": 50, "/V1/CHAT/COMPLETIONS": 50 });
  }, 30_000);

  test("OpenAI background responses spend tokens no budget sees", async () => {
    await withBudget("background", { limits: { total_tokens: 1_000_000 } }, async () => {
      const started = await chat("/v1/responses", { model: "gpt-4.1", input: "write a long report", background: true });
      const queued = await started.json();
      const polled = await broker.proxy(hp, `/v1/responses/${queued.id ?? "resp_bg1"}`);
      const done = await polled.json().catch(() => ({}));
      const u = await used("background", (x) => x.total_tokens > 0);
      // Should: a call whose usage the broker cannot see is refused under a token or money budget (as an unaskable chat
      // completion is), or its usage is counted where it is read. Now: the report is written and read, 0 tokens counted.
      expect(started.status === 200 && done.status === "completed" ? u.total_tokens : 1500).toBe(1500);
    });
  }, 30_000);
});

// ---------------------------------------------------------------------------------------------------------------
// HOLES: the drain and the usage of a stream that does not end
// ---------------------------------------------------------------------------------------------------------------

describe("what a stream that does not end is charged", () => {
  test("an agent that hangs up more than 2 s before the end is charged nothing for the text it read", async () => {
    await withBudget("early-drop", { limits: { total_tokens: 1 } }, async () => {
      const statuses: number[] = [];
      const texts: string[] = [];
      for (let i = 0; i < 3; i++) {
        // A long answer (60 chunks, one every 100 ms); the agent reads 10 of them and hangs up.
        const ctrl = new AbortController();
        const res = await chat("/v1/chat/completions", STREAMED, { "x-pieces": "60", "x-every-ms": "100" }, { signal: ctrl.signal });
        statuses.push(res.status);
        if (res.status !== 200) {
          await res.text();
          continue;
        }
        texts.push(await readThenDrop(res, ctrl, (t) => t.includes("word9 ")));
        await sleep(2800); // the drain is over, the upstream let go
      }
      expect(texts[0]).toContain("word9");
      const u = await used("early-drop");
      // Should: the first call is charged something (the tokens it read at least: each content chunk is a token, or
      // the request's max_tokens when no usage comes), so the limit of 1 token refuses the next ones. Now: every call
      // goes and counts 0 (the usage comes only at the end, after the drain gave up).
      expect({ statuses, countedSomething: u.total_tokens > 0 }).toEqual({ statuses: [200, 429, 429], countedSomething: true });
    });
  }, 30_000);

  test("a gzip-coded stream that is cut, or hung up on, loses the usage it carried", async () => {
    const got: Record<string, number> = {};
    for (const gz of ["0", "1"]) {
      await withBudget(`cut-${gz}`, { limits: { total_tokens: 1_000_000 } }, async () => {
        const res = await broker.proxy(hp, "/v1/messages", {
          method: "POST",
          headers: { "content-type": "application/json", "accept-encoding": "gzip", "x-gzip": gz, "x-cut": "1" },
          body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 100, stream: true, messages: MESSAGES }),
        });
        await res.text().catch(() => "");
        got[`cut, gzip=${gz}`] = (await used(`cut-${gz}`, (x) => x.input_tokens > 0)).input_tokens;
      });
      await withBudget(`drop-${gz}`, { limits: { total_tokens: 1_000_000 } }, async () => {
        const ctrl = new AbortController();
        const res = await broker.proxy(hp, "/v1/messages", {
          method: "POST",
          signal: ctrl.signal,
          headers: { "content-type": "application/json", "accept-encoding": "gzip", "x-gzip": gz, "x-pause-ms": "3000" },
          body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 100, stream: true, messages: MESSAGES }),
        });
        const text = await readThenDrop(res, ctrl, (t) => t.includes("end_turn"));
        expect(text).toContain('"output_tokens":15');
        await sleep(2600);
        got[`hung up, gzip=${gz}`] = (await used(`drop-${gz}`, (x) => x.total_tokens > 0)).total_tokens;
      });
    }
    // Should: the same whatever the coding (decode as it streams, so a cut body's usage is read as the plain one's).
    expect(got).toEqual({ "cut, gzip=0": 25, "hung up, gzip=0": 40, "cut, gzip=1": 25, "hung up, gzip=1": 40 });
  }, 30_000);

  test("an embeddings answer over 8 MiB in gzip is not read at its edges (150,000 tokens uncounted)", async () => {
    const got: Record<string, number> = {};
    for (const gz of ["0", "1"]) {
      await withBudget(`big-${gz}`, { limits: { total_tokens: 100_000_000 } }, async () => {
        const input = Array.from({ length: 1500 }, (_, i) => `document ${i}`);
        const res = await chat(
          "/v1/embeddings",
          { model: "text-embedding-3-small", input, encoding_format: "base64" },
          { "accept-encoding": "gzip", "x-gzip": gz },
        );
        expect(res.status).toBe(200);
        await res.arrayBuffer();
        got[`gzip=${gz}`] = (await used(`big-${gz}`, (x) => x.total_tokens > 0)).total_tokens;
      });
    }
    // Should: 150,000 both ways (decode as the body streams, keeping the decoded edges). Now: the coded copy is dropped
    // past 8 MiB, so the coded answer counts 0.
    expect(got).toEqual({ "gzip=0": 150_000, "gzip=1": 150_000 });
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------------------------
// WebSockets under a token budget
// ---------------------------------------------------------------------------------------------------------------

describe("a Realtime WebSocket under a token budget", () => {
  test("the upgrade goes and its tokens are never counted", async () => {
    await withBudget("ws-tokens", { limits: { total_tokens: 100 } }, async () => {
      const proxy = `http://${broker.sessionToken}:${broker.vault}@${broker.proxyAddress}`;
      const socket = new WebSocket(`wss://${wsHp}/v1/realtime?model=gpt-realtime`, { proxy, tls: { ca: await brokerCa() } } as unknown as string[]);
      const opened = await new Promise<boolean>((resolve) => {
        socket.onopen = () => resolve(true);
        socket.onerror = () => resolve(false);
        socket.onclose = () => resolve(false);
        setTimeout(() => resolve(false), 5000);
      });
      let usageSeen = 0;
      if (opened) {
        for (let i = 0; i < 3; i++) {
          const done = new Promise<void>((resolve) => {
            socket.onmessage = (m) => {
              usageSeen += JSON.parse(String(m.data)).response.usage.total_tokens;
              resolve();
            };
          });
          socket.send(JSON.stringify({ type: "response.create" }));
          await done;
        }
      }
      socket.close();
      await sleep(300);
      const u = await used("ws-tokens");
      // Should: under a token or money budget an upgrade whose frames are not metered is refused (as an unaskable chat
      // completion is), or its response.done usage is counted. Now: it opens, 15,000 tokens pass, 0 are counted.
      expect(opened ? u.total_tokens : usageSeen).toBe(usageSeen);
    });
  }, 30_000);
});

// ---------------------------------------------------------------------------------------------------------------
// the "spent" memory outlives the change that should clear it
// ---------------------------------------------------------------------------------------------------------------

describe("a budget raised or reset while a request is being judged stays refused", () => {
  for (const change of ["raise", "reset"] as const) {
    test(`${change}: requests after it are refused until the next change or period`, async () => {
      const get = async () => {
        const r = await broker.proxy(hp, "/v1/models");
        await r.text();
        return r.status;
      };
      const repo = broker.server.store.budgets as { add: (...args: any[]) => Promise<any> };
      const original = repo.add;
      await setBudget("edge", { limits: { requests: 2 } });
      try {
        expect([await get(), await get()]).toEqual([200, 200]);
        // One request is counted (3 of 2) and, a database round trip later, judged; the person's change lands in
        // between (on PostgreSQL the round trip is real; here the store's answer is held back to line them up).
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        let armed = true;
        repo.add = async function (this: unknown, ...args: any[]) {
          const out = await original.apply(repo, args);
          if (armed) {
            armed = false;
            await gate;
          }
          return out;
        };
        const inFlight = get();
        await sleep(100);
        if (change === "raise") await setBudget("edge", { limits: { requests: 100 } });
        else expect((await broker.api("POST", `${budgetPath(broker, "edge")}/reset`, undefined, broker.userToken)).status).toBe(200);
        release();
        await inFlight;
        repo.add = original;
        await sleep(200);
        const after = [await get(), await get(), await get()];
        const count = (await used("edge", (x) => x.requests >= (change === "raise" ? 3 : 2))).requests;
        // Should: the change drops the memory and no judgement begun before it puts it back: the next requests go
        // (and the count the reset started again is never below 0). Now: 429 for the rest of the day, with the old limit;
        // after a reset the count is -1.
        // (After a reset the limit is still 2: two requests go, the third is refused by the count, not by a memory.)
        expect({ after, count }).toEqual(change === "raise" ? { after: [200, 200, 200], count: 5 } : { after: [200, 200, 429], count: 2 });
      } finally {
        repo.add = original;
        await removeBudget("edge");
      }
    }, 30_000);
  }
});

// ---------------------------------------------------------------------------------------------------------------
// a graceful shutdown during a drain
// ---------------------------------------------------------------------------------------------------------------

describe("a shutdown within the drain", () => {
  test("keeps the audit record and the usage of a request whose agent just hung up", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "budget-attacks-2-"));
    const b = await startBroker({ caPem, env: { BROKER_DATA_DIR: dataDir } });
    try {
      b.dns.set("upstream.test", ["127.0.0.1"]);
      await b.setCredential("OPENAI_KEY", SECRET);
      await b.addService(hp, { type: "bearer", token: "OPENAI_KEY" });
      await setBudget("shutdown", { limits: { total_tokens: 1_000_000 } }, b);
      const ctrl = new AbortController();
      const res = await b.proxy(hp, "/v1/chat/completions", {
        method: "POST",
        signal: ctrl.signal,
        headers: { "content-type": "application/json", "x-pause-ms": "1000" },
        body: JSON.stringify(STREAMED),
      });
      expect(res.status).toBe(200);
      await readThenDrop(res, ctrl, (t) => t.includes('"finish_reason":"stop"'));
      await sleep(50);
      // A graceful stop with time to spare (a rolling deploy): the answer was sent, the agent is gone.
      await b.server.stop({ graceMs: 5000 });
      await sleep(3500);
      const lost = b.logLines
        .filter((l) => /"event":"(audit_write_failed|audit_journal_write_failed|budget_count_failed)"/.test(l))
        .map((l) => JSON.parse(l).event);
      // The shutdown waits (within its grace) for the drains under way: the record reaches the database (the journal
      // is emptied once it did), with its usage, and the budget its tokens.
      const db = new Database(join(dataDir, "broker.db"), { readonly: true });
      const rows = db.query("SELECT input_tokens AS i, output_tokens AS o FROM audit_logs WHERE path = '/v1/chat/completions'").all() as {
        i: number;
        o: number;
      }[];
      const usage = db.query("SELECT total_tokens AS t FROM budget_usage").all() as { t: number }[];
      db.close();
      expect({ rows: rows.length, counted: rows[0]?.i !== null && rows[0]?.i !== undefined, budget: usage[0]?.t ?? 0, lost }).toEqual({
        rows: 1,
        counted: true,
        budget: rows[0] ? rows[0].i + rows[0].o : -1,
        lost: [],
      });
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      await b.stop().catch(() => {});
    }
  }, 30_000);
});

// ---------------------------------------------------------------------------------------------------------------
// a hostile upstream's tiny chunks
// ---------------------------------------------------------------------------------------------------------------

describe("the JSON meter's memory per chunk", () => {
  test("an answer in 1-byte chunks is held as one object per byte", () => {
    // The upstream client hands on each HTTP chunk as its own Uint8Array ("1\r\nx\r\n": 6 bytes on the wire each);
    // the JSON meter copies each into a list (and the first and last 64 KiB into two more), so 8 MiB of such an answer
    // holds ~8.1 million objects (~1 GB measured) and its end concatenates them on the event loop (~2.4 s).
    const count = () => {
      Bun.gc(true);
      return heapStats().objectTypeCounts.Uint8Array ?? 0;
    };
    const before = count();
    const meter = createUsageMeter("openai", "application/json")!;
    const enc = new TextEncoder();
    meter.push(enc.encode('{"model":"gpt-4o-mini","choices":[{"message":{"content":"'));
    const one = enc.encode("x");
    for (let i = 0; i < 200_000; i++) meter.push(one);
    meter.push(enc.encode('"}}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}'));
    const held = count() - before;
    expect(meter.finish()?.totalTokens).toBe(10);
    // Should: a few buffers (the copy grows in place, edges kept as two buffers). Now: ~330,000 objects for 200 KB.
    expect(held).toBeLessThan(1000);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// DEFENDED: the request body scanner and the rewrite
// ---------------------------------------------------------------------------------------------------------------

const WANTED: ReadonlySet<string> = new Set(["stream", "stream_options"]);

describe("defended: json-members.ts and askForUsage agree with JSON.parse on every valid body", () => {
  // Top-level keys include the wanted ones, their escaped spellings and near misses; values include strings with
  // brackets and quotes, deep nesting, numbers in every form, full Unicode; members are separated by any JSON white space.
  const keyText = fc.oneof(
    fc
      .constantFrom(
        '"stream"',
        '"stream_options"',
        '"\\u0073tream"',
        '"stream\\u005foptions"',
        '"\\u0073\\u0074\\u0072\\u0065\\u0061\\u006d"',
        '"str\\u0065am"',
        '"stream "',
        '"Stream"',
        '"\\\\stream"',
        '"stream\\"',
        '"include_usage"',
        '"model"',
      )
      .filter((k) => k !== '"stream\\"'),
    fc.string({ unit: "binary", maxLength: 8 }).map((s) => JSON.stringify(s)),
  );
  const scalar = fc.oneof(
    fc.constantFrom("true", "false", "null", "1", "0", "1e5", "-0", "1.0", "1E-2", '"true"', '"]}"', '"\\"}"', '"{\\"stream\\":true}"', "[]", "{}"),
    fc.constantFrom('{"include_usage":true}', '{"include_usage":false}', '{"include_usage":true,"include_usage":false}', '{"include_usage":1,"x":[{"}":"]"}]}'),
    fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
  );
  const value: fc.Arbitrary<string> = fc.letrec((tie) => ({
    v: fc.oneof(
      { depthSize: "small" },
      scalar,
      fc.array(tie("v"), { maxLength: 3 }).map((a) => `[${a.join(",")}]`),
      fc.array(fc.tuple(keyText, tie("v")), { maxLength: 3 }).map((m) => `{${m.map(([k, v]) => `${k}:${v}`).join(",")}}`),
    ),
  })).v as fc.Arbitrary<string>;
  const space = fc.constantFrom("", " ", "\n", "\t", "\r\n ", "  \t");
  const body = fc
    .tuple(space, fc.array(fc.tuple(space, keyText, space, space, value, space), { maxLength: 6 }), space)
    .map(([a, members, b]) => `${a}{${members.map(([w1, k, w2, w3, v, w4]) => `${w1}${k}${w2}:${w3}${v}${w4}`).join(",")}}${b}`);

  test("the last `stream` and `stream_options` found are JSON.parse's; the rewrite is the body with include_usage", () => {
    fc.assert(
      fc.property(body, (text) => {
        const parsed = JSON.parse(text) as Record<string, unknown>;
        const members = topLevelMembers(text, WANTED);
        expect(members).toBeDefined();
        for (const key of WANTED) {
          const last = members!.findLast((m) => m.key === key);
          expect(last ? JSON.parse(text.slice(last.start, last.end)) : undefined).toEqual(Object.hasOwn(parsed, key) ? parsed[key] : undefined);
        }
        const asked = askForUsage(new TextEncoder().encode(text));
        const options = parsed.stream_options;
        const given = options && typeof options === "object" && !Array.isArray(options) ? (options as Record<string, unknown>) : {};
        // What another server might read otherwise is not guessed (round 2): a key that folds to one of these but is
        // spelled otherwise (Go matches keys case-insensitively), or a `stream` that is not a plain boolean (pydantic).
        const fold = (k: string) =>
          k
            .replace(/\u017f/g, "s")
            .replace(/\u212a/g, "k")
            .toLowerCase();
        const misspelled = (o: Record<string, unknown>, names: string[]) => Object.keys(o).some((k) => names.includes(fold(k)) && !names.includes(k));
        const stream = parsed.stream;
        const expected =
          misspelled(parsed, ["stream", "stream_options"]) ||
          (stream !== undefined && stream !== null && typeof stream !== "boolean") ||
          (stream === true && misspelled(given, ["include_usage"]))
            ? "unreadable"
            : stream === true && given.include_usage !== true
              ? "asked"
              : "as-is";
        expect(asked.kind).toBe(expected);
        if (asked.kind === "asked") {
          const sent = JSON.parse(new TextDecoder().decode(asked.body));
          expect(sent).toEqual({ ...parsed, stream_options: { ...given, include_usage: true } });
        }
      }),
      { numRuns: 20_000, seed: 38 },
    );
  });

  test("escaped keys, duplicates, strings with brackets and a BOM reach a JSON.parse upstream asked, and are counted", async () => {
    await withBudget("spellings", { limits: { total_tokens: 1_000_000 } }, async () => {
      const bodies = [
        '{"\\u0073tream":true,"model":"gpt-4o-mini","messages":[]}',
        '{"stream":false,"messages":[{"role":"user","content":"\\"stream\\":true}]{"}],"s\\u0074ream":true}',
        '{"stream":true,"stream_options":{"include_usage":true},"stream\\u005foptions":{"include_usage":false}}',
        '\ufeff {"model":"gpt-4o-mini","stream" :\ttrue , "messages":[]}',
        '{"stream":true,"stream_options":{"include_usage":false,"x":{"}":"]"}},"messages":[]}',
      ];
      for (const body of bodies) {
        const res = await chat("/v1/chat/completions", body);
        expect(res.status).toBe(200);
        const text = await res.text();
        expect(text).toContain("[DONE]");
        expect(text).not.toContain('"usage"'); // taken out again
        expect(seen.at(-1)!.includeUsage).toBe(true);
      }
      expect(await used("spellings", (x) => x.total_tokens >= 250)).toMatchObject({ requests: 5, total_tokens: 250 });
    });
  }, 30_000);

  test("bodies it cannot read (UTF-16, UTF-32, an array, invalid UTF-8) are refused under a token budget before the upstream", async () => {
    await withBudget("unreadable", { limits: { total_tokens: 1_000_000 } }, async () => {
      const json = JSON.stringify(STREAMED);
      const utf16 = Buffer.from(`\ufeff${json}`, "utf16le");
      const utf32 = new Uint8Array(new Uint32Array([...json].map((c) => c.codePointAt(0)!)).buffer);
      const bodies: Uint8Array[] = [
        utf16,
        Buffer.from(json, "utf16le"),
        utf32,
        Buffer.from(`[${json}]`),
        Buffer.concat([Buffer.from(json.slice(0, -1)), Buffer.from([0xc0, 0xaf, 0x7d])]),
      ];
      const before = seen.length;
      const statuses = [];
      for (const b of bodies) {
        const res = await chat("/v1/chat/completions", b);
        await res.text();
        statuses.push(res.status);
      }
      // Without the refusal (stage-budget.ts, meter.unasked) each would reach the upstream, which may well read it
      // (Python's json.loads detects UTF-16 and UTF-32), and stream uncounted.
      expect({ statuses, reached: seen.length - before }).toEqual({ statuses: [400, 400, 400, 400, 400], reached: 0 });
    });
  }, 30_000);
});

// ---------------------------------------------------------------------------------------------------------------
// DEFENDED: every way a metered stream ends writes one record and settles its budget; the drain is bounded
// ---------------------------------------------------------------------------------------------------------------

describe("defended: one audit record, the usage counted, the upstream let go within the drain", () => {
  test("HTTP/2 through the tunnel: RST_STREAM after the text, RST_STREAM before the head, the connection dropped, a normal end", async () => {
    const ca = await brokerCa();
    const session = async () => {
      const sock = await dialProxy(proxyPort());
      const r = await sendConnect(sock, hp, proxyAuth());
      if (r.status !== 200) throw new Error(r.head);
      const tls = await h2Tls({ socket: sock, host: "upstream.test", ca });
      const s = http2.connect(`https://${hp}`, { createConnection: () => tls });
      s.on("error", () => {});
      return s;
    };
    const results: Record<string, unknown> = {};
    for (const how of ["rst after the text", "rst before the head", "connection dropped", "read to the end"]) {
      await withBudget("h2-ends", { limits: { total_tokens: 1_000_000 } }, async () => {
        const before = await auditMark();
        const s = await session();
        const headers: http2.OutgoingHttpHeaders = {
          ":method": "POST",
          ":path": "/v1/chat/completions",
          "content-type": "application/json",
          "x-pause-ms": "1200",
        };
        if (how === "rst before the head") headers["x-head-delay"] = "500";
        const req = s.request(headers);
        req.on("error", () => {});
        req.end(JSON.stringify(STREAMED));
        let text = "";
        await new Promise<void>((resolve) => {
          if (how === "rst before the head") {
            setTimeout(() => {
              req.close(http2.constants.NGHTTP2_CANCEL);
              resolve();
            }, 150);
            return;
          }
          req.on("data", (d: Buffer) => {
            text += d.toString();
            if (how !== "read to the end" && text.includes('"finish_reason":"stop"')) {
              if (how === "connection dropped") s.destroy();
              else req.close(http2.constants.NGHTTP2_CANCEL);
              resolve();
            }
          });
          req.on("close", () => resolve());
        });
        await sleep(2600); // past the drain
        const records = await auditSince(before);
        s.destroy();
        const u = await used("h2-ends", (x) => x.total_tokens > 0);
        results[how] = { records: records.map((r) => [r.status, r.llm?.total_tokens]), counted: u.total_tokens };
      });
    }
    // Without the drain (llm-metering.ts) and afterDrain (llm-request.ts) the three cut ones count 0.
    expect(results).toEqual({
      "rst after the text": { records: [[200, 50]], counted: 50 },
      "rst before the head": { records: [[200, 50]], counted: 50 },
      "connection dropped": { records: [[200, 50]], counted: 50 },
      "read to the end": { records: [[200, 50]], counted: 50 },
    });
  }, 60_000);

  test("HTTP/1.1 through the tunnel and /proxy before the head: one record each, counted", async () => {
    await withBudget("h1-ends", { limits: { total_tokens: 1_000_000 } }, async () => {
      const before = await auditMark();
      // Tunnel, HTTP/1.1: the agent closes the TLS connection once it has the finish chunk.
      const { conn } = await openTunnel(proxyPort(), hp, proxyAuth(), { ca: await brokerCa() });
      const payload = JSON.stringify(STREAMED);
      conn.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: ${hp}\r\ncontent-type: application/json\r\nx-pause-ms: 1200\r\ncontent-length: ${payload.length}\r\n\r\n${payload}`,
      );
      expect(await conn.until(() => conn.buf.includes('"finish_reason":"stop"'))).toBe(true);
      conn.close();
      // /proxy: the agent gives up before the answer's head.
      const ctrl = new AbortController();
      const pending = chat("/v1/chat/completions", STREAMED, { "x-head-delay": "500" }, { signal: ctrl.signal }).catch((e: Error) => e.name);
      await sleep(150);
      ctrl.abort();
      expect(await pending).toBe("AbortError");
      await sleep(2800);
      const records = await auditSince(before);
      expect(records.map((r) => [r.status, r.llm?.total_tokens])).toEqual([
        [200, 50],
        [200, 50],
      ]);
      expect((await used("h1-ends", (x) => x.total_tokens >= 100)).total_tokens).toBe(100);
    });
  }, 30_000);

  test("60 agents hanging up on long streams: every upstream exchange ends within the drain, one record each", async () => {
    await withBudget("many", { limits: { requests: 1_000_000 } }, async () => {
      const before = seen.length;
      const audited = await auditMark();
      const hungUp: number[] = [];
      await Promise.all(
        Array.from({ length: 60 }, async () => {
          const ctrl = new AbortController();
          // 30 s of answer, one chunk every 100 ms: only the drain's bounds end it early.
          const res = await chat("/v1/chat/completions", STREAMED, { "x-pieces": "300", "x-every-ms": "100" }, { signal: ctrl.signal });
          await readThenDrop(res, ctrl, (t) => t.includes("word1 "));
          hungUp.push(Date.now());
        }),
      );
      await sleep(3200);
      const mine = seen.slice(before);
      const last = Math.max(...hungUp);
      const open = mine.filter((s) => s.closed === undefined).length;
      const latest = Math.max(...mine.map((s) => (s.closed ?? Infinity) - last));
      const records = (await auditSince(audited)).filter((r) => r.path === "/v1/chat/completions");
      // Without the drain's bounds (2 s, 1 MiB, then reader.cancel and afterDrain's abort) each would run its 30 s.
      expect({ agents: mine.length, open, cut: mine.every((s) => s.cut), closedWithin: latest < 2800, records: records.length }).toEqual({
        agents: 60,
        open: 0,
        cut: true,
        closedWithin: true,
        records: 60,
      });
    });
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------------------------
// DEFENDED: holds, periods, two instances
// ---------------------------------------------------------------------------------------------------------------

describe("defended: the soft approve hold on upgrades", () => {
  test("an upgrade past an approve budget's soft threshold gets 428 uncounted, goes once approved, never twice", async () => {
    await withBudget("ws-careful", { limits: { requests: 10 }, soft_percent: 1, soft_action: "approve" }, async () => {
      const first = await broker.proxy(hp, "/v1/models");
      await first.text();
      expect(first.status).toBe(200);
      const ca = await brokerCa();
      const upgrade = async () => {
        const { conn } = await openTunnel(proxyPort(), wsHp, proxyAuth(), { ca });
        conn.write(
          `GET /v1/realtime?model=gpt-realtime HTTP/1.1\r\nHost: ${wsHp}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
        );
        const res = await conn.readResponse({ noBody: true });
        const body = res.status === 101 ? "" : (await conn.until(() => conn.buf.includes("}"), 2000), conn.buf.toString("utf8"));
        conn.close();
        return { status: res.status, body };
      };
      const upgradesBefore = wsUpgrades.length;
      const held = await upgrade();
      expect(held.status).toBe(428);
      const id = /"approval_id":"(apr_[^"]+)"/.exec(held.body)?.[1];
      expect(id).toBeDefined();
      expect((await used("ws-careful")).requests).toBe(1); // the held upgrade was taken back
      expect((await broker.api("POST", `/v1/vaults/${broker.vault}/request-approvals/${id}/approve`, undefined, broker.userToken)).status).toBe(200);
      expect((await upgrade()).status).toBe(101);
      expect((await upgrade()).status).toBe(428);
      expect(wsUpgrades.length - upgradesBefore).toBe(1);
      expect((await used("ws-careful", (x) => x.requests === 2)).requests).toBe(2);
    });
  }, 30_000);
});

describe("defended: period boundaries", () => {
  test("a spent hourly budget refuses until the hour ends (Retry-After says when), then goes again", async () => {
    let clock = Date.UTC(2031, 0, 1, 10, 59, 58);
    const b = await startBroker({ caPem, now: () => clock });
    try {
      b.dns.set("upstream.test", ["127.0.0.1"]);
      await b.setCredential("OPENAI_KEY", SECRET);
      await b.addService(hp, { type: "bearer", token: "OPENAI_KEY" });
      await setBudget("hourly", { period: "hour", limits: { requests: 1 } }, b);
      const get = async () => {
        const r = await b.proxy(hp, "/v1/models");
        const text = await r.text();
        return { status: r.status, retry: r.headers.get("retry-after"), text };
      };
      expect((await get()).status).toBe(200);
      const refused = await get();
      expect(refused.status).toBe(429);
      expect(refused.retry).toBe("2"); // 11:00:00
      expect((await get()).status).toBe(429); // from the spent memory
      clock = Date.UTC(2031, 0, 1, 11, 0, 0, 1);
      // Without the period check on the spent memory (budget-gate.ts), the budget stays refused into the next hour.
      expect((await get()).status).toBe(200);
      expect((await get()).status).toBe(429);
      expect((await used("hourly", () => true, b)).requests).toBe(1);
    } finally {
      await b.stop();
    }
  }, 30_000);
});

/** A second instance on the same PostgreSQL database, in this process: the first one's tokens work on it. */
async function secondInstance(databaseUrl: string): Promise<{ server: RunningServer; dir: string; proxy: (b: Broker, path: string) => Promise<number> }> {
  const dir = mkdtempSync(join(tmpdir(), "budget-attacks-2-b-"));
  const caFile = join(dir, "upstream-ca.pem");
  await Bun.write(caFile, caPem);
  const config = loadConfig({
    BROKER_DATA_DIR: join(dir, "data"),
    BROKER_PORT: "0",
    BROKER_PROXY_PORT: "0",
    BROKER_NETWORK_ALLOWLIST: "127.0.0.1",
    BROKER_UPSTREAM_CA_FILE: caFile,
    BROKER_RATELIMIT_PROFILE: "off",
    BROKER_DATABASE_URL: databaseUrl,
  });
  const server = await startServer({
    config,
    log: createMemoryLogger(),
    masterPassword: undefined,
    passwordKdf: CHEAP_KDF,
    resolver: async (host) => {
      if (host !== "upstream.test") throw new Error(`no answer for ${host}`);
      return ["127.0.0.1"];
    },
  });
  const proxy = async (b: Broker, path: string) => {
    const r = await fetch(`${server.apiUrl}/proxy/${hp}${path}`, { headers: { authorization: `Bearer ${b.sessionToken}` } });
    await r.text();
    return r.status;
  };
  return { server, dir, proxy };
}

describe.skipIf(pgMissing)("defended: PostgreSQL, two instances", () => {
  test("a reset or a raise on one instance reopens a budget the other remembers as spent", async () => {
    const cluster = await sharedPgCluster();
    const url = await cluster.createDatabase();
    const a = await startBroker({ caPem, env: { BROKER_DATABASE_URL: url } });
    const second = await secondInstance(url);
    try {
      a.dns.set("upstream.test", ["127.0.0.1"]);
      await a.setCredential("OPENAI_KEY", SECRET);
      await a.addService(hp, { type: "bearer", token: "OPENAI_KEY" });
      await setBudget("shared", { limits: { requests: 2 } }, a);
      const onA = async () => {
        const r = await a.proxy(hp, "/v1/models");
        await r.text();
        return r.status;
      };
      expect([await onA(), await onA(), await onA(), await onA()]).toEqual([200, 200, 429, 429]); // A remembers it spent
      expect(await second.proxy(a, "/v1/models")).toBe(429);
      // Reset on B (its API, the same person): A hears it and forgets.
      const reset = await fetch(`${second.server.apiUrl}${budgetPath(a, "shared")}/reset`, {
        method: "POST",
        headers: { authorization: `Bearer ${a.userToken}` },
      });
      expect(reset.status).toBe(200);
      let afterReset = 0;
      for (const deadline = Date.now() + 3000; Date.now() < deadline && afterReset !== 200; ) {
        await sleep(100);
        afterReset = await onA(); // (a 429 here counts nothing)
      }
      expect(afterReset).toBe(200);
      expect(await onA()).toBe(200);
      expect(await onA()).toBe(429);
      // Raised on B: A's memory is dropped again.
      const raise = await fetch(`${second.server.apiUrl}${budgetPath(a, "shared")}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${a.userToken}`, "content-type": "application/json" },
        body: JSON.stringify({ scope: "vault", period: "day", limits: { requests: 4 } }),
      });
      expect(raise.status).toBe(200);
      let afterRaise = 0;
      for (const deadline = Date.now() + 3000; Date.now() < deadline && afterRaise !== 200; ) {
        await sleep(100);
        afterRaise = await onA();
      }
      expect(afterRaise).toBe(200);
      expect(await second.proxy(a, "/v1/models")).toBe(200);
      expect(await onA()).toBe(429);
      expect((await used("shared", (x) => x.requests === 4, a)).requests).toBe(4);
    } finally {
      await second.server.stop();
      rmSync(second.dir, { recursive: true, force: true });
      await a.stop();
      await cluster.release();
    }
  }, 60_000);
});

describe.skipIf(pgMissing)("PostgreSQL, two instances", () => {
  test("a raise on instance B while A is judging a request leaves A refusing with the old limit", async () => {
    const cluster = await sharedPgCluster();
    const url = await cluster.createDatabase();
    const a = await startBroker({ caPem, env: { BROKER_DATABASE_URL: url } });
    const second = await secondInstance(url);
    const repo = a.server.store.budgets as { add: (...args: any[]) => Promise<any> };
    const original = repo.add;
    try {
      a.dns.set("upstream.test", ["127.0.0.1"]);
      await a.setCredential("OPENAI_KEY", SECRET);
      await a.addService(hp, { type: "bearer", token: "OPENAI_KEY" });
      await setBudget("shared", { limits: { requests: 2 } }, a);
      const onA = async () => {
        const r = await a.proxy(hp, "/v1/models");
        await r.text();
        return r.status;
      };
      // Two requests on B use the budget up; A has not refused anything yet, so it remembers nothing.
      expect([await second.proxy(a, "/v1/models"), await second.proxy(a, "/v1/models")]).toEqual([200, 200]);
      // A's next request is counted (3 of 2); its answer from PostgreSQL is held back until B's raise is announced.
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let armed = true;
      repo.add = async function (this: unknown, ...args: any[]) {
        const out = await original.apply(repo, args);
        if (armed) {
          armed = false;
          await gate;
        }
        return out;
      };
      const inFlight = onA();
      await sleep(100);
      const raise = await fetch(`${second.server.apiUrl}${budgetPath(a, "shared")}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${a.userToken}`, "content-type": "application/json" },
        body: JSON.stringify({ scope: "vault", period: "day", limits: { requests: 100 } }),
      });
      expect(raise.status).toBe(200);
      await sleep(1000); // the announcement reaches A (and drops its cache and its memory)
      release();
      await inFlight;
      repo.add = original;
      const afterOnA = [await onA(), await onA()];
      const afterOnB = await second.proxy(a, "/v1/models");
      // Should: both instances let requests go under the new limit of 100. Now: B does, A refuses for the rest of the
      // day (its in-flight judgement, made with the old limit after the announcement, put the memory back).
      expect({ afterOnA, afterOnB }).toEqual({ afterOnA: [200, 200], afterOnB: 200 });
    } finally {
      repo.add = original;
      await second.server.stop();
      rmSync(second.dir, { recursive: true, force: true });
      await a.stop();
      await cluster.release();
    }
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------------------------
// DEFENDED: leaks
// ---------------------------------------------------------------------------------------------------------------

describe("defended: no credential value in a refusal, webhook, model name, audit record, log line or metric", () => {
  test("budget refusals, soft-threshold webhooks and model names echoing the credential in other forms", async () => {
    const hook = await broker.api("POST", `/v1/vaults/${broker.vault}/webhooks`, { url: `http://127.0.0.1:${hooks.port}/hook` }, broker.userToken);
    expect(hook.status).toBe(201);
    const outputs: string[] = [];
    try {
      await withBudget("leaky", { limits: { requests: 4, total_tokens: 1_000_000 }, soft_percent: 25, soft_action: "notify" }, async () => {
        const forms = [SECRET, Buffer.from(SECRET).toString("hex"), Buffer.from(SECRET).toString("base64url"), SECRET.toUpperCase()];
        for (const form of forms.slice(0, 3)) {
          // The upstream names the credential (in a form) as the model.
          const res = await chat("/v1/chat/completions", STREAMED, { "x-model": form });
          outputs.push(`${[...res.headers].join("\n")}\n${await res.text()}`);
        }
        const fourth = await chat("/v1/chat/completions", STREAMED, { "x-model": forms[3]! });
        const refused = await chat("/v1/chat/completions", STREAMED);
        outputs.push(await fourth.text(), `${[...refused.headers].join("\n")}\n${await refused.text()}`);
        expect([fourth.status, refused.status]).toEqual([200, 429]);
      });
      await sleep(1500); // the webhook delivery and the audit flush
      const records = await broker.auditLogs();
      const models = records
        .filter((r) => r.path === "/v1/chat/completions")
        .slice(0, 4)
        .map((r) => r.llm?.model);
      expect(models.filter((m) => m !== "[redacted]")).toEqual([]);
      expect(hookBodies.some((h) => h.includes("leaky"))).toBe(true);
      const metrics = await (await fetch(`${broker.apiUrl}/metrics`)).text();
      const everything = [...outputs, JSON.stringify(records), metrics, ...broker.logLines, ...hookBodies].join("\n");
      const forms = [
        SECRET,
        Buffer.from(SECRET).toString("base64"),
        Buffer.from(SECRET).toString("hex"),
        Buffer.from(SECRET).toString("base64url"),
        SECRET.slice(8, 40),
      ];
      for (const f of forms) expect(everything.toLowerCase()).not.toContain(f.toLowerCase());
    } finally {
      if (hook.body?.id) await broker.api("DELETE", `/v1/vaults/${broker.vault}/webhooks/${hook.body.id}`, undefined, broker.userToken);
    }
  }, 30_000);
});
