// Credentials that travel in the URL: which query parameter carries the value ('query' auth), and
// the path template that places it before the agent's path ('path' auth). Validation only (words/
// says where the value goes); the value itself is placed by egress/url-credential.ts and never
// passes through here.

import { InvalidRequest } from "../errors.ts";

/** The placeholder a path template holds exactly once. */
export const VALUE_PLACEHOLDER = "{value}";

const QUERY_PARAM = /^[A-Za-z0-9_.~-]{1,64}$/;
/** Characters a template keeps literally: the canonical path alphabet of path-rules.ts, plus "/". */
const TEMPLATE_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,=:@/]*$/;
const TEMPLATE_MAX = 128;

/** A query parameter name (letters, digits, _ . ~ -): any other spelling would need escaping to compare. */
export function readQueryParam(v: unknown, field: string): string {
  if (typeof v !== "string" || !QUERY_PARAM.test(v))
    throw new InvalidRequest(`${field} must be a query parameter name of letters, digits, _ . ~ or - (at most 64)`, field);
  return v;
}

/**
 * A path template such as `/bot{value}`: it starts with "/", holds {value} exactly once, does not end
 * with "/", and the rest is canonical path text (no %-escapes, `;`, `?`, `#`, `\`, empty or dot
 * segments). Upstream, the template with the value in place comes first and the agent's own path
 * follows it: `/bot{value}` and a request for /getMe give /bot<value>/getMe.
 */
export function readPathTemplate(v: unknown, field: string): string {
  const fail = (why: string) => new InvalidRequest(`${field} ${why}`, field);
  if (typeof v !== "string" || v.length > TEMPLATE_MAX) throw fail(`must be text of at most ${TEMPLATE_MAX} characters, such as /bot{value}`);
  if (!v.startsWith("/")) throw fail("must start with /");
  if (v.split(VALUE_PLACEHOLDER).length !== 2) throw fail(`must hold ${VALUE_PLACEHOLDER} exactly once`);
  if (v.endsWith("/")) throw fail("must not end with / (the agent's path, which starts with /, follows it)");
  if (!TEMPLATE_CHARS.test(v.replace(VALUE_PLACEHOLDER, "")))
    throw fail("may hold only letters, digits, / and - . _ ~ ! $ & ' ( ) * + , = : @ besides {value}");
  for (const segment of v.slice(1).split("/")) {
    if (segment === "") throw fail("must not hold empty segments (//)");
    if (segment === "." || segment === "..") throw fail("must not hold dot segments (. or ..)");
  }
  return v;
}

/** The template around its placeholder: what goes before the value and what goes after it. */
export function splitPathTemplate(template: string): { readonly before: string; readonly after: string } {
  const at = template.indexOf(VALUE_PLACEHOLDER);
  return { before: template.slice(0, at), after: template.slice(at + VALUE_PLACEHOLDER.length) };
}
