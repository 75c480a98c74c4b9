// Obtaining a short-lived access token from a long-lived secret the vault holds: OAuth 2.0 client
// credentials and refresh-token grants (RFC 6749 §4.4, §6) and GitHub App installation tokens (an
// RS256 app JWT exchanged at /app/installations/<id>/access_tokens). Each call is one request to the
// token endpoint; caching, single flight and failure marking are minted.ts's.

import { createPrivateKey } from "node:crypto";
import { SignJWT } from "jose";
import { CredentialRefreshFailed } from "../errors.ts";
import { Secret } from "../secret.ts";
import type { MintedAuthFields } from "../policy/index.ts";
import type { HeaderList } from "../http/index.ts";
import type { MintedToken } from "../egress/index.ts";
import { oauthErrorCode, postToTokenEndpoint, type TokenEndpointDeps } from "./token-endpoint.ts";

/** Tokens that say nothing of their lifetime are kept this long (a 401 from the upstream still refreshes early). */
const DEFAULT_LIFETIME_S = 3600;
const USER_AGENT = "broker (credential broker)";

export interface OAuthInputs {
  readonly clientId: Secret;
  readonly clientSecret: Secret;
  /** For the refresh-token grant. */
  readonly refreshToken?: Secret;
}

/** One token request of the client credentials or refresh-token grant. */
export async function requestOAuthToken(
  deps: TokenEndpointDeps,
  serviceHost: string,
  f: MintedAuthFields,
  inputs: OAuthInputs,
  now: number,
): Promise<MintedToken> {
  const form = new URLSearchParams();
  const sent: Secret[] = [];
  const enc = (s: string) => new URLSearchParams({ s }).toString().slice(2);
  if (inputs.refreshToken) {
    form.set("grant_type", "refresh_token");
    const refreshToken = inputs.refreshToken.reveal(); // reveal: into the token request body only (and its search patterns)
    form.set("refresh_token", refreshToken);
    sent.push(inputs.refreshToken, ...(enc(refreshToken) !== refreshToken ? [new Secret(enc(refreshToken))] : []));
  } else {
    form.set("grant_type", "client_credentials");
    if (f.scopes?.length) form.set("scope", f.scopes.join(" "));
    if (f.audience) form.set("audience", f.audience);
  }
  const headers: HeaderList = [
    ["Content-Type", "application/x-www-form-urlencoded"],
    ["Accept", "application/json"],
    ["User-Agent", USER_AGENT],
  ];
  // reveal: client authentication at the token endpoint (RFC 6749 §2.3.1), nowhere else
  const id = inputs.clientId.reveal();
  const secret = inputs.clientSecret.reveal();
  if (f.client_auth === "post") {
    form.set("client_id", id);
    form.set("client_secret", secret);
    if (enc(secret) !== secret) sent.push(new Secret(enc(secret)));
  } else {
    // client_secret_basic: each part form-urlencoded first (§2.3.1), then base64.
    const basic = Buffer.from(`${enc(id)}:${enc(secret)}`).toString("base64");
    headers.push(["Authorization", `Basic ${basic}`]);
    sent.push(new Secret(basic));
  }
  const what = inputs.refreshToken ? "the refresh token" : "the client credentials";
  deps.noteSent?.(sent); // noted before it goes: a refused request may still be kept
  const answer = await postToTokenEndpoint(deps, serviceHost, f.token_url!, headers, new TextEncoder().encode(form.toString()));
  if (answer.status === 400 || answer.status === 401 || answer.status === 403) {
    const code = oauthErrorCode(answer.json);
    throw new CredentialRefreshFailed(serviceHost, `the token endpoint refused ${what} (HTTP ${answer.status}${code ? `, ${code}` : ""})`, true);
  }
  if (answer.status !== 200) throw new CredentialRefreshFailed(serviceHost, `the token endpoint answered HTTP ${answer.status}`);
  const j = answer.json;
  const token = j?.access_token;
  if (typeof token !== "string" || token.length === 0 || token.length > 16_384 || /[\0-\x1f\x7f]/.test(token)) {
    throw new CredentialRefreshFailed(serviceHost, "the token endpoint's answer has no usable access_token");
  }
  if (j!.token_type !== undefined && (typeof j!.token_type !== "string" || j!.token_type.toLowerCase() !== "bearer")) {
    throw new CredentialRefreshFailed(serviceHost, "the token endpoint issued a token that is not a bearer token");
  }
  const rotated =
    typeof j!.refresh_token === "string" && j!.refresh_token.length > 0 && !/[\0-\x1f\x7f]/.test(j!.refresh_token) ? new Secret(j!.refresh_token) : undefined;
  return {
    value: new Secret(token),
    issuedAt: now,
    expiresAt: now + lifetimeSeconds(j!.expires_in) * 1000,
    ...(rotated && { rotatedRefreshToken: rotated }),
    sent,
  };
}

