// Reading untrusted input with its schema (zod, through the Standard Schema interface): the first issue
// becomes the broker's 400 with the field's path (`rules[0].paths[1]`) in `field`, and a field the
// schema does not know is named, never dropped. The routes (server/kit/body.ts), the console's forms
// and the CLI use it alike.
//
// Messages name their field through a template: `{field}` becomes the issue's path, `{parent}` the
// path of what holds it and `{key}` the last step of the path (a map's key), so one schema words `services[3].auth.token must be …` wherever it sits.

import type { StandardSchemaV1 } from "@standard-schema/spec";
import { z } from "zod";
import { InvalidRequest } from "./errors.ts";

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
export function issueError(issues: readonly StandardSchemaV1.Issue[], root?: string): InvalidRequest {
  const issue = issues.find((i) => (i as { code?: string }).code === "unrecognized_keys") ?? issues[0];
  const path = [...(root ? [root] : []), ...(issue?.path ?? [])];
  const at = fieldPath(path);
  const unknown = (issue as { keys?: string[] } | undefined)?.keys;
  const message = issue?.message ?? "invalid request body";
  if (unknown?.length) {
    const field = at ? `${at}.${unknown[0]}` : unknown[0]!;
    const said = message.includes("{field}") ? message : "{field} is not a field of this request (check its spelling; GET /v1/openapi.json lists every field)";
    return new InvalidRequest(said.replaceAll("{field}", field), field);
  }
  if (/\{(field|parent|key)\}/.test(message)) {
    const parent = fieldPath(path.slice(0, -1));
    const last = path.at(-1);
    const key = String(typeof last === "object" && last !== null ? last.key : (last ?? ""));
    return new InvalidRequest(message.replaceAll("{field}", at).replaceAll("{parent}", parent).replaceAll("{key}", key), at || undefined);
  }
  // zod's own messages start with a capital ("Invalid input: …") and get the field in front; ours are
  // whole sentences starting in lower case ("a proposal needs at least one service …").
  const zods = /^[A-Z]/.test(message);
  return new InvalidRequest(zods && at ? `${at}: ${message}` : message, at || undefined);
}

/**
 * Validates `input` against `schema` (synchronous schemas only), throwing the broker's 400. `root` names
 * a single value read on its own (a URL's `key`), so its errors name their field as a body's would.
 */
export function parseWith<S extends StandardSchemaV1>(schema: S, input: unknown, root?: string): StandardSchemaV1.InferOutput<S> {
  const proto = protoKeyPath(input);
  if (proto) throw issueError([{ code: "unrecognized_keys", keys: ["__proto__"], path: proto, message: "" } as StandardSchemaV1.Issue], root);
  const result = schema["~standard"].validate(input);
  if (result instanceof Promise) throw new TypeError("asynchronous schemas are not used for request bodies");
  if (result.issues) throw issueError(result.issues, root);
  return result.value;
}

/** zod's check options carrying one of our templated messages. */
export function says(message: string): { error: string } {
  return { error: message };
}

/**
 * A value read by one of policy/'s grammar parsers (host patterns, path patterns, URL templates): they
 * throw the broker's 400 naming the field they are given, so they are given `{field}` and their
 * refusal becomes this schema's issue at the right path. `base` is what the document says the field is
 * (a string), refused in the parser's own words.
 */
export function parsedBy<T>(parse: (input: unknown, field: string) => T, base: z.ZodType = z.unknown()) {
  return base.transform((v, ctx): T => {
    try {
      return parse(v, "{field}");
    } catch (e) {
      if (!(e instanceof InvalidRequest)) throw e;
      ctx.addIssue({ code: "custom", message: e.message, input: v });
      return z.NEVER;
    }
  });
}

/**
 * Where a `__proto__` key sits in parsed JSON, if anywhere. zod drops such a key without a word (to keep
 * it off the prototype), so a map keyed by host or credential key would lose an entry silently; it is
 * refused instead, as any field a schema does not know. Walked without recursion: bodies may nest deep.
 */
function protoKeyPath(input: unknown): PropertyKey[] | undefined {
  // Each node keeps its parent's index and its key, so a path is built only for the one key found.
  const nodes: { value: object; parent: number; key: PropertyKey }[] = [];
  const push = (value: unknown, parent: number, key: PropertyKey) => {
    if (typeof value === "object" && value !== null) nodes.push({ value, parent, key });
  };
  push(input, -1, "");
  for (let i = 0; i < nodes.length; i++) {
    const { value } = nodes[i]!;
    if (Array.isArray(value)) value.forEach((child, j) => push(child, i, j));
    else if (Object.hasOwn(value, "__proto__")) {
      const path: PropertyKey[] = [];
      for (let at = i; at > 0; at = nodes[at]!.parent) path.unshift(nodes[at]!.key);
      return path;
    } else for (const [key, child] of Object.entries(value)) push(child, i, key);
  }
  return undefined;
}
