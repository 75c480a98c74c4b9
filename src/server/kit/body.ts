// JSON request bodies read by their schema before a route's handler runs (architecture.md D30): the one check a body gets,
// with the schema the OpenAPI document describes it by (openapi/). The handler receives what the
// schema read (`c.req.valid("json")`: typed, normalised, a credential value already in its Secret
// wrapper). A field the schema does not know is refused with 400 naming it, since for a security
// setting a silently dropped field (`"rulez": …`) is the worst possible answer. Errors keep the one
// envelope: the field's path (`rules[0].paths[1]`) in `field`, and the reason in the message.
//
// Not Hono's own JSON validator: it reads the body only under a JSON content type and without a size
// cap, and the broker has always read JSON bodies whatever their content type, capped at 256 KiB
// (request.ts). The schema is used through the Standard Schema interface, as that validator does.

import type { StandardSchemaV1 } from "@standard-schema/spec";
import type { MiddlewareHandler } from "hono";
import { parseWith } from "../../contract/index.ts";
import { BODY_SCHEMA } from "../openapi/index.ts";
import { readJson } from "./request.ts";

/** Middleware: the JSON body read by `schema`; a body it refuses gets the broker's 400 before the handler runs. */
export function jsonBody<S extends StandardSchemaV1>(
  schema: S,
): MiddlewareHandler<any, string, { in: { json: StandardSchemaV1.InferInput<S> }; out: { json: StandardSchemaV1.InferOutput<S> } }> {
  const mw: MiddlewareHandler = async (c, next) => {
    const body = parseWith(schema, (await readJson(c)) ?? {});
    c.req.addValidatedData("json", body as object);
    await next();
  };
  return Object.assign(mw, { [BODY_SCHEMA]: schema });
}
