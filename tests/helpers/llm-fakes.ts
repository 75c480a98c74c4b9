// Fake LLM provider APIs on loopback: one server answers as OpenAI (chat completions, responses,
// embeddings), Anthropic (messages, count_tokens) and Google Gemini (generateContent,
// streamGenerateContent, countTokens) do, in their published wire shapes (bodies, SSE framing,
// x-request-id / request-id headers, error bodies), so the official SDKs run against it unchanged.
// HTTPS with a throwaway test CA (startUpstream) by default, plain HTTP with `tls: false`.
// Token counts are deterministic: derived from the request's words, or set by the test. Every request
// is recorded (headers, credential, parsed body, what was answered, whether the client stayed to the
// end). Streams can be split into N content chunks and slowed (first-token timing benches), and any
// status can be answered with the provider's own error body.

import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestPki } from "./pki.ts";
import { startUpstream, type TestUpstream } from "./upstream.ts";

export type LlmProvider = "openai" | "anthropic" | "gemini";
export type LlmEndpoint =
  | "chat.completions"
  | "responses"
  | "embeddings"
  | "messages"
  | "messages.count_tokens"
  | "generateContent"
  | "streamGenerateContent"
  | "countTokens";

/**
 * Token counts, provider-neutral. `input` counts every input token, cached ones included; `output`
 * every output token, reasoning included. Each provider states them its own way: OpenAI
 * prompt_tokens = input (cached_tokens inside it), completion_tokens = output (reasoning_tokens
 * inside it); Anthropic input_tokens = input − cachedInput − cacheWrite, with cache_read_input_tokens
 * and cache_creation_input_tokens beside it; Gemini promptTokenCount = input (cachedContentTokenCount
 * inside it), candidatesTokenCount = output − reasoning, thoughtsTokenCount = reasoning.
 */
export interface LlmUsage {
  input: number;
  output: number;
  /** Input tokens read from a prompt cache (default 0). */
  cachedInput: number;
  /** Input tokens written to a prompt cache: Anthropic's cache_creation_input_tokens (default 0). */
  cacheWrite: number;
  /** Output tokens spent reasoning (default 0). */
  reasoning: number;
}

/** An error to answer with, in the provider's error shape; type/code/message default by status. */
export interface LlmError {
  status: number;
  message?: string;
  /** OpenAI error.type, Anthropic error.type, Gemini error.status. */
  type?: string;
  /** OpenAI error.code (Anthropic and Gemini have none). */
  code?: string | null;
  headers?: Record<string, string>;
}

/** What the fake answers; mutable on `fake.config` between requests. */
export interface LlmFakeConfig {
  /** The reply text (default: a fixed nine-word sentence). */
  text: string | ((req: LlmRequest) => string);
  /** Content chunks a stream splits the text into (default 3; at most the text's length). */
  chunks: number;
  /** Wait before each streamed content chunk (default 0). */
  chunkDelayMs: number;
  /** Wait before the first content chunk instead (default: chunkDelayMs); the opening events go out at once. */
  firstChunkDelayMs: number | undefined;
  /** Token counts, fixed or per request; missing fields are derived (input: words of the prompt, output: words of the reply). */
  usage: Partial<LlmUsage> | ((req: LlmRequest) => Partial<LlmUsage>) | undefined;
  /** Answer with this error instead (for every request, or those the function picks). */
  error: LlmError | ((req: LlmRequest) => LlmError | undefined) | undefined;
  /** When set, a request must carry it (Bearer / x-api-key / x-goog-api-key or ?key=) or gets the provider's auth error. */
  apiKey: string | undefined;
  /** Embedding length when the request gives no `dimensions` (default 8). */
  embeddingDimensions: number;
  /**
   * Anthropic message_delta usage: "cumulative" (default; input_tokens, the cache counts and output_tokens, all
   * whole-message totals, as the API documents MessageDeltaUsage) or "output-only" ({output_tokens}).
   */
  anthropicDeltaUsage: "cumulative" | "output-only";
}

