// The LLM fakes (tests/helpers/llm-fakes.ts) speak the providers' protocols: the official OpenAI and
// Anthropic SDKs, pointed straight at them (no broker), get what the real APIs give them — bodies,
// streams and their usage, request ids, typed errors — and Gemini's REST shapes hold under plain
// fetch. HTTPS trust: the SDKs' `fetch` option gets a fetch with Bun's `tls: { ca }` (fake.fetch); a
// subprocess shows NODE_EXTRA_CA_CERTS works for an SDK left on the global fetch.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { countWords, DEFAULT_TEXT, type LlmFake, parseSse, splitText, startLlmFake } from "../helpers/llm-fakes.ts";

const KEY = `sk-fake-${crypto.randomUUID()}`;
let fake: LlmFake;

const openai = (opts: { maxRetries?: number; apiKey?: string } = {}) =>
  new OpenAI({ baseURL: fake.openaiBaseURL, apiKey: opts.apiKey ?? KEY, fetch: fake.fetch, maxRetries: opts.maxRetries ?? 0 });
const anthropic = (opts: { maxRetries?: number; apiKey?: string } = {}) =>
  new Anthropic({ baseURL: fake.anthropicBaseURL, apiKey: opts.apiKey ?? KEY, fetch: fake.fetch, maxRetries: opts.maxRetries ?? 0 });

/** Restores the defaults a test may have changed. */
function reset(): void {
  Object.assign(fake.config, {
    text: DEFAULT_TEXT,
    chunks: 3,
    chunkDelayMs: 0,
    firstChunkDelayMs: undefined,
    usage: undefined,
    error: undefined,
    apiKey: KEY,
    anthropicDeltaUsage: "cumulative",
  });
}

beforeAll(async () => {
  fake = await startLlmFake({ apiKey: KEY });
});
afterAll(() => fake.close());

