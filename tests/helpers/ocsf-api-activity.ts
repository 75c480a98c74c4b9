// A JSON Schema of the OCSF API Activity event class (class_uid 6003, category 6 "Application Activity"), written
// for these tests from OCSF 1.6.0 (github.com/ocsf/ocsf-schema at tag 1.6.0: events/base_event.json,
// events/application/api_activity.json, dictionary.json and the objects below). It holds what 1.6.0 requires
// (the class's and base event's "required" attributes, each object's "required" attributes and its "at_least_one"
// constraints), the types and enums of the attributes the broker fills, and the attribute names each object has in
// 1.6.0, so a misspelt or invented attribute fails too. No profile is applied (metadata.profiles is unset), so the
// profiles' attributes (cloud, device, trace, …) are not allowed at the top.

import Ajv from "ajv";

const str = { type: "string" };
const int = { type: "integer" };
const obj = { type: "object" };
const arr = { type: "array" };
const anyValue = {};

/** `names` are the object's attributes in OCSF 1.6.0; `typed` the ones given a type here (the others may be anything). */
function object(names: readonly string[], typed: Record<string, object>, extra: object = {}): object {
  return {
    type: "object",
    additionalProperties: false,
    properties: Object.fromEntries(names.map((n) => [n, typed[n] ?? anyValue])),
    ...extra,
  };
}

const atLeastOne = (names: readonly string[]) => ({ anyOf: names.map((n) => ({ required: [n] })) });

// objects/product.json (extends _entity: at least one of name, uid).
const product = object(
  ["cpe_name", "data_classification", "data_classifications", "feature", "lang", "name", "path", "uid", "url_string", "vendor_name", "version"],
  { name: str, uid: str, vendor_name: str, version: str },
  atLeastOne(["name", "uid"]),
);

// objects/metadata.json: product and version required.
const metadata = object(
  [
    "correlation_uid",
    "data_classification",
    "data_classifications",
    "debug",
    "event_code",
    "extension",
    "extensions",
    "is_truncated",
    "labels",
    "log_level",
    "log_name",
    "log_provider",
    "log_version",
    "logged_time",
    "loggers",
    "modified_time",
    "original_time",
    "processed_time",
    "product",
    "profiles",
    "sequence",
    "tags",
    "tenant_uid",
    "transformation_info_list",
    "uid",
    "untruncated_size",
    "version",
  ],
  { product, version: { type: "string", pattern: "^1\\.\\d+\\.\\d+" }, uid: str, log_name: str, sequence: int },
  { required: ["product", "version"] },
);

// objects/user.json (at least one of account, name, uid); type_id's enum from the object.
const user = object(
  [
    "account",
    "credential_uid",
    "display_name",
    "domain",
    "email_addr",
    "forward_addr",
    "full_name",
    "groups",
    "has_mfa",
    "ldap_person",
    "name",
    "org",
    "phone_number",
    "programmatic_credentials",
    "risk_level",
    "risk_level_id",
    "risk_score",
    "type",
    "type_id",
    "uid",
    "uid_alt",
  ],
  { name: str, uid: str, type: str, type_id: { enum: [0, 1, 2, 3, 4, 99] } },
  atLeastOne(["account", "name", "uid"]),
);

// objects/actor.json: at least one of process, user, invoked_by, session, app_name, app_uid.
const actor = object(
  ["app_name", "app_uid", "authorizations", "idp", "invoked_by", "process", "session", "user"],
  { user },
  atLeastOne(["process", "user", "invoked_by", "session", "app_name", "app_uid"]),
);

// objects/service.json (extends _entity).
const service = object(["labels", "name", "tags", "uid", "version"], { name: str, uid: str, version: str });

// objects/api.json: operation required.
const api = object(["group", "operation", "request", "response", "service", "version"], { operation: str, service }, { required: ["operation"] });

