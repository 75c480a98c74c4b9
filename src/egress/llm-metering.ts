// Metering an LLM call's answer as it passes (issue 38): the upstream's body goes through the usage meter
// (llm-usage.ts) chunk by chunk on its way to the scan, and, where the broker asked for a stream's usage, through the
// filter that takes it out again (llm-stream-usage.ts). At the end the usage is priced (policy/llm-prices.ts) and its model
// name checked like any upstream text: a name that holds a stored value, or is not a plain model name, is not kept.

import { headerOf, joinedHeader, withHeader, type Answer } from "./answer.ts";
import { decodeWhole, parseCodings, type Coding } from "./content-coding.ts";
import type { MeterPlan } from "./llm-request.ts";
import { costMicros, type PriceTable } from "../policy/index.ts";
import { stripAskedUsage, stripAskedUsageWhole } from "./llm-stream-usage.ts";
import { createUsageMeter, MAX_METERED_JSON_BYTES, type CallUsage, type LlmUsage, type UsageMeter } from "./llm-usage.ts";
import type { Needles } from "./redact.ts";
import { redactText } from "./redact-headers.ts";

export interface MeteredAnswer {
  readonly answer: Answer;
  /** At the body's end: the call's usage, or undefined when the answer carried none. */
  finish(): CallUsage | undefined;
}

/** A model name as kept: letters, digits and the punctuation model names use, at most 100 characters. */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}$/;

export function meterAnswer(answer: Answer, plan: MeterPlan, needles: Needles, prices: PriceTable): MeteredAnswer {
  const type = headerOf(answer.headers, "content-type") ?? null;
  let codings: Coding[];
  try {
    codings = parseCodings(joinedHeader(answer.headers, "content-encoding"));
  } catch {
    return { answer, finish: () => undefined }; // a coding the broker cannot read: unmetered (the scan refuses it where it must)
  }
  const plain = createUsageMeter(plan.provider, type);
  if (!plain || !answer.body) return { answer, finish: () => undefined };
  const meter = codings.length ? decodingMeter(plain, codings) : plain;
  const strip = plan.stripUsage && codings.length === 0 && /^text\/event-stream/i.test(type ?? "");
  const priced = (usage: LlmUsage | undefined) => usage && priceUsage(usage, needles, prices);
  if (answer.body instanceof Uint8Array) {
    meter.push(answer.body);
    const usage = priced(meter.finish());
    if (!strip) return { answer, finish: () => usage };
    const body = stripAskedUsageWhole(answer.body);
    return { answer: { ...answer, body, headers: withHeader(answer.headers, "content-length", String(body.byteLength)) }, finish: () => usage };
  }
  const tap = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, ctrl) {
      meter.push(chunk);
      ctrl.enqueue(chunk);
    },
  });
  let body = answer.body.pipeThrough(tap);
  let headers = answer.headers;
  if (strip) {
    body = body.pipeThrough(stripAskedUsage());
    headers = withHeader(headers, "content-length", undefined);
  }
  return { answer: { ...answer, headers, body }, finish: () => priced(meter.finish()) };
}

/**
 * A meter for an answer in a content coding (the agent asked for one: Accept-Encoding goes upstream unchanged, D3):
 * the coded bytes are copied aside up to the metering bound and decoded at the end. The stream itself is not held.
 */
function decodingMeter(inner: UsageMeter, codings: readonly Coding[]): UsageMeter {
  const parts: Uint8Array[] = [];
  let size = 0;
  return {
    push(chunk) {
      size += chunk.byteLength;
      if (size <= MAX_METERED_JSON_BYTES) parts.push(chunk.slice());
    },
    finish() {
      if (size > MAX_METERED_JSON_BYTES) return undefined;
      try {
        inner.push(decodeWhole(Buffer.concat(parts), codings).plain);
      } catch {
        return undefined;
      }
      return inner.finish();
    },
  };
}

/** The usage priced, its model name kept only when it is a plain name holding no stored value. */
export function priceUsage(usage: LlmUsage, needles: Needles, prices: PriceTable): CallUsage {
  const name = usage.model;
  const model = name !== null && MODEL_NAME.test(name) && redactText(name, needles) === name ? name : name === null ? null : "[redacted]";
  return {
    model,
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    totalTokens: usage.totalTokens,
    costMicros: model === "[redacted]" ? undefined : costMicros(prices, model, usage.inputTokens, usage.outputTokens),
    currency: prices.currency,
  };
}
