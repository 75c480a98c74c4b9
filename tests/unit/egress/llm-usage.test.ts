// What an LLM call used, read from its answer as it passes (src/egress/llm-usage.ts): the providers' documented
// answer shapes, whole and streamed, split at every byte boundary (the meter sees chunks as the network gives them),
// and the answers it must leave alone.

import { describe, expect, test } from "bun:test";
import { createUsageMeter, llmRouteOf, MAX_METERED_JSON_BYTES, type LlmProvider } from "../../../src/egress/llm-usage.ts";

const enc = new TextEncoder();

/** The meter's reading of `body`, fed in chunks of `size` bytes (every size from 1 up, when asked). */
function meter(provider: LlmProvider, type: string, body: string, size = 64) {
  const m = createUsageMeter(provider, type)!;
  const bytes = enc.encode(body);
  for (let i = 0; i < bytes.length; i += size) m.push(bytes.subarray(i, i + size));
  return m.finish();
}

const sse = (events: unknown[], done = false) => `${events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join("")}${done ? "data: [DONE]\n\n" : ""}`;

describe("which requests are metered", () => {
  test("the providers' generation routes, by path, POST only", () => {
    expect(llmRouteOf("POST", "/v1/chat/completions")).toBe("openai");
    expect(llmRouteOf("POST", "/openai/deployments/x/chat/completions?api-version=2024-10-21")).toBe("openai");
    expect(llmRouteOf("POST", "/v1/responses")).toBe("openai");
    expect(llmRouteOf("POST", "/v1/embeddings")).toBe("openai");
    expect(llmRouteOf("POST", "/v1/messages")).toBe("anthropic");
    expect(llmRouteOf("POST", "/v1beta/models/gemini-2.0-flash:generateContent")).toBe("gemini");
    expect(llmRouteOf("POST", "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse")).toBe("gemini");
    for (const [m, p] of [
      ["GET", "/v1/chat/completions"],
      ["POST", "/v1/files"],
      ["POST", "/v1/messages/batches"],
      ["POST", "/v1/chat/completions/x"],
      ["POST", "/repos/o/r/issues"],
    ] as const)
      expect(llmRouteOf(m, p)).toBeUndefined();
  });

  test("only JSON and event streams get a meter", () => {
    expect(createUsageMeter("openai", "application/json; charset=utf-8")).toBeDefined();
    expect(createUsageMeter("openai", "text/event-stream")).toBeDefined();
    expect(createUsageMeter("openai", "text/plain")).toBeUndefined();
    expect(createUsageMeter("openai", null)).toBeUndefined();
  });
});

describe("OpenAI-compatible answers", () => {
  test("a chat completion, whole", () => {
    const body = JSON.stringify({
      id: "chatcmpl-1",
      object: "chat.completion",
      model: "gpt-4o-mini-2024-07-18",
      choices: [{ index: 0, message: { role: "assistant", content: "Hello" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 19, completion_tokens: 10, total_tokens: 29, prompt_tokens_details: { cached_tokens: 0 } },
    });
    for (const size of [1, 7, 64, 4096])
      expect(meter("openai", "application/json", body, size)).toEqual({
        provider: "openai",
        model: "gpt-4o-mini-2024-07-18",
        inputTokens: 19,
        outputTokens: 10,
        totalTokens: 29,
      });
  });

  test("a streamed chat completion with stream_options.include_usage: the last chunk's usage", () => {
    const chunks = [
      { id: "c", object: "chat.completion.chunk", model: "gpt-4o", choices: [{ index: 0, delta: { role: "assistant", content: "" } }], usage: null },
      { id: "c", object: "chat.completion.chunk", model: "gpt-4o", choices: [{ index: 0, delta: { content: "Hi there, usage" } }], usage: null },
      { id: "c", object: "chat.completion.chunk", model: "gpt-4o", choices: [], usage: { prompt_tokens: 8, completion_tokens: 3, total_tokens: 11 } },
    ];
    const body = sse(chunks, true);
    for (let size = 1; size <= body.length; size += 13)
      expect(meter("openai", "text/event-stream", body, size)).toEqual({
        provider: "openai",
        model: "gpt-4o",
        inputTokens: 8,
        outputTokens: 3,
        totalTokens: 11,
      });
    // Without include_usage there is none to read.
    expect(meter("openai", "text/event-stream", sse(chunks.slice(0, 2), true))).toBeUndefined();
  });

  test("the Responses API, whole and streamed (response.completed carries it)", () => {
    const response = {
      id: "resp_1",
      object: "response",
      model: "gpt-4.1",
      usage: { input_tokens: 36, output_tokens: 87, total_tokens: 123, output_tokens_details: { reasoning_tokens: 0 } },
    };
    expect(meter("openai", "application/json", JSON.stringify(response))).toMatchObject({
      inputTokens: 36,
      outputTokens: 87,
      totalTokens: 123,
      model: "gpt-4.1",
    });
    const events = `event: response.created\ndata: ${JSON.stringify({ type: "response.created", response: { ...response, usage: null } })}\n\nevent: response.output_text.delta\ndata: ${JSON.stringify({ type: "response.output_text.delta", delta: "Hi" })}\n\nevent: response.completed\ndata: ${JSON.stringify({ type: "response.completed", response })}\n\n`;
    expect(meter("openai", "text/event-stream", events, 5)).toMatchObject({ inputTokens: 36, outputTokens: 87, totalTokens: 123, model: "gpt-4.1" });
  });

  test("embeddings: prompt tokens only", () => {
    const body = JSON.stringify({
      object: "list",
      data: [{ object: "embedding", index: 0, embedding: [0.1, 0.2] }],
      model: "text-embedding-3-small",
      usage: { prompt_tokens: 5, total_tokens: 5 },
    });
    expect(meter("openai", "application/json", body)).toEqual({
      provider: "openai",
      model: "text-embedding-3-small",
      inputTokens: 5,
      outputTokens: 0,
      totalTokens: 5,
    });
  });
});

describe("Anthropic messages", () => {
  test("whole: input with cache reads and writes, output", () => {
    const body = JSON.stringify({
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "claude-sonnet-4-5",
      content: [{ type: "text", text: "Hi" }],
      usage: { input_tokens: 100, cache_creation_input_tokens: 20, cache_read_input_tokens: 10, output_tokens: 15 },
    });
    expect(meter("anthropic", "application/json", body, 3)).toEqual({
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      inputTokens: 130,
      outputTokens: 15,
      totalTokens: 145,
    });
  });

  test("streamed: input from message_start, output from the last message_delta (cumulative, not added up)", () => {
    const events = [
      [
        "message_start",
        {
          type: "message_start",
          message: { id: "msg_1", type: "message", role: "assistant", model: "claude-haiku-4-5", content: [], usage: { input_tokens: 25, output_tokens: 1 } },
        },
      ],
      ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
      ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "usage model" } }],
      ["message_delta", { type: "message_delta", delta: { stop_reason: "tool_use" }, usage: { output_tokens: 9 } }],
      ["message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 15 } }],
      ["message_stop", { type: "message_stop" }],
    ];
    const body = events.map(([name, data]) => `event: ${name}\r\ndata: ${JSON.stringify(data)}\r\n\r\n`).join("");
    for (let size = 1; size <= 40; size++)
      expect(meter("anthropic", "text/event-stream", body, size)).toEqual({
        provider: "anthropic",
        model: "claude-haiku-4-5",
        inputTokens: 25,
        outputTokens: 15,
        totalTokens: 40,
      });
  });
});

