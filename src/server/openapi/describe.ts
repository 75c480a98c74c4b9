// What the OpenAPI document says about a route, kept on the route itself: `describe({...})` is a
// middleware that does nothing but carry its operation's summary, who may call it and its answer's
// schema, and `jsonBody(schema)` (../body.ts) carries the request body's. The document is built from
// the app's registered routes (document.ts), so a route cannot exist without showing up there.

import type { StandardSchemaV1 } from "@standard-schema/spec";
import type { MiddlewareHandler } from "hono";

/** How a caller authenticates (the document's security schemes). */
export type Auth = "none" | "bearer" | "cookie" | "basic-proxy" | "metrics-token";

export interface OperationDoc {
  readonly summary: string;
  readonly description?: string;
  readonly tags: readonly string[];
  /** Who may call it; "bearer" covers user sessions, agent tokens and scoped sessions unless `who` narrows it. */
  readonly auth: Auth | readonly Auth[];
  /** In words: which principals and roles (e.g. "admin, member; never agents or scoped sessions"). */
  readonly who?: string;
  /** The success answer: its status, and its JSON body's schema (absent: no body, or `contentType`). */
  readonly success: { readonly status: number; readonly schema?: StandardSchemaV1; readonly contentType?: string; readonly description?: string };
  /** Error statuses beyond the common ones (400, 401, 403, 404, 429 as they apply), each with the envelope. */
  readonly errors?: readonly number[];
  /** Query parameters: name → description (all strings on the wire). */
  readonly query?: Readonly<Record<string, string>>;
}

export const OPERATION = Symbol.for("broker.openapi.operation");
export const BODY_SCHEMA = Symbol.for("broker.openapi.body");

/**
 * The route's OpenAPI operation. Under BROKER_SCHEMA_CHECK=strict (the test suite) it also checks each
 * success answer against the documented schema, so every test that gets one checks the document too.
 */
export function describe(doc: OperationDoc): MiddlewareHandler {
  const schema = doc.success.schema;
  // Outside the test suite it only passes on: one call, no await (it sits on /proxy's path too).
  if (!schema || process.env.BROKER_SCHEMA_CHECK !== "strict") return Object.assign(((_c, next) => next()) as MiddlewareHandler, { [OPERATION]: doc });
  const mw: MiddlewareHandler = async (c, next) => {
    await next();
    if (c.res.status !== doc.success.status) return;
    const body: unknown = await c.res.clone().json();
    const result = await schema["~standard"].validate(body);
    if (result.issues) {
      const at = result.issues[0]?.path?.map((p) => (typeof p === "object" ? p.key : p)).join(".") ?? "";
      throw new Error(`response schema drift on ${c.req.method} ${c.req.routePath}: ${at} ${result.issues[0]?.message}`);
    }
  };
  return Object.assign(mw, { [OPERATION]: doc });
}

export function operationOf(handler: unknown): OperationDoc | undefined {
  return (handler as { [OPERATION]?: OperationDoc } | undefined)?.[OPERATION];
}

export function bodySchemaOf(handler: unknown): StandardSchemaV1 | undefined {
  return (handler as { [BODY_SCHEMA]?: StandardSchemaV1 } | undefined)?.[BODY_SCHEMA];
}
