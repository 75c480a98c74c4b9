// Live export of traces and audit records to an OpenTelemetry collector over OTLP/HTTP (issue 37,
// architecture.md D25): it implements what egress/telemetry.ts declares, and app/ wires it in.

export { createTelemetry, type Telemetry, type TelemetryOptions } from "./telemetry.ts";
export { createExportQueue, type ExportQueue, type ExportQueueOptions } from "./export-queue.ts";
export { createRequestTracing } from "./request-tracing.ts";
