// One POST to a token endpoint (an OAuth 2.0 token URL, GitHub's installation-token endpoint),
// through the same network guard and verified TLS client as every upstream request: the endpoint is
// a host like any other, so a service cannot point the broker at an internal address. Answers the
// status and the JSON body; never follows a redirect and reads at most 64 KiB (counted as the answer
// arrives: a longer one, declared or chunked, is let go at the cap).

import type { Secret } from "../secret.ts";
import { CredentialRefreshFailed, EgressBlocked } from "../errors.ts";
import { cappedBody, type HeaderList } from "../http/index.ts";
import { resolveChecked, type NetPolicy, type Resolver } from "../egress/index.ts";
import type { Upstream } from "../egress/index.ts";

export interface TokenEndpointDeps {
  readonly upstream: Upstream;
  readonly policy: NetPolicy;
  readonly resolver: Resolver;
  /**
   * Told what a token request is about to send (an app JWT, client authentication as encoded, a
   * refresh token) before it goes: the echo needles take it even when the request then fails
   * (plan.ts noteSent). SECRET values.
   */
  readonly noteSent?: (values: readonly Secret[]) => void;
}

export interface TokenEndpointAnswer {
  readonly status: number;
  /** The parsed JSON object, or undefined when the body was not a JSON object. */
  readonly json: Record<string, unknown> | undefined;
}

const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * POSTs `body` to `url`. `serviceHost` names the service in errors. Network, TLS and guard failures
 * become a transient CredentialRefreshFailed (the next request tries again); a refused destination
 * (the guard) is refused for good until the service changes.
 */
export async function postToTokenEndpoint(
  deps: TokenEndpointDeps,
  serviceHost: string,
  url: string,
  headers: HeaderList,
  body: Uint8Array,
): Promise<TokenEndpointAnswer> {
  const u = new URL(url);
  const host = u.hostname.replace(/^\[|\]$/g, "");
  const port = Number(u.port || 443);
  let answer;
  try {
    answer = await deps.upstream.send(
      { host, port, addresses: () => resolveChecked(host, port, deps.policy, deps.resolver) },
      {
        method: "POST",
        target: `${u.pathname}${u.search}`,
        headers,
        body: new Blob([body as Uint8Array<ArrayBuffer>]).stream(),
        bodyLength: body.byteLength,
      },
    );
  } catch (err) {
    if (err instanceof EgressBlocked) throw new CredentialRefreshFailed(serviceHost, `the token endpoint ${u.host} is blocked by the network guard`, true);
    throw new CredentialRefreshFailed(serviceHost, `the token endpoint ${u.host} could not be reached`);
  }
  const tooLarge = () => new CredentialRefreshFailed(serviceHost, `the token endpoint ${u.host} sent an answer larger than ${MAX_ANSWER_BYTES} bytes`);
  const declared = Number(answer.headers.find(([k]) => k === "content-length")?.[1] ?? NaN);
  if (declared > MAX_ANSWER_BYTES) {
    if (answer.body && !(answer.body instanceof Uint8Array)) await answer.body.cancel().catch(() => {});
    throw tooLarge();
  }
  // Counted as it arrives (a chunked answer declares no length): let go as soon as the cap is passed.
  const bytes = await cappedBody(answer.body, MAX_ANSWER_BYTES).catch(() => {
    throw new CredentialRefreshFailed(serviceHost, `the token endpoint ${u.host} broke off its answer`);
  });
  if (bytes === undefined) throw tooLarge();
  let json: Record<string, unknown> | undefined;
  try {
    const v = JSON.parse(new TextDecoder().decode(bytes)) as unknown;
    if (v && typeof v === "object" && !Array.isArray(v)) json = v as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  return { status: answer.status, json };
}

/** RFC 6749 §5.2's error codes: only these are repeated, so a token endpoint cannot make the broker echo text it chose. */
const OAUTH_ERRORS = new Set(["invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type", "invalid_scope"]);

/** The token endpoint's OAuth error code, when it is a standard one. */
export function oauthErrorCode(json: Record<string, unknown> | undefined): string | undefined {
  const e = json?.error;
  return typeof e === "string" && OAUTH_ERRORS.has(e) ? e : undefined;
}
