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

/**
 * A target's path as servers route it: without its query, percent-escapes decoded (`/v1/chat/%63ompletions` is chat
 * completions), so a spelling the upstream serves is not one the meter misses.
 */
export function llmPathOf(target: string): string {
  const raw = target.split("?")[0]!;
  const canonical = canonicalPath(raw);
  if (canonical.ok) return `/${canonical.segments.join("/")}`.replace(/\/+$/, "").toLowerCase();
  // A spelling rules would refuse, read as the loosest server would: every escape decoded (%2F too), `;params`
  // dropped, slashes collapsed, case ignored. Metering a path that is not an LLM call costs little; missing one is a
  // call no budget sees.
  let loose = raw;
  try {
    loose = decodeURIComponent(raw);
  } catch {
    // a bad escape: as written
  }
  return loose
    .replace(/\\/g, "/")
    .split("/")
    .map((s) => s.split(";")[0]!)
    .filter(Boolean)
    .reduce((p, s) => `${p}/${s}`, "")
    .toLowerCase();
}

/** Which provider's shape a request's path has, or undefined for any other request (not metered). */
export function llmRouteOf(method: string, path: string): LlmProvider | undefined {
  if (method !== "POST") return undefined;
  const p = llmPathOf(path);
  if (/\/(chat\/completions|completions|responses|embeddings)$/.test(p)) return "openai";
  if (/\/v1\/messages$/.test(p)) return "anthropic";
  if (/\/models\/[^/]+:(generatecontent|streamgeneratecontent)$/.test(p)) return "gemini";
  return undefined;
}

/**
 * LLM calls whose usage never passes the broker in their answer: batches (the work is done later, read elsewhere).
 * Under a token or money budget they are refused (stage-budget.ts).
 */