describe("Google Gemini", () => {
  test("generateContent, whole; streamGenerateContent as SSE (the last chunk's totals) and as a JSON array", () => {
    const chunk = (text: string, usage: Record<string, number>) => ({
      candidates: [{ content: { parts: [{ text }], role: "model" }, index: 0 }],
      usageMetadata: usage,
      modelVersion: "gemini-2.0-flash",
    });
    const last = chunk("!", { promptTokenCount: 12, candidatesTokenCount: 30, thoughtsTokenCount: 5, totalTokenCount: 47 });
    const want = { provider: "gemini" as const, model: "gemini-2.0-flash", inputTokens: 12, outputTokens: 35, totalTokens: 47 };
    expect(meter("gemini", "application/json", JSON.stringify(last))).toEqual(want);
    const stream = sse([
      chunk("Hel", { promptTokenCount: 12, totalTokenCount: 12 }),
      chunk("lo", { promptTokenCount: 12, candidatesTokenCount: 20, totalTokenCount: 32 }),
      last,
    ]);
    expect(meter("gemini", "text/event-stream", stream, 11)).toEqual(want);
    expect(meter("gemini", "application/json", JSON.stringify([chunk("a", { promptTokenCount: 12, totalTokenCount: 12 }), last]))).toEqual(want);
  });
});

describe("answers the meter leaves alone", () => {
  test("no usage, not JSON, an error body, a huge JSON answer, an oversized event line: no reading, no throw", () => {
    expect(meter("openai", "application/json", JSON.stringify({ error: { message: "quota", type: "insufficient_quota" } }))).toBeUndefined();
    expect(meter("openai", "application/json", "{not json")).toBeUndefined();
    expect(meter("anthropic", "text/event-stream", "data: {broken\n\ndata: [DONE]\n\n")).toBeUndefined();
    const huge = `{"usage":{"prompt_tokens":1,"completion_tokens":1},"pad":"${"x".repeat(MAX_METERED_JSON_BYTES)}"}`;
    expect(meter("openai", "application/json", huge, 1 << 20)).toBeUndefined();
    const longLine = `data: {"usage":{"prompt_tokens":1},"pad":"${"y".repeat(2 * 1024 * 1024)}"}\n\n${sse([{ model: "m", usage: { prompt_tokens: 4, completion_tokens: 2 } }])}`;
    expect(meter("openai", "text/event-stream", longLine, 1 << 16)).toEqual({
      provider: "openai",
      model: "m",
      inputTokens: 4,
      outputTokens: 2,
      totalTokens: 6,
    });
  });

  test("counts that are not non-negative integers are not taken", () => {
    expect(meter("openai", "application/json", JSON.stringify({ usage: { prompt_tokens: -1, completion_tokens: 1.5, total_tokens: "9" } }))).toBeUndefined();
  });
});
