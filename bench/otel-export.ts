// `bun bench/otel-export.ts [--quick] [--in-process]`: what live OTLP export costs (issue 37). Two
// compiled brokers over one upstream, one with BROKER_OTEL_EXPORTER_OTLP_ENDPOINT pointed at a local
// OTLP/HTTP receiver (it answers 200 to every export and counts them), the other without; both warmed
// alike, then the tunnel and /proxy rows run through each in turn, alternating which goes first, in the
// same repetitions. Prints throughput, p50 and broker CPU per request, and the on/off ratios (medians of
// the per-repetition ratios); then, in this process, the cost of one request's spans and record, and of
// encoding spans and records alone (the broker's encoder, protobuf and JSON, beside the official
// @opentelemetry/otlp-transformer serializers given the SDK's data for the same spans and records).
// --in-process skips the brokers.

import { ensureBinary, startBroker, type BrokerProc } from "./broker.ts";
import { createBenchPki } from "./pki.ts";
import { abMedian, abRatio, runAbRows, type AbRow } from "./ab-rows.ts";
import { warmUp, type Env } from "./scenarios.ts";
import { startUpstream } from "./upstream.ts";
import { createRequestTracing, createTelemetry } from "../src/telemetry/index.ts";
import { toLogRecord } from "../src/telemetry/audit-records.ts";
import type { LogRecordData, Source, SpanData } from "../src/telemetry/otlp-data.ts";
import { logsEncoding, traceEncoding } from "../src/telemetry/otlp-encoding.ts";
import { createLogger } from "../src/log.ts";
import type { AuditEntry } from "../src/egress/index.ts";

const quick = process.argv.includes("--quick");
const inProcessOnly = process.argv.includes("--in-process");
const size = quick ? { requests: 1000, reps: 3, warm: 2000 } : { requests: 4000, reps: 5, warm: 20_000 };
const log = (s: string) => console.error(`[otel-bench] ${s}`);