export function unmeteredLlmRoute(method: string, path: string): boolean {
  return method === "POST" && /\/(batches|messages\/batches)$/.test(llmPathOf(path));
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
/** A line of an event stream longer than this is not held: its edges are read for the usage (foldEdges). */
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
export interface Tally {
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
  const copy = new GrowingBytes(MAX_METERED_JSON_BYTES);
  let size = 0;
  const edges = edgeKeeper();
  return {
    push(chunk) {
      size += chunk.byteLength;
      if (size > MAX_METERED_JSON_BYTES) {
        // Past what is read whole: only the edges are kept from here on.
        if (copy.length) {
          edges.push(copy.bytes());
          copy.clear();
        }
        edges.push(chunk);
        return;
      }
      copy.push(chunk);
    },
    finish() {
      if (size === 0) return undefined;
      const t: Tally = { model: null };
      // Larger than is read whole (embeddings of thousands of inputs): the usage and the model are near its edges.
      if (size > MAX_METERED_JSON_BYTES) {
        foldEdges(provider, edges.head(), edges.tail(), t);
        return result(provider, t);
      }
      let doc: unknown;
      try {
        doc = JSON.parse(Buffer.from(copy.bytes()).toString("utf8"));
      } catch {
        return undefined;
      }
      // Gemini's non-streamed streamGenerateContent answers a JSON array of chunks.
      for (const d of Array.isArray(doc) ? doc : [doc]) foldUsage(provider, d, t);
      return result(provider, t);
    },
  };
}

/** An event's data that can carry usage (an object, not `"usage":null`) or, until it is known, the model. */
const USAGE_OBJECT = /"usage(?:Metadata)?"\s*:\s*\{/;

function eventStreamMeter(provider: LlmProvider): UsageMeter {
  const decoder = new TextDecoder();
  const t: Tally = { model: null };
  let line = "";
  /** The line is longer than is held: only its edges are kept, where an event's usage and model are. */
  let long: ReturnType<typeof textEdges> | undefined;
  const take = (l: string) => {
    // Only `data:` lines that can hold usage or the model are parsed; the rest (the tokens themselves) are skipped.
    if (!l.startsWith("data:")) return;
    const data = l.slice(5).trim();
    if (data === "[DONE]") return;
    const model = t.model === null && (data.includes('"model') || data.includes("modelVersion"));
    if (!model && !USAGE_OBJECT.test(data)) return;
    try {
      foldUsage(provider, JSON.parse(data), t);
    } catch {
      // not JSON: not an event that carries usage
    }
  };
  const endLine = (piece: string) => {
    if (long) {
      long.push(piece);
      if (long.head.startsWith("data:")) foldEdges(provider, long.head, long.tail, t);
      long = undefined;
    } else take(line + piece);
    line = "";
  };
  return {
    push(chunk) {
      const s = decoder.decode(chunk, { stream: true });
      let from = 0;
      for (;;) {
        const nl = s.indexOf("\n", from);
        if (nl < 0) break;
        endLine(s.slice(from, nl).replace(/\r$/, ""));
        from = nl + 1;
      }
      const rest = s.slice(from);
      if (long) long.push(rest);
      else {
        line += rest;
        if (line.length > MAX_EVENT_LINE) {
          long = textEdges(line);
          line = "";
        }
      }
    },
    finish() {
      if (long || line) endLine("");
      return result(provider, t);
    },
  };
}

/** How much of each edge of an oversized answer or event is kept: the usage object and the model fit well inside. */
const EDGE = 64 * 1024;

/** The first and last EDGE characters of a text that arrives in pieces. */
function textEdges(first: string): { push(piece: string): void; readonly head: string; readonly tail: string } {
  let head = first.slice(0, EDGE);
  let tail = first.slice(-EDGE);
  return {
    push(piece) {
      if (head.length < EDGE) head = (head + piece).slice(0, EDGE);
      tail = (tail + piece).slice(-EDGE);
    },
    get head() {
      return head;
    },
    get tail() {
      return tail;
    },
  };
}

/**
 * Bytes copied into one buffer that doubles as it fills (never past `max`): a hostile upstream's one-byte chunks cost
 * one copy each, not an object each.
 */
export class GrowingBytes {
  private buf = new Uint8Array(0);
  length = 0;
  constructor(private readonly max: number) {}
  push(chunk: Uint8Array): void {
    const need = this.length + chunk.byteLength;
    if (need > this.buf.byteLength) {
      const next = new Uint8Array(Math.min(this.max, Math.max(need, this.buf.byteLength * 2, 4096)));
      next.set(this.buf.subarray(0, this.length));
      this.buf = next;
    }
    this.buf.set(chunk, this.length);
    this.length = need;
  }
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
  clear(): void {
    this.buf = new Uint8Array(0);
    this.length = 0;
  }
}

/** The first and last EDGE bytes of a body, as text: two fixed buffers, however the body is cut. */
function edgeKeeper(): { push(chunk: Uint8Array): void; head(): string; tail(): string } {
  const head = new GrowingBytes(EDGE);
  // The tail is a ring of EDGE bytes: `end` is where the next byte goes, `filled` whether it has wrapped.
  const ring = new Uint8Array(EDGE);
  let end = 0;
  let filled = false;
  return {
    push(chunk) {
      if (head.length < EDGE) head.push(chunk.subarray(0, EDGE - head.length));
      const last = chunk.byteLength > EDGE ? chunk.subarray(chunk.byteLength - EDGE) : chunk;
      const first = Math.min(last.byteLength, EDGE - end);
      ring.set(last.subarray(0, first), end);
      ring.set(last.subarray(first), 0);
      if (end + last.byteLength >= EDGE) filled = true;
      end = (end + last.byteLength) % EDGE;
    },
    head: () => Buffer.from(head.bytes()).toString("utf8"),
    tail: () => Buffer.concat(filled ? [ring.subarray(end), ring.subarray(0, end)] : [ring.subarray(0, end)]).toString("utf8"),
  };
}

/**
 * Folds the usage found at an oversized text's edges: the last usage object in its tail (its key outside any string:
 * a quote inside a JSON string is escaped) and the model named in its head or tail.
 */
export function foldEdges(provider: LlmProvider, head: string, tail: string, t: Tally): void {
  const key = provider === "gemini" ? "usageMetadata" : "usage";
  const usage = lastObjectAfter(tail, new RegExp(`"${key}"\\s*:\\s*\\{`, "g"));
  const modelKey = provider === "gemini" ? "modelVersion" : "model";
  const named = new RegExp(`"${modelKey}"\\s*:\\s*"([^"\\\\]{1,200})"`);
  const model = named.exec(head)?.[1] ?? named.exec(tail)?.[1];
  foldUsage(provider, { [key]: usage, ...(model && { [modelKey]: model }) }, t);
}

/** The JSON object that starts at the last match of `opener` (ending in `{`), parsed; undefined when cut off. */
function lastObjectAfter(text: string, opener: RegExp): unknown {
  let at = -1;
  for (const m of text.matchAll(opener)) at = m.index + m[0].length - 1;
  if (at < 0) return undefined;
  let depth = 0;
  let inString = false;
  for (let i = at; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) {
      try {
        return JSON.parse(text.slice(at, i + 1));
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}
