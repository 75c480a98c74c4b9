// An OTLP/HTTP receiver for tests: an HTTPS listener on 127.0.0.1 that keeps every export it is sent
// (raw bytes and headers) and decodes it with the OpenTelemetry project's own protobuf definitions (the
// generated decoder @opentelemetry/otlp-transformer 0.57 shipped, installed as otlp-proto-decoder), or as
// OTLP JSON. Nothing here is written from the broker's side of the encoding.

import root from "otlp-proto-decoder/build/src/generated/root.js";
import { createTestPki, type TestPki } from "./pki.ts";

// biome-ignore lint/suspicious/noExplicitAny: the generated protobufjs root is untyped
const proto = (root as any).opentelemetry.proto;

export interface Export {
  readonly path: string;
  readonly headers: Headers;
  readonly raw: Uint8Array;
  /** The request, decoded to plain objects: ids as lower-case hex, 64-bit numbers as strings. */
  readonly body: any;
}

export interface DecodedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: number;
  readonly startTimeUnixNano: string;
  readonly endTimeUnixNano: string;
  readonly attributes: Record<string, unknown>;
  readonly status: { code?: number; message?: string };
  readonly resource: Record<string, unknown>;
}

export interface DecodedLog {
  readonly traceId: string;
  readonly spanId: string;
  readonly eventName: string;
  readonly body: unknown;
  readonly timeUnixNano: string;
  readonly attributes: Record<string, unknown>;
  readonly resource: Record<string, unknown>;
}

export interface OtlpReceiver {
  readonly url: string;
  readonly pki: TestPki;
  readonly exports: Export[];
  spans(): DecodedSpan[];
  logs(): DecodedLog[];
  /** Answer every export with this status from now on (a collector that is down or refusing). */
  answer(status: number): void;
  close(): Promise<void>;
}

/** `pki`: the certificate to serve (default: one of its own, whose CA the broker must be told to trust). */
export async function startOtlpReceiver(pki?: TestPki): Promise<OtlpReceiver> {
  pki ??= await createTestPki();
  const exports: Export[] = [];
  let status = 200;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: pki.certPem, key: pki.keyPem },
    async fetch(req) {
      const raw = new Uint8Array(await req.arrayBuffer());
      const path = new URL(req.url).pathname;
      if (status !== 200) return new Response("unavailable", { status });
      const json = req.headers.get("content-type")?.startsWith("application/json");
      exports.push({ path, headers: req.headers, raw, body: json ? JSON.parse(new TextDecoder().decode(raw)) : decodeProto(path, raw) });
      // An empty ExportServiceResponse (full success), in the encoding the exporter used.
      return json ? Response.json({}) : new Response(new Uint8Array(0), { headers: { "content-type": "application/x-protobuf" } });
    },
  });
  return {
    url: `https://localhost:${server.port}`,
    pki,
    exports,
    spans: () => exports.filter((e) => e.path === "/v1/traces").flatMap((e) => flattenSpans(e.body)),
    logs: () => exports.filter((e) => e.path === "/v1/logs").flatMap((e) => flattenLogs(e.body)),
    answer(s) {
      status = s;
    },
    async close() {
      await server.stop(true);
    },
  };
}

function decodeProto(path: string, raw: Uint8Array): unknown {
  const type =
    path === "/v1/traces"
      ? proto.collector.trace.v1.ExportTraceServiceRequest
      : path === "/v1/logs"
        ? proto.collector.logs.v1.ExportLogsServiceRequest
        : undefined;
  if (!type) throw new Error(`unexpected export path ${path}`);
  const message = type.decode(raw);
  // Ids travel as bytes in protobuf and as hex in OTLP JSON: both are read as hex here.
  return hexIds(type.toObject(message, { longs: String, enums: Number, bytes: Array, defaults: false }));
}

function hexIds(v: any): any {
  if (Array.isArray(v)) return v.map(hexIds);
  if (!v || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v))
    out[k] = /^(traceId|spanId|parentSpanId)$/.test(k) && Array.isArray(x) ? Buffer.from(x as number[]).toString("hex") : hexIds(x);
  return out;
}

/** An OTLP AnyValue as a plain value. */
function valueOf(v: any): unknown {
  if (!v) return undefined;
  if ("stringValue" in v) return v.stringValue;
  if ("intValue" in v) return Number(v.intValue);
  if ("doubleValue" in v) return v.doubleValue;
  if ("boolValue" in v) return v.boolValue;
  if ("arrayValue" in v) return (v.arrayValue.values ?? []).map(valueOf);
  if ("kvlistValue" in v) return attributes(v.kvlistValue.values);
  return undefined;
}

function attributes(list: any[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((kv: any) => [kv.key, valueOf(kv.value)]));
}

function flattenSpans(body: any): DecodedSpan[] {
  return (body.resourceSpans ?? []).flatMap((rs: any) =>
    (rs.scopeSpans ?? []).flatMap((ss: any) =>
      (ss.spans ?? []).map((s: any) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? "",
        name: s.name,
        kind: Number(s.kind),
        startTimeUnixNano: String(s.startTimeUnixNano),
        endTimeUnixNano: String(s.endTimeUnixNano),
        attributes: attributes(s.attributes),
        status: s.status ?? {},
        resource: attributes(rs.resource?.attributes),
      })),
    ),
  );
}

function flattenLogs(body: any): DecodedLog[] {
  return (body.resourceLogs ?? []).flatMap((rl: any) =>
    (rl.scopeLogs ?? []).flatMap((sl: any) =>
      (sl.logRecords ?? []).map((r: any) => ({
        traceId: r.traceId ?? "",
        spanId: r.spanId ?? "",
        eventName: r.eventName ?? "",
        body: valueOf(r.body),
        timeUnixNano: String(r.timeUnixNano),
        attributes: attributes(r.attributes),
        resource: attributes(rl.resource?.attributes),
      })),
    ),
  );
}
