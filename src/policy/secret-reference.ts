// A credential by reference (issue 36): `<connection>:<path>#<field>`, with an optional version beside it.
// The connection is a broker name (lower-case letters, digits and hyphens, as vault names), so the first
// `:` ends it and a path may hold colons of its own (an AWS ARN); `#` starts the field, which a path never
// holds. Parsed once where a reference is set; stored as its parts, so nothing re-parses text on the way.

import type { Secret } from "../secret.ts";
import type { CredentialReference } from "../store/index.ts";

/** A reference's parts: the connection's name, and the store's own address of the secret (path, field, version). */
export type SecretReference = CredentialReference;

/** Where a credential's value comes from: typed in (wrapped at once), or a reference into a store. */
export type CredentialSource = { readonly value: Secret } | { readonly reference: SecretReference };

const CONNECTION = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;
/** Printable ASCII without spaces: every store's own names fit (paths, ARNs, ids), and nothing invisible hides in one. */
const PART = /^[\x21-\x7e]+$/;
const MAX_LENGTH = 1024;

/** The reference's parts, or a message naming what is wrong (never repeating the text, which a person may have mistyped a value into). */
export function parseReference(text: string, version?: string): SecretReference | { readonly problem: string } {
  if (text.length === 0 || text.length > MAX_LENGTH) return { problem: `a reference is 1 to ${MAX_LENGTH} characters: <connection>:<path>#<field>` };
  const colon = text.indexOf(":");
  if (colon <= 0) return { problem: "a reference starts with its connection's name and a colon: <connection>:<path>#<field>" };
  const connection = text.slice(0, colon);
  if (!CONNECTION.test(connection)) return { problem: "a reference's connection is a name of lower-case letters, digits and hyphens" };
  const rest = text.slice(colon + 1);
  const hash = rest.indexOf("#");
  const path = hash < 0 ? rest : rest.slice(0, hash);
  const field = hash < 0 ? undefined : rest.slice(hash + 1);
  if (!PART.test(path)) return { problem: "a reference's path is printable text without spaces, between the connection's colon and the #" };
  if (field !== undefined && (!PART.test(field) || field.includes("#")))
    return { problem: "a reference's field, after the #, is printable text without spaces or another #" };
  if (version !== undefined && (!PART.test(version) || version.length > 128))
    return { problem: "a reference's version is printable text without spaces, at most 128 characters" };
  return { connection, path, ...(field !== undefined && { field }), ...(version !== undefined && { version }) };
}

/** The reference as a person writes it (for lists and audit records): never a value, only names. */
export function formatReference(r: SecretReference): string {
  return `${r.connection}:${r.path}${r.field !== undefined ? `#${r.field}` : ""}${r.version !== undefined ? ` (version ${r.version})` : ""}`;
}

/**
 * Whether a share narrowed to `prefixes` (null: not narrowed) lets a reference read `path`: the path as the
 * reference writes it starts with one of them, and holds no `.` or `..` segment that could walk out of it.
 */
export function pathAllowed(prefixes: readonly string[] | null, path: string): boolean {
  if (prefixes === null) return true;
  if (path.split("/").some((segment) => segment === "." || segment === "..")) return false;
  return prefixes.some((prefix) => path.startsWith(prefix));
}
