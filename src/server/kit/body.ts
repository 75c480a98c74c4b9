// JSON request bodies checked against their schema before a route's handler runs: the same schema the
// domain reads the body with and the OpenAPI document describes it by (openapi/). A field the schema
// does not know is refused with 400 naming it, since for a security setting a silently dropped field
// (`"rulez": …`) is the worst possible answer. Errors keep the one envelope: the field's path
// (`rules[0].paths[1]`) in `field`, and the reason in the message.
//
// Not Hono's own JSON validator: it reads the body only under a JSON content type and without a size
// cap, and the broker has always read JSON bodies whatever their content type, capped at 256 KiB
// (request.ts). The schema is used through the Standard Schema interface, as that validator does.

import type { StandardSchemaV1 } from "@standard-schema/spec";
import type { MiddlewareHandler } from "hono";
import { issueError } from "../../contract/index.ts";
import { BODY_SCHEMA } from "../openapi/index.ts";
import { readJson } from "./request.ts";

/**
 * Middleware: the JSON body checked against `schema`. A field the schema does not know is refused here,
 * with 400 naming it. Any other mismatch is left to the domain operation the handler calls, which reads
 * the body with its own checks and answers with the precise message and field it always has; the
 * handler gets the body as sent (`c.req.valid("json")`). Under BROKER_SCHEMA_CHECK=strict (the test
 * suite) a body the schema refuses but the handler accepts fails loudly: the schema and the domain
 * must say the same thing, and every test that posts a body checks that they do.
 */
export function jsonBody<S extends StandardSchemaV1>(
  schema: S,
): MiddlewareHandler<any, string, { in: { json: StandardSchemaV1.InferInput<S> }; out: { json: unknown } }> {
  const mw: MiddlewareHandler = async (c, next) => {
    const body = (await readJson(c)) ?? {};
    const result = schema["~standard"].validate(body);
    if (result instanceof Promise) throw new TypeError("asynchronous schemas are not used for request bodies");
    const unknownField = result.issues?.some((i) => (i as { code?: string }).code === "unrecognized_keys");
    if (result.issues && unknownField) throw issueError(result.issues);
    c.req.addValidatedData("json", body as object);
    await next();
    if (result.issues && c.res.status < 400 && process.env.BROKER_SCHEMA_CHECK === "strict") {
      throw new Error(
        `schema drift on ${c.req.method} ${c.req.routePath}: the schema refused a body the handler accepted (${issueError(result.issues).message})`,
      );
    }
  };
  return Object.assign(mw, { [BODY_SCHEMA]: schema });
}
