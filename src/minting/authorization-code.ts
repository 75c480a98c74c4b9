// Redeeming an authorization code for a connected account (RFC 6749 §4.1.3 with the PKCE verifier, RFC 7636
// §4.5) at the provider's token endpoint, through the same network guard and verified TLS client as every
// token request (token-endpoint.ts). Only the refresh token leaves: the access token that comes with it is
// dropped (the service mints its own when an agent first needs one). Failures are words without values.

import { CredentialRefreshFailed } from "../errors.ts";
import { Secret } from "../secret.ts";
import type { HeaderList } from "../http/index.ts";
import { oauthErrorCode, postToTokenEndpoint, type TokenEndpointDeps } from "./token-endpoint.ts";

/** One redemption (the shape workflows/connect.ts declares as CodeRedemption). SECRET: clientSecret, code, codeVerifier. */
export interface AuthorizationCode {
  readonly tokenUrl: string;
  readonly clientId: string;
  readonly clientSecret: Secret;
  readonly clientAuth: "basic" | "post";
  readonly code: Secret;
  readonly codeVerifier: Secret;
  readonly redirectUri: string;
}

const USER_AGENT = "broker (credential broker)";
const MAX_TOKEN_CHARS = 16_384;

/** The refresh token the provider issued, or what went wrong (never a value the provider sent). */
export async function redeemAuthorizationCode(deps: TokenEndpointDeps, r: AuthorizationCode): Promise<{ refreshToken: Secret } | { failure: string }> {
  const form = new URLSearchParams();
  form.set("grant_type", "authorization_code");
  // reveal: the code, its PKCE verifier and the client authentication go into this one request body or header only
  form.set("code", r.code.reveal());
  form.set("redirect_uri", r.redirectUri);
  form.set("code_verifier", r.codeVerifier.reveal());
  const headers: HeaderList = [
    ["Content-Type", "application/x-www-form-urlencoded"],
    // GitHub answers form-encoded unless asked for JSON.
    ["Accept", "application/json"],
    ["User-Agent", USER_AGENT],
  ];
  const enc = (s: string) => new URLSearchParams({ s }).toString().slice(2);
  const secret = r.clientSecret.reveal();
  const sent: Secret[] = [r.code];
  if (r.clientAuth === "post") {
    form.set("client_id", r.clientId);
    form.set("client_secret", secret);
    if (enc(secret) !== secret) sent.push(new Secret(enc(secret)));
  } else {
    // client_secret_basic: each part form-urlencoded first (RFC 6749 §2.3.1), then base64.
    const basic = Buffer.from(`${enc(r.clientId)}:${enc(secret)}`).toString("base64");
    headers.push(["Authorization", `Basic ${basic}`]);
    sent.push(new Secret(basic));
  }
  const host = new URL(r.tokenUrl).host;
  deps.noteSent?.(sent); // noted before it goes: a refused request may still be kept
  let answer;
  try {
    answer = await postToTokenEndpoint(deps, host, r.tokenUrl, headers, new TextEncoder().encode(form.toString()));
  } catch (err) {
    if (err instanceof CredentialRefreshFailed) return { failure: err.reason };
    throw err;
  }
  // GitHub answers a refused code with 200 and {"error": …}: an error member is a refusal whatever the status.
  const code = oauthErrorCode(answer.json);
  if (answer.status !== 200 || answer.json?.error !== undefined) {
    return { failure: `the token endpoint ${host} refused the authorization code (HTTP ${answer.status}${code ? `, ${code}` : ""})` };
  }
  const rt = answer.json?.refresh_token;
  if (typeof rt !== "string" || rt.length === 0) {
    return { failure: `the token endpoint ${host} issued no refresh token (the app may need refresh tokens, or offline access, turned on at the provider)` };
  }
  if (rt.length > MAX_TOKEN_CHARS || /[\0-\x1f\x7f]/.test(rt)) return { failure: `the token endpoint ${host} issued a refresh token the broker cannot use` };
  return { refreshToken: new Secret(rt) };
}
