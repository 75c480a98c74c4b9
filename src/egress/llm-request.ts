// Which requests are metered LLM calls, and the one change the broker makes to such a request (issue 38): a streamed
// OpenAI chat completion reports its usage only when asked (`stream_options.include_usage`), so where the agent did
// not ask, the broker asks for it and takes the extra usage out of the answer again (llm-stream-usage.ts), so the
// agent receives what it would have without the broker; that answer is asked for in no content coding (Accept-Encoding:
// identity), the one place the broker changes Accept-Encoding (D3), since the usage is cut out of it as it passes.
// Nothing else about any request changes.

import { PayloadTooLarge } from "../errors.ts";
import { headerValues } from "../http/index.ts";
import type { Exchange } from "./exchange.ts";
import { foldKey, topLevelMembers } from "./json-members.ts";
import { DRAIN_MS, llmPathOf, llmRouteOf, unmeteredLlmRoute, type LlmProvider } from "./llm-usage.ts";
import type { Ruled } from "./stage-rules.ts";

/** How an answer is metered. */
export interface MeterPlan {
  readonly provider: LlmProvider;
  /** The broker asked for the stream's usage: the usage chunk and the `"usage":null` fields are taken out again. */
  readonly stripUsage: boolean;
  /**
   * A chat completion the broker could not ask for its usage (a body over MAX_REWRITTEN_BODY, in a content coding, or
   * not a JSON object): if it streams, its usage will not come. A token or money budget refuses it (stage-budget.ts).
   */
  readonly unasked?: "too-large" | "coded" | "unreadable" | "background" | "batch" | "websocket";
}

/** A chat request larger than this is not read to be asked for its usage (under a token or money budget: refused). */
export const MAX_REWRITTEN_BODY = 4 * 1024 * 1024;

const ASK_FOR_USAGE = '"stream_options":{"include_usage":true},';
const REQUEST_FIELDS: ReadonlySet<string> = new Set(["stream", "stream_options"]);
const BACKGROUND_FIELD: ReadonlySet<string> = new Set(["background"]);

/**
 * The metering plan for a request (undefined: not an LLM call), and the request as it is to be sent. It runs before the
 * rules, so a request a rule holds for a person is shown, approved and sent as changed here.
 */
export async function planMetering(x: Exchange, ruled: Ruled): Promise<{ ruled: Ruled; meter?: MeterPlan }> {
  const { input } = x;
  if (unmeteredLlmRoute(input.method, ruled.target)) return { ruled, meter: { provider: "openai", stripUsage: false, unasked: "batch" } };
  const provider = llmRouteOf(input.method, ruled.target);
  if (!provider) return { ruled };
  ruled = { ...ruled, ...(input.signal && { signal: afterDrain(input.signal) }) };
  const path = llmPathOf(ruled.target);
  const chat = provider === "openai" && /\/(chat\/)?completions$/.test(path);
  const responses = provider === "openai" && /\/responses$/.test(path);
  if (!chat && !responses) return { ruled, meter: { provider, stripUsage: false } };
  // The route decides, not the Content-Type: an upstream that reads any body as JSON streams whatever it says.
  const unasked = (why: NonNullable<MeterPlan["unasked"]>): MeterPlan => ({ provider, stripUsage: false, unasked: why });
  if (headerValues(input.headers, "content-encoding").some((v) => v.trim().toLowerCase() !== "identity")) return { ruled, meter: unasked("coded") };
  const body = ruled.body ?? (await readUpTo(x, MAX_REWRITTEN_BODY));
  if (!(body instanceof Uint8Array)) return { ruled: { ...ruled, stream: body }, meter: unasked("too-large") };
  if (responses) {
    // A background response answers "queued" and is read later by a GET no meter sees.
    const background = inBackground(body);
    return {
      ruled: { ...ruled, body },
      meter: background === false ? { provider, stripUsage: false } : unasked(background === true ? "background" : "unreadable"),
    };
  }
  const asked = askForUsage(body);
  if (asked.kind === "unreadable") return { ruled: { ...ruled, body }, meter: unasked("unreadable") };
  if (asked.kind === "as-is") return { ruled: { ...ruled, body }, meter: { provider, stripUsage: false } };
  // The usage asked for is taken out of the stream as it passes, which it can only be in no content coding.
  return { ruled: { ...ruled, body: asked.body, headers: withoutContentCoding(ruled.headers ?? input.headers) }, meter: { provider, stripUsage: true } };
}

/**
 * The agent's signal, fired only once the metering's drain is over (llm-metering.ts): an agent that hangs up once it
 * has the text must not cut off the usage that follows it.
 */
function afterDrain(signal: AbortSignal): AbortSignal {
  const later = new AbortController();
  const fire = () => setTimeout(() => later.abort(signal.reason), DRAIN_MS + 100).unref?.();
  if (signal.aborted) fire();
  else signal.addEventListener("abort", fire, { once: true });
  return later.signal;
}

