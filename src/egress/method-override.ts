// The methods a request claims besides the one on its request line, as web frameworks honour them:
// override headers (Google APIs, Express's method-override) and a `_method` parameter in the query
// or in a POST's form, multipart or JSON body (Rails, Laravel, Symfony, Express with a getter). The
// rules check every claimed method, so a rule allowing POST is not a way to DELETE, and a method a
// rule holds for a human stays held however it is claimed.

const OVERRIDE_HEADERS = new Set(["x-http-method-override", "x-http-method", "x-method-override"]);
const OVERRIDE_PARAM = "_method";

const normal = (value: string) => value.trim().toUpperCase();

/** The method, then every method an override header or a `_method` query parameter claims. */
export function claimedMethods(method: string, headers: Iterable<[string, string]>, target = ""): string[] {
  const methods = [method];
  for (const [name, value] of headers) if (OVERRIDE_HEADERS.has(name.toLowerCase())) methods.push(normal(value));
  const q = target.indexOf("?");
  if (q >= 0) {
    const query = target.slice(q + 1);
    // Parsed (percent-decoded, as the frameworks do) only when the name may be in it, spelt `%5F` or not.
    if (/_|%5f/i.test(query)) for (const v of new URLSearchParams(query).getAll(OVERRIDE_PARAM)) methods.push(normal(v));
  }
  return methods;
}

/**
 * Methods a `_method` field in a request body claims, read the way frameworks read a body of that
 * media type (percent-decoded form fields, multipart parts, a JSON object's member). Other media
 * types are not parsed by those frameworks, so they claim nothing.
 */
export async function claimedInBody(body: Uint8Array, contentType: string | undefined): Promise<string[]> {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if (body.byteLength === 0) return [];
  const text = new TextDecoder().decode(body);
  if (type === "application/x-www-form-urlencoded") return new URLSearchParams(text).getAll(OVERRIDE_PARAM).map(normal);
  if (type === "multipart/form-data") {
    const form = await new Response(body as Uint8Array<ArrayBuffer>, { headers: { "content-type": contentType! } }).formData().catch(() => undefined);
    return (form?.getAll(OVERRIDE_PARAM) ?? []).filter((v): v is string => typeof v === "string").map(normal);
  }
  if (type === "application/json" || type.endsWith("+json")) {
    try {
      const parsed: unknown = JSON.parse(text);
      const claimed = parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, unknown>)[OVERRIDE_PARAM] : undefined;
      return typeof claimed === "string" ? [normal(claimed)] : [];
    } catch {
      return [];
    }
  }
  return [];
}
