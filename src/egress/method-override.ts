// The methods a request claims besides the one on its request line, as web frameworks honour them:
// override headers (Google APIs, Express's method-override, Symfony, Rack) and a `_method` parameter
// in the query or in a POST's body (Rails, Laravel, Symfony, Express with a getter). The rules check
// every claimed method, so a rule allowing POST is not a way to DELETE, and a method a rule holds
// for a human stays held however it is claimed.
//
// Servers read these leniently, so the broker does too: a header name with `_` for `-` (CGI maps
// both to HTTP_X_HTTP_METHOD_OVERRIDE), parameter names as PHP mangles them (`.method` and
// ` method` arrive as `_method`), and a body as a form, as JSON and as multipart alike, whatever its
// declared media type (Rack reads an untyped POST as a form, Laravel any type containing "/json").

import { InvalidRequest } from "../errors.ts";
import { bodyCharset } from "./headers.ts";

const OVERRIDE_HEADERS = new Set(["x-http-method-override", "x-http-method", "x-method-override"]);
const OVERRIDE_PARAM = "_method";

const normal = (value: string) => value.trim().toUpperCase();

/** A parameter name as PHP stores it: leading spaces dropped, then spaces, dots and `[` become `_`. */
const asPhpReads = (name: string) => name.replace(/^ +/, "").replace(/[ .[]/g, "_");
const isOverrideParam = (name: string) => name === OVERRIDE_PARAM || asPhpReads(name) === OVERRIDE_PARAM;

/** The method, then every method an override header or a `_method` query parameter claims. */
export function claimedMethods(method: string, headers: Iterable<[string, string]>, target = ""): string[] {
  const methods = [method];
  for (const [name, value] of headers) if (OVERRIDE_HEADERS.has(name.toLowerCase().replaceAll("_", "-"))) methods.push(normal(value));
  const q = target.indexOf("?");
  // Parsed (percent-decoded, as the frameworks do) only when the name may be in it, in any spelling.
  if (q >= 0 && /method|%/i.test(target.slice(q + 1))) methods.push(...formClaims(target.slice(q + 1)));
  return methods;
}

function formClaims(text: string): string[] {
  const claims: string[] = [];
  for (const [name, value] of new URLSearchParams(text)) if (isOverrideParam(name)) claims.push(normal(value));
  return claims;
}

/**
 * Methods a `_method` field in a request body claims, read every way a framework might read it: as a
 * form, as a JSON object and as multipart parts (leniently: bare LF line ends, no closing boundary),
 * in the charset the Content-Type declares. A charset the broker cannot decode is refused: a body it
 * cannot read must not pass as one that claims nothing.
 */
export function claimedInBody(body: Uint8Array, contentType: string | undefined): string[] {
  if (body.byteLength === 0) return [];
  const text = decodeDeclared(body, contentType);
  const claims = formClaims(text);
  if (text.trimStart().startsWith("{")) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
        for (const [name, value] of Object.entries(parsed)) if (isOverrideParam(name) && typeof value === "string") claims.push(normal(value));
      }
    } catch {
      // not JSON: read as a form above
    }
  }
  if (/content-disposition/i.test(text)) claims.push(...multipartClaims(text));
  return claims;
}

/** The value of each multipart part named `_method`: the first line after the part's header lines. */
function multipartClaims(text: string): string[] {
  const lines = text.split(/\r?\n/);
  const claims: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^content-disposition\s*:.*?;\s*name\s*=\s*(?:"([^"]*)"|([^;\s]*))/i.exec(lines[i]!);
    if (!m || !isOverrideParam(m[1] ?? m[2] ?? "")) continue;
    let j = i + 1;
    while (j < lines.length && lines[j] !== "") j++;
    if (j + 1 < lines.length) claims.push(normal(lines[j + 1]!));
  }
  return claims;
}

/** The body as text in its declared charset (UTF-8 when none is declared). */
function decodeDeclared(body: Uint8Array, contentType: string | undefined): string {
  const charset = bodyCharset(contentType);
  try {
    return new TextDecoder(charset).decode(body);
  } catch {
    throw new InvalidRequest(
      `the body's charset (${charset}) cannot be read, and this POST goes to a path where a rule holds other methods for a human, so its body must be checked for a _method field`,
      "content-type",
    );
  }
}
