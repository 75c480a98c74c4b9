// OTLP/HTTP's protobuf payload (http/protobuf), written straight from the broker's span and log record
// data: no intermediate objects. Field numbers are opentelemetry-proto's (collector/trace/v1
// ExportTraceServiceRequest, collector/logs/v1 ExportLogsServiceRequest, and the trace, logs, common and
// resource messages they hold); tests/unit/telemetry reads the output back with the project's own
// generated definitions.
//
// The spans or records of an export are written one after the other, each as its ScopeSpans.spans /
// ScopeLogs.log_records field (tag and length included); the request is then its few framing bytes, the
// resource and scope (written once, at start) and those items: both requests have the same shape
// (resource = 1 and scope_* = 2 in the Resource* message, scope = 1 and the items = 2 in the Scope* one).

import { spanFlags, type AnyValue, type Attributes, type LogRecordData, type Source, type SpanData } from "./otlp-data.ts";
import { isInt64, ProtoWriter, putShort, tagByte, varintSize, WIRE } from "./protobuf-writer.ts";

const { VARINT, I64, LEN, I32 } = WIRE;

/** Span fields (opentelemetry/proto/trace/v1/trace.proto), as their tags. */
const SPAN = {
  traceId: tagByte(1, LEN),
  spanId: tagByte(2, LEN),
  traceState: tagByte(3, LEN),
  parentSpanId: tagByte(4, LEN),
  name: tagByte(5, LEN),
  kind: tagByte(6, VARINT),
  start: tagByte(7, I64),
  end: tagByte(8, I64),
  attributes: tagByte(9, LEN),
  status: tagByte(15, LEN),
  /** Field 16: a two-byte tag. */
  flags: [16, I32],
} as const;
const STATUS = { message: tagByte(2, LEN), code: tagByte(3, VARINT) } as const;
/** LogRecord fields (opentelemetry/proto/logs/v1/logs.proto), as their tags. */
const LOG = {
  time: tagByte(1, I64),
  severityNumber: tagByte(2, VARINT),
  severityText: tagByte(3, LEN),
  body: tagByte(5, LEN),
  attributes: tagByte(6, LEN),
  flags: tagByte(8, I32),
  traceId: tagByte(9, LEN),
  spanId: tagByte(10, LEN),
  observed: tagByte(11, I64),
  eventName: tagByte(12, LEN),
} as const;
/** AnyValue's oneof (opentelemetry/proto/common/v1/common.proto), as tags. */
const VALUE = {
  string: tagByte(1, LEN),
  bool: tagByte(2, VARINT),
  int: tagByte(3, VARINT),
  double: tagByte(4, I64),
  array: tagByte(5, LEN),
  kvlist: tagByte(6, LEN),
  bytes: tagByte(7, LEN),
} as const;
/** KeyValue's fields, and ArrayValue's / KeyValueList's one repeated field (1). */
const KV = { key: tagByte(1, LEN), value: tagByte(2, LEN), values: tagByte(1, LEN) } as const;
/** ScopeSpans.spans and ScopeLogs.log_records. */
const ITEM = tagByte(2, LEN);

/** A span as its ScopeSpans.spans field. */
export function writeSpan(w: ProtoWriter, s: SpanData): void {
  const m = w.beginItem(ITEM);
  w.hexField(SPAN.traceId, s.traceId);
  w.hexField(SPAN.spanId, s.spanId);
  if (s.traceState) w.stringField(SPAN.traceState, s.traceState);
  if (s.parentSpanId) w.hexField(SPAN.parentSpanId, s.parentSpanId);
  w.stringField(SPAN.name, s.name);
  if (s.kind) {
    w.byte(SPAN.kind);
    w.varint32(s.kind);
  }
  w.byte(SPAN.start);
  w.fixed64Nanos(s.startMs);
  w.byte(SPAN.end);
  w.fixed64Nanos(s.endMs);
  writeAttributes(w, s.attributes, SPAN.attributes);
  const status = s.status;
  if (status && (status.code || status.message)) {
    w.byte(SPAN.status);
    const sm = w.begin();
    if (status.message) w.stringField(STATUS.message, status.message);
    if (status.code) {
      w.byte(STATUS.code);
      w.varint32(status.code);
    }
    w.end(sm);
  }
  w.tag(SPAN.flags[0], SPAN.flags[1]);
  w.fixed32(spanFlags(s));
  w.endItem(m);
}