/** One request the fake got, and what it answered. */
export interface LlmRequest {
  /** 0-based arrival order. */
  seq: number;
  provider: LlmProvider | undefined;
  endpoint: LlmEndpoint | undefined;
  method: string;
  /** The path without the query. */
  path: string;
  query: URLSearchParams;
  /** Header names lower-cased (node:http's view). */
  headers: IncomingHttpHeaders;
  /** Header pairs in arrival order, names as sent. */
  rawHeaders: [string, string][];
  rawBody: string;
  /** The body parsed as JSON; undefined when absent or not JSON. */
  body: any;
  /** The credential by the provider's scheme: OpenAI's Bearer token, Anthropic's x-api-key (or Bearer), Gemini's x-goog-api-key or ?key=. */
  credential: string | undefined;
  /** body.model, or the Gemini path's model. */
  model: string | undefined;
  stream: boolean;
  /** OpenAI chat: body.stream_options.include_usage === true. */
  includeUsage: boolean;
  /** The status answered (0 until then). */
  status: number;
  /** The x-request-id (OpenAI) / request-id (Anthropic) answered; Gemini's responseId. */
  requestId: string;
  /** The usage answered, when a success carried one. */
  usage: LlmUsage | undefined;
  /** The reply text answered. */
  text: string;
  /** Content chunks written so far (streams). */
  chunksSent: number;
  /** The whole answer was written. */
  finished: boolean;
  /** The client went away before the end. */
  aborted: boolean;
  /** Settles when the answer is finished or the client went away. */
  settled: Promise<void>;
}

