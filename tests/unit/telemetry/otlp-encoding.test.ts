// What the broker's span and log record data become on the wire, through the official OTLP encoders the
// exporters use (protobuf and JSON), read back with the OpenTelemetry project's own protobuf definitions:
// the audit record's fields, its trace ids, the resource; and no sentinel a request carried.

import { describe, expect, test } from "bun:test";
import { JsonLogsSerializer, JsonTraceSerializer, ProtobufLogsSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import type { ReadableSpan } from "@opentelemetry/sdk-trace";
import root from "otlp-proto-decoder/build/src/generated/root.js";
import type { AuditEntry } from "../../../src/egress/index.ts";
import { createRequestTracing } from "../../../src/telemetry/index.ts";
import { toLogRecords } from "../../../src/telemetry/audit-records.ts";

// biome-ignore lint/suspicious/noExplicitAny: the generated protobufjs root is untyped
const proto = (root as any).opentelemetry.proto;
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SECRET = "sk-live-encoding-sentinel";
const QUERY = "query-encoding-sentinel";
const source = { resource: resourceFromAttributes({ "service.name": "broker-test" }), scope: { name: "broker.audit", version: "1" } };

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

function spansOfOneRequest(): ReadableSpan[] {
  const out: ReadableSpan[] = [];
  const tracing = createRequestTracing((s) => void out.push(s), { ...source, scope: { name: "broker" } });
  const t0 = performance.now();
  const span = tracing.open(
    {
      headers: [
        ["traceparent", `00-${TRACE}-00f067aa0ba902b7-01`],
        ["authorization", `Bearer ${SECRET}`],
        ["x-query", QUERY],
      ],
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

const attrs = (list: any[]) =>
  Object.fromEntries(
    list.map((kv) => {
      const v = kv.value;
      // Set fields are the message's own properties (defaults live on the prototype of a decoded message).
      const has = (k: string) => Object.hasOwn(v, k);
      const value = has("stringValue")
        ? v.stringValue
        : has("intValue")
          ? Number(v.intValue)
          : has("boolValue")
            ? v.boolValue
            : (v.arrayValue?.values ?? []).map((x: any) => x.stringValue);
      return [kv.key, value];
    }),
  );

describe("OTLP encoding of the broker's data", () => {
  test("audit records, protobuf: every field of the record, the request's trace, the resource", () => {
    const records = toLogRecords(source, [
      { entry, trace: { traceId: TRACE, spanId: "00f067aa0ba902b7", sampled: true } },
      { entry: { ...entry, error: "forbidden", status: 403 } },
    ]);
    const bytes = ProtobufLogsSerializer.serializeRequest(records)!;
    const decoded = proto.collector.logs.v1.ExportLogsServiceRequest.decode(bytes);
    const rl = decoded.resourceLogs[0];
    expect(attrs(rl.resource.attributes)["service.name"]).toBe("broker-test");
    const [first, second] = rl.scopeLogs[0].logRecords;
    expect(rl.scopeLogs[0].scope.name).toBe("broker.audit");
    expect(Buffer.from(first.traceId).toString("hex")).toBe(TRACE);
    expect(Buffer.from(first.spanId).toString("hex")).toBe("00f067aa0ba902b7");
    expect(BigInt(first.timeUnixNano.toString())).toBe(BigInt(entry.at) * 1_000_000n);
    expect(first.severityNumber).toBe(9);
    expect(first.body.stringValue).toBe("GET api.example.com:8443/v1/items 200");
    expect(attrs(first.attributes)).toEqual({
      "broker.audit.principal": "agent:4",
      "broker.audit.vault_id": 2,
      "broker.audit.vault": "main",
      "broker.audit.ingress": "explicit",
      "broker.audit.method": "GET",
      "broker.audit.host": "api.example.com:8443",
      "broker.audit.path": "/v1/items",
      "broker.audit.service": "api.example.com:8443",
      "broker.audit.credential_keys": ["API_KEY", "OTHER"],
      "broker.audit.credential_refs": ["vault-kv:apps/api#token"],
      "broker.audit.status": 200,
      "broker.audit.bytes_in": 0,
      "broker.audit.bytes_out": 42,
      "broker.audit.duration_ms": 7,
      "broker.audit.contained": true,
    });
    expect(second.traceId?.length ?? 0).toBe(0); // no span: no trace context
    expect(attrs(second.attributes)["broker.audit.error"]).toBe("forbidden");
  });

  test("spans, protobuf: one SERVER span in the agent's trace and its three children; no header value reaches the wire", () => {
    const spans = spansOfOneRequest();
    const bytes = ProtobufTraceSerializer.serializeRequest(spans)!;
    const text = Buffer.from(bytes).toString("latin1");
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(QUERY);
    const decoded = proto.collector.trace.v1.ExportTraceServiceRequest.decode(bytes);
    const wire = decoded.resourceSpans[0].scopeSpans[0].spans;
    expect(wire).toHaveLength(4);
    const server = wire.find((s: any) => s.kind === 2);
    expect(Buffer.from(server.traceId).toString("hex")).toBe(TRACE);
    expect(Buffer.from(server.parentSpanId).toString("hex")).toBe("00f067aa0ba902b7");
    expect(server.name).toBe("GET api.example.com:8443");
    expect(attrs(server.attributes)["url.path"]).toBe("/v1/items");
    const children = wire.filter((s: any) => Buffer.from(s.parentSpanId ?? []).equals(Buffer.from(server.spanId)));
    expect(children.map((s: any) => s.name).sort()).toEqual(["broker.request", "broker.response", "upstream"]);
  });

  test("http/json: hex ids and the same fields", () => {
    const spans = JSON.parse(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spansOfOneRequest())!));
    const server = spans.resourceSpans[0].scopeSpans[0].spans.find((s: any) => s.kind === 2);
    expect(server.traceId).toBe(TRACE);
    expect(server.parentSpanId).toBe("00f067aa0ba902b7");
    const logs = JSON.parse(new TextDecoder().decode(JsonLogsSerializer.serializeRequest(toLogRecords(source, [{ entry }]))!));
    const record = logs.resourceLogs[0].scopeLogs[0].logRecords[0];
    expect(record.eventName).toBe("broker.audit");
    expect(attrs(record.attributes)["broker.audit.credential_refs"]).toEqual(["vault-kv:apps/api#token"]);
  });
});
