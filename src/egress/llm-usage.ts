// What an LLM call used, read from the answer as it passes (issue 38, docs/architecture.md D26): the token counts the
// provider reported and the model, for OpenAI-compatible APIs (chat completions, responses, embeddings), Anthropic
// messages and Google Gemini, whole JSON answers and streamed ones (server-sent events, the usage in the events that
// carry it). The meter is handed the body's chunks as they are sent on and never holds the stream: an event stream is
// read a line at a time, a JSON answer is copied aside up to a bound and read at its end. Only answers to a known LLM
// route are metered, so no other response pays for it.

import { canonicalPath } from "../policy/index.ts";

/** Tokens as the provider reported them; absent where it did not say. */
export interface LlmUsage {
  readonly provider: LlmProvider;
  readonly model: string | null;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly totalTokens: number;
}

export type LlmProvider = "openai" | "anthropic" | "gemini";

/** What a metered call used, as the audit record, the metrics and budgets keep it. */
export interface CallUsage {
  readonly model: string | null;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly totalTokens: number;
  /** Micro-units of the price table's currency; undefined: the table does not price the model. */
  readonly costMicros: number | undefined;
  /** What budgets' money limits count: the cost, or for an unpriced model its tokens at the table's dearest prices. */
  readonly chargedMicros: number;
  /** The price table's currency. */
  readonly currency: string;
}

/** Which provider's shape a request's path has, or undefined for any other request (not metered). */
export function llmRouteOf(method: string, path: string): LlmProvider | undefined {
  if (method !== "POST") return undefined;
  // As servers route it: percent-escapes decoded (`/v1/chat/%63ompletions` is chat completions), so a spelling the
  // upstream serves is not one the meter misses.
  const raw = path.split("?")[0]!;
  const canonical = canonicalPath(raw);
  const p = canonical.ok ? `/${canonical.segments.join("/")}` : raw;
  if (/\/(chat\/completions|completions|responses|embeddings)$/.test(p)) return "openai";
  if (/\/v1\/messages$/.test(p)) return "anthropic";
  if (/\/models\/[^/]+:(generateContent|streamGenerateContent)$/.test(p)) return "gemini";
  return undefined;
}

/**
 * When the agent stops reading a metered stream (it hung up, perhaps once it had the text and before the usage came),
 * the broker reads on for at most this long and this much, so the usage that follows the text is still counted;
 * the upstream may go on generating for that long.
 */
export const DRAIN_MS = 2000;
export const DRAIN_BYTES = 1024 * 1024;

/** A JSON answer is read for its usage only up to this size (larger ones are left unmetered, and say so). */
export const MAX_METERED_JSON_BYTES = 8 * 1024 * 1024;
/** A line of an event stream longer than this is skipped (the usage events are small). */
const MAX_EVENT_LINE = 1024 * 1024;

export interface UsageMeter {
  /** The next chunk of the (decoded) body, as it is sent on. */
  push(chunk: Uint8Array): void;
  /** At the body's end: the usage, or undefined when the answer carried none (or was not readable). */
  finish(): LlmUsage | undefined;
}

/** A meter for an answer of `provider` with this content type (event stream or JSON; anything else: none). */
export function createUsageMeter(provider: LlmProvider, contentType: string | null): UsageMeter | undefined {
  const type = (contentType ?? "").toLowerCase();
  if (type.startsWith("text/event-stream")) return eventStreamMeter(provider);
  if (type.includes("json")) return jsonMeter(provider);
  return undefined;
}

/** The running totals a stream's events add up to. */
interface Tally {
  model: string | null;
  input?: number;
  output?: number;
  total?: number;
}

function result(provider: LlmProvider, t: Tally): LlmUsage | undefined {
  if (t.input === undefined && t.output === undefined && t.total === undefined) return undefined;
  const input = t.input ?? 0;
  const output = t.output ?? 0;
  return { provider, model: t.model, inputTokens: input, outputTokens: output, totalTokens: t.total ?? input + output };
}

const count = (v: unknown): number | undefined => (typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : undefined);
const text = (v: unknown): string | null => (typeof v === "string" && v.length <= 200 ? v : null);
const obj = (v: unknown): Record<string, unknown> | undefined => (v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);

