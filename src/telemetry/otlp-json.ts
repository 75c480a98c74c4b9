// OTLP/HTTP's JSON payload (http/json): the protobuf messages in proto3's JSON mapping with OTLP's
// deviations (opentelemetry-proto docs/specification.md, "JSON Protobuf Encoding"): lowerCamelCase keys,
// trace and span ids as hex rather than base64, enums as integers; 64-bit integers (int_value and the
// fixed64 times) as decimal strings, as proto3's mapping writes them; bytes as base64; a double that is
// not finite as "NaN", "Infinity" or "-Infinity"; a lone surrogate as U+FFFD, as protobuf's UTF-8 has it.
//
// Written as UTF-8 straight into the same kind of buffer as protobuf (protobuf-writer.ts), not through JS
// strings: an export's spans or records one after the other, each followed by a comma, and the request
// is then its head (the resource and scope, written once), those items (the last comma dropped) and its tail.

import { spanFlags, type AnyValue, type Attributes, type LogRecordData, type Source, type SpanData } from "./otlp-data.ts";
import { isInt64, ProtoWriter } from "./protobuf-writer.ts";

const encoder = new TextEncoder();
const utf8 = (s: string) => encoder.encode(s);

// The fixed parts, as bytes.
const SPAN_START = utf8('{"traceId":"');
const SPAN_ID = utf8('","spanId":"');
const TRACE_STATE = utf8(',"traceState":');
const PARENT = utf8(',"parentSpanId":"');
const FLAGS = utf8(',"flags":');
const NAME = utf8(',"name":');
const KIND = utf8(',"kind":');
const START = utf8(',"startTimeUnixNano":"');
const END = utf8('","endTimeUnixNano":"');
const ATTRIBUTES = utf8(',"attributes":[');
const STATUS = utf8(',"status":{');
const STATUS_MESSAGE = utf8('"message":');
const STATUS_CODE = utf8('"code":');
const LOG_START = utf8('{"timeUnixNano":"');
const OBSERVED = utf8('","observedTimeUnixNano":"');
const SEVERITY_NUMBER = utf8(',"severityNumber":');
const SEVERITY_TEXT = utf8(',"severityText":');
const BODY = utf8(',"body":');
const TRACE_ID = utf8(',"traceId":"');
const SPAN_ID_FIELD = utf8(',"spanId":"');
const EVENT_NAME = utf8(',"eventName":');
const STRING_VALUE = utf8('{"stringValue":');
const INT_VALUE = utf8('{"intValue":"');
const DOUBLE_VALUE = utf8('{"doubleValue":');
const TRUE = utf8('{"boolValue":true}');
const FALSE = utf8('{"boolValue":false}');
const BYTES_VALUE = utf8('{"bytesValue":"');
const ARRAY_VALUE = utf8('{"arrayValue":{"values":[');
const KVLIST_VALUE = utf8('{"kvlistValue":{"values":[');
const EMPTY_VALUE = utf8("{}");

const QUOTE = 0x22;
const COMMA = 0x2c;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/** A span, and the comma that follows it in the list. */
export function writeSpanJson(w: ProtoWriter, s: SpanData): void {
  raw(w, SPAN_START);
  ascii(w, s.traceId);
  raw(w, SPAN_ID);
  ascii(w, s.spanId);
  w.byte(QUOTE);
  if (s.traceState) {
    raw(w, TRACE_STATE);
    jsonString(w, s.traceState);
  }
  if (s.parentSpanId) {
    raw(w, PARENT);
    ascii(w, s.parentSpanId);
    w.byte(QUOTE);
  }
  raw(w, FLAGS);
  decimal(w, spanFlags(s));
  raw(w, NAME);
  jsonString(w, s.name);
  if (s.kind) {
    raw(w, KIND);
    decimal(w, s.kind);
  }
  raw(w, START);
  nanos(w, s.startMs);
  raw(w, END);
  nanos(w, s.endMs);
  w.byte(QUOTE);
  raw(w, ATTRIBUTES);
  writeAttributesJson(w, s.attributes);
  w.byte(CLOSE_BRACKET);
  const status = s.status;
  if (status && (status.code || status.message)) {
    raw(w, STATUS);
    if (status.message) {
      raw(w, STATUS_MESSAGE);
      jsonString(w, status.message);
    }
    if (status.code) {
      if (status.message) w.byte(COMMA);
      raw(w, STATUS_CODE);
      decimal(w, status.code);
    }
    w.byte(CLOSE_BRACE);
  }
  w.byte(CLOSE_BRACE);
  w.byte(COMMA);
}

