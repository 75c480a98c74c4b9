// The OpenAPI 3.1 document (GET /v1/openapi.json), built from the routes the app registered: each
// route's describe() gives its summary, callers and answer, its jsonBody() the request body's schema,
// both turned into JSON Schema (2020-12, which OpenAPI 3.1 uses) from the same zod schemas that validate
// requests. Pages of the web console and the approval pages are listed as HTML.

import { z } from "zod";
import type { StandardSchemaV1 } from "@standard-schema/spec";
import { VERSION } from "../../version.ts";
import { bodySchemaOf, operationOf, type Auth, type OperationDoc } from "./describe.ts";

export interface RegisteredRoute {
  readonly method: string;
  readonly path: string;
  readonly handler: unknown;
}

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch"] as const;
const JSON_PREFIXES = ["/v1/", "/discover", "/health", "/proxy", "/metrics"];

/** `/v1/vaults/:vault/services/:host` → `/v1/vaults/{vault}/services/{host}`; `/proxy/*` → `/proxy/{target}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, "{$1}").replace(/\/\*$/, "/{target}");
}

/** Whether a path belongs to the JSON API (every such route must be described), not the HTML pages. */
export function isApiPath(path: string): boolean {
  return JSON_PREFIXES.some((p) => path === p || path.startsWith(p.endsWith("/") ? p : `${p}/`) || path === p.replace(/\/$/, ""));
}

const PAGE: OperationDoc = {
  summary: "Web page (HTML)",
  description: "A page of the web console or of the approval and invite flows, for browsers; it answers HTML and works without JavaScript.",
  tags: ["pages"],
  auth: "cookie",
  success: { status: 200, contentType: "text/html" },
};

const ERROR_SCHEMA = {
  type: "object",
  description: "The one error envelope: a machine-readable code (also in the X-Broker-Error header), a message for people, and safe extras.",
  properties: {
    error: { type: "string", description: "e.g. invalid_request, unauthorized, forbidden, not_found, conflict, rate_limited, approval_required" },
    message: { type: "string" },
    field: { type: "string", description: "for invalid_request: the field's path, e.g. rules[0].paths[1]" },
    proposal_hint: { type: "object", description: "for forbidden and request_not_allowed on a proxied call: a proposal to file" },
  },
  required: ["error", "message"],
  additionalProperties: true,
};

const STATUS_TEXT: Record<number, string> = {
  400: "Invalid request (the field is named)",
  401: "Missing, invalid or expired token",
  403: "Not allowed for this principal or role",
  404: "Not found",
  409: "Conflict with the current state",
  413: "Body too large",
  428: "Held for a human's approval",
  429: "Rate limited (Retry-After)",
  502: "Upstream or credential failure",
  503: "Unavailable",
};

function jsonSchemaOf(schema: StandardSchemaV1, io: "input" | "output"): Record<string, unknown> {
  if (!(schema instanceof z.ZodType)) throw new TypeError("request and response schemas are zod schemas");
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { target: "draft-2020-12", io, unrepresentable: "any" }) as Record<string, unknown>;
  return rest;
}

function securityOf(auth: Auth | readonly Auth[]): Record<string, string[]>[] {
  const list = (Array.isArray(auth) ? auth : [auth]) as Auth[];
  if (list.includes("none")) return [];
  const names: Record<Exclude<Auth, "none">, string> = {
    bearer: "bearerToken",
    cookie: "sessionCookie",
    "basic-proxy": "proxyBasic",
    "metrics-token": "metricsToken",
  };
  return list.map((a) => ({ [names[a as Exclude<Auth, "none">]]: [] }));
}