// objects/network_endpoint.json (extends endpoint, _entity): at least one of these.
const networkEndpoint = object(
  [
    "agent_list",
    "autonomous_system",
    "container",
    "domain",
    "hostname",
    "hw_info",
    "instance_uid",
    "interface_name",
    "interface_uid",
    "intermediate_ips",
    "ip",
    "isp",
    "isp_org",
    "location",
    "mac",
    "name",
    "namespace_pid",
    "os",
    "owner",
    "port",
    "proxy_endpoint",
    "subnet_uid",
    "svc_name",
    "type",
    "type_id",
    "uid",
    "vlan_uid",
    "vpc_uid",
    "zone",
  ],
  { hostname: str, ip: str, name: str, uid: str, svc_name: str, port: { type: "integer", minimum: 0, maximum: 65535 } },
  atLeastOne(["ip", "uid", "name", "hostname", "svc_name", "instance_uid", "interface_uid", "interface_name", "domain"]),
);

// objects/url.json: at least one of url_string, path.
const url = object(
  ["categories", "category_ids", "domain", "hostname", "path", "port", "query_string", "resource_type", "scheme", "subdomain", "url_string"],
  { hostname: str, path: str, port: { type: "integer", minimum: 0, maximum: 65535 }, scheme: str, url_string: str, query_string: str },
  atLeastOne(["url_string", "path"]),
);

const httpRequest = object(
  ["args", "body_length", "http_headers", "http_method", "length", "referrer", "uid", "url", "user_agent", "version", "x_forwarded_for"],
  {
    http_method: str,
    url,
    length: int,
  },
);

// objects/http_response.json: code required.
const httpResponse = object(
  ["body_length", "code", "content_type", "http_headers", "latency", "length", "message", "status"],
  { code: int, latency: int, length: int },
  { required: ["code"] },
);

/** API Activity (6003) in OCSF 1.6.0: base_event's attributes and the class's, no profile. */
export const OCSF_API_ACTIVITY_SCHEMA = object(
  [
    "activity_id",
    "activity_name",
    "actor",
    "api",
    "category_name",
    "category_uid",
    "class_name",
    "class_uid",
    "count",
    "dst_endpoint",
    "duration",
    "end_time",
    "enrichments",
    "http_request",
    "http_response",
    "message",
    "metadata",
    "observables",
    "raw_data",
    "raw_data_hash",
    "raw_data_size",
    "resources",
    "severity",
    "severity_id",
    "src_endpoint",
    "start_time",
    "status",
    "status_code",
    "status_detail",
    "status_id",
    "time",
    "timezone_offset",
    "type_name",
    "type_uid",
    "unmapped",
  ],
  {
    // Base event: required classification and occurrence attributes.
    activity_id: { enum: [0, 1, 2, 3, 4, 99] },
    activity_name: str,
    category_uid: { const: 6 },
    category_name: str,
    class_uid: { const: 6003 },
    class_name: str,
    type_uid: { enum: [600300, 600301, 600302, 600303, 600304, 600399] },
    type_name: str,
    severity_id: { enum: [0, 1, 2, 3, 4, 5, 6, 99] },
    severity: str,
    time: { type: "integer", minimum: 0 },
    message: str,
    status_id: { enum: [0, 1, 2, 99] },
    status: str,
    status_code: str,
    status_detail: str,
    metadata,
    // API Activity: actor, api and src_endpoint required; the rest recommended.
    actor,
    api,
    src_endpoint: networkEndpoint,
    dst_endpoint: networkEndpoint,
    http_request: httpRequest,
    http_response: httpResponse,
    resources: arr,
    unmapped: obj,
  },
  { required: ["activity_id", "category_uid", "class_uid", "type_uid", "severity_id", "time", "metadata", "actor", "api", "src_endpoint"] },
);

const validator = new Ajv({ allErrors: true, strict: true, strictRequired: false }).compile(OCSF_API_ACTIVITY_SCHEMA);

/** The schema's complaints about `event` (empty when it is a valid API Activity event), plus type_uid's rule. */
export function ocsfApiActivityErrors(event: unknown): string[] {
  const errors = validator(event) ? [] : (validator.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}`);
  const e = event as { class_uid?: number; activity_id?: number; type_uid?: number };
  // dictionary.json: type_uid = class_uid * 100 + activity_id.
  if (e.type_uid !== (e.class_uid ?? 0) * 100 + (e.activity_id ?? 0)) errors.push("/type_uid must be class_uid * 100 + activity_id");
  return errors;
}
