// `broker audit export --format ocsf`: each chained audit record as an OCSF API Activity event (class 6003,
// category 6, Application Activity), targeting OCSF 1.6.0 (github.com/ocsf/ocsf-schema, tag 1.6.0:
// events/application/api_activity.json and the objects it uses). The chain fields, and what OCSF has no place
// for, go under `unmapped`. Nothing here a record does not hold: no query string, header value, body or token.

import type { ExportedAuditRecord } from "../../crypto/index.ts";
import { VERSION } from "../../version.ts";

export const OCSF_VERSION = "1.6.0";
const CLASS_UID = 6003;
const CATEGORY_UID = 6;

/** API Activity's activity ids (OCSF 1.6.0): the HTTP method's CRUD meaning, Other (99) for the rest. */
const ACTIVITIES: Record<string, [number, string]> = {
  POST: [1, "Create"],
  GET: [2, "Read"],
  HEAD: [2, "Read"],
  PUT: [3, "Update"],
  PATCH: [3, "Update"],
  DELETE: [4, "Delete"],
};

/** `api.example.com:8443` → host and port (443 when the record names none: the broker's upstreams are HTTPS). */
function splitHost(host: string): { name: string; port: number } {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(host);
  if (v6) return { name: v6[1]!, port: v6[2] ? Number(v6[2]) : 443 };
  const m = /^(.*):(\d+)$/.exec(host);
  return m ? { name: m[1]!, port: Number(m[2]) } : { name: host, port: 443 };
}

const isIp = (name: string) => /^\d{1,3}(\.\d{1,3}){3}$/.test(name) || name.includes(":");

/**
 * The record as an OCSF 1.6.0 API Activity event. `names`: who each principal is (the export's
 * principal_names); the actor's name falls back to the principal's id.
 */
export function ocsfApiActivity(r: ExportedAuditRecord, vaultId: number, names: Readonly<Record<string, string>>): Record<string, unknown> {
  const [activityId, activity] = ACTIVITIES[r.method.toUpperCase()] ?? [99, r.method];
  const ok = r.status >= 100 && r.status < 400 && r.error === null;
  const host = splitHost(r.host);
  const principalName = names[r.principal] ?? r.principal;
  const kind = r.principal.startsWith("agent:")
    ? { type_id: 4, type: "Service" }
    : r.principal.startsWith("user:")
      ? { type_id: 1, type: "User" }
      : { type_id: 0, type: "Unknown" };
  const url: Record<string, unknown> = { scheme: "https", hostname: host.name, port: host.port, url_string: `https://${r.host}${r.path}` };
  if (r.path) url.path = r.path;
  return {
    activity_id: activityId,
    activity_name: activity,
    category_uid: CATEGORY_UID,
    category_name: "Application Activity",
    class_uid: CLASS_UID,
    class_name: "API Activity",
    type_uid: CLASS_UID * 100 + activityId,
    type_name: `API Activity: ${activity}`,
    severity_id: 1,
    severity: "Informational",
    time: r.at,
    message: `${r.method} ${r.host}${r.path} answered ${r.status}`,
    status_id: ok ? 1 : 2,
    status: ok ? "Success" : "Failure",
    status_code: String(r.status),
    ...(r.error ? { status_detail: r.error } : {}),
    metadata: {
      version: OCSF_VERSION,
      product: { name: "broker", vendor_name: "broker", version: VERSION },
      uid: String(r.id),
      log_name: "audit",
      sequence: r.seq,
    },
    actor: { user: { uid: r.principal, name: principalName, ...kind } },
    api: { operation: `${r.method} ${r.path}`, service: { name: r.service ?? r.host } },
    src_endpoint: { uid: r.principal, name: principalName },
    dst_endpoint: { ...(isIp(host.name) ? { ip: host.name } : { hostname: host.name }), port: host.port, ...(r.service ? { svc_name: r.service } : {}) },
    http_request: { http_method: r.method, url, length: r.bytes_in },
    http_response: { code: r.status, latency: r.duration_ms, length: r.bytes_out },
    unmapped: {
      vault: r.vault,
      vault_id: vaultId,
      record_id: r.id,
      chain: { seq: r.seq, prev: r.prev, hash: r.hash },
      ingress: r.ingress,
      service: r.service,
      credential_keys: r.credential_keys,
      credential_refs: r.credential_refs,
      contained: r.contained,
      approved_by: r.approved_by,
      ...(r.approved_by ? { approved_by_name: names[r.approved_by] ?? r.approved_by } : {}),
      // OCSF 1.6.0 API Activity has no place for an LLM call's usage; null on records that are not LLM calls.
      llm_model: r.llm_model ?? null,
      input_tokens: r.input_tokens ?? null,
      output_tokens: r.output_tokens ?? null,
      total_tokens: r.total_tokens ?? null,
      cost_micros: r.cost_micros ?? null,
      workload_issuer: r.workload_issuer ?? null,
      workload_subject: r.workload_subject ?? null,
    },
  };
}