/** A log record as its ScopeLogs.log_records field. */
export function writeLogRecord(w: ProtoWriter, r: LogRecordData): void {
  const m = w.beginItem(ITEM);
  w.byte(LOG.time);
  w.fixed64Nanos(r.timeMs);
  if (r.severityNumber) {
    w.byte(LOG.severityNumber);
    w.varint32(r.severityNumber);
  }
  if (r.severityText) w.stringField(LOG.severityText, r.severityText);
  if (r.body !== undefined && r.body !== null) {
    w.byte(LOG.body);
    const bm = w.begin();
    writeAnyValue(w, r.body);
    w.end(bm);
  }
  writeAttributes(w, r.attributes, LOG.attributes);
  if (r.traceFlags) {
    w.byte(LOG.flags);
    w.fixed32(r.traceFlags & 0xff);
  }
  if (r.traceId) w.hexField(LOG.traceId, r.traceId);
  if (r.spanId) w.hexField(LOG.spanId, r.spanId);
  w.byte(LOG.observed);
  w.fixed64Nanos(r.observedMs);
  if (r.eventName) w.stringField(LOG.eventName, r.eventName);
  w.endItem(m);
}

/**
 * Repeated KeyValue under the one-byte `tag`; undefined and null values are left out. The common case (a
 * short string, a small non-negative integer or a boolean under a known key) is written in one go; the
 * rest field by field.
 */
export function writeAttributes(w: ProtoWriter, attributes: Attributes, tag: number): void {
  for (const key in attributes) {
    const v = attributes[key];
    if (v === undefined || v === null) continue;
    const prefix = keyPrefix(key);
    if (prefix !== undefined && writeSimpleKeyValue(w, tag, prefix, v)) continue;
    w.byte(tag);
    const m = w.begin();
    w.stringField(KV.key, key);
    w.byte(KV.value);
    const vm = w.begin();
    writeAnyValue(w, v);
    w.end(vm);
    w.end(m);
  }
}

/**
 * A KeyValue whose lengths all fit one byte, at once: its tag, length, the key's prefix, the AnyValue's
 * length and its one field. False (nothing written) when the value is not that simple.
 */
function writeSimpleKeyValue(w: ProtoWriter, tag: number, prefix: Uint8Array, v: AnyValue): boolean {
  let value: number; // the value's tag, or -1: a string
  if (typeof v === "string") {
    if (v.length > SHORT_VALUE) return false;
    value = -1;
  } else if (typeof v === "number") {
    if (!(v >= 0 && v < 0x10000000 && Number.isInteger(v))) return false;
    value = VALUE.int;
  } else if (typeof v === "boolean") value = VALUE.bool;
  else return false;
  w.ensure(prefix.length + 3 * SHORT_VALUE + 6);
  const buf = w.buf;
  const start = w.pos;
  let p = start;
  buf[p++] = tag;
  const kvAt = p++;
  for (let i = 0; i < prefix.length; i++) buf[p++] = prefix[i]!;
  const valueAt = p++;
  if (value === -1) {
    buf[p++] = VALUE.string;
    p = putShort(buf, p, v as string);
  } else {
    buf[p++] = value;
    let n = value === VALUE.bool ? (v ? 1 : 0) : (v as number);
    while (n > 0x7f) {
      buf[p++] = (n & 0x7f) | 0x80;
      n >>>= 7;
    }
    buf[p++] = n;
  }
  const kv = p - kvAt - 1;
  if (kv > 0x7f) return false; // a long one: written again the general way (w.pos never moved)
  buf[kvAt] = kv;
  buf[valueAt] = p - valueAt - 1;
  w.pos = p;
  return true;
}