if (!inProcessOnly) {
  let exportsReceived = 0;
  let bytesReceived = 0;
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      bytesReceived += (await req.arrayBuffer()).byteLength;
      exportsReceived++;
      return new Response(new Uint8Array(0), { headers: { "content-type": "application/x-protobuf" } });
    },
  });

  const pki = await createBenchPki();
  const upstream = startUpstream(pki);
  const bin = ensureBinary(log);
  const brokers: Record<"off" | "on", BrokerProc> = {
    off: await startBroker(bin, pki.caPem, upstream.port),
    on: await startBroker(bin, pki.caPem, upstream.port, { BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.port}` }),
  };
  const envOf = (b: BrokerProc): Env => ({ broker: b, upstreamPort: upstream.port, upstreamCa: pki.caPem });

  let rows: AbRow[] = [];
  try {
    for (const which of ["off", "on"] as const) {
      log(`warming the export-${which} broker (${size.warm} requests)…`);
      await warmUp(envOf(brokers[which]), size.warm);
    }
    rows = await runAbRows({ base: brokers.off, changed: brokers.on }, envOf, size, log);
  } finally {
    await brokers.off.stop();
    await brokers.on.stop();
    upstream.stop();
  }
  receiver.stop(true);

  const lines = [
    `| row | off req/s | on req/s | on/off throughput | off p50 ms | on p50 ms | off CPU ms/req | on CPU ms/req | on/off CPU |`,
    `|---|---:|---:|---:|---:|---:|---:|---:|---:|`,
    ...rows.map(
      (r) =>
        `| ${r.name} | ${abMedian(r.base, (m) => m.rps).toFixed(0)} | ${abMedian(r.changed, (m) => m.rps).toFixed(0)} | ${(abRatio(r, (m) => m.rps) * 100).toFixed(1)}% | ${abMedian(r.base, (m) => m.p50).toFixed(3)} | ${abMedian(r.changed, (m) => m.p50).toFixed(3)} | ${abMedian(r.base, (m) => m.cpu).toFixed(3)} | ${abMedian(r.changed, (m) => m.cpu).toFixed(3)} | ${(abRatio(r, (m) => m.cpu) * 100).toFixed(1)}% |`,
    ),
  ];
  console.log(`OTLP export on vs off, ${size.reps} repetitions alternating (medians of per-repetition ratios)\n`);
  console.log(lines.join("\n"));
  console.log(`\nreceiver: ${exportsReceived} exports, ${(bytesReceived / 1024).toFixed(0)} KiB`);
}

// In-process: one request's spans (open, dispatch with its traceparent, answer, hand back, end) and its
// audit record handed to the export queues, and the queues' batches written as OTLP protobuf export
// requests; the exporters do nothing, so this is all but the HTTP transport.
const record: AuditEntry = {
  at: Date.now(),
  principal: "agent:1",
  vaultId: 1,
  vault: "main",
  ingress: "transparent",
  method: "GET",
  host: "api.example.com",
  path: "/v1/things",
  service: "api.example.com",
  credentialKeys: "API_KEY",
  credentialRefs: null,
  status: 200,
  bytesIn: 0,
  bytesOut: 512,
  durationMs: 3,
  error: null,
  contained: false,
  approvedBy: null,
};
const headers: [string, string][] = [
  ["host", "api.example.com"],
  ["traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"],
];
const request = { headers, method: "GET", host: "api.example.com", port: 443, ingress: "transparent" };
let sent = 0;
const telemetry = createTelemetry(
  {
    traces: { url: "http://x/v1/traces", protocol: "http/protobuf", headers: new Map(), timeoutMs: 1000, compression: "none" },
    logs: { url: "http://x/v1/logs", protocol: "http/protobuf", headers: new Map(), timeoutMs: 1000, compression: "none" },
    serviceName: "bench",
    resourceAttributes: {},
  },
  {
    log: createLogger({ level: "error" }),
    roots: undefined,
    delayMs: 50,
    exporters: {
      spans: async (_request, items) => void (sent += items),
      logs: async (_request, items) => void (sent += items),
      shutdown: async () => {},
    },
  },
);
const n = quick ? 20_000 : 100_000;
const once = () => {
  const t = performance.now();
  const span = telemetry.tracing.open(request, t);
  span.dispatched(t + 0.01);
  span.answered(t + 0.5);
  span.handedBack(t + 0.51);
  span.end(record, t + 0.52);
  telemetry.audit.add(record, span.ref);
};
for (let i = 0; i < 2000; i++) once();
await Bun.sleep(200);
let t0 = Bun.nanoseconds();
for (let i = 0; i < n; i++) {
  once();
  if (i % 1000 === 999) await Bun.sleep(0); // let the queue's batches leave, as between requests
}
const requestNs = (Bun.nanoseconds() - t0) / n;
await telemetry.stop(5000);
// The tracer alone (the four spans' data, no encoding, no audit record), to split the figure.
const spans: SpanData[] = [];
const tracing = createRequestTracing((s) => void spans.push(s));
const trace = () => {
  const t = performance.now();
  const span = tracing.open(request, t);
  span.dispatched(t + 0.01);
  span.answered(t + 0.5);
  span.handedBack(t + 0.51);
  span.end(record, t + 0.52);
  return span.ref;
};
t0 = Bun.nanoseconds();
for (let i = 0; i < n; i++) {
  trace();
  if (spans.length > 4096) spans.length = 0;
}
const spanNs = (Bun.nanoseconds() - t0) / n;
console.log(
  `\nin-process per request: spans + audit record queued, batched and encoded ${(requestNs / 1000).toFixed(2)} µs; the four spans' data alone ${(spanNs / 1000).toFixed(2)} µs (${sent} items exported)`,
);

// Encoding alone: a batch of spans (128 requests' four) and one of 512 audit records (their log record
// data made beforehand), each written as one export request, repeated; µs per span or record. The
// official serializers are given the SDK's data for the same spans and records (also made beforehand).
spans.length = 0;
for (let i = 0; i < 128; i++) trace();
const spanBatch = spans.slice(0, 512);
const records = Array.from({ length: 512 }, () => toLogRecord({ entry: record, trace: trace(), observedMs: Date.now() }));
const source = { resource: { "service.name": "bench", "telemetry.sdk.language": "nodejs" }, scope: { name: "broker", version: "1" } };
const reps = quick ? 40 : 200;
/** µs per item of `encode` over a batch of `items`, after a warm-up. */
const perItem = (items: number, encode: () => Uint8Array | undefined) => {
  for (let i = 0; i < 20; i++) encode();
  const start = Bun.nanoseconds();
  for (let i = 0; i < reps; i++) encode();
  return (Bun.nanoseconds() - start) / reps / items / 1000;
};
const encodingRows: string[] = [];
for (const protocol of ["http/protobuf", "http/json"] as const) {
  const traces = traceEncoding(protocol, source);
  const logs = logsEncoding(protocol, source);
  const spanUs = perItem(spanBatch.length, () => traces.request(spanBatch));
  const recordUs = perItem(records.length, () => logs.request(records));
  const bytes = [traces.request(spanBatch).length / spanBatch.length, logs.request(records).length / records.length];
  encodingRows.push(`| broker's encoder, ${protocol} | ${spanUs.toFixed(2)} | ${recordUs.toFixed(2)} | ${bytes[0]!.toFixed(0)} | ${bytes[1]!.toFixed(0)} |`);
}
encodingRows.push(...(await officialEncoding(spanBatch, records, source, perItem)));
console.log(`\nencoding alone (a batch of ${spanBatch.length} spans, one of ${records.length} audit records; µs and bytes per item)\n`);
console.log(["| encoder | µs/span | µs/record | bytes/span | bytes/record |", "|---|---:|---:|---:|---:|", ...encodingRows].join("\n"));

/**
 * The official OTLP serializers (@opentelemetry/otlp-transformer, what the export used before the broker
 * wrote its own) on the SDK's ReadableSpan and ReadableLogRecord data for the same spans and records;
 * none when the package is not installed.
 */
async function officialEncoding(
  spanData: readonly SpanData[],
  recordData: readonly LogRecordData[],
  from: Source,
  time: (items: number, encode: () => Uint8Array | undefined) => number,
): Promise<string[]> {
  // biome-ignore lint/suspicious/noExplicitAny: an optional package, loaded only here
  const otlp: any = await import("@opentelemetry/otlp-transformer").catch(() => undefined);
  // biome-ignore lint/suspicious/noExplicitAny: as above
  const resources: any = await import("@opentelemetry/resources").catch(() => undefined);
  if (!otlp || !resources) return [];
  const resource = resources.resourceFromAttributes(from.resource);
  const scope = from.scope;
  const hr = (ms: number) => [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6)];
  const sdkSpans = spanData.map((s) => ({
    name: s.name,
    kind: s.kind - 1, // the API's SpanKind counts from INTERNAL = 0
    spanContext: () => ({ traceId: s.traceId, spanId: s.spanId, traceFlags: s.traceFlags }),
    parentSpanContext: s.parentSpanId ? { traceId: s.traceId, spanId: s.parentSpanId, traceFlags: s.traceFlags, isRemote: s.parentIsRemote } : undefined,
    startTime: hr(s.startMs),
    endTime: hr(s.endMs),
    duration: hr(s.endMs - s.startMs),
    status: s.status ?? { code: 0 },
    attributes: s.attributes,
    links: [],
    events: [],
    ended: true,
    resource,
    instrumentationScope: scope,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  }));
  const sdkRecords = recordData.map((r) => ({
    hrTime: hr(r.timeMs),
    hrTimeObserved: hr(r.observedMs),
    ...(r.traceId && { spanContext: { traceId: r.traceId, spanId: r.spanId, traceFlags: r.traceFlags ?? 0 } }),
    eventName: r.eventName,
    severityNumber: r.severityNumber,
    severityText: r.severityText,
    body: r.body,
    attributes: r.attributes,
    droppedAttributesCount: 0,
    resource,
    instrumentationScope: scope,
  }));
  return [
    ["http/protobuf", otlp.ProtobufTraceSerializer, otlp.ProtobufLogsSerializer],
    ["http/json", otlp.JsonTraceSerializer, otlp.JsonLogsSerializer],
  ].map(([protocol, traces, logs]) => {
    const spanUs = time(sdkSpans.length, () => traces.serializeRequest(sdkSpans));
    const recordUs = time(sdkRecords.length, () => logs.serializeRequest(sdkRecords));
    const bytes = [traces.serializeRequest(sdkSpans).length / sdkSpans.length, logs.serializeRequest(sdkRecords).length / sdkRecords.length];
    return `| official otlp-transformer, ${protocol} | ${spanUs.toFixed(2)} | ${recordUs.toFixed(2)} | ${bytes[0]!.toFixed(0)} | ${bytes[1]!.toFixed(0)} |`;
  });
}