function lifetimeSeconds(v: unknown): number {
  const n = typeof v === "string" ? Number(v) : v;
  return typeof n === "number" && Number.isFinite(n) && n > 0 ? Math.min(n, 86_400 * 30) : DEFAULT_LIFETIME_S;
}

/** Signs the app JWT and exchanges it for an installation token. */
export async function requestInstallationToken(
  deps: TokenEndpointDeps,
  serviceHost: string,
  f: MintedAuthFields,
  privateKey: Secret,
  now: number,
): Promise<MintedToken> {
  let key;
  try {
    key = createPrivateKey(reflowPem(privateKey.reveal())); // reveal: parsed into a key object, PKCS#1 or PKCS#8 PEM
  } catch {
    throw new CredentialRefreshFailed(serviceHost, "the GitHub App private key is not a PEM private key", true);
  }
  // GitHub allows at most 10 minutes; iat a minute back absorbs clock drift (GitHub's own advice).
  const seconds = Math.floor(now / 1000);
  const jwt = await new SignJWT({})
    .setProtectedHeader({ alg: "RS256", typ: "JWT" })
    .setIssuer(f.app_id!)
    .setIssuedAt(seconds - 60)
    .setExpirationTime(seconds + 540)
    .sign(key);
  const url = `${f.api_url ?? "https://api.github.com"}/app/installations/${f.installation_id}/access_tokens`;
  const headers: HeaderList = [
    ["Authorization", `Bearer ${jwt}`],
    ["Accept", "application/vnd.github+json"],
    ["X-GitHub-Api-Version", "2022-11-28"],
    ["User-Agent", USER_AGENT],
  ];
  deps.noteSent?.([new Secret(jwt)]); // noted before it goes: a refused request may still be kept
  const answer = await postToTokenEndpoint(deps, serviceHost, url, headers, new Uint8Array(0));
  if (answer.status === 401 || answer.status === 403 || answer.status === 404 || answer.status === 422) {
    // GitHub's message is not repeated: a token endpoint could echo the app JWT it was sent.
    throw new CredentialRefreshFailed(serviceHost, `GitHub refused the app's token request (HTTP ${answer.status})`, true);
  }
  if (answer.status !== 201 && answer.status !== 200)
    throw new CredentialRefreshFailed(serviceHost, `GitHub answered the token request with HTTP ${answer.status}`);
  const token = answer.json?.token;
  if (typeof token !== "string" || token.length === 0 || /[\0-\x1f\x7f]/.test(token))
    throw new CredentialRefreshFailed(serviceHost, "GitHub's answer has no usable token");
  const expires = Date.parse(String(answer.json?.expires_at ?? ""));
  // The app JWT mints any installation's token until it expires: a needle like the token it bought.
  return { value: new Secret(token), issuedAt: now, expiresAt: Number.isFinite(expires) ? expires : now + DEFAULT_LIFETIME_S * 1000, sent: [new Secret(jwt)] };
}

/**
 * A PEM block as PEM. A key pasted into a one-line field (a browser's password input drops line
 * breaks) arrives as BEGIN line, base64 and END line run together: the lines are put back.
 */
export function reflowPem(text: string): string {
  const m = /^\s*-----BEGIN ([A-Z0-9 ]{1,40})-----([A-Za-z0-9+/=\s]+)-----END \1-----\s*$/.exec(text);
  if (!m) return text;
  const body = m[2]!.replace(/\s+/g, "");
  return `-----BEGIN ${m[1]}-----\n${body.replace(/.{1,64}/g, "$&\n")}-----END ${m[1]}-----\n`;
}