/** A string value of at most this many units keeps a KeyValue under a short key within one-byte lengths. */
const SHORT_VALUE = 32;
/** Keys met so far, as the bytes a KeyValue starts with: the key field and the value's tag. */
const keyPrefixes = new Map<string, Uint8Array | null>();
/** The broker's attribute names and the resource's are few: past this many keys, the rest are written as they come. */
const MAX_KEYS = 512;

function keyPrefix(key: string): Uint8Array | undefined {
  const known = keyPrefixes.get(key);
  if (known !== undefined) return known ?? undefined;
  if (keyPrefixes.size >= MAX_KEYS) return undefined;
  const bytes = new TextEncoder().encode(key);
  // A key past 64 bytes never makes a simple KeyValue: remembered as such.
  const prefix = bytes.length > 64 ? null : new Uint8Array([KV.key, bytes.length, ...bytes, KV.value]);
  keyPrefixes.set(key, prefix);
  return prefix ?? undefined;
}

/** An AnyValue's fields (its length is the caller's); null or undefined: an empty AnyValue. */
function writeAnyValue(w: ProtoWriter, v: AnyValue): void {
  switch (typeof v) {
    case "string":
      w.stringField(VALUE.string, v);
      return;
    case "boolean":
      w.byte(VALUE.bool);
      w.byte(v ? 1 : 0);
      return;
    case "number":
      if (isInt64(v)) {
        w.byte(VALUE.int);
        w.int64(v);
      } else {
        w.byte(VALUE.double);
        w.double(v);
      }
      return;
  }
  if (v === null || v === undefined) return;
  if (v instanceof Uint8Array) {
    w.byte(VALUE.bytes);
    w.bytes(v);
  } else if (Array.isArray(v)) {
    w.byte(VALUE.array);
    const m = w.begin();
    for (const item of v as readonly AnyValue[]) {
      w.byte(KV.values);
      const im = w.begin();
      writeAnyValue(w, item);
      w.end(im);
    }
    w.end(m);
  } else {
    w.byte(VALUE.kvlist);
    const m = w.begin();
    writeAttributes(w, v as Attributes, KV.values);
    w.end(m);
  }
}

/** The resource and the scope of a signal's exports, written once (otlp-encoding.ts). */
export interface SourceBytes {
  /** ResourceSpans.resource / ResourceLogs.resource (field 1), tag included. */
  readonly resource: Uint8Array;
  /** ScopeSpans.scope / ScopeLogs.scope (field 1), tag included. */
  readonly scope: Uint8Array;
}

export function writeSource(source: Source): SourceBytes {
  const w = new ProtoWriter(4096);
  const bytes = () => {
    const out = w.written().slice();
    w.reset();
    return out;
  };
  w.byte(tagByte(1, LEN));
  const rm = w.begin();
  writeAttributes(w, source.resource, tagByte(1, LEN)); // Resource.attributes
  w.end(rm);
  const resource = bytes();
  w.byte(tagByte(1, LEN));
  const sm = w.begin();
  w.stringField(tagByte(1, LEN), source.scope.name); // InstrumentationScope.name
  if (source.scope.version) w.stringField(tagByte(2, LEN), source.scope.version);
  w.end(sm);
  return { resource, scope: bytes() };
}

/**
 * An ExportTraceServiceRequest or ExportLogsServiceRequest: one Resource* (field 1) holding the resource
 * and one Scope* (field 2) holding the scope and the items (written one after the other, each its own field).
 */
export function frameRequest(source: SourceBytes, items: Uint8Array): Uint8Array {
  const scoped = source.scope.length + items.length;
  const resourced = source.resource.length + 1 + varintSize(scoped) + scoped;
  const out = new Uint8Array(1 + varintSize(resourced) + resourced);
  let p = 0;
  out[p++] = tagByte(1, LEN); // resource_spans / resource_logs
  p = putVarint(out, p, resourced);
  out.set(source.resource, p);
  p += source.resource.length;
  out[p++] = tagByte(2, LEN); // scope_spans / scope_logs
  p = putVarint(out, p, scoped);
  out.set(source.scope, p);
  out.set(items, p + source.scope.length);
  return out;
}

function putVarint(out: Uint8Array, p: number, v: number): number {
  while (v > 0x7f) {
    out[p++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  out[p++] = v;
  return p;
}
