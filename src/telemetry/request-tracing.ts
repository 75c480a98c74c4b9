// A span per proxied request (egress/telemetry.ts RequestTracing): a SERVER span for the whole exchange
// (until the body has streamed), and children for where the time went: the broker's work before
// dispatch (`broker.request`), the upstream (`upstream`, a CLIENT span: the one the upstream's
// traceparent names), and the broker's work on the answer's head (`broker.response`).
//
// W3C Trace Context, parsed by the SDK's propagator and written here (version 00): a valid `traceparent`
// from the agent makes the span its child (the agent's trace id, its sampled flag honoured), with its
// `tracestate` passed on; none, or an invalid one (or two), starts a new trace, and the upstream is still
// sent the broker's traceparent so its own spans join the broker's.
//
// The spans are plain data (otlp-data.ts), made once the times are known, with the SDK's id generator,
// and written as OTLP when their batch leaves (telemetry.ts): not through the SDK's Tracer, whose live
// Span objects (attribute checks, span processors, a context per span) cost four times as much on the
// request path for nothing these finished spans need, nor as the SDK's ReadableSpan, which only the SDK's
// own encoder reads.
//
// Attributes are the audit record's names and numbers (never a header value, token, body or query; the
// path is the record's, whose query was dropped) plus the principal's display name.

import { ROOT_CONTEXT, TraceFlags, trace, type TextMapGetter } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { RandomIdGenerator } from "@opentelemetry/sdk-trace";
import { splitRecordedError, type AuditEntry, type RequestSpan, type RequestTracing, type TracedRequest } from "../egress/index.ts";
import { llmAttributes } from "./audit-records.ts";
import { SPAN_KIND, STATUS_CODE, type Attributes, type SpanData, type SpanStatus } from "./otlp-data.ts";

type Headers = TracedRequest["headers"];

/** Reads the two trace headers, whatever their case; a repeated traceparent is no traceparent (W3C Trace Context §3.2). */
const getter: TextMapGetter<Headers> = {
  keys: (h) => h.map(([k]) => k.toLowerCase()),
  get(h, key) {
    let values: string[] | undefined;
    for (const [k, v] of h) if (k.length === key.length && k.toLowerCase() === key) (values ??= []).push(v);
    if (key === "traceparent") return values?.length === 1 ? values[0] : undefined;
    return values;
  },
};

const propagator = new W3CTraceContextPropagator();
/** The broker's own children carry no attributes. */
const NONE: Attributes = Object.freeze({});
const ids = new RandomIdGenerator();

/**
 * `sink` takes each finished span of a sampled trace (the export queue). `now` must be performance.now,
 * the metrics' clock: span times are its readings on the epoch.
 */
export function createRequestTracing(sink: (span: SpanData) => void, now: () => number = () => performance.now()): RequestTracing {
  const origin = performance.timeOrigin;
  return {
    now,
    open(req, t0) {
      const parent = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, req.headers, getter));
      // ParentBased(AlwaysOn), the SDK's default sampler: the agent's decision when it made one, else recorded.
      const traceFlags = parent ? parent.traceFlags & TraceFlags.SAMPLED : TraceFlags.SAMPLED;
      const own: Trace = {
        traceId: parent?.traceId ?? ids.generateTraceId(),
        spanId: ids.generateSpanId(),
        traceFlags,
        traceState: parent?.traceState?.serialize() || undefined,
        parentSpanId: parent?.spanId,
        origin,
      };
      return openSpan(traceFlags ? sink : () => {}, own, req, t0);
    },
  };
}

/** The request's own span and what its children share. */
interface Trace {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
  readonly traceState: string | undefined;
  /** The agent's span (its traceparent's), when it sent a valid one. */
  readonly parentSpanId: string | undefined;
  /** performance.timeOrigin: span times are performance.now readings past it. */
  readonly origin: number;
}

