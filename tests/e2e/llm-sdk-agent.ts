// An agent using the official OpenAI and Anthropic SDKs, run under `broker vault run` by llm-budgets.test.ts: it holds
// placeholder API keys only, and its HTTPS goes through the broker (HTTPS_PROXY, the broker's CA). Each step named in
// argv is one SDK call; one JSON line per step says what the SDK returned, or the error it surfaced (status, body).

import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const openai = new OpenAI({ apiKey: "placeholder", baseURL: process.env.OPENAI_BASE_URL });
const anthropic = new Anthropic({ apiKey: "placeholder", baseURL: process.env.ANTHROPIC_BASE_URL });
const messages = [{ role: "user" as const, content: "Say hello." }];

type Step = () => Promise<Record<string, unknown>>;

const STEPS: Record<string, Step> = {
  async "openai.chat"() {
    const r = await openai.chat.completions.create({ model: "gpt-4o-mini", messages });
    return { usage: r.usage, text: r.choices[0]?.message.content };
  },
  async "openai.chat.stream"() {
    // The agent does not ask for usage: the broker does, and the agent must not see it (no usage field, no extra chunk).
    const stream = await openai.chat.completions.create({ model: "gpt-4o-mini", messages, stream: true });
    let text = "";
    let usageFields = 0;
    let chunks = 0;
    for await (const c of stream) {
      chunks++;
      if ("usage" in c) usageFields++;
      text += c.choices[0]?.delta?.content ?? "";
    }
    return { text, chunks, usageFields };
  },
  async "openai.chat.stream.usage"() {
    const stream = await openai.chat.completions.create({ model: "gpt-4o-mini", messages, stream: true, stream_options: { include_usage: true } });
    let usage: unknown;
    let text = "";
    for await (const c of stream) {
      if (c.usage) usage = c.usage;
      text += c.choices[0]?.delta?.content ?? "";
    }
    return { usage, text };
  },
  async "openai.responses"() {
    const r = await openai.responses.create({ model: "gpt-4.1-mini", input: "Say hello." });
    return { usage: r.usage, text: r.output_text };
  },
  async "openai.responses.stream"() {
    const stream = await openai.responses.create({ model: "gpt-4.1-mini", input: "Say hello.", stream: true });
    let usage: unknown;
    for await (const e of stream) if (e.type === "response.completed") usage = e.response.usage;
    return { usage };
  },
  async "openai.embeddings"() {
    const r = await openai.embeddings.create({ model: "text-embedding-3-small", input: "hello" });
    return { usage: r.usage };
  },
  async "anthropic.messages"() {
    const r = await anthropic.messages.create({ model: "claude-haiku-4-5", max_tokens: 64, messages });
    return { usage: r.usage, text: r.content[0]?.type === "text" ? r.content[0].text : null };
  },
  async "anthropic.stream"() {
    const m = await anthropic.messages.stream({ model: "claude-haiku-4-5", max_tokens: 64, messages }).finalMessage();
    return { usage: m.usage, text: m.content[0]?.type === "text" ? m.content[0].text : null };
  },
};

for (const name of process.argv.slice(2)) {
  const step = STEPS[name];
  if (!step) throw new Error(`no step ${name}`);
  try {
    console.log(JSON.stringify({ step: name, ok: true, ...(await step()) }));
  } catch (err) {
    const e = err as { status?: number; error?: unknown; headers?: Headers | Record<string, string>; message?: string };
    const headers = e.headers instanceof Headers ? Object.fromEntries(e.headers) : (e.headers ?? {});
    console.log(JSON.stringify({ step: name, ok: false, status: e.status ?? null, error: e.error ?? null, headers, message: e.message ?? String(err) }));
  }
}
