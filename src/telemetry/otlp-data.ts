// What the broker exports, as plain data: a finished span (request-tracing.ts makes them) and a log record
// (audit-records.ts), with the resource and scope they are sent under. otlp-protobuf.ts and otlp-json.ts
// write them as OTLP; nothing else reads them, so they hold only what the broker sets.

/** An OTLP AnyValue: a number is an int64 when it is an integer in that range, else a double. */
export type AnyValue = string | number | boolean | Uint8Array | null | undefined | readonly AnyValue[] | { readonly [key: string]: AnyValue };

/** Attributes by key; an undefined or null value is left out (as the OpenTelemetry SDK does). */
export type Attributes = { readonly [key: string]: AnyValue };

/** OTLP Span.SpanKind. */
export const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 } as const;
/** OTLP Status.StatusCode. */
export const STATUS_CODE = { UNSET: 0, OK: 1, ERROR: 2 } as const;
/** OTLP SeverityNumber. */
export const SEVERITY_INFO = 9;

export interface SpanStatus {
  readonly code: number;
  readonly message?: string;
}

export interface SpanData {
  /** W3C ids in lower-case hex. */
  readonly traceId: string;
  readonly spanId: string;
  /** Absent for the root of a trace. */
  readonly parentSpanId?: string;
  /** The parent's span came from another process (the agent's traceparent). */
  readonly parentIsRemote?: boolean;
  /** The W3C tracestate, serialized. */
  readonly traceState?: string;
  /** W3C trace flags (1: sampled). */
  readonly traceFlags: number;
  readonly name: string;
  /** SPAN_KIND. */
  readonly kind: number;
  /** Milliseconds since the epoch (fractions to the nanosecond). */
  readonly startMs: number;
  readonly endMs: number;
  readonly attributes: Attributes;
  /** Absent: UNSET. */
  readonly status?: SpanStatus;
}

export interface LogRecordData {
  /** Milliseconds since the epoch: when it happened, and when it was handed to the export. */
  readonly timeMs: number;
  readonly observedMs: number;
  readonly severityNumber: number;
  readonly severityText?: string;
  readonly eventName?: string;
  readonly body?: AnyValue;
  readonly attributes: Attributes;
  /** The trace and span it belongs to (hex), with the trace's W3C flags. */
  readonly traceId?: string;
  readonly spanId?: string;
  readonly traceFlags?: number;
}

/** Who sends (the resource) and which part of it (the scope): written once per export. */
export interface Source {
  readonly resource: Attributes;
  readonly scope: { readonly name: string; readonly version?: string };
}

/** OTLP Span.flags: the W3C trace flags and whether the parent is remote (SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE / IS_REMOTE). */
export function spanFlags(span: SpanData): number {
  return (span.traceFlags & 0xff) | 0x100 | (span.parentIsRemote ? 0x200 : 0);
}
