// The broker's own OTLP encoder (telemetry/otlp-encoding.ts and the protobuf and JSON writers under it),
// read back with the OpenTelemetry project's own protobuf definitions (the generated decoder of
// @opentelemetry/otlp-transformer 0.57, installed as otlp-proto-decoder): every AnyValue type the
// attributes can hold (strings ASCII or not, empty, long; integers past 32 and 53 bits, negative ones;
// doubles, NaN and the infinities; arrays, bytes, maps), the span and log record fields, times to the
// nanosecond, batches past the writer's buffer, and the JSON encoding carrying the same
// message (checked by converting it with the same definitions). Span.flags and LogRecord.event_name are
// newer than those definitions: they are read off the wire with a few lines of protobuf reading here.

import { describe, expect, test } from "bun:test";
import root from "otlp-proto-decoder/build/src/generated/root.js";
import type { AuditEntry } from "../../../src/egress/index.ts";
import { createLogger, createMemoryLogger } from "../../../src/log.ts";
import { createRequestTracing, createTelemetry } from "../../../src/telemetry/index.ts";
import { toLogRecord } from "../../../src/telemetry/audit-records.ts";
import type { Attributes, LogRecordData, SpanData } from "../../../src/telemetry/otlp-data.ts";
import { logsEncoding, traceEncoding } from "../../../src/telemetry/otlp-encoding.ts";

// biome-ignore lint/suspicious/noExplicitAny: the generated protobufjs root is untyped
const proto = (root as any).opentelemetry.proto;
const TraceRequest = proto.collector.trace.v1.ExportTraceServiceRequest;
const LogsRequest = proto.collector.logs.v1.ExportLogsServiceRequest;
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
const SECRET = "sk-live-encoding-sentinel";
const QUERY = "query-encoding-sentinel";
const source = { resource: { "service.name": "broker-test", "host.name": "bröker-1" }, scope: { name: "broker.audit", version: "1.2.3" } };
const utf8 = new TextDecoder();

const entry: AuditEntry = {
  at: Date.UTC(2025, 0, 31, 12, 0, 0),
  principal: "agent:4",
  vaultId: 2,
  vault: "main",
  ingress: "explicit",
  method: "GET",
  host: "api.example.com:8443",
  path: "/v1/items",
  service: "api.example.com:8443",
  credentialKeys: "API_KEY,OTHER",
  credentialRefs: JSON.stringify(["vault-kv:apps/api#token"]),
  status: 200,
  bytesIn: 0,
  bytesOut: 42,
  durationMs: 7,
  error: null,
  contained: true,
  approvedBy: null,
};