/** The agent's headers with Accept-Encoding set to identity: an answer in a content coding could not be read as it passes. */
function withoutContentCoding(headers: readonly [string, string][]): [string, string][] {
  return [...headers.filter(([n]) => n.toLowerCase() !== "accept-encoding"), ["accept-encoding", "identity"]];
}

/** What asking a chat body for its usage found. */
export type Asked =
  /** It asks for a stream without its usage: the body that does. */
  | { readonly kind: "asked"; readonly body: Uint8Array }
  /** Nothing to change: not streamed, or the usage already asked for. */
  | { readonly kind: "as-is" }
  /** Not a JSON object the broker can read: whether it streams is unknown. */
  | { readonly kind: "unreadable" };

/**
 * The body with `stream_options.include_usage` set where it asks for a stream without it. Only its top-level members
 * are looked at (json-members.ts), each key's last occurrence as JSON parsers read it; the field is added at the start
 * where the body has no `stream_options`, or that member alone is rewritten, so the rest of the agent's bytes stay.
 */
export function askForUsage(body: Uint8Array): Asked {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(body);
  } catch {
    return { kind: "unreadable" };
  }
  const members = topLevelMembers(text, REQUEST_FIELDS);
  if (!members) return { kind: "unreadable" };
  // A key another server might read as one of these, spelled otherwise (`Stream`, `STREAM_OPTIONS`): whether it
  // streams, and with what options, depends on the server. Not guessed.
  if (members.some((m) => !REQUEST_FIELDS.has(m.key))) return { kind: "unreadable" };
  const last = (key: string) => members.findLast((m) => m.key === key);
  const stream = last("stream");
  const streams = stream && text.slice(stream.start, stream.end);
  if (!streams || streams === "false" || streams === "null") return { kind: "as-is" };
  // Lax servers (pydantic) stream for 1, "true" or "yes": anything but a plain boolean is not guessed either.
  if (streams !== "true") return { kind: "unreadable" };
  const options = last("stream_options");
  if (!options) {
    const open = text.indexOf("{");
    return { kind: "asked", body: new TextEncoder().encode(text.slice(0, open + 1) + ASK_FOR_USAGE + text.slice(open + 1)) };
  }
  let value: unknown;
  try {
    value = JSON.parse(text.slice(options.start, options.end));
  } catch {
    return { kind: "unreadable" };
  }
  const given = value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  if (Object.keys(given).some((k) => foldKey(k) === "include_usage" && k !== "include_usage")) return { kind: "unreadable" };
  if (given.include_usage === true) return { kind: "as-is" };
  const merged = JSON.stringify({ ...given, include_usage: true });
  return { kind: "asked", body: new TextEncoder().encode(text.slice(0, options.start) + merged + text.slice(options.end)) };
}

/** Whether a Responses request runs in the background (`"background": true`), or "unreadable" when that cannot be told. */
export function inBackground(body: Uint8Array): boolean | "unreadable" {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(body);
  } catch {
    return "unreadable";
  }
  const members = topLevelMembers(text, BACKGROUND_FIELD);
  if (!members) return "unreadable";
  if (members.some((m) => m.key !== "background")) return "unreadable";
  const value = members.at(-1) && text.slice(members.at(-1)!.start, members.at(-1)!.end);
  return value === undefined || value === "false" || value === "null" ? false : value === "true" ? true : "unreadable";
}

/**
 * The agent's body read whole up to `max` bytes; beyond that, a stream of what was read and the rest, untouched (a
 * larger request is sent as it came).
 */
async function readUpTo(x: Exchange, max: number): Promise<Uint8Array | ReadableStream<Uint8Array> | null> {
  const { body, bodyLength } = x.input;
  if (!body) return new Uint8Array(0);
  if (bodyLength !== null && bodyLength > max) return body;
  const cap = x.deps.maxRequestBytes;
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    let next: Awaited<ReturnType<typeof reader.read>>;
    try {
      next = await reader.read();
    } catch (err) {
      x.bodyFailure = err; // the agent's side failed (malformed chunking, gone): egress() reports it as such
      throw err;
    }
    if (next.done) break;
    const value = next.value;
    parts.push(value);
    size += value.byteLength;
    x.bytesIn = size;
    if (cap && size > cap) {
      await reader.cancel().catch(() => {});
      throw new PayloadTooLarge(`request body exceeded the broker's limit of ${cap} bytes`);
    }
    if (size > max) {
      // Too large to rewrite: what was read goes first, then the rest as it comes.
      return new ReadableStream<Uint8Array>({
        start(c) {
          for (const p of parts) c.enqueue(p);
        },
        async pull(c) {
          const next = await reader.read();
          if (next.done) c.close();
          else c.enqueue(next.value);
        },
        cancel: (why) => reader.cancel(why),
      });
    }
  }
  return Buffer.concat(parts);
}
