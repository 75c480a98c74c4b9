// A list's page query (limit and cursor) read by its contract schema (contract/pages.ts), for the API's
// routes and the console's pages alike: a malformed one is the broker's 400 naming it. An empty value
// counts as absent, as in the audit log's query (`?after=` is the first page).

import type { StandardSchemaV1 } from "@standard-schema/spec";
import type { Context } from "hono";
import { LIMITS } from "../../policy/index.ts";
import { parseWith } from "../../contract/index.ts";

/** The query's values that `schema` reads, validated; what it does not name is left to the route. */
export function readPageQuery<S extends StandardSchemaV1>(c: Context, schema: S): StandardSchemaV1.InferOutput<S> {
  const given = Object.fromEntries(Object.entries(c.req.query()).filter(([, v]) => v !== ""));
  return parseWith(schema, given);
}

/** The OpenAPI words for a page's query, the cursor named as the list takes it. */
export function pageQueryDoc(cursor: "after" | "before"): Record<string, string> {
  return {
    limit: `1 to ${LIMITS.listPageMax} (default ${LIMITS.listPageDefault})`,
    [cursor]: "the next_cursor of the previous page (absent: the first page)",
  };
}