/** Every kind of value an attribute can hold, and what the official decoder must read back. */
const LONG = "ä".repeat(100); // 200 bytes: a two-byte length
const HUGE = `${"x".repeat(70_000)}é`; // past the encoder's 64 KiB chunk
const everyType: Attributes = {
  "str.ascii": "GET",
  "str.empty": "",
  "str.latin1": "café crème",
  "str.cjk": "日本語のパス",
  "str.emoji": "agent 🤖 ok",
  "str.lone-surrogate": "a\ud800b",
  "str.long": LONG,
  "str.quote": 'say "hi"\n\ttab\\',
  "str.33": "x".repeat(33),
  "str.50": "y".repeat(50),
  "int.zero": 0,
  "int.small": 42,
  "int.u32": 4_294_967_295,
  "int.past32": 5_000_000_000,
  "int.max-safe": Number.MAX_SAFE_INTEGER,
  "int.2^53": 2 ** 53,
  "int.2^62": 2 ** 62,
  "int.neg": -1,
  "int.neg-big": -(2 ** 40) - 7,
  "int.min": -(2 ** 63),
  "double.half": 1.5,
  "double.neg": -0.25,
  "double.tiny": 5e-324,
  "double.huge": 1e300,
  "double.2^63": 2 ** 63,
  "double.nan": Number.NaN,
  "double.inf": Number.POSITIVE_INFINITY,
  "double.-inf": Number.NEGATIVE_INFINITY,
  "bool.true": true,
  "bool.false": false,
  "array.strings": ["a", "", "ü"],
  "array.empty": [],
  "array.mixed": [1, "two", true, 2.5, null],
  bytes: new Uint8Array([0, 1, 254, 255]),
  map: { inner: "v", n: 3, deeper: { ok: true } },
  "skipped.undefined": undefined,
  "skipped.null": null,
  "": "empty key",
  ключ: "non-ASCII key",
  ["long.key.".repeat(10)]: 7,
};
const expected: Record<string, unknown> = {
  "str.ascii": { stringValue: "GET" },
  "str.empty": { stringValue: "" },
  "str.latin1": { stringValue: "café crème" },
  "str.cjk": { stringValue: "日本語のパス" },
  "str.emoji": { stringValue: "agent 🤖 ok" },
  "str.lone-surrogate": { stringValue: "a\ufffdb" },
  "str.long": { stringValue: LONG },
  "str.quote": { stringValue: 'say "hi"\n\ttab\\' },
  "str.33": { stringValue: "x".repeat(33) },
  "str.50": { stringValue: "y".repeat(50) },
  "int.zero": { intValue: "0" },
  "int.small": { intValue: "42" },
  "int.u32": { intValue: "4294967295" },
  "int.past32": { intValue: "5000000000" },
  "int.max-safe": { intValue: "9007199254740991" },
  "int.2^53": { intValue: "9007199254740992" },
  "int.2^62": { intValue: "4611686018427387904" },
  "int.neg": { intValue: "-1" },
  "int.neg-big": { intValue: "-1099511627783" },
  "int.min": { intValue: "-9223372036854775808" },
  "double.half": { doubleValue: 1.5 },
  "double.neg": { doubleValue: -0.25 },
  "double.tiny": { doubleValue: 5e-324 },
  "double.huge": { doubleValue: 1e300 },
  "double.2^63": { doubleValue: 2 ** 63 },
  "double.nan": { doubleValue: Number.NaN },
  "double.inf": { doubleValue: Number.POSITIVE_INFINITY },
  "double.-inf": { doubleValue: Number.NEGATIVE_INFINITY },
  "bool.true": { boolValue: true },
  "bool.false": { boolValue: false },
  "array.strings": { arrayValue: { values: [{ stringValue: "a" }, { stringValue: "" }, { stringValue: "ü" }] } },
  "array.empty": { arrayValue: {} },
  "array.mixed": { arrayValue: { values: [{ intValue: "1" }, { stringValue: "two" }, { boolValue: true }, { doubleValue: 2.5 }, {}] } },
  bytes: { bytesValue: [0, 1, 254, 255] },
  map: {
    kvlistValue: {
      values: [
        { key: "inner", value: { stringValue: "v" } },
        { key: "n", value: { intValue: "3" } },
        { key: "deeper", value: { kvlistValue: { values: [{ key: "ok", value: { boolValue: true } }] } } },
      ],
    },
  },
  "": { stringValue: "empty key" },
  ключ: { stringValue: "non-ASCII key" },
  ["long.key.".repeat(10)]: { intValue: "7" },
};

const toObject = (type: { toObject: Function }, message: unknown) => type.toObject(message, { longs: String, enums: Number, bytes: Array, defaults: false });
/** Decoded with the official definitions, as plain objects (64-bit numbers as decimal strings, bytes as arrays). */
const decodeTraces = (bytes: Uint8Array) => toObject(TraceRequest, TraceRequest.decode(bytes));
const decodeLogs = (bytes: Uint8Array) => toObject(LogsRequest, LogsRequest.decode(bytes));
const hex = (bytes: number[] | undefined) => Buffer.from(bytes ?? []).toString("hex");
/** An attribute list by key (each key once). */
const byKey = (list: { key: string; value: unknown }[] | undefined) => Object.fromEntries((list ?? []).map((kv) => [kv.key, kv.value]));