export interface LlmFake {
  /** `https://127.0.0.1:<port>` (or http://, or the listen host given). */
  readonly url: string;
  readonly port: number;
  readonly tls: boolean;
  /** The test PKI (HTTPS only): trust `pki.caPem`. */
  readonly pki: TestPki | undefined;
  readonly caPem: string | undefined;
  /** For `new OpenAI({ baseURL })`: url + "/v1". */
  readonly openaiBaseURL: string;
  /** For `new Anthropic({ baseURL })`: url (the SDK adds /v1). */
  readonly anthropicBaseURL: string;
  /** Gemini REST base: url + "/v1beta". */
  readonly geminiBaseURL: string;
  readonly config: LlmFakeConfig;
  readonly requests: LlmRequest[];
  /** The newest request (throws when none came). */
  last(): LlmRequest;
  /** fetch that trusts the test CA (Bun's `tls.ca`): pass as the SDKs' `fetch` option. */
  readonly fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
  /** The underlying HTTPS upstream (raw received bytes), when tls. */
  readonly upstream: TestUpstream | undefined;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface LlmFakeOptions extends Partial<LlmFakeConfig> {
  /** HTTPS with a fresh test CA (default true). */
  tls?: boolean;
  /** listen address (default 127.0.0.1) */
  host?: string;
  /** listen port (default: any free one) */
  port?: number;
  /** certificate names (HTTPS), as startUpstream takes them */
  names?: { dns?: string[]; ips?: string[] };
  keepAliveTimeoutMs?: number;
  /** Further paths, each answered as the endpoint path it names (a bench's route that the broker does not meter). */
  aliases?: Record<string, string>;
}

export const DEFAULT_TEXT = "This is a deterministic reply from the fake model.";

/** Splits `text` into `n` non-empty consecutive pieces by length (joined, they give `text` back). */
export function splitText(text: string, n: number): string[] {
  const chars = Array.from(text);
  const count = Math.max(1, Math.min(Math.floor(n), chars.length));
  const out: string[] = [];
  for (let i = 0; i < count; i++) out.push(chars.slice(Math.round((i * chars.length) / count), Math.round(((i + 1) * chars.length) / count)).join(""));
  return out;
}

/** Words (whitespace-separated runs) in a text: the default token count. */
export function countWords(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

/** Parses an SSE body into its events (`event:` name and joined `data:` lines); accepts \n and \r\n. */
export function parseSse(body: string): { event: string | undefined; data: string }[] {
  const events: { event: string | undefined; data: string }[] = [];
  for (const block of body.split(/\r\n\r\n|\n\n|\r\r/)) {
    let event: string | undefined;
    const data: string[] = [];
    for (const line of block.split(/\r\n|\n|\r/)) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (data.length || event) events.push({ event, data: data.join("\n") });
  }
  return events;
}

// --- identifiers, in the providers' formats ---

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
function alnum(n: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(n));
  return Array.from(bytes, (b) => ALNUM[b % ALNUM.length]).join("");
}
const hex = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex");

// --- what the request asks ---

/** Every text a prompt holds: strings, `text` fields, and what sits under `content` / `parts`. */
function texts(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(texts);
  if (value && typeof value === "object") {
    const o = value as Record<string, unknown>;
    if (typeof o.text === "string") return [o.text];
    if ("content" in o) return texts(o.content);
    if ("parts" in o) return texts(o.parts);
  }
  return [];
}

function promptTokens(endpoint: LlmEndpoint | undefined, body: any): number {
  if (!body || typeof body !== "object") return 1;
  let roots: unknown[] = [];
  switch (endpoint) {
    case "chat.completions":
      roots = [body.messages];
      break;
    case "responses":
      roots = [body.instructions, body.input];
      break;
    case "embeddings": {
      // Strings count their words; token arrays count their tokens.
      const inputs = Array.isArray(body.input) && body.input.every((x: unknown) => typeof x === "number") ? [body.input] : [body.input].flat();
      return Math.max(
        1,
        inputs.reduce((n: number, x: unknown) => n + (typeof x === "string" ? countWords(x) : Array.isArray(x) ? x.length : 0), 0),
      );
    }
    case "messages":
    case "messages.count_tokens":
      roots = [body.system, body.messages];
      break;
    default:
      roots = [body.systemInstruction, body.contents];
  }
  return Math.max(1, countWords(roots.flatMap(texts).join(" ")));
}

function route(method: string, path: string): { provider: LlmProvider | undefined; endpoint: LlmEndpoint | undefined; model?: string } {
  const gemini = /^\/v1(?:beta|alpha)?\/models\/([^/:]+):(generateContent|streamGenerateContent|countTokens)$/.exec(path);
  if (gemini) return { provider: "gemini", endpoint: method === "POST" ? (gemini[2] as LlmEndpoint) : undefined, model: decodeURIComponent(gemini[1]!) };
  if (/^\/v1(?:beta|alpha)\//.test(path)) return { provider: "gemini", endpoint: undefined };
  if (path === "/v1/messages" || path.startsWith("/v1/messages/"))
    return {
      provider: "anthropic",
      endpoint:
        method !== "POST" ? undefined : path === "/v1/messages" ? "messages" : path === "/v1/messages/count_tokens" ? "messages.count_tokens" : undefined,
    };
  const openai: Record<string, LlmEndpoint> = { "/v1/chat/completions": "chat.completions", "/v1/responses": "responses", "/v1/embeddings": "embeddings" };
  return { provider: "openai", endpoint: method === "POST" ? openai[path] : undefined };
}

function credentialOf(provider: LlmProvider | undefined, headers: IncomingHttpHeaders, query: URLSearchParams): string | undefined {
  const bearer = /^Bearer (.+)$/.exec(headers.authorization ?? "")?.[1];
  const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  if (provider === "anthropic") return one(headers["x-api-key"]) ?? bearer;
  if (provider === "gemini") return one(headers["x-goog-api-key"]) ?? query.get("key") ?? undefined;
  return bearer;
}

// --- error bodies ---

const ANTHROPIC_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  504: "timeout_error",
  529: "overloaded_error",
};
const GEMINI_STATUSES: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  409: "ABORTED",
  429: "RESOURCE_EXHAUSTED",
  499: "CANCELLED",
  500: "INTERNAL",
  501: "NOT_IMPLEMENTED",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};
const MESSAGES: Record<number, string> = {
  400: "Invalid request.",
  401: "Invalid authentication.",
  403: "Permission denied.",
  404: "Not found.",
  429: "Rate limit reached. Please try again later.",
  500: "The server had an error while processing your request.",
  503: "The service is temporarily unavailable.",
  529: "Overloaded",
};

