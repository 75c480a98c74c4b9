// One signal's OTLP/HTTP exporter: the HTTP transport of the official otlp-exporter-base (node's https
// client, which Bun runs, retrying a busy or unreachable collector with backoff within the timeout),
// sending requests the broker has already encoded (otlp-encoding.ts). Built from parts rather than
// through the exporter packages' classes, whose constructors read the OTEL_* environment themselves:
// here every setting comes from config.ts. The collector is the operator's own, so no network guard, but
// its certificate is always verified (an explicit rejectUnauthorized: true holds even under
// NODE_TLS_REJECT_UNAUTHORIZED=0), against the system roots plus BROKER_UPSTREAM_CA_FILE.

import { ExportResultCode, type ExportResult } from "@opentelemetry/core";
import { OTLPExporterBase, OTLPExporterError } from "@opentelemetry/otlp-exporter-base";
import { createOtlpHttpExportDelegate } from "@opentelemetry/otlp-exporter-base/node-http";
import type { Agent } from "node:http";
import type { OtlpSignalConfig } from "../config.ts";
import { VERSION } from "../version.ts";

/** Sends one export request (`items` spans or records); rejects with the exporter's error when the collector did not take it. */
export type SendRequest = (request: Uint8Array, items: number) => Promise<void>;

export interface Exporters {
  readonly spans: SendRequest;
  readonly logs: SendRequest;
  /** Waits for exports under way and closes the connections. */
  shutdown(): Promise<void>;
}

/** An encoded request and how many items it holds (what the delegate's metrics count). */
interface EncodedRequest {
  readonly body: Uint8Array;
  readonly items: number;
}

/** The delegate's serializer: the request is already encoded, and the collector's answer is not read (a partial success is not acted on). */
const passThrough = { serializeRequest: (r: EncodedRequest) => r.body, deserializeResponse: () => ({}) };

/** `roots`: the system's plus BROKER_UPSTREAM_CA_FILE's (app/upstream-roots.ts); undefined: the system's. */
export function createExporters(config: { traces: OtlpSignalConfig; logs: OtlpSignalConfig }, roots: readonly string[] | undefined): Exporters {
  const agents = createAgents(roots);
  const exporter = (signal: OtlpSignalConfig, component: string, name: "span" | "log") =>
    new OTLPExporterBase<EncodedRequest>(
      createOtlpHttpExportDelegate(
        transportOptions(signal, agents.factory),
        passThrough,
        component,
        { name, countItems: (r: EncodedRequest) => r.items },
        undefined,
      ),
    );
  const spans = exporter(config.traces, "broker_otlp_span_exporter", "span");
  const logs = exporter(config.logs, "broker_otlp_log_exporter", "log");
  return {
    spans: (body, items) => sendWith(spans, { body, items }),
    logs: (body, items) => sendWith(logs, { body, items }),
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

function sendWith(exporter: OTLPExporterBase<EncodedRequest>, request: EncodedRequest): Promise<void> {
  return new Promise((resolve, reject) => {
    exporter.export(request, (result: ExportResult) => {
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
