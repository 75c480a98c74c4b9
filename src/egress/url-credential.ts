// Credentials that travel in the URL ('query' and 'path' auth): the value, percent-encoded once
// when the plan is built, is placed into the request target after the service's rules have
// checked the agent's own path, so rules, audit records and logs only ever see the agent's target.
// Never logs; the placed target goes to the upstream request line and nowhere else.

import { InvalidRequest } from "../errors.ts";
import { Secret } from "../secret.ts";

export type UrlPlacement =
  /** Sets `param` in the query, replacing every agent-supplied value of it. */
  | { readonly kind: "query"; readonly param: string; readonly value: Secret }
  /** `before` + value + `after`, then the agent's path (e.g. /bot + value + "" + /getMe). */
  | { readonly kind: "path"; readonly before: string; readonly after: string; readonly value: Secret };

/** RFC 3986 unreserved characters; everything else is %XX (upper-case hex) in a query value. */
const QUERY_KEEP = /[A-Za-z0-9\-._~]/;
/** In a path segment ":" and "@" stay literal too (as in /bot123456:ABC-DEF/getMe); "/", "?", "#", "%", ";" and the rest are escaped. */
const PATH_KEEP = /[A-Za-z0-9\-._~:@]/;

/** The value as it travels: UTF-8 bytes percent-encoded except the characters `keep` allows. */
export function encodeUrlValue(value: string, keep: RegExp): string {
  let out = "";
  for (const byte of Buffer.from(value, "utf8")) {
    const ch = String.fromCharCode(byte);
    out += byte < 0x80 && keep.test(ch) ? ch : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

export function queryPlacement(param: string, value: Secret): UrlPlacement {
  // reveal: encoded once here; the result stays wrapped until the request line is written.
  return { kind: "query", param, value: new Secret(encodeUrlValue(value.reveal(), QUERY_KEEP)) };
}

export function pathPlacement(before: string, after: string, value: Secret): UrlPlacement {
  // reveal: encoded once here; the result stays wrapped until the request line is written.
  let encoded = encodeUrlValue(value.reveal(), PATH_KEEP);
  // A value that would make its segment "." or ".." is sent with escaped dots: an upstream would
  // otherwise resolve it away (and the path with it).
  const segment = before.slice(before.lastIndexOf("/") + 1) + encoded + after.split("/")[0];
  if (segment === "." || segment === "..") encoded = encoded.replaceAll(".", "%2E");
  return { kind: "path", before, after, value: new Secret(encoded) };
}

/** The request target with the credential in place. `target` is the agent's (already rule-checked) path and query. */
export function placeCredential(target: string, p: UrlPlacement): string {
  if (!target.startsWith("/") || target.includes("#")) {
    throw new InvalidRequest("this service sends its credential in the URL: the request target must be a path starting with / (and without #)", "path");
  }
  const q = target.indexOf("?");
  const path = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? null : target.slice(q + 1);
  // reveal: into the upstream request line only.
  if (p.kind === "path") return `${p.before}${p.value.reveal()}${p.after}${path}${query === null ? "" : `?${query}`}`;
  const kept = query === null || query === "" ? [] : query.split("&").filter((pair) => parameterName(pair) !== p.param);
  return `${path}?${[...kept, `${p.param}=${p.value.reveal()}`].join("&")}`;
}

const LENIENT_UTF8 = new TextDecoder("utf-8");

/**
 * A query pair's name as a server decodes it: `+` is a space and each valid %XX escape a byte (a
 * malformed one stays as written), so `k%65y=` and `ke+y`-style spellings compare as they will be read.
 */
function parameterName(pair: string): string {
  const eq = pair.indexOf("=");
  const raw = eq < 0 ? pair : pair.slice(0, eq);
  if (!/[%+]/.test(raw)) return raw;
  const bytes: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const hex = raw.slice(i + 1, i + 3);
    if (raw[i] === "%" && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else if (raw[i] === "+") {
      bytes.push(0x20);
    } else {
      bytes.push(...Buffer.from(raw[i]!, "utf8"));
    }
  }
  return LENIENT_UTF8.decode(new Uint8Array(bytes));
}
