// A span per proxied request (egress/telemetry.ts RequestTracing): a SERVER span for the whole exchange
// (until the body has streamed), and children for where the time went: the broker's work before
// dispatch (`broker.request`), the upstream (`upstream`, a CLIENT span: the one the upstream's
// traceparent names), and the broker's work on the answer's head (`broker.response`).
//
// W3C Trace Context, parsed and written by the SDK's propagator: a valid `traceparent` from the agent
// makes the span its child (the agent's trace id, its sampled flag honoured), with its `tracestate`
// passed on; none, or an invalid one (or two), starts a new trace, and the upstream is still sent the
// broker's traceparent so its own spans join the broker's.
//
// The spans are the SDK's ReadableSpan data, made once the times are known, with the SDK's id generator;
// not through its Tracer, whose live Span objects (attribute checks, span processors, a context per span)
// cost four times as much on the request path for nothing these finished spans need. The OTLP encoders
// read this data as they read the Tracer's.
//
// Attributes are the audit record's names and numbers (never a header value, token, body or query; the
// path is the record's, whose query was dropped) plus the principal's display name.

import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Attributes,
  type SpanContext,
  type SpanStatus,
  type TextMapGetter,
} from "@opentelemetry/api";
import { hrTimeDuration, millisToHrTime, W3CTraceContextPropagator, type InstrumentationScope } from "@opentelemetry/core";
import type { Resource } from "@opentelemetry/resources";
import { RandomIdGenerator, type ReadableSpan } from "@opentelemetry/sdk-trace";
import type { AuditEntry, RequestSpan, RequestTracing, TracedRequest } from "../egress/index.ts";

type Headers = TracedRequest["headers"];

/** Reads the two trace headers, whatever their case; a repeated traceparent is no traceparent (W3C Trace Context §3.2). */
const getter: TextMapGetter<Headers> = {
  keys: (h) => h.map(([k]) => k.toLowerCase()),
  get(h, key) {
    const values = h.filter(([k]) => k.toLowerCase() === key).map(([, v]) => v);
    if (key === "traceparent") return values.length === 1 ? values[0] : undefined;
    return values.length ? values : undefined;
  },
};

const propagator = new W3CTraceContextPropagator();
const ids = new RandomIdGenerator();
const OK: SpanStatus = { code: SpanStatusCode.UNSET };

export interface SpanSource {
  readonly resource: Resource;
  readonly scope: InstrumentationScope;
}

/**
 * `sink` takes each finished span of a sampled trace (the export queue). `now` must be performance.now,
 * the metrics' clock: span times are its readings on the epoch.
 */
export function createRequestTracing(sink: (span: ReadableSpan) => void, source: SpanSource, now: () => number = () => performance.now()): RequestTracing {
  return {
    now,
    open(req, t0) {
      const parent = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, req.headers, getter));
      // ParentBased(AlwaysOn), the SDK's default sampler: the agent's decision when it made one, else recorded.
      const traceFlags = parent ? parent.traceFlags & TraceFlags.SAMPLED : TraceFlags.SAMPLED;
      const own: SpanContext = {
        traceId: parent?.traceId ?? ids.generateTraceId(),
        spanId: ids.generateSpanId(),
        traceFlags,
        ...(parent?.traceState && { traceState: parent.traceState }),
      };
      return openSpan(traceFlags ? sink : () => {}, source, own, parent, req, t0);
    },
  };
}

function openSpan(
  sink: (span: ReadableSpan) => void,
  source: SpanSource,
  own: SpanContext,
  parent: SpanContext | undefined,
  req: TracedRequest,
  t0: number,
): RequestSpan {
  let upstream: SpanContext | undefined;
  let tSend = 0;
  let tHead = 0;
  let tHanded = 0;
  let ended = false;
  const child = (name: string, kind: SpanKind, ctx: SpanContext, from: number, to: number, attributes: Attributes = {}, status = OK) =>
    sink(finished(source, { name, kind, ctx, parent: own, from, to, attributes, status }));
  return {
    ref: { traceId: own.traceId, spanId: own.spanId, sampled: own.traceFlags === TraceFlags.SAMPLED },
    dispatched(at) {
      tSend = at;
      // A minted token's resend reuses the first dispatch's span: one upstream span per request.
      upstream ??= { ...own, spanId: ids.generateSpanId() };
      const out: [string, string][] = [];
      propagator.inject(trace.setSpanContext(ROOT_CONTEXT, upstream), out, { set: (c, k, v) => c.push([k, v]) });
      return out;
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
      const failed: SpanStatus = { code: SpanStatusCode.ERROR, ...(record.error && { message: record.error }) };
      if (upstream) {
        const attributes = { "http.request.method": req.method, "server.address": req.host, "server.port": req.port };
        child("upstream", SpanKind.CLIENT, upstream, tSend, tHead || handed, attributes, tHead ? OK : failed);
      }
      child("broker.request", SpanKind.INTERNAL, { ...own, spanId: ids.generateSpanId() }, t0, tSend || handed);
      if (tHead) child("broker.response", SpanKind.INTERNAL, { ...own, spanId: ids.generateSpanId() }, tHead, Math.max(tHead, handed));
      // The broker's own time, as the metrics count it (server/kit/metrics.ts): all but the upstream's wait.
      const addedMs = handed - t0 - (tHead ? tHead - tSend : 0);
      sink(
        finished(source, {
          name: `${record.method} ${record.service ?? record.host}`,
          kind: SpanKind.SERVER,
          ctx: own,
          parent,
          from: t0,
          to: at,
          attributes: attributesOf(record, req, addedMs),
          // A refusal (4xx) is the broker doing its job; a 5xx is a failed request (OpenTelemetry's HTTP server rule).
          status: record.status >= 500 ? failed : OK,
        }),
      );
    },
  };
}

interface Finished {
  readonly name: string;
  readonly kind: SpanKind;
  readonly ctx: SpanContext;
  readonly parent: SpanContext | undefined;
  /** performance.now readings (ms). */
  readonly from: number;
  readonly to: number;
  readonly attributes: Attributes;
  readonly status: SpanStatus;
}

function finished(source: SpanSource, f: Finished): ReadableSpan {
  const startTime = millisToHrTime(performance.timeOrigin + f.from);
  const endTime = millisToHrTime(performance.timeOrigin + f.to);
  return {
    name: f.name,
    kind: f.kind,
    spanContext: () => f.ctx,
    ...(f.parent && { parentSpanContext: f.parent }),
    startTime,
    endTime,
    duration: hrTimeDuration(startTime, endTime),
    status: f.status,
    attributes: f.attributes,
    links: [],
    events: [],
    ended: true,
    resource: source.resource,
    instrumentationScope: source.scope,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
}

/** The audit record's fields (plus the principal's name) as span attributes: OpenTelemetry's HTTP names where there are some. */
export function attributesOf(record: AuditEntry, req: TracedRequest, addedMs: number): Attributes {
  const out: Attributes = {
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
  if (record.error) out["error.type"] = record.error;
  return out;
}
