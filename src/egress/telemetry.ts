// What the pipeline asks of live telemetry export (issue 37, architecture.md D25): a span per proxied
// request and the audit records as they are made, for an operator's OpenTelemetry collector. telemetry/
// implements both and app/ wires them in only when export is on, so with it off the pipeline holds no
// span, reads no clock for it and sends no header upstream it would not send anyway.
// Only names and numbers cross this interface: never a header value, body, query string or credential.

import type { AuditRow } from "../store/index.ts";

/** The trace a record or span belongs to (W3C ids, lower-case hex). */
export interface TraceRef {
  readonly traceId: string;
  readonly spanId: string;
  /** The trace's sampled flag (an agent's `traceparent` may say 00: then no span is exported, the record still is). */
  readonly sampled: boolean;
}

/** What the tracer reads of a request when it opens its span (EgressInput has these fields). */
export interface TracedRequest {
  /** The agent's headers: only `traceparent` and `tracestate` are read, to join the agent's trace. */
  readonly headers: readonly (readonly [string, string])[];
  readonly method: string;
  readonly host: string;
  readonly port: number;
  readonly ingress: string;
  readonly http2?: boolean;
  readonly principalName?: string;
}

export interface RequestTracing {
  /** The monotonic clock (ms) every time below is read on: the metrics' clock (performance.now). */
  readonly now: () => number;
  /** Opens the request's span at `startedAt`: a child of the agent's `traceparent` when it sent a valid one, else a new trace. */
  open(request: TracedRequest, startedAt: number): RequestSpan;
}

export interface RequestSpan {
  readonly ref: TraceRef;
  /**
   * The request goes upstream now: the upstream span opens, and these are the trace headers it carries in
   * place of whatever the agent sent under those names (`traceparent` naming the upstream span, and the
   * agent's `tracestate` when its `traceparent` was valid).
   */
  dispatched(at: number): readonly [string, string][];
  /** The upstream's response head arrived. */
  answered(at: number): void;
  /** The response head went back to the agent: the broker's own time ends here. */
  handedBack(at: number): void;
  /** The exchange is over (body streamed or failed): the span takes the audit record's names and numbers, and ends. */
  end(record: Omit<AuditRow, "id">, at: number): void;
}

/** Audit records as they are made, sent off the request path (a bounded queue of its own; the database write is apart). */
export interface AuditExport {
  add(record: Omit<AuditRow, "id">, trace?: TraceRef): void;
}