function openSpan(sink: (span: SpanData) => void, own: Trace, req: TracedRequest, t0: number): RequestSpan {
  let upstream: string | undefined;
  let tSend = 0;
  let tHead = 0;
  let tHanded = 0;
  let ended = false;
  const child = (name: string, kind: number, spanId: string, from: number, to: number, attributes: Attributes = NONE, status?: SpanStatus) =>
    sink(span(own, { name, kind, spanId, parentSpanId: own.spanId, parentIsRemote: false, from, to, attributes, status }));
  return {
    ref: { traceId: own.traceId, spanId: own.spanId, sampled: own.traceFlags === TraceFlags.SAMPLED },
    dispatched(at) {
      tSend = at;
      // A minted token's resend reuses the first dispatch's span: one upstream span per request.
      upstream ??= ids.generateSpanId();
      // W3C Trace Context's version 00, naming the upstream span; the agent's tracestate passes on.
      const traceparent = `00-${own.traceId}-${upstream}-0${own.traceFlags}`;
      return own.traceState
        ? [
            ["traceparent", traceparent],
            ["tracestate", own.traceState],
          ]
        : [["traceparent", traceparent]];
    },
    answered(at) {
      tHead = at;
    },
    handedBack(at) {
      if (!tHanded) tHanded = at;
    },
    end(record, at) {
      if (ended) return;
      ended = true;
      const handed = tHanded || at;
      const failed: SpanStatus = record.error ? { code: STATUS_CODE.ERROR, message: record.error } : { code: STATUS_CODE.ERROR };
      if (upstream) {
        const attributes = { "http.request.method": req.method, "server.address": req.host, "server.port": req.port };
        child("upstream", SPAN_KIND.CLIENT, upstream, tSend, tHead || handed, attributes, tHead ? undefined : failed);
      }
      child("broker.request", SPAN_KIND.INTERNAL, ids.generateSpanId(), t0, tSend || handed);
      if (tHead) child("broker.response", SPAN_KIND.INTERNAL, ids.generateSpanId(), tHead, Math.max(tHead, handed));
      // The broker's own time, as the metrics count it (server/kit/metrics.ts): all but the upstream's wait.
      const addedMs = handed - t0 - (tHead ? tHead - tSend : 0);
      sink(
        span(own, {
          name: `${record.method} ${record.service ?? record.host}`,
          kind: SPAN_KIND.SERVER,
          spanId: own.spanId,
          parentSpanId: own.parentSpanId,
          parentIsRemote: own.parentSpanId !== undefined,
          from: t0,
          to: at,
          attributes: attributesOf(record, req, addedMs),
          // A refusal (4xx) is the broker doing its job; a 5xx is a failed request (OpenTelemetry's HTTP server rule).
          status: record.status >= 500 ? failed : undefined,
        }),
      );
    },
  };
}

interface Finished {
  readonly name: string;
  readonly kind: number;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly parentIsRemote: boolean;
  /** performance.now readings (ms). */
  readonly from: number;
  readonly to: number;
  readonly attributes: Attributes;
  /** Undefined: UNSET. */
  readonly status: SpanStatus | undefined;
}

function span(own: Trace, f: Finished): SpanData {
  return {
    traceId: own.traceId,
    spanId: f.spanId,
    parentSpanId: f.parentSpanId,
    parentIsRemote: f.parentIsRemote,
    traceState: own.traceState,
    traceFlags: own.traceFlags,
    name: f.name,
    kind: f.kind,
    startMs: own.origin + f.from,
    endMs: own.origin + f.to,
    attributes: f.attributes,
    status: f.status,
  };
}

/** The audit record's fields (plus the principal's name) as span attributes: OpenTelemetry's HTTP names where there are some. */
export function attributesOf(record: AuditEntry, req: TracedRequest, addedMs: number): Attributes {
  const out: Record<string, string | number | boolean> = {
    "http.request.method": record.method,
    "server.address": req.host,
    "server.port": req.port,
    "url.path": record.path,
    "http.response.status_code": record.status,
    "http.request.body.size": record.bytesIn,
    "http.response.body.size": record.bytesOut,
    "network.protocol.version": req.http2 ? "2" : "1.1",
    "broker.ingress": record.ingress,
    "broker.vault": record.vault,
    "broker.principal": record.principal,
    "broker.contained": record.contained,
    "broker.added_ms": Math.max(0, Math.round(addedMs * 1000) / 1000),
  };
  if (record.service) out["broker.service"] = record.service;
  if (req.principalName) out["broker.principal.name"] = req.principalName;
  if (record.approvedBy) out["broker.approved_by"] = record.approvedBy;
  // A request report mode let through did not fail: its refusal is an attribute of its own, not an error.type.
  const { wouldRefuse, error } = splitRecordedError(record.error);
  if (error) out["error.type"] = error;
  if (wouldRefuse) out["broker.would_refuse"] = wouldRefuse;
  Object.assign(out, llmAttributes(record));
  return out;
}