function operation(method: string, path: string, doc: OperationDoc, body: StandardSchemaV1 | undefined) {
  const params = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => ({ name: m[1], in: "path", required: true, schema: { type: "string" } }));
  const query = Object.entries(doc.query ?? {}).map(([name, description]) => ({ name, in: "query", required: false, description, schema: { type: "string" } }));
  const responses: Record<string, unknown> = {};
  const s = doc.success;
  responses[String(s.status)] = {
    description: s.description ?? "Success",
    ...(s.schema
      ? { content: { "application/json": { schema: jsonSchemaOf(s.schema, "output") } } }
      : s.contentType
        ? { content: { [s.contentType]: { schema: { type: "string" } } } }
        : {}),
  };
  const errors = new Set<number>(doc.errors ?? []);
  if (body || params.length || query.length) errors.add(400);
  if (doc.auth !== "none") errors.add(401);
  if (params.length) errors.add(404);
  errors.add(429);
  for (const status of [...errors].sort()) {
    responses[String(status)] = {
      description: STATUS_TEXT[status] ?? "Error",
      content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
    };
  }
  return {
    operationId: `${method}${path.replace(/\{([^}]+)\}/g, "By_$1").replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ""))}`,
    summary: doc.summary,
    ...(doc.description || doc.who ? { description: [doc.description, doc.who && `Who may call it: ${doc.who}.`].filter(Boolean).join("\n\n") } : {}),
    tags: [...doc.tags],
    security: securityOf(doc.auth),
    ...(params.length || query.length ? { parameters: [...params, ...query] } : {}),
    ...(body ? { requestBody: { required: true, content: { "application/json": { schema: jsonSchemaOf(body, "input") } } } } : {}),
    responses,
  };
}

/** The document for the given routes (as `app.routes` lists them, middleware included). */
export function buildOpenApi(routes: readonly RegisteredRoute[], serverUrl: string): Record<string, unknown> {
  const grouped = new Map<string, { method: string; path: string; handlers: unknown[] }>();
  for (const r of routes) {
    const key = `${r.method} ${r.path}`;
    const g = grouped.get(key) ?? { method: r.method, path: r.path, handlers: [] };
    g.handlers.push(r.handler);
    grouped.set(key, g);
  }
  const paths: Record<string, Record<string, unknown>> = {};
  for (const g of grouped.values()) {
    const described = g.handlers.map(operationOf).find(Boolean);
    // `use()` middleware is registered as ALL; an ALL route is an operation only when described (/proxy).
    if (g.method === "ALL" && !described) continue;
    const doc = described ?? (isApiPath(g.path) ? undefined : PAGE);
    if (!doc) continue; // an undescribed API route: the document test names it
    const body = g.handlers.map(bodySchemaOf).find(Boolean);
    const path = openApiPath(g.path);
    const methods = g.method === "ALL" ? METHODS.filter((m) => m !== "head" && m !== "options") : [g.method.toLowerCase()];
    for (const m of methods) (paths[path] ??= {})[m] = operation(m, path, doc, m === "get" || m === "delete" ? undefined : body);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "broker",
      version: VERSION,
      description:
        "A credential broker for AI agents: people store credentials in vaults; agents call APIs through the broker, which adds the credential and never reveals it. Errors share one envelope (components.schemas.Error).",
    },
    servers: [{ url: serverUrl }],
    paths: Object.fromEntries(Object.entries(paths).sort(([a], [b]) => (a < b ? -1 : 1))),
    components: {
      schemas: { Error: ERROR_SCHEMA },
      securitySchemes: {
        bearerToken: { type: "http", scheme: "bearer", description: "A user session (av_sess_…), agent token (av_agt_…, with X-Vault) or scoped session." },
        sessionCookie: { type: "apiKey", in: "cookie", name: "broker_session", description: "The web console's session cookie (HTML pages only)." },
        proxyBasic: { type: "http", scheme: "basic", description: "Proxy-Authorization: Basic base64(<token>:<vault>) on the CONNECT listener." },
        metricsToken: { type: "http", scheme: "bearer", description: "BROKER_METRICS_TOKEN, when set." },
      },
    },
  };
}