/** Wire fields of one message: protobuf's own rules, for the fields the 0.57 definitions do not know. */
function wireFields(bytes: Uint8Array): { field: number; wire: number; value: number | Uint8Array }[] {
  const out: { field: number; wire: number; value: number | Uint8Array }[] = [];
  let p = 0;
  const varint = () => {
    let v = 0;
    for (let shift = 0; ; shift += 7) {
      const b = bytes[p++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
    }
  };
  while (p < bytes.length) {
    const key = varint();
    const wire = key & 7;
    const field = Math.floor(key / 8);
    if (wire === 0) out.push({ field, wire, value: varint() });
    else if (wire === 1) {
      out.push({ field, wire, value: bytes.subarray(p, p + 8) });
      p += 8;
    } else if (wire === 2) {
      const len = varint();
      out.push({ field, wire, value: bytes.subarray(p, p + len) });
      p += len;
    } else if (wire === 5) {
      out.push({ field, wire, value: new DataView(bytes.buffer, bytes.byteOffset + p, 4).getUint32(0, true) });
      p += 4;
    } else throw new Error(`wire type ${wire}`);
  }
  return out;
}

/** The items (spans or log records) of a request, as their raw bytes: request.1 → .2 → .2. */
function rawItems(request: Uint8Array): Uint8Array[] {
  const sub = (b: Uint8Array, field: number) =>
    wireFields(b)
      .filter((f) => f.field === field)
      .map((f) => f.value as Uint8Array);
  return sub(request, 1).flatMap((r) => sub(r, 2).flatMap((s) => sub(s, 2)));
}

function encodeAll<D>(coding: { request(items: readonly D[]): Uint8Array }, data: D[]): Uint8Array {
  return coding.request(data);
}

function spansOfOneRequest(headers: [string, string][] = [["traceparent", `00-${TRACE}-${PARENT}-01`]]): SpanData[] {
  const out: SpanData[] = [];
  const tracing = createRequestTracing((s) => void out.push(s));
  const t0 = performance.now();
  const span = tracing.open(
    {
      headers: [...headers, ["authorization", `Bearer ${SECRET}`], ["x-query", QUERY], ["tracestate", "congo=t61rcWkgMzE"]],
      method: "GET",
      host: "api.example.com",
      port: 8443,
      ingress: "explicit",
    },
    t0,
  );
  span.dispatched(t0 + 1);
  span.answered(t0 + 2);
  span.handedBack(t0 + 3);
  span.end(entry, t0 + 4);
  return out;
}

const AT = Date.UTC(2025, 0, 31, 12, 0, 0);
const span = (over: Partial<SpanData> = {}): SpanData => ({
  traceId: TRACE,
  spanId: PARENT,
  traceFlags: 1,
  name: "span",
  kind: 2,
  startMs: AT,
  endMs: AT + 1,
  attributes: {},
  ...over,
});
const record = (over: Partial<LogRecordData> = {}): LogRecordData => ({
  timeMs: AT,
  observedMs: AT + 5,
  severityNumber: 9,
  attributes: {},
  ...over,
});

describe("OTLP protobuf encoding, read with the official definitions", () => {
  test("every attribute type on a span, in order, undefined and null left out", () => {
    const decoded = decodeTraces(encodeAll(traceEncoding("http/protobuf", source), [span({ attributes: everyType })]));
    const attributes = decoded.resourceSpans[0].scopeSpans[0].spans[0].attributes as { key: string; value: unknown }[];
    expect(attributes.map((kv) => kv.key)).toEqual(Object.keys(expected));
    expect(byKey(attributes)).toEqual(expected);
  });

  test("every attribute type on a log record, and a map as its body", () => {
    const body = { event: "denied", count: 3, tags: ["x"] };
    const decoded = decodeLogs(encodeAll(logsEncoding("http/protobuf", source), [record({ attributes: everyType, body })]));
    const r = decoded.resourceLogs[0].scopeLogs[0].logRecords[0];
    expect(byKey(r.attributes)).toEqual(expected);
    expect(byKey(r.body.kvlistValue.values)).toEqual({
      event: { stringValue: "denied" },
      count: { intValue: "3" },
      tags: { arrayValue: { values: [{ stringValue: "x" }] } },
    });
  });

  test("the resource and the scope, once per request, around every item", () => {
    const coding = traceEncoding("http/protobuf", source);
    const decoded = decodeTraces(encodeAll(coding, [span({ name: "a" }), span({ name: "b" }), span({ name: "c" })]));
    expect(decoded.resourceSpans).toHaveLength(1);
    const rs = decoded.resourceSpans[0];
    expect(byKey(rs.resource.attributes)).toEqual({ "service.name": { stringValue: "broker-test" }, "host.name": { stringValue: "bröker-1" } });
    expect(rs.scopeSpans).toHaveLength(1);
    expect(rs.scopeSpans[0].scope).toEqual({ name: "broker.audit", version: "1.2.3" });
    expect(rs.scopeSpans[0].spans.map((s: { name: string }) => s.name)).toEqual(["a", "b", "c"]);
  });

  test("span fields: ids, parent, tracestate, kind, times to the nanosecond, status; flags carry sampled and remote parent", () => {
    const spans = [
      span({ parentSpanId: "b7ad6b7169203331", parentIsRemote: true, traceState: "congo=t61rcWkgMzE", startMs: AT + 0.5, endMs: AT + 1.25 }),
      span({ spanId: "0102030405060708", kind: 1, status: { code: 2, message: "upstream_unreachable" }, traceFlags: 0 }),
      span({ spanId: "1112131415161718", kind: 3, status: { code: 1 }, parentSpanId: PARENT }),
    ];
    const bytes = encodeAll(traceEncoding("http/protobuf", source), spans);
    const [a, b, c] = decodeTraces(bytes).resourceSpans[0].scopeSpans[0].spans;
    expect(hex(a.traceId)).toBe(TRACE);
    expect(hex(a.spanId)).toBe(PARENT);
    expect(hex(a.parentSpanId)).toBe("b7ad6b7169203331");
    expect(a.traceState).toBe("congo=t61rcWkgMzE");
    expect(a.kind).toBe(2);
    expect(a.startTimeUnixNano).toBe(String(BigInt(AT) * 1_000_000n + 500_000n));
    expect(a.endTimeUnixNano).toBe(String(BigInt(AT) * 1_000_000n + 1_250_000n));
    expect(a.status).toBeUndefined(); // UNSET: the default, not written
    expect(b.parentSpanId).toBeUndefined();
    expect(b.kind).toBe(1);
    expect(b.status).toEqual({ code: 2, message: "upstream_unreachable" });
    expect(c.status).toEqual({ code: 1 });
    // Span.flags (16, fixed32): W3C flags | HAS_IS_REMOTE (0x100) | IS_REMOTE (0x200).
    const flags = rawItems(bytes).map((item) => wireFields(item).find((f) => f.field === 16));
    expect(flags.map((f) => [f?.wire, f?.value])).toEqual([
      [5, 0x301],
      [5, 0x100],
      [5, 0x101],
    ]);
  });

  test("a time with a fraction of a millisecond keeps it to the microsecond", () => {
    const ms = performance.timeOrigin + 1234.567891;
    const [s] = decodeTraces(encodeAll(traceEncoding("http/protobuf", source), [span({ startMs: ms, endMs: ms })])).resourceSpans[0].scopeSpans[0].spans;
    const ns = BigInt(s.startTimeUnixNano);
    const want = BigInt(Math.floor(ms)) * 1_000_000n + BigInt(Math.round((ms % 1) * 1e6));
    expect(ns - want <= 1000n && want - ns <= 1000n).toBe(true);
  });

  test("log record fields: times, severity, body, trace context; event_name and flags on the wire", () => {
    const bytes = encodeAll(logsEncoding("http/protobuf", source), [
      record({ severityText: "INFO", eventName: "broker.audit", body: "GET x 200", traceId: TRACE, spanId: PARENT, traceFlags: 1 }),
      record({ body: "" }),
    ]);
    const [a, b] = decodeLogs(bytes).resourceLogs[0].scopeLogs[0].logRecords;
    expect(a.timeUnixNano).toBe(String(BigInt(AT) * 1_000_000n));
    expect(a.observedTimeUnixNano).toBe(String(BigInt(AT + 5) * 1_000_000n));
    expect(a.severityNumber).toBe(9);
    expect(a.severityText).toBe("INFO");
    expect(a.body).toEqual({ stringValue: "GET x 200" });
    expect(hex(a.traceId)).toBe(TRACE);
    expect(hex(a.spanId)).toBe(PARENT);
    expect(a.flags).toBe(1);
    expect(b.body).toEqual({ stringValue: "" });
    expect(b.traceId).toBeUndefined();
    expect(b.flags).toBeUndefined();
    const eventNames = rawItems(bytes).map((item) => wireFields(item).find((f) => f.field === 12));
    expect(utf8.decode(eventNames[0]!.value as Uint8Array)).toBe("broker.audit");
    expect(eventNames[1]).toBeUndefined();
  });

  test("a batch past the writer's first buffer, one record larger than it: every one intact and in order; the same request when built again", () => {
    const coding = logsEncoding("http/protobuf", source);
    const data = Array.from({ length: 400 }, (_, i) =>
      record({ body: `record ${i}`, attributes: { i, path: `/v1/${"p".repeat(i % 50)}`, note: i === 123 ? HUGE : "ü" } }),
    );
    const first = coding.request(data);
    expect(coding.request(data)).toEqual(first); // a batch sent again after a failure
    const logs = decodeLogs(first).resourceLogs[0].scopeLogs[0].logRecords;
    expect(logs).toHaveLength(400);
    logs.forEach((r: { body: { stringValue: string }; attributes: { key: string; value: unknown }[] }, i: number) => {
      expect(r.body.stringValue).toBe(`record ${i}`);
      expect(byKey(r.attributes)).toEqual({
        i: { intValue: String(i) },
        path: { stringValue: `/v1/${"p".repeat(i % 50)}` },
        note: { stringValue: i === 123 ? HUGE : "ü" },
      });
    });
    // The writer is used again for the next batch: a smaller one is whole too.
    expect(decodeLogs(coding.request(data.slice(0, 7))).resourceLogs[0].scopeLogs[0].logRecords).toHaveLength(7);
  });

  test("a span that cannot be written is left out, and the rest of its batch goes", () => {
    const broken = {
      get oops(): string {
        throw new Error("not a value");
      },
    };
    for (const protocol of ["http/protobuf", "http/json"] as const) {
      const bytes = encodeAll(traceEncoding(protocol, source), [span({ name: "a" }), span({ name: "b", attributes: broken }), span({ name: "c" })]);
      const spans =
        protocol === "http/json"
          ? JSON.parse(utf8.decode(bytes)).resourceSpans[0].scopeSpans[0].spans
          : decodeTraces(bytes).resourceSpans[0].scopeSpans[0].spans;
      expect(spans.map((s: { name: string }) => s.name)).toEqual(["a", "c"]);
    }
  });

  test("audit records: every field of the record, the request's trace, the resource", () => {
    const coding = logsEncoding("http/protobuf", source);
    const bytes = encodeAll(coding, [
      toLogRecord({ entry, trace: { traceId: TRACE, spanId: PARENT, sampled: true }, observedMs: entry.at + 3 }),
      toLogRecord({
        entry: { ...entry, error: "forbidden", status: 403, approvedBy: "user:2", credentialKeys: "", credentialRefs: null },
        trace: undefined,
        observedMs: entry.at + 4,
      }),
    ]);
    const rl = decodeLogs(bytes).resourceLogs[0];
    expect(byKey(rl.resource.attributes)["service.name"]).toEqual({ stringValue: "broker-test" });
    const [first, second] = rl.scopeLogs[0].logRecords;
    expect(hex(first.traceId)).toBe(TRACE);
    expect(hex(first.spanId)).toBe(PARENT);
    expect(BigInt(first.timeUnixNano)).toBe(BigInt(entry.at) * 1_000_000n);
    expect(BigInt(first.observedTimeUnixNano)).toBe(BigInt(entry.at + 3) * 1_000_000n);
    expect(first.severityNumber).toBe(9);
    expect(first.body.stringValue).toBe("GET api.example.com:8443/v1/items 200");
    const strings = (...v: string[]) => ({ arrayValue: { values: v.map((stringValue) => ({ stringValue })) } });
    expect(byKey(first.attributes)).toEqual({
      "broker.audit.principal": { stringValue: "agent:4" },
      "broker.audit.vault_id": { intValue: "2" },
      "broker.audit.vault": { stringValue: "main" },
      "broker.audit.ingress": { stringValue: "explicit" },
      "broker.audit.method": { stringValue: "GET" },
      "broker.audit.host": { stringValue: "api.example.com:8443" },
      "broker.audit.path": { stringValue: "/v1/items" },
      "broker.audit.service": { stringValue: "api.example.com:8443" },
      "broker.audit.credential_keys": strings("API_KEY", "OTHER"),
      "broker.audit.credential_refs": strings("vault-kv:apps/api#token"),
      "broker.audit.status": { intValue: "200" },
      "broker.audit.bytes_in": { intValue: "0" },
      "broker.audit.bytes_out": { intValue: "42" },
      "broker.audit.duration_ms": { intValue: "7" },
      "broker.audit.contained": { boolValue: true },
    });
    expect(second.traceId).toBeUndefined(); // no span: no trace context
    expect(byKey(second.attributes)).toMatchObject({
      "broker.audit.error": { stringValue: "forbidden" },
      "broker.audit.approved_by": { stringValue: "user:2" },
      "broker.audit.credential_keys": { arrayValue: {} },
      "broker.audit.credential_refs": { arrayValue: {} },
    });
  });

  test("one request's spans: a SERVER span in the agent's trace and its three children; no header value reaches the wire", () => {
    const bytes = encodeAll(traceEncoding("http/protobuf", source), spansOfOneRequest());
    const text = Buffer.from(bytes).toString("latin1");
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(QUERY);
    const wire = decodeTraces(bytes).resourceSpans[0].scopeSpans[0].spans;
    expect(wire).toHaveLength(4);
    const server = wire.find((s: { kind: number }) => s.kind === 2);
    expect(hex(server.traceId)).toBe(TRACE);
    expect(hex(server.parentSpanId)).toBe(PARENT);
    expect(server.name).toBe("GET api.example.com:8443");
    expect(byKey(server.attributes)["url.path"]).toEqual({ stringValue: "/v1/items" });
    const children = wire.filter((s: { parentSpanId?: number[] }) => hex(s.parentSpanId) === hex(server.spanId));
    expect(children.map((s: { name: string }) => s.name).sort()).toEqual(["broker.request", "broker.response", "upstream"]);
    for (const s of wire) expect(s.traceState).toBe("congo=t61rcWkgMzE");
  });
});

describe("OTLP JSON encoding", () => {
  /** JSON's ids are hex where protobuf's JSON mapping has base64: made bytes again, the official definitions read the rest. */
  function fromJson(type: { fromObject: Function }, json: unknown) {
    const ids = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(ids);
      if (!v || typeof v !== "object") return v;
      return Object.fromEntries(
        Object.entries(v).map(([k, x]) => [k, /^(traceId|spanId|parentSpanId)$/.test(k) ? [...Buffer.from(x as string, "hex")] : ids(x)]),
      );
    };
    return toObject(type as { toObject: Function } & typeof type, type.fromObject(ids(json)));
  }

  test("spans: the same message as protobuf, with hex ids, 64-bit numbers as decimal strings, enums and flags as numbers", () => {
    const spans = [
      span({ attributes: everyType, parentSpanId: "b7ad6b7169203331", parentIsRemote: true, startMs: AT + 0.5, status: { code: 2, message: "é" } }),
    ];
    const json = JSON.parse(utf8.decode(encodeAll(traceEncoding("http/json", source), spans)));
    const s = json.resourceSpans[0].scopeSpans[0].spans[0];
    expect(s.traceId).toBe(TRACE);
    expect(s.spanId).toBe(PARENT);
    expect(s.parentSpanId).toBe("b7ad6b7169203331");
    expect(s.kind).toBe(2);
    expect(s.flags).toBe(0x301);
    expect(s.startTimeUnixNano).toBe(String(BigInt(AT) * 1_000_000n + 500_000n));
    expect(byKey(s.attributes)["int.past32"]).toEqual({ intValue: "5000000000" });
    expect(byKey(s.attributes)["int.min"]).toEqual({ intValue: "-9223372036854775808" });
    expect(byKey(s.attributes)["double.nan"]).toEqual({ doubleValue: "NaN" });
    expect(byKey(s.attributes)["double.-inf"]).toEqual({ doubleValue: "-Infinity" });
    expect(byKey(s.attributes).bytes).toEqual({ bytesValue: "AAH+/w==" });
    expect(fromJson(TraceRequest, json)).toEqual(decodeTraces(encodeAll(traceEncoding("http/protobuf", source), spans)));
  });

  test("log records: the same message as protobuf, eventName and flags included", () => {
    const records = [
      toLogRecord({ entry, trace: { traceId: TRACE, spanId: PARENT, sampled: true }, observedMs: entry.at + 3 }),
      record({ attributes: everyType, body: { nested: ["a", 1] }, eventName: "x" }),
    ];
    const json = JSON.parse(utf8.decode(encodeAll(logsEncoding("http/json", source), records)));
    const r = json.resourceLogs[0].scopeLogs[0].logRecords[0];
    expect(r.eventName).toBe("broker.audit");
    expect(r.flags).toBe(1);
    expect(r.traceId).toBe(TRACE);
    expect(r.timeUnixNano).toBe(String(BigInt(entry.at) * 1_000_000n));
    expect(byKey(r.attributes)["broker.audit.credential_refs"]).toEqual({ arrayValue: { values: [{ stringValue: "vault-kv:apps/api#token" }] } });
    expect(fromJson(LogsRequest, json)).toEqual(decodeLogs(encodeAll(logsEncoding("http/protobuf", source), records)));
  });
});

