// Metering an LLM call's answer as it passes (issue 38): the upstream's body goes through the usage meter
// (llm-usage.ts) chunk by chunk on its way to the scan, and, where the broker asked for a stream's usage, through the
// filter that takes it out again (llm-stream-usage.ts). At the end the usage is priced (policy/llm-prices.ts) and its model
// name checked like any upstream text: a name that holds a stored value, or is not a plain model name, is not kept.

import { headerOf, joinedHeader, withHeader, type Answer } from "./answer.ts";
import { decodeWhole, parseCodings, type Coding } from "./content-coding.ts";
import type { MeterPlan } from "./llm-request.ts";
import { chargedMicros, costMicros, type PriceTable } from "../policy/index.ts";
import { stripAskedUsage, stripAskedUsageWhole } from "./llm-stream-usage.ts";
import { createUsageMeter, DRAIN_BYTES, DRAIN_MS, GrowingBytes, MAX_METERED_JSON_BYTES, type CallUsage, type LlmUsage, type UsageMeter } from "./llm-usage.ts";
import type { Needles } from "./redact.ts";
import { redactText } from "./redact-headers.ts";

/** The longest a cut metered answer waits for its usage before its record is made (the drain, then a margin). */
export const USAGE_SETTLED_WITHIN_MS = DRAIN_MS + 1000;

export interface MeteredAnswer {
  readonly answer: Answer;
  /**
   * Once the body ended, however it ended (the agent gone, the upstream cut): the call's usage as far as the answer
   * reported it, or undefined when it reported none.
   */
  settled(): Promise<CallUsage | undefined>;
  /**
   * What budgets are charged for an answer that ended without its usage (the agent left before it came, the upstream
   * was cut, or never reports it): input a token per 4 bytes of the request, output an event per token of a stream (a
   * token per 4 bytes of another answer), money at the table's dearest prices. The audit record keeps no estimate.
   */
  estimate(requestBytes: number): CallUsage;
}

/** A model name as kept: letters, digits and the punctuation model names use, at most 100 characters. */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}$/;

export function meterAnswer(answer: Answer, plan: MeterPlan, needles: Needles, prices: PriceTable): MeteredAnswer {
  const type = headerOf(answer.headers, "content-type") ?? null;
  let codings: Coding[];
  try {
    codings = parseCodings(joinedHeader(answer.headers, "content-encoding"));
  } catch {
    return { answer, settled: none, estimate: (n) => estimated(n, 0, prices) }; // a coding the broker cannot read: unmetered (the scan refuses it where it must)
  }
  const plain = createUsageMeter(plan.provider, type);
  if (!plain || !answer.body) return { answer, settled: none, estimate: (n) => estimated(n, 0, prices) };
  const strip = plan.stripUsage && codings.length === 0 && /^text\/event-stream/i.test(type ?? "");
  const priced = (usage: LlmUsage | undefined) => usage && priceUsage(usage, needles, prices);
  if (answer.body instanceof Uint8Array) {
    const meter = codings.length ? decodingMeter(plain, codings) : plain;
    meter.push(answer.body);
    const usage = priced(meter.finish());
    const settled = () => Promise.resolve(usage);
    const size = answer.body.byteLength;
    const estimate = (n: number) => estimated(n, Math.ceil(size / 4), prices);
    if (!strip) return { answer, settled, estimate };
    const body = stripAskedUsageWhole(answer.body);
    return { answer: { ...answer, body, headers: withHeader(answer.headers, "content-length", String(body.byteLength)) }, settled, estimate };
  }
  // A streamed answer in a content coding is decoded as it passes (a copy, into the meter), so one cut off or left
  // by the agent still yields the usage it carried so far.
  const meter = codings.length ? (streamingDecodeMeter(plain, codings) ?? asyncMeter(decodingMeter(plain, codings))) : asyncMeter(plain);
  const reader = answer.body.getReader();
  // What passed, for an estimate when the usage never comes: bytes, and a stream's data events.
  let bytes = 0;
  let events = 0;
  const events_ = /^text\/event-stream/i.test(type ?? "") && codings.length === 0;
  const seen = {
    push(chunk: Uint8Array) {
      bytes += chunk.byteLength;
      if (events_) for (let at = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).indexOf(DATA); at >= 0; at = nextData(chunk, at)) events++;
      meter.push(chunk);
    },
  };
  // Resolved once the upstream's body is over for the meter: read to its end, failed, or drained after a cancel (which
  // reaches this stream a moment after whoever reads it has heard of it).
  const over = Promise.withResolvers<void>();
  const tapped = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (err) {
        over.resolve();
        throw err;
      }
      if (next.done) {
        over.resolve();
        return ctrl.close();
      }
      seen.push(next.value);
      ctrl.enqueue(next.value);
    },
    cancel(reason) {
      void drain(reader, seen, reason).finally(over.resolve);
    },
  });
  let body = tapped;
  let headers = answer.headers;
  if (strip) {
    body = body.pipeThrough(stripAskedUsage());
    headers = withHeader(headers, "content-length", undefined);
  }
  const settled = async () => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([over.promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, USAGE_SETTLED_WITHIN_MS)))]);
    clearTimeout(timer);
    return priced(await meter.finish());
  };
  const estimate = (requestBytes: number) => estimated(requestBytes, events_ ? Math.max(events, 1) : Math.ceil(bytes / 4), prices);
  return { answer: { ...answer, headers, body }, settled, estimate };
}