/**
 * Folds one JSON document (a whole answer, or one event's data) into the tally, by the provider's shape. Streams
 * report usage cumulatively (Anthropic's message_delta, Gemini's chunks, OpenAI's last chunk), so later values replace
 * earlier ones; Anthropic's input tokens come in message_start only.
 */
export function foldUsage(provider: LlmProvider, doc: unknown, t: Tally): void {
  const d = obj(doc);
  if (!d) return;
  if (provider === "openai") {
    // Responses API events carry the response object; chat chunks and whole answers carry usage at the top.
    const body = obj(d.response) ?? d;
    t.model = text(body.model) ?? t.model;
    const u = obj(body.usage);
    if (!u) return;
    t.input = count(u.prompt_tokens) ?? count(u.input_tokens) ?? t.input;
    t.output = count(u.completion_tokens) ?? count(u.output_tokens) ?? t.output;
    t.total = count(u.total_tokens) ?? t.total;
    return;
  }
  if (provider === "anthropic") {
    const message = obj(d.message) ?? (d.type === "message" ? d : undefined);
    if (message) t.model = text(message.model) ?? t.model;
    const u = obj(message?.usage) ?? obj(d.usage);
    if (!u) return;
    const input = count(u.input_tokens);
    if (input !== undefined) {
      // Cache reads and writes are input the model was given too; they are billed (at other rates) and counted.
      t.input = input + (count(u.cache_creation_input_tokens) ?? 0) + (count(u.cache_read_input_tokens) ?? 0);
    }
    t.output = count(u.output_tokens) ?? t.output;
    return;
  }
  t.model = text(d.modelVersion) ?? t.model;
  const u = obj(d.usageMetadata);
  if (!u) return;
  t.input = count(u.promptTokenCount) ?? t.input;
  t.output = (count(u.candidatesTokenCount) ?? 0) + (count(u.thoughtsTokenCount) ?? 0) || t.output;
  t.total = count(u.totalTokenCount) ?? t.total;
}

function jsonMeter(provider: LlmProvider): UsageMeter {
  const parts: Uint8Array[] = [];
  let size = 0;
  let tooBig = false;
  return {
    push(chunk) {
      if (tooBig) return;
      size += chunk.byteLength;
      if (size > MAX_METERED_JSON_BYTES) {
        tooBig = true;
        parts.length = 0;
        return;
      }
      parts.push(chunk.slice());
    },
    finish() {
      if (tooBig || size === 0) return undefined;
      let doc: unknown;
      try {
        doc = JSON.parse(Buffer.concat(parts).toString("utf8"));
      } catch {
        return undefined;
      }
      const t: Tally = { model: null };
      // Gemini's non-streamed streamGenerateContent answers a JSON array of chunks.
      for (const d of Array.isArray(doc) ? doc : [doc]) foldUsage(provider, d, t);
      return result(provider, t);
    },
  };
}

function eventStreamMeter(provider: LlmProvider): UsageMeter {
  const decoder = new TextDecoder();
  const t: Tally = { model: null };
  let line = "";
  let skipping = false;
  const take = (l: string) => {
    // Only `data:` lines that can hold usage or the model are parsed; the rest (the tokens themselves) are skipped.
    if (!l.startsWith("data:")) return;
    const data = l.slice(5).trim();
    if (data === "[DONE]" || !(data.includes("usage") || data.includes('"model') || data.includes("modelVersion"))) return;
    try {
      foldUsage(provider, JSON.parse(data), t);
    } catch {
      // not JSON: not an event that carries usage
    }
  };
  return {
    push(chunk) {
      const s = decoder.decode(chunk, { stream: true });
      let from = 0;
      for (;;) {
        const nl = s.indexOf("\n", from);
        if (nl < 0) break;
        const piece = s.slice(from, nl).replace(/\r$/, "");
        if (!skipping) take(line + piece);
        line = "";
        skipping = false;
        from = nl + 1;
      }
      if (!skipping) {
        line += s.slice(from);
        if (line.length > MAX_EVENT_LINE) {
          line = "";
          skipping = true;
        }
      }
    },
    finish() {
      if (!skipping && line) take(line.replace(/\r$/, ""));
      return result(provider, t);
    },
  };
}
