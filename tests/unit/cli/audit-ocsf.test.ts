// `broker audit export --format ocsf` (src/cli/commands/audit-ocsf.ts): every kind of record maps to an OCSF 1.6.0
// API Activity event that the class's schema (tests/helpers/ocsf-api-activity.ts, written from OCSF 1.6.0) accepts,
// with the chain fields under `unmapped`; the schema itself refuses events that miss what 1.6.0 requires.

import { expect, test } from "bun:test";
import type { ExportedAuditRecord } from "../../../src/crypto/index.ts";
import { OCSF_VERSION, ocsfApiActivity } from "../../../src/cli/commands/audit-ocsf.ts";
import { ocsfApiActivityErrors } from "../../helpers/ocsf-api-activity.ts";

const base: ExportedAuditRecord = {
  id: 41,
  seq: 12,
  prev: "a".repeat(64),
  hash: "b".repeat(64),
  at: Date.UTC(2026, 0, 2, 3, 4, 5),
  principal: "agent:3",
  vault: "main",
  ingress: "explicit",
  method: "GET",
  host: "api.example.com",
  path: "/v1/items",
  service: "api.example.com",
  credential_keys: "API_KEY",
  credential_refs: null,
  status: 200,
  bytes_in: 0,
  bytes_out: 321,
  duration_ms: 14,
  error: null,
  contained: false,
  approved_by: null,
};
const names = { "agent:3": "ci-bot", "user:1": "owner@example.com" };

test("records of every kind are valid OCSF 1.6.0 API Activity events", () => {
  const records: ExportedAuditRecord[] = [
    base,
    { ...base, method: "POST", status: 201, bytes_in: 20 },
    { ...base, method: "PUT" },
    { ...base, method: "PATCH", principal: "user:1", approved_by: "user:1" },
    { ...base, method: "DELETE", status: 404 },
    { ...base, method: "HEAD" },
    { ...base, method: "OPTIONS", service: null },
    { ...base, ingress: "blind", method: "CONNECT", path: "", service: null, host: "other.example.com:8443", credential_keys: "" },
    { ...base, host: "127.0.0.1:4443", status: 502, error: "upstream_unreachable" },
    { ...base, host: "[::1]:4443" },
    { ...base, principal: "session:9", credential_refs: JSON.stringify(["kv:a#b"]), contained: true },
    { ...base, method: "GET", status: 101, ingress: "transparent" },
  ];
  for (const r of records) {
    const event = ocsfApiActivity(r, 5, names);
    expect({ record: r, errors: ocsfApiActivityErrors(event) }).toEqual({ record: r, errors: [] });
  }
});

test("the mapping: activity from the method, actor by name, destination, the request and response, chain under unmapped", () => {
  const e = ocsfApiActivity({ ...base, method: "POST", status: 403, error: "forbidden_by_rule", bytes_in: 9 }, 5, names) as any;
  expect(e).toMatchObject({
    class_uid: 6003,
    category_uid: 6,
    activity_id: 1,
    activity_name: "Create",
    type_uid: 600301,
    time: base.at,
    status_id: 2,
    status_code: "403",
    status_detail: "forbidden_by_rule",
    metadata: { version: OCSF_VERSION, uid: "41", sequence: 12, product: { name: "broker" } },
    actor: { user: { uid: "agent:3", name: "ci-bot", type_id: 4 } },
    api: { operation: "POST /v1/items", service: { name: "api.example.com" } },
    src_endpoint: { uid: "agent:3", name: "ci-bot" },
    dst_endpoint: { hostname: "api.example.com", port: 443, svc_name: "api.example.com" },
    http_request: {
      http_method: "POST",
      url: { scheme: "https", hostname: "api.example.com", port: 443, path: "/v1/items", url_string: "https://api.example.com/v1/items" },
      length: 9,
    },
    http_response: { code: 403, latency: 14, length: 321 },
    unmapped: {
      vault: "main",
      vault_id: 5,
      record_id: 41,
      chain: { seq: 12, prev: base.prev, hash: base.hash },
      ingress: "explicit",
      credential_keys: "API_KEY",
    },
  });
  expect(OCSF_VERSION).toBe("1.6.0");
  const connect = ocsfApiActivity({ ...base, method: "CONNECT", path: "", host: "10.0.0.1:8443" }, 5, {}) as any;
  expect(connect).toMatchObject({ activity_id: 99, activity_name: "CONNECT", type_uid: 600399, dst_endpoint: { ip: "10.0.0.1", port: 8443 } });
  expect(connect.http_request.url.path).toBeUndefined();
  expect(connect.actor.user.name).toBe("agent:3"); // no name known: the id
});

test("the schema refuses what OCSF 1.6.0 does not allow", () => {
  const good = ocsfApiActivity(base, 5, names) as any;
  const without = (path: string[]) => {
    const copy = structuredClone(good);
    let at = copy;
    for (const p of path.slice(0, -1)) at = at[p];
    delete at[path.at(-1)!];
    return copy;
  };
  for (const missing of [
    ["actor"],
    ["api"],
    ["src_endpoint"],
    ["metadata"],
    ["time"],
    ["severity_id"],
    ["metadata", "version"],
    ["api", "operation"],
    ["http_response", "code"],
  ])
    expect({ missing, errors: ocsfApiActivityErrors(without(missing)).length > 0 }).toEqual({ missing, errors: true });
  expect(ocsfApiActivityErrors({ ...good, class_uid: 4002 }).length).toBeGreaterThan(0);
  expect(ocsfApiActivityErrors({ ...good, type_uid: 600303 }).length).toBeGreaterThan(0);
  expect(ocsfApiActivityErrors({ ...good, cloud: {} }).length).toBeGreaterThan(0); // a profile's attribute without the profile
  expect(ocsfApiActivityErrors({ ...good, actor: {} }).length).toBeGreaterThan(0);
  expect(ocsfApiActivityErrors({ ...good, src_endpoint: { port: 1 } }).length).toBeGreaterThan(0);
  expect(ocsfApiActivityErrors({ ...good, http_request: { ...good.http_request, url: { hostname: "x" } } }).length).toBeGreaterThan(0);
});