const none = () => Promise.resolve(undefined);
const DATA = Buffer.from("data:");
function nextData(chunk: Uint8Array, at: number): number {
  return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).indexOf(DATA, at + DATA.byteLength);
}

function estimated(requestBytes: number, outputTokens: number, prices: PriceTable): CallUsage {
  const inputTokens = Math.ceil(requestBytes / 4);
  return {
    model: null,
    inputTokens,
    outputTokens,
    totalTokens: inputTokens + outputTokens,
    costMicros: undefined,
    chargedMicros: chargedMicros(prices, undefined, inputTokens, outputTokens),
    currency: prices.currency,
  };
}

/** Reads what the upstream still sends into the meter, within the drain's bounds, then lets the upstream go. */
async function drain(reader: ReadableStreamDefaultReader<Uint8Array>, meter: Pick<UsageMeter, "push">, reason: unknown): Promise<void> {
  const deadline = Date.now() + DRAIN_MS;
  let bytes = 0;
  try {
    while (bytes < DRAIN_BYTES) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), left)));
      const next = await Promise.race([reader.read(), late]).finally(() => clearTimeout(timer));
      if (next === "late" || next.done) break;
      bytes += next.value.byteLength;
      meter.push(next.value);
    }
  } catch {
    // the upstream failed too: what was read counts
  }
  await reader.cancel(reason).catch(() => {});
}

/**
 * A meter for an answer in a content coding (the agent asked for one: Accept-Encoding goes upstream unchanged, D3):
 * the coded bytes are copied aside up to the metering bound and decoded at the end. The stream itself is not held.
 */
function decodingMeter(inner: UsageMeter, codings: readonly Coding[]): UsageMeter {
  const copy = new GrowingBytes(MAX_METERED_JSON_BYTES);
  let size = 0;
  return {
    push(chunk) {
      size += chunk.byteLength;
      if (size <= MAX_METERED_JSON_BYTES) copy.push(chunk);
    },
    finish() {
      if (size > MAX_METERED_JSON_BYTES) return undefined;
      try {
        inner.push(decodeWhole(copy.bytes(), codings).plain);
      } catch {
        return undefined;
      }
      return inner.finish();
    },
  };
}

/** A meter whose end is awaited (a streaming decoder's is). */
interface AsyncMeter {
  push(chunk: Uint8Array): void;
  finish(): Promise<LlmUsage | undefined>;
}

function asyncMeter(m: UsageMeter): AsyncMeter {
  return { push: (c) => m.push(c), finish: async () => m.finish() };
}

/** Decoded bytes a metered answer may yield; past it the rest is not decoded (a decompression bomb costs no more). */
const MAX_DECODED_BYTES = 256 * 1024 * 1024;

/**
 * The body's codings undone as it passes (DecompressionStream: gzip, deflate, brotli), into the meter: a truncated
 * body yields what it decoded, and an answer of any size is read at the meter's own bounds. Undefined for a coding
 * it does not stream (zstd): that one is decoded whole at the end.
 */
function streamingDecodeMeter(inner: UsageMeter, codings: readonly Coding[]): AsyncMeter | undefined {
  const formats: string[] = [];
  for (const c of codings) {
    if (c === "zstd") return undefined;
    formats.push(c === "br" ? "brotli" : c);
  }
  const source = new TransformStream<Uint8Array, Uint8Array>();
  let decoded = source.readable;
  for (const f of formats.reverse())
    decoded = decoded.pipeThrough(new DecompressionStream(f as CompressionFormat) as unknown as TransformStream<Uint8Array, Uint8Array>);
  const writer = source.writable.getWriter();
  const reader = decoded.getReader();
  const pump = (async () => {
    let size = 0;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        size += value.byteLength;
        if (size > MAX_DECODED_BYTES) return void reader.cancel().catch(() => {});
        inner.push(value);
      }
    } catch {
      // truncated or not what it said it was: what was decoded counts
    }
  })();
  return {
    push(chunk) {
      writer.write(chunk.slice()).catch(() => {});
    },
    async finish() {
      await writer.close().catch(() => {});
      await pump;
      return inner.finish();
    },
  };
}

/** The usage priced, its model name kept only when it is a plain name holding no stored value. */
export function priceUsage(usage: LlmUsage, needles: Needles, prices: PriceTable): CallUsage {
  const name = usage.model;
  const model = name !== null && MODEL_NAME.test(name) && redactText(name, needles) === name ? name : name === null ? null : "[redacted]";
  const cost = model === "[redacted]" ? undefined : costMicros(prices, model, usage.inputTokens, usage.outputTokens);
  return {
    model,
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    totalTokens: usage.totalTokens,
    costMicros: cost,
    chargedMicros: chargedMicros(prices, cost, usage.inputTokens, usage.outputTokens),
    currency: prices.currency,
  };
}
