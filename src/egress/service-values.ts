// What a static service (bearer, basic, header, query, path) puts on the wire for a credential: the
// header or the place in the URL, and the values an echo of it can be found by. One derivation for
// the per-vault plans (plan.ts) and the host-wide needle sets (stored-values.ts), so both look for the
// very same forms.

import { Secret } from "../secret.ts";
import type { ServiceRow } from "../store/index.ts";
import { splitPathTemplate } from "../policy/index.ts";
import type { Injection } from "./headers.ts";
import { pathPlacement, queryPlacement, type UrlPlacement } from "./url-credential.ts";

export interface StaticSend {
  readonly injection: Injection | undefined;
  /** SECRET: for 'query' and 'path' auth, the value's place in the URL. */
  readonly placement: UrlPlacement | undefined;
  /**
   * SECRET: search patterns. The raw value; for Basic its base64 form (echoed with or without the
   * "Basic " prefix); for a URL credential the percent-encoded form it travels in (an echoed URL
   * carries it so).
   */
  readonly values: readonly string[];
}

/** What of a service row decides how its value travels. */
export type SendingFields = Pick<ServiceRow, "authType" | "authHeader" | "authPrefix" | "authUsername" | "authParam" | "authTemplate">;

/** How `secret` travels for a static service row (the caller has refused multi-line values). */
export function staticSend(row: SendingFields, secret: Secret): StaticSend {
  const placement = placementFor(row, secret);
  const injection = placement ? undefined : injectionFor(row, secret);
  // reveal: search patterns only
  const values = [secret.reveal()];
  if (injection && row.authType === "basic") values.push(injection.value.reveal().slice("Basic ".length));
  if (placement && placement.value.reveal() !== values[0]) values.push(placement.value.reveal());
  return { injection, placement, values };
}

/**
 * Only a PEM key may span lines (workflows/credential-ops.ts), and it has no place in a header or URL;
 * nor has a character above U+00FF (a value read from a store may hold one), since a head is written
 * as latin1 and U+010D U+010A would reach the wire as CR LF.
 */
export function isMultiLine(secret: Secret): boolean {
  return /[\r\n\0]|[^\x00-\xff]/.test(secret.reveal()); // reveal: checked, not kept
}

function placementFor(row: SendingFields, secret: Secret): UrlPlacement | undefined {
  // The domain never stores one without the other; a row that does fails closed (500), never sends the value elsewhere.
  if (row.authType === "query") return queryPlacement(required(row.authParam, "parameter name"), secret);
  if (row.authType !== "path") return undefined;
  const { before, after } = splitPathTemplate(required(row.authTemplate, "path template"));
  return pathPlacement(before, after, secret);
}

function required(v: string | null, what: string): string {
  if (!v) throw new Error(`the service row has no ${what}`);
  return v;
}

function injectionFor(row: SendingFields, secret: Secret): Injection {
  // reveal: composing the auth header value; the result stays wrapped until the request is written.
  const v = secret.reveal();
  switch (row.authType) {
    case "bearer":
      return { header: "authorization", value: new Secret(`Bearer ${v}`) };
    case "basic":
      return { header: "authorization", value: new Secret(`Basic ${Buffer.from(row.authUsername ? `${row.authUsername}:${v}` : v).toString("base64")}`) };
    default:
      return { header: row.authHeader ?? "authorization", value: new Secret(`${row.authPrefix ?? ""}${v}`) };
  }
}