describe("the telemetry's exports", () => {
  test("what the exporters are handed: one request per signal, in the configured encoding, with the SDK's resource", async () => {
    const sent: { signal: string; body: Uint8Array; items: number }[] = [];
    const config = (protocol: "http/protobuf" | "http/json", signal: string) => ({
      url: `http://127.0.0.1:1/v1/${signal}`,
      protocol,
      headers: new Map(),
      timeoutMs: 1000,
      compression: "none" as const,
    });
    const telemetry = createTelemetry(
      {
        traces: config("http/protobuf", "traces"),
        logs: config("http/json", "logs"),
        serviceName: "svc",
        resourceAttributes: { "deployment.environment.name": "test" },
      },
      {
        log: createLogger({ level: "error" }),
        roots: undefined,
        delayMs: 60_000,
        exporters: {
          spans: async (body, items) => void sent.push({ signal: "traces", body, items }),
          logs: async (body, items) => void sent.push({ signal: "logs", body, items }),
          shutdown: async () => {},
        },
      },
    );
    const t0 = performance.now();
    const s = telemetry.tracing.open(
      { headers: [["traceparent", `00-${TRACE}-${PARENT}-01`]], method: "GET", host: "h.example", port: 443, ingress: "transparent" },
      t0,
    );
    s.dispatched(t0 + 1);
    s.answered(t0 + 2);
    s.end(entry, t0 + 3);
    telemetry.audit.add(entry, s.ref);
    await telemetry.stop(1000);
    const traces = sent.find((x) => x.signal === "traces")!;
    const logs = sent.find((x) => x.signal === "logs")!;
    expect(traces.items).toBe(4);
    expect(logs.items).toBe(1);
    const rs = decodeTraces(traces.body).resourceSpans[0];
    expect(byKey(rs.resource.attributes)).toMatchObject({
      "service.name": { stringValue: "svc" },
      "deployment.environment.name": { stringValue: "test" },
      "telemetry.sdk.language": { stringValue: "nodejs" },
    });
    expect(rs.scopeSpans[0].scope.name).toBe("broker");
    expect(rs.scopeSpans[0].spans).toHaveLength(4);
    const json = JSON.parse(utf8.decode(logs.body));
    expect(json.resourceLogs[0].scopeLogs[0].scope.name).toBe("broker.audit");
    expect(json.resourceLogs[0].scopeLogs[0].logRecords[0].spanId).toBe(s.ref.spanId);
  });

  test("a collector that never answers: past the queue's bound, spans are counted as dropped, not queued", async () => {
    const log = createMemoryLogger("warn");
    let framed = 0;
    const never = () => new Promise<void>(() => {});
    const config = (signal: string) => ({
      url: `http://127.0.0.1:1/v1/${signal}`,
      protocol: "http/protobuf" as const,
      headers: new Map(),
      timeoutMs: 1000,
      compression: "none" as const,
    });
    const telemetry = createTelemetry(
      { traces: config("traces"), logs: config("logs"), serviceName: "svc", resourceAttributes: {} },
      {
        log,
        roots: undefined,
        delayMs: 10,
        exporters: {
          spans: (body) => ((framed += body.length), never()),
          logs: never,
          shutdown: async () => {},
        },
      },
    );
    const requests = 2100; // 8,400 spans: 8,192 held, 208 turned away
    for (let i = 0; i < requests; i++) {
      const t0 = performance.now();
      const s = telemetry.tracing.open({ headers: [], method: "GET", host: "h.example", port: 443, ingress: "transparent" }, t0);
      s.dispatched(t0 + 1);
      s.answered(t0 + 2);
      s.end(entry, t0 + 3);
    }
    expect(framed).toBeGreaterThan(0); // the first batch is under way (and never answered)
    await telemetry.stop(20);
    const dropped = log.lines.map((l) => JSON.parse(l)).filter((l) => l.event === "otel_export_dropped" && l.signal === "traces");
    expect(dropped.find((l) => l.reason === "queue full")?.count).toBe(requests * 4 - 8192);
    expect(dropped.find((l) => l.reason === "shutdown")?.count).toBe(8192);
  });
});
