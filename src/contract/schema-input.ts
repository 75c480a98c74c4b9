// Reading untrusted input with its schema (zod, through the Standard Schema interface): the first issue
// becomes the broker's 400 with the field's path (`rules[0].paths[1]`) in `field`, and a field the
// schema does not know is named, never dropped. The routes (server/kit/body.ts) and the domain use it alike.

import type { StandardSchemaV1 } from "@standard-schema/spec";
import { InvalidRequest } from "../errors.ts";

/** `rules[0].paths[1]` for the path ["rules", 0, "paths", 1]. */
export function fieldPath(path: readonly (PropertyKey | StandardSchemaV1.PathSegment)[] | undefined): string {
  let out = "";
  for (const seg of path ?? []) {
    const key = typeof seg === "object" && seg !== null ? seg.key : seg;
    out += typeof key === "number" ? `[${key}]` : out ? `.${String(key)}` : String(key);
  }
  return out;
}

/** The broker's 400 for a failed check: an unknown field first (it is named), else the first issue. */
export function issueError(issues: readonly StandardSchemaV1.Issue[]): InvalidRequest {
  const issue = issues.find((i) => (i as { code?: string }).code === "unrecognized_keys") ?? issues[0];
  const at = fieldPath(issue?.path);
  const unknown = (issue as { keys?: string[] } | undefined)?.keys;
  if (unknown?.length) {
    const field = at ? `${at}.${unknown[0]}` : unknown[0]!;
    return new InvalidRequest(`${field} is not a field of this request (check its spelling; GET /v1/openapi.json lists every field)`, field);
  }
  const message = issue?.message ?? "invalid request body";
  // A schema message that names its field already reads well; a generic one gets the field in front.
  return new InvalidRequest(at && !message.startsWith(at) ? `${at}: ${message}` : message, at || undefined);
}

/** Validates `input` against `schema` (synchronous schemas only), throwing the broker's 400. */
export function parseWith<S extends StandardSchemaV1>(schema: S, input: unknown): StandardSchemaV1.InferOutput<S> {
  const result = schema["~standard"].validate(input);
  if (result instanceof Promise) throw new TypeError("asynchronous schemas are not used for request bodies");
  if (result.issues) throw issueError(result.issues);
  return result.value;
}
