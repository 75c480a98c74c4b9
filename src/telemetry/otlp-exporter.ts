// One signal's OTLP/HTTP exporter, built from the official packages' parts: the serializer of
// @opentelemetry/otlp-transformer (protobuf or JSON) and the HTTP transport of otlp-exporter-base (node's
// https client, which Bun runs, retrying a busy or unreachable collector with backoff within the timeout).
// Built from parts rather than through the exporter packages' classes, whose constructors read the
// OTEL_* environment themselves: here every setting comes from config.ts. The collector is the
// operator's own, so no network guard, but its certificate is always verified (an explicit
// rejectUnauthorized: true holds even under NODE_TLS_REJECT_UNAUTHORIZED=0), against the system roots
// plus BROKER_UPSTREAM_CA_FILE.

import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { OTLPExporterBase, OTLPExporterError } from "@opentelemetry/otlp-exporter-base";
import { createOtlpHttpExportDelegate } from "@opentelemetry/otlp-exporter-base/node-http";
import {
  JsonLogsSerializer,
  JsonTraceSerializer,
  LogsExporterMetricsHelper,
  ProtobufLogsSerializer,
  ProtobufTraceSerializer,
  TraceExporterMetricsHelper,
} from "@opentelemetry/otlp-transformer";
import type { Agent } from "node:http";
import type { ReadableLogRecord } from "@opentelemetry/sdk-logs";
import type { ReadableSpan } from "@opentelemetry/sdk-trace";
import type { OtlpSignalConfig } from "../config.ts";
import { VERSION } from "../version.ts";

/** Sends one batch; rejects with the exporter's error when the collector did not take it. */
export type SendBatch<T> = (batch: T[]) => Promise<void>;

export interface Exporters {
  readonly spans: SendBatch<ReadableSpan>;
  readonly logs: SendBatch<ReadableLogRecord>;
  /** Waits for exports under way and closes the connections. */
  shutdown(): Promise<void>;
}

/** `roots`: the system's plus BROKER_UPSTREAM_CA_FILE's (app/upstream-roots.ts); undefined: the system's. */
export function createExporters(config: { traces: OtlpSignalConfig; logs: OtlpSignalConfig }, roots: readonly string[] | undefined): Exporters {
  const agents = createAgents(roots);
  const spans = new OTLPExporterBase<ReadableSpan[]>(
    createOtlpHttpExportDelegate(
      transportOptions(config.traces, agents.factory),
      config.traces.protocol === "http/json" ? JsonTraceSerializer : ProtobufTraceSerializer,
      "broker_otlp_span_exporter",
      TraceExporterMetricsHelper,
      undefined,
    ),
  );
  const logs = new OTLPExporterBase<ReadableLogRecord[]>(
    createOtlpHttpExportDelegate(
      transportOptions(config.logs, agents.factory),
      config.logs.protocol === "http/json" ? JsonLogsSerializer : ProtobufLogsSerializer,
      "broker_otlp_log_exporter",
      LogsExporterMetricsHelper,
      undefined,
    ),
  );
  return {
    spans: (batch) => sendWith(spans, batch),
    logs: (batch) => sendWith(logs, batch),
    async shutdown() {
      await Promise.all([spans.shutdown(), logs.shutdown()]);
      // Idle keep-alive connections to the collector would hold the process after its last export.
      agents.destroy();
    },
  };
}

/**
 * A refusal the collector will repeat whatever we do (a 4xx other than 408 and 429: a payload or
 * credential it does not accept): retrying it would hold the queue forever.
 */
export function isPermanentRefusal(err: unknown): boolean {
  const code = err instanceof OTLPExporterError ? err.code : undefined;
  return code !== undefined && code >= 400 && code < 500 && code !== 408 && code !== 429;
}

function sendWith<T>(exporter: OTLPExporterBase<T[]>, batch: T[]): Promise<void> {
  return new Promise((resolve, reject) => {
    exporter.export(batch, (result: ExportResult) => {
      if (result.code === ExportResultCode.SUCCESS) resolve();
      else reject(result.error ?? new Error("OTLP export failed"));
    });
  });
}

/** One keep-alive agent per scheme, made when the first export needs it, and destroyed at shutdown. */
function createAgents(roots: readonly string[] | undefined) {
  const made: Promise<Agent>[] = [];
  const byScheme = new Map<string, Promise<Agent>>();
  return {
    factory(protocol: string): Promise<Agent> {
      let agent = byScheme.get(protocol);
      if (!agent) {
        agent =
          protocol === "http:"
            ? import("node:http").then(({ Agent }) => new Agent({ keepAlive: true }))
            : import("node:https").then(({ Agent }) => new Agent({ keepAlive: true, rejectUnauthorized: true, ...(roots && { ca: [...roots] }) }));
        byScheme.set(protocol, agent);
        made.push(agent);
      }
      return agent;
    },
    destroy() {
      for (const agent of made) void agent.then((a) => a.destroy());
    },
  };
}

function transportOptions(signal: OtlpSignalConfig, agentFactory: (protocol: string) => Promise<Agent>) {
  const contentType = signal.protocol === "http/json" ? "application/json" : "application/x-protobuf";
  // reveal: the collector's own API keys, sent only to it (the configured endpoint, over the verified connection).
  const headers: Record<string, string> = Object.fromEntries([...signal.headers].map(([k, v]) => [k, v.reveal()]));
  return {
    url: signal.url,
    headers: async () => ({ ...headers, "Content-Type": contentType }),
    agentFactory,
    compression: signal.compression,
    timeoutMillis: signal.timeoutMs,
    // The export queue sends one batch at a time; a second slot lets shutdown's last batch start while a late one finishes.
    concurrencyLimit: 2,
    userAgent: `broker/${VERSION}`,
  };
}
