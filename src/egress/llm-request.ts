// Which requests are metered LLM calls, and the one change the broker makes to such a request (issue 38): a streamed
// OpenAI chat completion reports its usage only when asked (`stream_options.include_usage`), so where the agent did
// not ask, the broker asks for it and takes the extra usage out of the answer again (llm-stream-usage.ts), so the
// agent receives what it would have without the broker; that answer is asked for in no content coding (Accept-Encoding:
// identity), the one place the broker changes Accept-Encoding (D3), since the usage is cut out of it as it passes.
// Nothing else about any request changes.

import { PayloadTooLarge } from "../errors.ts";
import { headerValues } from "../http/index.ts";
import type { Exchange } from "./exchange.ts";
import { DRAIN_MS, llmRouteOf, type LlmProvider } from "./llm-usage.ts";
import type { Ruled } from "./stage-rules.ts";

/** How an answer is metered. */
export interface MeterPlan {
  readonly provider: LlmProvider;
  /** The broker asked for the stream's usage: the usage chunk and the `"usage":null` fields are taken out again. */
  readonly stripUsage: boolean;
}

/** A chat request larger than this is sent as it is (unasked for usage; its stream is then counted as unmetered). */
export const MAX_REWRITTEN_BODY = 4 * 1024 * 1024;

const ASK_FOR_USAGE = '"stream_options":{"include_usage":true},';

/**
 * The metering plan for a request (undefined: not an LLM call), and the request as it is to be sent. A request a
 * person approved is sent exactly as approved.
 */
export async function planMetering(x: Exchange, ruled: Ruled): Promise<{ ruled: Ruled; meter?: MeterPlan }> {
  const { input } = x;
  const provider = llmRouteOf(input.method, ruled.target);
  if (!provider) return { ruled };
  ruled = { ...ruled, ...(input.signal && { signal: afterDrain(input.signal) }) };
  const path = ruled.target.split("?")[0]!;
  const asksUsage = provider === "openai" && /\/(chat\/)?completions$/.test(path) && x.approvedBy === null;
  if (!asksUsage || !/json/i.test(headerValues(input.headers, "content-type")[0] ?? "") || headerValues(input.headers, "content-encoding").length) {
    return { ruled, meter: { provider, stripUsage: false } };
  }
  const body = ruled.body ?? (await readUpTo(x, MAX_REWRITTEN_BODY));
  if (!(body instanceof Uint8Array)) return { ruled: { ...ruled, stream: body }, meter: { provider, stripUsage: false } };
  const asked = askForUsage(body);
  if (!asked) return { ruled: { ...ruled, body }, meter: { provider, stripUsage: false } };
  // The usage asked for is taken out of the stream as it passes, which it can only be in no content coding.
  return { ruled: { ...ruled, body: asked, headers: withoutContentCoding(ruled.headers ?? input.headers) }, meter: { provider, stripUsage: true } };
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

/**
 * The body with `stream_options.include_usage` set, when it asks for a stream without it; undefined when nothing
 * needs changing (not streamed, already asked, or not a JSON object). Added as a field at the start where the body has
 * no `stream_options` (the rest of the agent's bytes stay as they were); otherwise the object is written anew.
 */
export function askForUsage(body: Uint8Array): Uint8Array | undefined {
  const text = new TextDecoder().decode(body);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) return undefined;
  const o = doc as Record<string, unknown>;
  if (o.stream !== true) return undefined;
  const options = o.stream_options;
  if (options && typeof options === "object" && (options as Record<string, unknown>).include_usage === true) return undefined;
  if (options === undefined && !/"stream_options"/.test(text)) {
    const open = text.indexOf("{");
    return new TextEncoder().encode(text.slice(0, open + 1) + ASK_FOR_USAGE + text.slice(open + 1));
  }
  const merged = options && typeof options === "object" && !Array.isArray(options) ? { ...options, include_usage: true } : { include_usage: true };
  return new TextEncoder().encode(JSON.stringify({ ...o, stream_options: merged }));
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
