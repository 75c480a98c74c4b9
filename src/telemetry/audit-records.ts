// Audit records as OpenTelemetry log records (egress/telemetry.ts AuditExport). The audit writer hands
// each record over as it is made; it waits in the export queue as it came (a push: nothing else on the
// request path), and becomes log record data only when its batch is written (telemetry.ts). Made as plain
// data rather than through the SDK's Logger, whose per-record attribute checks cost more than the rest of
// the export together, for records whose fields are already plain names and numbers.
// A record holds what the audit log holds, under the API's field names: never a header value, body,
// query string or credential value.

import type { AuditEntry, TraceRef } from "../egress/index.ts";
import { SEVERITY_INFO, type Attributes, type LogRecordData } from "./otlp-data.ts";

/** A record handed to the export: the request's span, when it has one, and when it was handed over. */
export interface PendingRecord {
  readonly entry: AuditEntry;
  readonly trace: TraceRef | undefined;
  readonly observedMs: number;
}

/** The record as a log record. */
export function toLogRecord({ entry, trace, observedMs }: PendingRecord): LogRecordData {
  return {
    timeMs: entry.at,
    observedMs,
    severityNumber: SEVERITY_INFO,
    severityText: "INFO",
    eventName: "broker.audit",
    body: `${entry.method} ${entry.host}${entry.path} ${entry.status}`,
    attributes: auditAttributes(entry),
    // The request's span, so a collector joins the record to its trace; no span: no trace context.
    traceId: trace?.traceId,
    spanId: trace?.spanId,
    traceFlags: trace?.sampled ? 1 : 0,
  };
}

/** The audit record's fields under the names GET /v1/vaults/{vault}/logs gives them (docs/api.md), as `broker.audit.*`. */
export function auditAttributes(e: AuditEntry): Attributes {
  const out: Record<string, string | number | boolean | string[]> = {
    "broker.audit.principal": e.principal,
    "broker.audit.vault_id": e.vaultId,
    "broker.audit.vault": e.vault,
    "broker.audit.ingress": e.ingress,
    "broker.audit.method": e.method,
    "broker.audit.host": e.host,
    "broker.audit.path": e.path,
    "broker.audit.credential_keys": e.credentialKeys ? e.credentialKeys.split(",") : [],
    "broker.audit.credential_refs": refsOf(e.credentialRefs),
    "broker.audit.status": e.status,
    "broker.audit.bytes_in": e.bytesIn,
    "broker.audit.bytes_out": e.bytesOut,
    "broker.audit.duration_ms": e.durationMs,
    "broker.audit.contained": e.contained,
  };
  if (e.service !== null) out["broker.audit.service"] = e.service;
  if (e.error !== null) out["broker.audit.error"] = e.error;
  if (e.approvedBy !== null) out["broker.audit.approved_by"] = e.approvedBy;
  if (e.workloadSubject) out["broker.audit.workload.subject"] = e.workloadSubject;
  if (e.workloadIssuer) out["broker.audit.workload.issuer"] = e.workloadIssuer;
  Object.assign(out, llmAttributes(e));
  return out;
}

/**
 * What a metered LLM call used (issue 38), under OpenTelemetry's GenAI names (`gen_ai.usage.*`,
 * `gen_ai.response.model`) and the cost under the broker's; nothing for any other request.
 */
export function llmAttributes(e: Pick<AuditEntry, "llmModel" | "inputTokens" | "outputTokens" | "costMicros">): Record<string, string | number> {
  if (e.inputTokens === null || e.inputTokens === undefined) return {};
  return {
    "gen_ai.usage.input_tokens": e.inputTokens,
    "gen_ai.usage.output_tokens": e.outputTokens ?? 0,
    ...(e.llmModel && { "gen_ai.response.model": e.llmModel }),
    ...(e.costMicros !== null && e.costMicros !== undefined && { "broker.llm.cost_micros": e.costMicros }),
  };
}

/** References as the record stores them: a JSON array of `conn:path#field` texts (never values), or null. */
function refsOf(text: string | null | undefined): string[] {
  if (!text) return [];
  try {
    const refs: unknown = JSON.parse(text);
    return Array.isArray(refs) ? refs.filter((r): r is string => typeof r === "string") : [];
  } catch {
    return [];
  }
}
