// Live export to an OpenTelemetry collector (issue 37): the request tracing and the audit record export
// the pipeline calls (egress/telemetry.ts), each signal through its own bounded queue (export-queue.ts)
// to its OTLP/HTTP exporter (otlp-exporter.ts). Built by app/ only when BROKER_OTEL_EXPORTER_OTLP_ENDPOINT
// is set: when it is not, nothing here runs and no request holds a span.
//
// The queues hold the broker's own span data and the audit records as they were handed over; a batch
// becomes OTLP (protobuf or JSON, as configured: otlp-encoding.ts) when it leaves.

import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import type { OtelConfig } from "../config.ts";
import type { AuditExport, RequestTracing } from "../egress/index.ts";
import type { LiveSecrets, Logger } from "../log.ts";
import { VERSION } from "../version.ts";
import { toLogRecord, type PendingRecord } from "./audit-records.ts";
import { createExportQueue, type ExportQueue } from "./export-queue.ts";
import type { Attributes, SpanData } from "./otlp-data.ts";
import { logsEncoding, traceEncoding } from "./otlp-encoding.ts";
import { createExporters, isPermanentRefusal, type Exporters } from "./otlp-exporter.ts";
import { createRequestTracing } from "./request-tracing.ts";

/** Spans held while the collector is slow or away: 4 a request, so about 2,000 requests. */
const MAX_QUEUED_SPANS = 8192;
/** Audit records held meanwhile: they are the point of the export, so more of them wait. */
const MAX_QUEUED_RECORDS = 20_000;
const MAX_BATCH = 512;

export interface Telemetry {
  readonly tracing: RequestTracing;
  readonly audit: AuditExport;
  /** SECRET: the collector's header values, for the logger's scrub (they are never logged anyway). */
  readonly secrets: LiveSecrets;
  /** Sends what is queued within `graceMs`, then closes the exporters' connections. */
  stop(graceMs: number): Promise<void>;
}

export interface TelemetryOptions {
  readonly log: Logger;
  /** The system's roots plus BROKER_UPSTREAM_CA_FILE's (app/upstream-roots.ts); undefined: the system's. */
  readonly roots: readonly string[] | undefined;
  /** How long a partial batch waits (tests shorten it). */
  readonly delayMs?: number;
  /** Where the export requests go (tests and the bench replace the OTLP exporters). */
  readonly exporters?: Exporters;
}

export function createTelemetry(config: OtelConfig, opts: TelemetryOptions): Telemetry {
  const exporters = opts.exporters ?? createExporters(config, opts.roots);
  // The SDK's resource (its telemetry.sdk.* attributes) with the operator's, read once: every export carries it.
  const resource = defaultResource().merge(
    resourceFromAttributes({ ...config.resourceAttributes, "service.name": config.serviceName, "service.version": VERSION }),
  ).attributes as Attributes;
  const spanCoding = traceEncoding(config.traces.protocol, { resource, scope: { name: "broker", version: VERSION } });
  const recordCoding = logsEncoding(config.logs.protocol, { resource, scope: { name: "broker.audit", version: VERSION } });
  const spans = queueFor<SpanData>("traces", config.traces.url, (batch) => spanCoding.request(batch), exporters.spans, MAX_QUEUED_SPANS, opts);
  const records = queueFor<PendingRecord>(
    "logs",
    config.logs.url,
    (batch) => recordCoding.request(batch.map(toLogRecord)),
    exporters.logs,
    MAX_QUEUED_RECORDS,
    opts,
  );

  return {
    tracing: createRequestTracing((span) => spans.push(span)),
    audit: { add: (entry, trace) => records.push({ entry, trace, observedMs: Date.now() }) },
    secrets: {
      *values() {
        // reveal: scrub patterns only (the logger never stores them).
        for (const signal of [config.traces, config.logs]) for (const v of signal.headers.values()) yield v.reveal();
      },
    },
    async stop(graceMs) {
      const deadline = Date.now() + graceMs;
      await Promise.all([spans.stop(graceMs), records.stop(graceMs)]);
      // Connections close; an export still running past the grace is not waited for (nor is its timer left to hold the process).
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))));
      await Promise.race([exporters.shutdown().catch(() => {}), late]);
      clearTimeout(timer);
    },
  };
}

function queueFor<T>(
  signal: "traces" | "logs",
  url: string,
  encode: (batch: readonly T[]) => Uint8Array,
  send: (request: Uint8Array, items: number) => Promise<void>,
  maxQueued: number,
  opts: TelemetryOptions,
): ExportQueue<T> {
  const log = opts.log;
  return createExportQueue<T>({
    send: (batch) => send(encode(batch), batch.length),
    maxQueued,
    maxBatch: MAX_BATCH,
    delayMs: opts.delayMs ?? 1000,
    isPermanent: isPermanentRefusal,
    onFailing: (err) => log.warn("otel_export_failing", { signal, endpoint: url, err, detail: "held in memory and sent again when the collector answers" }),
    onRecovered: () => log.info("otel_export_recovered", { signal, endpoint: url }),
    onDropped: (count, reason) => log.warn("otel_export_dropped", { signal, count, reason }),
  });
}
