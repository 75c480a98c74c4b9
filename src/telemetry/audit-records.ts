// Audit records as OpenTelemetry log records (egress/telemetry.ts AuditExport). The audit writer hands
// each record over as it is made; it waits in the export queue as it came (a push: nothing else on the
// request path), and becomes the SDK's log record data only when its batch leaves, for the official OTLP
// encoder. Made directly rather than through the SDK's Logger, whose per-record attribute checks cost
// more than the rest of the export together, for records whose fields are already plain names and numbers.
// A record holds what the audit log holds, under the API's field names: never a header value, body,
// query string or credential value.

import { SeverityNumber, TraceFlags, type Attributes } from "@opentelemetry/api";
import { millisToHrTime, type InstrumentationScope } from "@opentelemetry/core";
import type { Resource } from "@opentelemetry/resources";
import type { ReadableLogRecord } from "@opentelemetry/sdk-logs";
import type { AuditEntry, TraceRef } from "../egress/index.ts";

export interface PendingRecord {
  readonly entry: AuditEntry;
  readonly trace?: TraceRef;
}

/** Turns a batch of pending records into log record data (one resource and scope for all: the encoder groups by them). */
export function toLogRecords(source: { resource: Resource; scope: InstrumentationScope }, batch: readonly PendingRecord[]): ReadableLogRecord[] {
  const observed = millisToHrTime(Date.now());
  return batch.map(({ entry, trace }) => ({
    hrTime: millisToHrTime(entry.at),
    hrTimeObserved: observed,
    // The request's span, so a collector joins the record to its trace; no span: no trace context.
    ...(trace && { spanContext: { traceId: trace.traceId, spanId: trace.spanId, traceFlags: trace.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE } }),
    eventName: "broker.audit",
    severityNumber: SeverityNumber.INFO,
    severityText: "INFO",
    body: `${entry.method} ${entry.host}${entry.path} ${entry.status}`,
    attributes: auditAttributes(entry),
    droppedAttributesCount: 0,
    resource: source.resource,
    instrumentationScope: source.scope,
  }));
}

/** The audit record's fields under the names GET /v1/vaults/{vault}/logs gives them (docs/api.md), as `broker.audit.*`. */
export function auditAttributes(e: AuditEntry): Attributes {
  const out: Attributes = {
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
  return out;
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