/** A log record, and the comma that follows it in the list. */
export function writeLogRecordJson(w: ProtoWriter, r: LogRecordData): void {
  raw(w, LOG_START);
  nanos(w, r.timeMs);
  raw(w, OBSERVED);
  nanos(w, r.observedMs);
  w.byte(QUOTE);
  if (r.severityNumber) {
    raw(w, SEVERITY_NUMBER);
    decimal(w, r.severityNumber);
  }
  if (r.severityText) {
    raw(w, SEVERITY_TEXT);
    jsonString(w, r.severityText);
  }
  if (r.body !== undefined && r.body !== null) {
    raw(w, BODY);
    writeAnyValueJson(w, r.body);
  }
  raw(w, ATTRIBUTES);
  writeAttributesJson(w, r.attributes);
  w.byte(CLOSE_BRACKET);
  if (r.traceFlags) {
    raw(w, FLAGS);
    decimal(w, r.traceFlags & 0xff);
  }
  if (r.traceId) {
    raw(w, TRACE_ID);
    ascii(w, r.traceId);
    w.byte(QUOTE);
  }
  if (r.spanId) {
    raw(w, SPAN_ID_FIELD);
    ascii(w, r.spanId);
    w.byte(QUOTE);
  }
  if (r.eventName) {
    raw(w, EVENT_NAME);
    jsonString(w, r.eventName);
  }
  w.byte(CLOSE_BRACE);
  w.byte(COMMA);
}

/** The KeyValue list's members (the brackets are the caller's); undefined and null values are left out. */
function writeAttributesJson(w: ProtoWriter, attributes: Attributes): void {
  let first = true;
  for (const key in attributes) {
    const v = attributes[key];
    if (v === undefined || v === null) continue;
    if (!first) w.byte(COMMA);
    first = false;
    raw(w, keyPrefix(key));
    writeAnyValueJson(w, v);
    w.byte(CLOSE_BRACE);
  }
}

function writeAnyValueJson(w: ProtoWriter, v: AnyValue): void {
  switch (typeof v) {
    case "string":
      raw(w, STRING_VALUE);
      jsonString(w, v);
      w.byte(CLOSE_BRACE);
      return;
    case "boolean":
      raw(w, v ? TRUE : FALSE);
      return;
    case "number":
      if (isInt64(v)) {
        raw(w, INT_VALUE);
        if (v >= 0 && v <= Number.MAX_SAFE_INTEGER) decimal(w, v);
        // String() writes one past 2^53 with an exponent; BigInt writes every digit.
        else ascii(w, Number.isSafeInteger(v) ? String(v) : BigInt(v).toString());
        w.byte(QUOTE);
      } else {
        raw(w, DOUBLE_VALUE);
        ascii(w, Number.isFinite(v) ? String(v) : v > 0 ? '"Infinity"' : v < 0 ? '"-Infinity"' : '"NaN"');
      }
      w.byte(CLOSE_BRACE);
      return;
  }
  if (v === null || v === undefined) raw(w, EMPTY_VALUE);
  else if (v instanceof Uint8Array) {
    raw(w, BYTES_VALUE);
    ascii(w, Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64"));
    w.byte(QUOTE);
    w.byte(CLOSE_BRACE);
  } else if (Array.isArray(v)) {
    raw(w, ARRAY_VALUE);
    (v as readonly AnyValue[]).forEach((item, i) => {
      if (i) w.byte(COMMA);
      writeAnyValueJson(w, item);
    });
    raw(w, CLOSE_LIST);
  } else {
    raw(w, KVLIST_VALUE);
    writeAttributesJson(w, v as Attributes);
    raw(w, CLOSE_LIST);
  }
}

const CLOSE_LIST = utf8("]}}");

/** Keys met so far, as the bytes a KeyValue starts with (`{"key":…,"value":`). */
const keyPrefixes = new Map<string, Uint8Array>();
/** The broker's attribute names and the resource's are few: past this many, keys are not remembered. */
const MAX_KEYS = 512;

function keyPrefix(key: string): Uint8Array {
  let prefix = keyPrefixes.get(key);
  if (prefix === undefined) {
    prefix = utf8(`{"key":${JSON.stringify(key.toWellFormed())},"value":`);
    if (keyPrefixes.size < MAX_KEYS) keyPrefixes.set(key, prefix);
  }
  return prefix;
}

function raw(w: ProtoWriter, bytes: Uint8Array): void {
  const n = bytes.length;
  w.ensure(n);
  const buf = w.buf;
  let p = w.pos;
  for (let i = 0; i < n; i++) buf[p++] = bytes[i]!;
  w.pos = p;
}

/** Text known to be ASCII without anything to escape (digits, hex ids). */
function ascii(w: ProtoWriter, s: string): void {
  const n = s.length;
  w.ensure(n);
  const buf = w.buf;
  let p = w.pos;
  for (let i = 0; i < n; i++) buf[p++] = s.charCodeAt(i);
  w.pos = p;
}

const HEX_DIGITS = "0123456789abcdef";

/** A JSON string literal in UTF-8: quotes, backslashes and control characters escaped, lone surrogates as U+FFFD. */
function jsonString(w: ProtoWriter, s: string): void {
  const n = s.length;
  w.ensure(6 * n + 2); // \u00XX is the longest a unit gets
  const buf = w.buf;
  let p = w.pos;
  buf[p++] = QUOTE;
  for (let i = 0; i < n; i++) {
    let c = s.charCodeAt(i);
    if (c >= 0x20 && c < 0x80) {
      if (c === QUOTE || c === 0x5c) buf[p++] = 0x5c;
      buf[p++] = c;
    } else if (c < 0x20) {
      buf[p++] = 0x5c;
      const short = c === 0x0a ? 0x6e : c === 0x0d ? 0x72 : c === 0x09 ? 0x74 : c === 0x08 ? 0x62 : c === 0x0c ? 0x66 : 0;
      if (short) buf[p++] = short;
      else {
        buf[p++] = 0x75; // \u00XX
        buf[p++] = 0x30;
        buf[p++] = 0x30;
        buf[p++] = HEX_DIGITS.charCodeAt(c >> 4);
        buf[p++] = HEX_DIGITS.charCodeAt(c & 15);
      }
    } else if (c < 0x800) {
      buf[p++] = 0xc0 | (c >> 6);
      buf[p++] = 0x80 | (c & 0x3f);
    } else {
      if (c >= 0xd800 && c <= 0xdfff) {
        const next = i + 1 < n ? s.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
          i++;
          buf[p++] = 0xf0 | (c >> 18);
          buf[p++] = 0x80 | ((c >> 12) & 0x3f);
          buf[p++] = 0x80 | ((c >> 6) & 0x3f);
          buf[p++] = 0x80 | (c & 0x3f);
          continue;
        }
        c = 0xfffd; // a lone surrogate
      }
      buf[p++] = 0xe0 | (c >> 12);
      buf[p++] = 0x80 | ((c >> 6) & 0x3f);
      buf[p++] = 0x80 | (c & 0x3f);
    }
  }
  buf[p++] = QUOTE;
  w.pos = p;
}