describe("OpenAI SDK: chat.completions", () => {
  test("non-streamed: the message, usage derived from the prompt's words, the request id, the Bearer key", async () => {
    reset();
    const prompt = "Say hello to the four fakes";
    const { data, request_id } = await openai()
      .chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: prompt }] })
      .withResponse();
    const rec = fake.last();
    expect(data.object).toBe("chat.completion");
    expect(data.choices[0]?.message.content).toBe(DEFAULT_TEXT);
    expect(data.choices[0]?.finish_reason).toBe("stop");
    expect(data.model).toBe("gpt-4o-mini");
    expect(data.usage).toMatchObject({ prompt_tokens: countWords(prompt), completion_tokens: countWords(DEFAULT_TEXT) });
    expect(data.usage?.total_tokens).toBe(countWords(prompt) + countWords(DEFAULT_TEXT));
    expect(data.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    expect(data.usage?.completion_tokens_details?.reasoning_tokens).toBe(0);
    expect(request_id).toBe(rec.requestId);
    expect(rec.requestId).toMatch(/^req_[0-9a-f]{32}$/);
    expect(rec).toMatchObject({ provider: "openai", endpoint: "chat.completions", stream: false, status: 200, credential: KEY, finished: true });
    expect(rec.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(rec.body.messages[0].content).toBe(prompt);
  });

  test("streamed without stream_options: chunks carry no usage field at all, then [DONE]", async () => {
    reset();
    fake.config.chunks = 4;
    const stream = await openai().chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], stream: true });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks).toHaveLength(1 + 4 + 1); // role chunk, content chunks, finish chunk
    expect(chunks.every((c) => c.object === "chat.completion.chunk" && !("usage" in c))).toBe(true);
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(DEFAULT_TEXT);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
    const rec = fake.last();
    expect(rec).toMatchObject({ stream: true, includeUsage: false, chunksSent: 4, finished: true });
    expect(rec.body.stream_options).toBeUndefined();
    expect(rec.headers["content-type"]).toContain("application/json");
  });

  test("streamed with stream_options.include_usage: usage null on every chunk, then a choices-less usage chunk before [DONE]", async () => {
    reset();
    fake.config.usage = { input: 11, output: 7, cachedInput: 3, reasoning: 2 };
    const stream = await openai().chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toEqual({
      prompt_tokens: 11,
      completion_tokens: 7,
      total_tokens: 18,
      prompt_tokens_details: { cached_tokens: 3, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 2, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(fake.last()).toMatchObject({ includeUsage: true, usage: { input: 11, output: 7 } });
    expect(fake.last().body.stream_options).toEqual({ include_usage: true });
  });

  test("the wire format: data: lines, [DONE] last (raw fetch)", async () => {
    reset();
    const res = await fake.fetch(`${fake.openaiBaseURL}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(res.headers.get("x-request-id")).toBe(fake.last().requestId);
    const text = await res.text();
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    const events = parseSse(text);
    expect(events.every((e) => e.event === undefined)).toBe(true);
    expect(JSON.parse(events.at(-2)!.data)).toMatchObject({ choices: [], usage: { total_tokens: expect.any(Number) } });
  });

  test("chunk delays: the first token waits firstChunkDelayMs, later ones chunkDelayMs, and each arrives on its own", async () => {
    reset();
    Object.assign(fake.config, { chunks: 4, firstChunkDelayMs: 150, chunkDelayMs: 100 });
    const t0 = performance.now();
    const stream = await openai().chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true });
    const at: number[] = [];
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) at.push(performance.now() - t0);
    expect(at).toHaveLength(4);
    // Lower bounds only (the fake cannot send a chunk before its wait is over), and the first chunk arrives
    // well before the last one was sent, so nothing buffers the stream.
    at.forEach((ms, i) => expect(ms).toBeGreaterThanOrEqual(150 + 100 * i - 10));
    expect(at[3]! - at[0]!).toBeGreaterThanOrEqual(100);
  });

  test("a client that leaves mid-stream is recorded as aborted", async () => {
    reset();
    Object.assign(fake.config, { chunks: 5, chunkDelayMs: 60 });
    const stream = await openai().chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true });
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) break;
    const rec = fake.last();
    await rec.settled;
    expect(rec.aborted).toBe(true);
    expect(rec.finished).toBe(false);
    expect(rec.chunksSent).toBeLessThan(5);
  });
});

describe("OpenAI SDK: responses and embeddings", () => {
  test("responses.create non-streamed: output_text and usage", async () => {
    reset();
    const res = await openai().responses.create({ model: "gpt-4.1", input: "one two three", instructions: "be brief" });
    expect(res.object).toBe("response");
    expect(res.status).toBe("completed");
    expect(res.output_text).toBe(DEFAULT_TEXT);
    expect(res.usage).toEqual({
      input_tokens: 5,
      input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      output_tokens: countWords(DEFAULT_TEXT),
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 5 + countWords(DEFAULT_TEXT),
    });
    expect(res._request_id).toBe(fake.last().requestId);
    expect(fake.last()).toMatchObject({ endpoint: "responses", stream: false });
  });

  test("responses.create streamed: created … output_text.delta … completed with usage; stream().finalResponse() agrees", async () => {
    reset();
    fake.config.usage = { input: 40, output: 9 };
    const stream = await openai().responses.create({ model: "gpt-4.1", input: [{ role: "user", content: "hi" }], stream: true });
    const events = [];
    for await (const ev of stream) events.push(ev);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const created = events[0];
    if (created?.type !== "response.created") throw new Error("no response.created");
    expect(created.response.usage).toBeNull();
    const done = events.at(-1);
    if (done?.type !== "response.completed") throw new Error("no response.completed");
    expect(done.response.usage).toMatchObject({ input_tokens: 40, output_tokens: 9, total_tokens: 49 });
    expect(
      events
        .filter((e) => e.type === "response.output_text.delta")
        .map((e) => e.delta)
        .join(""),
    ).toBe(DEFAULT_TEXT);

    const final = await openai().responses.stream({ model: "gpt-4.1", input: "hi" }).finalResponse();
    expect(final.output_text).toBe(DEFAULT_TEXT);
    expect(final.usage?.total_tokens).toBe(49);
    expect(fake.last().body.stream).toBe(true);
  });

  test("embeddings.create: the SDK's default base64 is decoded, floats on request, dimensions honoured, usage", async () => {
    reset();
    const client = openai();
    const res = await client.embeddings.create({ model: "text-embedding-3-small", input: ["alpha beta", "gamma"] });
    expect(fake.last().body.encoding_format).toBe("base64");
    expect(res.object).toBe("list");
    expect(res.data).toHaveLength(2);
    expect(res.data[0]?.embedding).toHaveLength(8);
    expect(res.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
    const floats = await client.embeddings.create({ model: "text-embedding-3-small", input: "alpha beta", encoding_format: "float", dimensions: 4 });
    expect(floats.data[0]?.embedding).toHaveLength(4);
    expect(fake.last().body).toMatchObject({ encoding_format: "float", dimensions: 4 });
    // Deterministic: same input, same vector, whichever encoding carried it.
    const again = await client.embeddings.create({ model: "text-embedding-3-small", input: ["alpha beta", "gamma"], encoding_format: "float" });
    expect(again.data[0]?.embedding).toEqual(Array.from(res.data[0]!.embedding));
  });
});

describe("Anthropic SDK: messages", () => {
  test("non-streamed: the message, usage, request-id; SDK 1.x sends the key as Bearer with anthropic-version 2026-10-21", async () => {
    reset();
    fake.config.usage = { input: 30, output: 12, cachedInput: 10, cacheWrite: 5 };
    const { data, request_id } = await anthropic()
      .messages.create({ model: "claude-sonnet-5-5", max_tokens: 64, messages: [{ role: "user", content: "hello" }] })
      .withResponse();
    expect(data.type).toBe("message");
    expect(data.id).toMatch(/^msg_01/);
    expect(data.content).toEqual([{ type: "text", text: DEFAULT_TEXT, citations: null }]);
    expect(data.stop_reason).toBe("end_turn");
    expect(data.usage).toMatchObject({ input_tokens: 15, output_tokens: 12, cache_read_input_tokens: 10, cache_creation_input_tokens: 5 });
    const rec = fake.last();
    expect(request_id).toBe(rec.requestId);
    expect(rec).toMatchObject({ provider: "anthropic", endpoint: "messages", stream: false, credential: KEY });
    expect(rec.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(rec.headers["x-api-key"]).toBeUndefined();
    expect(rec.headers["anthropic-version"]).toBe("2026-10-21");
  });

  test("streamed: messages.stream().finalMessage() has the text and usage; raw events in Anthropic's order", async () => {
    reset();
    fake.config.chunks = 5;
    const final = await anthropic()
      .messages.stream({ model: "claude-sonnet-5-5", max_tokens: 64, system: "be kind", messages: [{ role: "user", content: "one two three" }] })
      .finalMessage();
    expect(final.content).toHaveLength(1);
    expect(final.content[0]).toMatchObject({ type: "text", text: DEFAULT_TEXT, citations: null });
    expect(final.usage).toMatchObject({ input_tokens: 5, output_tokens: countWords(DEFAULT_TEXT), cache_read_input_tokens: 0 });
    expect(final.stop_reason).toBe("end_turn");
    expect(fake.last()).toMatchObject({ stream: true, chunksSent: 5, finished: true });

    fake.config.chunks = 3;
    const raw = await anthropic().messages.create({ model: "claude-sonnet-5-5", max_tokens: 64, messages: [{ role: "user", content: "x" }], stream: true });
    const types = [];
    for await (const ev of raw) types.push(ev.type);
    expect(types).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
  });

  test("the wire format (raw fetch, x-api-key): event: lines matching each data's type, usage in message_start and message_delta", async () => {
    reset();
    const post = () =>
      fake.fetch(`${fake.anthropicBaseURL}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json" },
        body: JSON.stringify({ model: "claude-sonnet-5-5", max_tokens: 10, messages: [{ role: "user", content: "a b" }], stream: true }),
      });
    const res = await post();
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(res.headers.get("request-id")).toBe(fake.last().requestId);
    expect(fake.last().credential).toBe(KEY);
    const events = parseSse(await res.text());
    for (const e of events) expect(JSON.parse(e.data).type).toBe(e.event);
    expect(JSON.parse(events[0]!.data).message.usage).toMatchObject({ input_tokens: 2, output_tokens: 1 });
    const deltaUsage = async () => {
      const res = await post();
      return JSON.parse(parseSse(await res.text()).find((e) => e.event === "message_delta")!.data).usage;
    };
    // Cumulative whole-message totals by default (a reader adding message_start's input to these counts it twice) …
    expect(await deltaUsage()).toEqual({
      input_tokens: 2,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: countWords(DEFAULT_TEXT),
    });
    // … or output_tokens alone, as older answers gave it.
    fake.config.anthropicDeltaUsage = "output-only";
    expect(await deltaUsage()).toEqual({ output_tokens: countWords(DEFAULT_TEXT) });
  });

  test("as the API does: no anthropic-version is a 400, and 2026-10-21 refuses temperature", async () => {
    reset();
    const post = (headers: Record<string, string>, extra: object = {}) =>
      fake.fetch(`${fake.anthropicBaseURL}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": KEY, "content-type": "application/json", ...headers },
        body: JSON.stringify({ model: "claude-sonnet-5-5", max_tokens: 10, messages: [{ role: "user", content: "a" }], ...extra }),
      });
    const none = await post({});
    expect(none.status).toBe(400);
    expect(await none.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" }, request_id: fake.last().requestId });
    expect((await post({ "anthropic-version": "2026-10-21" }, { temperature: 0.5 })).status).toBe(400);
    expect((await post({ "anthropic-version": "2023-06-01" }, { temperature: 0.5 })).status).toBe(200);
  });

  test("countTokens", async () => {
    reset();
    const count = await anthropic().messages.countTokens({ model: "claude-sonnet-5-5", messages: [{ role: "user", content: "one two three four" }] });
    expect(count.input_tokens).toBe(4);
  });
});

describe("Gemini REST (fetch)", () => {
  const body = JSON.stringify({ systemInstruction: { parts: [{ text: "be brief" }] }, contents: [{ role: "user", parts: [{ text: "one two three" }] }] });

  test("generateContent: candidates and usageMetadata; the key by x-goog-api-key", async () => {
    reset();
    fake.config.usage = { reasoning: 3, cachedInput: 2 };
    const res = await fake.fetch(`${fake.geminiBaseURL}/models/gemini-2.5-flash:generateContent`, {
      method: "POST",
      headers: { "x-goog-api-key": KEY, "content-type": "application/json" },
      body,
    });
    expect(res.status).toBe(200);
    const out = (await res.json()) as any;
    expect(out.candidates[0]).toEqual({ content: { parts: [{ text: DEFAULT_TEXT }], role: "model" }, finishReason: "STOP", index: 0 });
    const words = countWords(DEFAULT_TEXT);
    expect(out.usageMetadata).toMatchObject({
      promptTokenCount: 5,
      candidatesTokenCount: words - 3,
      thoughtsTokenCount: 3,
      cachedContentTokenCount: 2,
      totalTokenCount: 5 + words,
    });
    expect(out.modelVersion).toBe("gemini-2.5-flash");
    expect(fake.last()).toMatchObject({ provider: "gemini", endpoint: "generateContent", model: "gemini-2.5-flash", credential: KEY, stream: false });
  });

  test("streamGenerateContent?alt=sse: data frames ending \\r\\n\\r\\n, cumulative usage, the last one STOP with the totals; ?key= works", async () => {
    reset();
    fake.config.chunks = 4;
    const res = await fake.fetch(`${fake.geminiBaseURL}/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=${KEY}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const text = await res.text();
    expect(text.endsWith("}\r\n\r\n")).toBe(true);
    const chunks = parseSse(text).map((e) => JSON.parse(e.data));
    expect(chunks).toHaveLength(4);
    expect(chunks.map((c) => c.candidates[0].content.parts[0].text).join("")).toBe(DEFAULT_TEXT);
    expect(chunks.slice(0, -1).every((c) => c.candidates[0].finishReason === undefined)).toBe(true);
    expect(chunks.at(-1).candidates[0].finishReason).toBe("STOP");
    expect(chunks.at(-1).usageMetadata).toMatchObject({ promptTokenCount: 5, candidatesTokenCount: countWords(DEFAULT_TEXT) });
    const counts = chunks.map((c) => c.usageMetadata.candidatesTokenCount);
    expect([...counts].sort((a, b) => a - b)).toEqual(counts);
    expect(fake.last()).toMatchObject({ endpoint: "streamGenerateContent", stream: true, credential: KEY, chunksSent: 4 });
    expect(fake.last().query.get("alt")).toBe("sse");
  });

  test("streamGenerateContent without alt=sse: one JSON array", async () => {
    reset();
    const res = await fake.fetch(`${fake.geminiBaseURL}/models/gemini-2.5-flash:streamGenerateContent`, {
      method: "POST",
      headers: { "x-goog-api-key": KEY, "content-type": "application/json" },
      body,
    });
    const chunks = (await res.json()) as any[];
    expect(chunks).toHaveLength(3);
    expect(chunks.map((c) => c.candidates[0].content.parts[0].text).join("")).toBe(DEFAULT_TEXT);
  });
});

describe("errors in each provider's shape", () => {
  test("a configured 429 reaches the SDKs as their RateLimitError, and Gemini as RESOURCE_EXHAUSTED", async () => {
    reset();
    fake.config.error = { status: 429, headers: { "retry-after": "7" } };
    const o = await openai()
      .chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(o).toBeInstanceOf(OpenAI.RateLimitError);
    expect(o).toMatchObject({ status: 429, code: "rate_limit_exceeded", type: "requests", requestID: fake.last().requestId });
    expect((o as InstanceType<typeof OpenAI.RateLimitError>).headers.get("retry-after")).toBe("7");

    const a = await anthropic()
      .messages.create({ model: "claude", max_tokens: 5, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(a).toBeInstanceOf(Anthropic.RateLimitError);
    expect(a).toMatchObject({ status: 429, requestID: fake.last().requestId, error: { type: "error", error: { type: "rate_limit_error" } } });

    const g = await fake.fetch(`${fake.geminiBaseURL}/models/gemini-2.5-flash:generateContent`, {
      method: "POST",
      headers: { "x-goog-api-key": KEY, "content-type": "application/json" },
      body: "{}",
    });
    expect(g.status).toBe(429);
    expect(await g.json()).toEqual({ error: { code: 429, message: expect.any(String), status: "RESOURCE_EXHAUSTED" } });
  });

  test("an error picked per request: the first call fails with 500 and the SDK's retry succeeds", async () => {
    reset();
    const before = fake.requests.length;
    fake.config.error = (req) => (req.seq === before ? { status: 500 } : undefined);
    const res = await openai({ maxRetries: 1 }).chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(res.choices[0]?.message.content).toBe(DEFAULT_TEXT);
    expect(fake.requests.slice(before).map((r) => r.status)).toEqual([500, 200]);
    expect(fake.requests[before + 1]?.headers["x-stainless-retry-count"]).toBe("1");
  });

  test("a wrong or missing key gets each provider's auth error, which never echoes the key", async () => {
    reset();
    const wrong = `sk-wrong-${crypto.randomUUID()}`;
    const o = await openai({ apiKey: wrong })
      .chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(o).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(o).toMatchObject({ code: "invalid_api_key" });
    const a = await anthropic({ apiKey: wrong })
      .messages.create({ model: "claude", max_tokens: 5, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(a).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(a).toMatchObject({ error: { error: { type: "authentication_error" } } });
    const g = await fake.fetch(`${fake.geminiBaseURL}/models/gemini-2.5-flash:generateContent`, { method: "POST", body: "{}" });
    expect(g.status).toBe(403);
    expect(((await g.json()) as any).error.status).toBe("PERMISSION_DENIED");
    for (const e of [o, a]) expect(JSON.stringify((e as { error: unknown }).error)).not.toContain(wrong);
  });

  test("unknown paths: the provider's 404", async () => {
    reset();
    const o = await fake.fetch(`${fake.openaiBaseURL}/nope`, { method: "POST", headers: { authorization: `Bearer ${KEY}` }, body: "{}" });
    expect(o.status).toBe(404);
    expect(((await o.json()) as any).error).toMatchObject({ message: "Invalid URL (POST /v1/nope)", type: "invalid_request_error" });
  });
});

describe("plain HTTP and NODE_EXTRA_CA_CERTS", () => {
  test("tls: false serves the same over http://, for SDKs on the global fetch", async () => {
    await using plain = await startLlmFake({ tls: false });
    expect(plain.url).toStartWith("http://127.0.0.1:");
    expect(plain.caPem).toBeUndefined();
    const res = await new OpenAI({ baseURL: plain.openaiBaseURL, apiKey: "k", maxRetries: 0 }).chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(res.choices[0]?.message.content).toBe(DEFAULT_TEXT);
    expect(plain.last().credential).toBe("k");
  });

  test("an SDK in a subprocess trusts the test CA through NODE_EXTRA_CA_CERTS, with no custom fetch", async () => {
    reset();
    const dir = mkdtempSync(join(tmpdir(), "llm-fakes-"));
    const caFile = join(dir, "ca.pem");
    writeFileSync(caFile, fake.caPem!);
    const script = [
      'import Anthropic from "@anthropic-ai/sdk";',
      "const c = new Anthropic({ baseURL: process.env.BASE, apiKey: process.env.KEY, maxRetries: 0 });",
      'const m = await c.messages.stream({ model: "claude", max_tokens: 5, messages: [{ role: "user", content: "hi" }] }).finalMessage();',
      "console.log(JSON.stringify(m.usage));",
    ].join("\n");
    const proc = Bun.spawn([process.execPath, "-e", script], {
      cwd: process.cwd(),
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NODE_EXTRA_CA_CERTS: caFile, BASE: fake.anthropicBaseURL, KEY },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(JSON.parse(out)).toMatchObject({ output_tokens: countWords(DEFAULT_TEXT) });
  });
});

test("splitText and countWords are what the fakes count by", () => {
  expect(splitText("abcdefg", 3)).toEqual(["ab", "cde", "fg"]);
  expect(splitText("ab", 5)).toEqual(["a", "b"]);
  expect(splitText(DEFAULT_TEXT, 7).join("")).toBe(DEFAULT_TEXT);
  expect(countWords("  one\ttwo\nthree ")).toBe(3);
});