/** The provider's error body for `err`: OpenAI {error:{message,type,param,code}}, Anthropic {type:"error",error:{type,message},request_id}, Gemini {error:{code,message,status}}. */
export function errorBody(provider: LlmProvider | undefined, err: LlmError, requestId: string): unknown {
  const message = err.message ?? MESSAGES[err.status] ?? `Error ${err.status}`;
  if (provider === "anthropic")
    return {
      type: "error",
      error: { type: err.type ?? ANTHROPIC_TYPES[err.status] ?? (err.status >= 500 ? "api_error" : "invalid_request_error"), message },
      request_id: requestId,
    };
  if (provider === "gemini")
    return {
      error: { code: err.status, message, status: err.type ?? GEMINI_STATUSES[err.status] ?? (err.status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION") },
    };
  const type = err.type ?? (err.status === 429 ? "requests" : err.status >= 500 ? "server_error" : "invalid_request_error");
  const code = err.code !== undefined ? err.code : err.status === 429 ? "rate_limit_exceeded" : err.status === 401 ? "invalid_api_key" : null;
  return { error: { message, type, param: null, code } };
}

/** The auth error a provider gives for a missing or wrong key (never echoing it). */
function authError(provider: LlmProvider | undefined, missing: boolean): LlmError {
  if (provider === "anthropic") return { status: 401, message: missing ? "x-api-key header is required" : "invalid x-api-key" };
  if (provider === "gemini")
    return missing
      ? {
          status: 403,
          message:
            "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
        }
      : { status: 400, message: "API key not valid. Please pass a valid API key." };
  return missing
    ? {
        status: 401,
        message:
          "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        code: null,
      }
    : { status: 401, message: "Incorrect API key provided.", code: "invalid_api_key" };
}

// --- usage in each provider's words ---

function openaiChatUsage(u: LlmUsage) {
  return {
    prompt_tokens: u.input,
    completion_tokens: u.output,
    total_tokens: u.input + u.output,
    prompt_tokens_details: { cached_tokens: u.cachedInput, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: u.reasoning, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

function openaiResponsesUsage(u: LlmUsage) {
  return {
    input_tokens: u.input,
    input_tokens_details: { cached_tokens: u.cachedInput, cache_write_tokens: u.cacheWrite },
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: u.reasoning },
    total_tokens: u.input + u.output,
  };
}

function anthropicUsage(u: LlmUsage, outputTokens = u.output) {
  return {
    input_tokens: Math.max(0, u.input - u.cachedInput - u.cacheWrite),
    cache_creation_input_tokens: u.cacheWrite,
    cache_read_input_tokens: u.cachedInput,
    cache_creation: { ephemeral_5m_input_tokens: u.cacheWrite, ephemeral_1h_input_tokens: 0 },
    output_tokens: outputTokens,
    output_tokens_details: null,
    server_tool_use: null,
    service_tier: "standard",
    inference_geo: null,
    speed: null,
  };
}

/** message_delta's usage: cumulative whole-message totals (input ones included), or output_tokens alone as older answers gave it. */
function anthropicDeltaUsage(u: LlmUsage, style: LlmFakeConfig["anthropicDeltaUsage"]) {
  if (style === "output-only") return { output_tokens: u.output };
  const { input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens } = anthropicUsage(u);
  return { input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens };
}

function geminiUsage(u: LlmUsage, outputSoFar = u.output) {
  const candidates = Math.max(0, outputSoFar - u.reasoning);
  const thoughts = Math.min(u.reasoning, outputSoFar);
  return {
    promptTokenCount: u.input,
    candidatesTokenCount: candidates,
    totalTokenCount: u.input + candidates + thoughts,
    ...(u.cachedInput ? { cachedContentTokenCount: u.cachedInput } : {}),
    ...(thoughts ? { thoughtsTokenCount: thoughts } : {}),
    promptTokensDetails: [{ modality: "TEXT", tokenCount: u.input }],
    ...(u.cachedInput ? { cacheTokensDetails: [{ modality: "TEXT", tokenCount: u.cachedInput }] } : {}),
  };
}

/** A deterministic unit-ish vector for input `i`, seeded by its text. */
function embeddingOf(input: unknown, index: number, dims: number): number[] {
  let seed = 2166136261 ^ index;
  for (const ch of JSON.stringify(input ?? "")) seed = Math.imul(seed ^ ch.charCodeAt(0), 16777619);
  const out: number[] = [];
  for (let i = 0; i < dims; i++) {
    seed = Math.imul(seed ^ (seed >>> 15), 2246822507) ^ (i + 1);
    out.push(Math.fround(((seed >>> 0) / 0xffffffff) * 2 - 1));
  }
  return out;
}

// --- the server ---

export async function startLlmFake(opts: LlmFakeOptions = {}): Promise<LlmFake> {
  const { tls = true, host = "127.0.0.1", port: listenPort, names, keepAliveTimeoutMs, aliases = {}, ...given } = opts;
  const config: LlmFakeConfig = {
    text: DEFAULT_TEXT,
    chunks: 3,
    chunkDelayMs: 0,
    firstChunkDelayMs: undefined,
    usage: undefined,
    error: undefined,
    apiKey: undefined,
    embeddingDimensions: 8,
    anthropicDeltaUsage: "cumulative",
    ...given,
  };
  const requests: LlmRequest[] = [];

  const handler = (req: IncomingMessage, res: ServerResponse, raw: Buffer) => {
    const url = new URL(req.url ?? "/", "http://fake");
    const method = req.method ?? "";
    const { provider, endpoint, model: pathModel } = route(method, Object.hasOwn(aliases, url.pathname) ? aliases[url.pathname]! : url.pathname);
    const rawHeaders: [string, string][] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) rawHeaders.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
    const rawBody = raw.toString("utf8");
    let body: any;
    try {
      body = rawBody ? JSON.parse(rawBody) : undefined;
    } catch {
      body = undefined;
    }
    const stream =
      endpoint === "streamGenerateContent" ||
      ((endpoint === "chat.completions" || endpoint === "responses" || endpoint === "messages") && body?.stream === true);
    let settle!: () => void;
    const rec: LlmRequest = {
      seq: requests.length,
      provider,
      endpoint,
      method,
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      rawHeaders,
      rawBody,
      body,
      credential: credentialOf(provider, req.headers, url.searchParams),
      model: pathModel ?? (typeof body?.model === "string" ? body.model : undefined),
      stream,
      includeUsage: endpoint === "chat.completions" && body?.stream_options?.include_usage === true,
      status: 0,
      requestId: provider === "gemini" ? alnum(22) : provider === "anthropic" ? `req_011C${alnum(20)}` : `req_${hex(16)}`,
      usage: undefined,
      text: "",
      chunksSent: 0,
      finished: false,
      aborted: false,
      settled: new Promise<void>((resolve) => {
        settle = resolve;
      }),
    };
    requests.push(rec);
    res.on("close", () => {
      if (!res.writableFinished) rec.aborted = true;
      settle();
    });
    res.on("finish", () => {
      rec.finished = true;
      settle();
    });

    const idHeaders = (): Record<string, string> =>
      provider === "openai"
        ? {
            "x-request-id": rec.requestId,
            "openai-version": "2020-10-01",
            "openai-processing-ms": "1",
            "x-ratelimit-limit-requests": "10000",
            "x-ratelimit-remaining-requests": "9999",
            "x-ratelimit-reset-requests": "6ms",
            "x-ratelimit-limit-tokens": "30000000",
            "x-ratelimit-remaining-tokens": "29999000",
            "x-ratelimit-reset-tokens": "2ms",
          }
        : provider === "anthropic"
          ? { "request-id": rec.requestId, "anthropic-organization-id": "00000000-0000-4000-8000-000000000000" }
          : {};
    const json = (status: number, payload: unknown, extra: Record<string, string> = {}) => {
      rec.status = status;
      const text = JSON.stringify(payload);
      res.writeHead(status, {
        "content-type": provider === "gemini" ? "application/json; charset=UTF-8" : "application/json",
        "content-length": String(Buffer.byteLength(text)),
        ...idHeaders(),
        ...extra,
      });
      res.end(text);
    };
    const fail = (err: LlmError) => json(err.status, errorBody(provider, err, rec.requestId), err.headers);

    // Anything but the endpoints served: the provider's not-found answer.
    if (!endpoint) {
      if (provider === "anthropic") return fail({ status: 404, message: "Not Found" });
      if (provider === "gemini") return fail({ status: 404, message: `Method not found: ${method} ${url.pathname}` });
      return fail({ status: 404, message: `Invalid URL (${method} ${url.pathname})`, code: null });
    }
    if (config.apiKey !== undefined && rec.credential !== config.apiKey) return fail(authError(provider, rec.credential === undefined));
    const forced = typeof config.error === "function" ? config.error(rec) : config.error;
    if (forced) return fail(forced);
    if (!body || typeof body !== "object" || Array.isArray(body)) {
      if (provider === "anthropic") return fail({ status: 400, message: "There was an issue with the JSON body of the request." });
      if (provider === "gemini") return fail({ status: 400, message: "Invalid JSON payload received." });
      return fail({ status: 400, message: "We could not parse the JSON body of your request.", code: null });
    }
    if (provider !== "gemini" && typeof body.model !== "string") return fail({ status: 400, message: "model: Field required", code: null });
    if (provider === "anthropic") {
      // Anthropic requires a version; 2026-10-21 (what SDK 1.x sends) removed the sampling parameters.
      const version = req.headers["anthropic-version"];
      if (!version) return fail({ status: 400, message: "anthropic-version: header is required" });
      const removed = version >= "2026-10-21" ? ["temperature", "top_p", "top_k"].find((k) => k in body) : undefined;
      if (removed) return fail({ status: 400, message: `${removed}: Extra inputs are not permitted on API version ${version}` });
    }

    const counting = endpoint === "messages.count_tokens" || endpoint === "countTokens";
    rec.text = endpoint === "embeddings" || counting ? "" : typeof config.text === "function" ? config.text(rec) : config.text;
    const set = typeof config.usage === "function" ? config.usage(rec) : (config.usage ?? {});
    const usage: LlmUsage = {
      input: set.input ?? promptTokens(endpoint, body),
      output: set.output ?? (endpoint === "embeddings" ? 0 : Math.max(1, countWords(rec.text))),
      cachedInput: set.cachedInput ?? 0,
      cacheWrite: set.cacheWrite ?? 0,
      reasoning: set.reasoning ?? 0,
    };
    const model = rec.model ?? "unknown-model";
    const created = Math.floor(Date.now() / 1000);

    // --- non-streamed answers ---
    if (counting && provider === "anthropic") return json(200, { input_tokens: usage.input });
    if (counting) return json(200, { totalTokens: usage.input, promptTokensDetails: [{ modality: "TEXT", tokenCount: usage.input }] });
    rec.usage = usage;
    if (endpoint === "embeddings") {
      const inputs: unknown[] = Array.isArray(body.input) && !body.input.every((x: unknown) => typeof x === "number") ? body.input : [body.input];
      const dims = typeof body.dimensions === "number" ? body.dimensions : config.embeddingDimensions;
      const base64 = body.encoding_format === "base64";
      return json(200, {
        object: "list",
        data: inputs.map((input, index) => {
          const vector = embeddingOf(input, index, dims);
          return { object: "embedding", index, embedding: base64 ? Buffer.from(new Float32Array(vector).buffer).toString("base64") : vector };
        }),
        model,
        usage: { prompt_tokens: usage.input, total_tokens: usage.input },
      });
    }
    const chatId = `chatcmpl-${alnum(29)}`;
    const respId = `resp_${hex(24)}`;
    const itemId = `msg_${hex(24)}`;
    const msgId = `msg_01${alnum(22)}`;
    const fingerprint = "fp_fake0000";
    const responseObject = (status: "in_progress" | "completed", text: string | undefined) => ({
      id: respId,
      object: "response",
      created_at: created,
      status,
      access_programs: null,
      completed_at: status === "completed" ? Math.floor(Date.now() / 1000) : null,
      background: false,
      error: null,
      incomplete_details: null,
      instructions: body.instructions ?? null,
      max_output_tokens: body.max_output_tokens ?? null,
      model,
      output:
        text === undefined
          ? []
          : [
              {
                id: itemId,
                type: "message",
                status: "completed",
                role: "assistant",
                content: [{ type: "output_text", annotations: [], logprobs: [], text }],
              },
            ],
      parallel_tool_calls: true,
      previous_response_id: body.previous_response_id ?? null,
      reasoning: { effort: null, summary: null },
      service_tier: "default",
      store: body.store ?? true,
      temperature: body.temperature ?? 1,
      text: { format: { type: "text" }, verbosity: "medium" },
      tool_choice: "auto",
      tools: [],
      top_p: body.top_p ?? 1,
      truncation: "disabled",
      usage: text === undefined ? null : openaiResponsesUsage(usage),
      user: null,
      metadata: body.metadata ?? {},
    });
    const geminiChunk = (text: string, outputSoFar: number, last: boolean) => ({
      candidates: [{ content: { parts: [{ text }], role: "model" }, ...(last ? { finishReason: "STOP" } : {}), index: 0 }],
      usageMetadata: geminiUsage(usage, outputSoFar),
      modelVersion: model,
      responseId: rec.requestId,
    });

    if (!stream) {
      if (endpoint === "chat.completions")
        return json(200, {
          id: chatId,
          object: "chat.completion",
          created,
          model,
          choices: [{ index: 0, message: { role: "assistant", content: rec.text, refusal: null, annotations: [] }, logprobs: null, finish_reason: "stop" }],
          usage: openaiChatUsage(usage),
          service_tier: "default",
          system_fingerprint: fingerprint,
        });
      if (endpoint === "responses") return json(200, responseObject("completed", rec.text));
      if (endpoint === "messages")
        return json(200, {
          id: msgId,
          type: "message",
          role: "assistant",
          model,
          content: [{ type: "text", text: rec.text, citations: null }],
          stop_reason: "end_turn",
          stop_sequence: null,
          stop_details: null,
          container: null,
          diagnostics: null,
          usage: anthropicUsage(usage),
        });
      return json(200, geminiChunk(rec.text, usage.output, true));
    }

    // --- streams ---
    const pieces = splitText(rec.text, config.chunks);
    const sse = provider !== "gemini" || url.searchParams.get("alt") === "sse";
    rec.status = 200;
    res.writeHead(200, {
      "content-type": sse ? (provider === "gemini" ? "text/event-stream" : "text/event-stream; charset=utf-8") : "application/json; charset=UTF-8",
      "cache-control": "no-cache",
      ...idHeaders(),
    });
    res.flushHeaders();
    const gone = () => res.destroyed || res.writableEnded;
    const send = (text: string) => {
      if (!gone()) res.write(text);
    };
    const data = (payload: unknown) => send(`data: ${JSON.stringify(payload)}\n\n`);
    const event = (type: string, payload: unknown) => send(`event: ${type}\ndata: ${JSON.stringify(payload)}\n\n`);
    /** Writes each content piece after its delay; stops when the client is gone. */
    const eachPiece = async (write: (piece: string, i: number) => void) => {
      for (const [i, piece] of pieces.entries()) {
        const wait = i === 0 ? (config.firstChunkDelayMs ?? config.chunkDelayMs) : config.chunkDelayMs;
        if (wait > 0) await Bun.sleep(wait);
        if (gone()) return false;
        write(piece, i);
        rec.chunksSent++;
      }
      return true;
    };
    const end = () => {
      if (!gone()) res.end();
    };

    void (async () => {
      if (endpoint === "chat.completions") {
        const usageNull = rec.includeUsage ? { usage: null } : {};
        const chunk = (choices: unknown[], extra: Record<string, unknown> = usageNull) => ({
          id: chatId,
          object: "chat.completion.chunk",
          created,
          model,
          service_tier: "default",
          system_fingerprint: fingerprint,
          choices,
          ...extra,
        });
        data(chunk([{ index: 0, delta: { role: "assistant", content: "", refusal: null }, logprobs: null, finish_reason: null }]));
        if (!(await eachPiece((piece) => data(chunk([{ index: 0, delta: { content: piece }, logprobs: null, finish_reason: null }]))))) return;
        data(chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }]));
        if (rec.includeUsage) data(chunk([], { usage: openaiChatUsage(usage) }));
        send("data: [DONE]\n\n");
        return end();
      }
      if (endpoint === "responses") {
        let seq = 0;
        const ev = (type: string, fields: Record<string, unknown>) => event(type, { type, sequence_number: seq++, ...fields });
        const part = (text: string) => ({ type: "output_text", annotations: [], logprobs: [], text });
        const at = { item_id: itemId, output_index: 0, content_index: 0 };
        ev("response.created", { response: responseObject("in_progress", undefined) });
        ev("response.in_progress", { response: responseObject("in_progress", undefined) });
        ev("response.output_item.added", { output_index: 0, item: { id: itemId, type: "message", status: "in_progress", content: [], role: "assistant" } });
        ev("response.content_part.added", { ...at, part: part("") });
        if (!(await eachPiece((piece) => ev("response.output_text.delta", { ...at, delta: piece, logprobs: [] })))) return;
        ev("response.output_text.done", { ...at, text: rec.text, logprobs: [] });
        ev("response.content_part.done", { ...at, part: part(rec.text) });
        ev("response.output_item.done", {
          output_index: 0,
          item: { id: itemId, type: "message", status: "completed", content: [part(rec.text)], role: "assistant" },
        });
        ev("response.completed", { response: responseObject("completed", rec.text) });
        return end();
      }
      if (endpoint === "messages") {
        event("message_start", {
          type: "message_start",
          message: {
            id: msgId,
            type: "message",
            role: "assistant",
            model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            stop_details: null,
            container: null,
            diagnostics: null,
            usage: anthropicUsage(usage, 1),
          },
        });
        event("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "", citations: null } });
        event("ping", { type: "ping" });
        if (!(await eachPiece((piece) => event("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: piece } }))))
          return;
        event("content_block_stop", { type: "content_block_stop", index: 0 });
        event("message_delta", {
          type: "message_delta",
          delta: { stop_reason: "end_turn", stop_sequence: null, stop_details: null },
          usage: anthropicDeltaUsage(usage, config.anthropicDeltaUsage),
        });
        event("message_stop", { type: "message_stop" });
        return end();
      }
      // Gemini: every chunk a GenerateContentResponse with cumulative usageMetadata (the last is the total);
      // SSE frames end in \r\n\r\n as Google's do; without alt=sse, one JSON array written piece by piece.
      if (!sse) send("[");
      const ok = await eachPiece((piece, i) => {
        const last = i === pieces.length - 1;
        const outputSoFar = last ? usage.output : Math.floor((usage.output * (i + 1)) / pieces.length);
        const payload = JSON.stringify(geminiChunk(piece, outputSoFar, last));
        send(sse ? `data: ${payload}\r\n\r\n` : `${i ? ",\r\n" : ""}${payload}`);
      });
      if (!ok) return;
      if (!sse) send("]");
      end();
    })();
  };

  let upstream: TestUpstream | undefined;
  let port: number;
  let close: () => Promise<void>;
  if (tls) {
    upstream = await startUpstream(handler, { host, port: listenPort, names, keepAliveTimeoutMs });
    port = upstream.port;
    close = upstream.close;
  } else {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => handler(req, res, Buffer.concat(chunks)));
    });
    if (keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = keepAliveTimeoutMs;
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(listenPort ?? 0, host, resolve));
    port = (server.address() as AddressInfo).port;
    close = () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
  }
  const caPem = upstream?.pki.caPem;
  const origin = `${tls ? "https" : "http"}://${host.includes(":") ? `[${host}]` : host}:${port}`;
  const fetchWithCa = (input: string | URL | Request, init?: RequestInit) =>
    caPem ? fetch(input, { ...init, tls: { ca: caPem } } as RequestInit) : fetch(input, init);
  return {
    url: origin,
    port,
    tls,
    pki: upstream?.pki,
    caPem,
    openaiBaseURL: `${origin}/v1`,
    anthropicBaseURL: origin,
    geminiBaseURL: `${origin}/v1beta`,
    config,
    requests,
    last() {
      const r = requests.at(-1);
      if (!r) throw new Error("the LLM fake got no request");
      return r;
    },
    fetch: fetchWithCa,
    upstream,
    close,
    [Symbol.asyncDispose]: close,
  };
}