/** A non-negative integer up to 2^53 in decimal. */
function decimal(w: ProtoWriter, n: number): void {
  let digits = 1;
  for (let x = n; x >= 10; x = Math.floor(x / 10)) digits++;
  w.ensure(digits);
  let p = w.pos + digits;
  w.pos = p;
  const buf = w.buf;
  while (n >= 10) {
    const q = Math.floor(n / 10);
    buf[--p] = 0x30 + (n - q * 10);
    n = q;
  }
  buf[--p] = 0x30 + n;
}

/** Milliseconds since the epoch (fractions to the nanosecond) as decimal nanoseconds. */
function nanos(w: ProtoWriter, ms: number): void {
  if (!(ms > 0)) return w.byte(0x30);
  let whole = Math.floor(ms);
  let sub = Math.round((ms - whole) * 1e6);
  if (sub >= 1e6) {
    whole += 1;
    sub -= 1e6;
  }
  if (!whole) return decimal(w, sub);
  decimal(w, whole);
  // The six sub-millisecond digits, zeros included.
  w.ensure(6);
  const buf = w.buf;
  for (let p = w.pos + 5; p >= w.pos; p--) {
    const q = Math.floor(sub / 10);
    buf[p] = 0x30 + (sub - q * 10);
    sub = q;
  }
  w.pos += 6;
}

/** The resource and scope of a signal's requests, as the JSON before and after its items. */
export interface JsonFrame {
  readonly head: Uint8Array;
  readonly tail: Uint8Array;
}

/** `{"resourceSpans":[{"resource":…,"scopeSpans":[{"scope":…,"spans":[` and `]}]}]}` (or the logs' names). */
export function writeJsonFrame(signal: "traces" | "logs", source: Source): JsonFrame {
  const [outer, inner, list] = signal === "traces" ? ["resourceSpans", "scopeSpans", "spans"] : ["resourceLogs", "scopeLogs", "logRecords"];
  const w = new ProtoWriter(4096);
  raw(w, utf8(`{"${outer}":[{"resource":{"attributes":[`));
  writeAttributesJson(w, source.resource);
  raw(w, utf8(`]},"${inner}":[{"scope":{"name":`));
  jsonString(w, source.scope.name);
  if (source.scope.version) {
    raw(w, utf8(',"version":'));
    jsonString(w, source.scope.version);
  }
  raw(w, utf8(`},"${list}":[`));
  return { head: w.written().slice(), tail: utf8("]}]}]}") };
}

/** The request around the items, each of them followed by its comma (the last one's dropped). */
export function frameJsonRequest(frame: JsonFrame, items: Uint8Array): Uint8Array {
  const listed = items.subarray(0, Math.max(0, items.length - 1));
  const out = new Uint8Array(frame.head.length + listed.length + frame.tail.length);
  out.set(frame.head, 0);
  out.set(listed, frame.head.length);
  out.set(frame.tail, frame.head.length + listed.length);
  return out;
}
