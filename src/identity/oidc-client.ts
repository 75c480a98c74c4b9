// The broker as an OpenID Connect relying party: discovery at start-up, the authorization URL, and
// the code exchange with every ID-token check (oauth4webapi for the protocol, jose for the RS256
// signature against the provider's key set). Provider access and refresh tokens are dropped here:
// only the validated ID-token claims leave this file. Never logs codes, tokens or ID tokens.

import * as jose from "jose";
import * as oauth from "oauth4webapi";
import type { Secret } from "../secret.ts";

/** RS256 only: the contract names it, and refusing the rest shuts out `none` and HS256-with-the-public-key. */
export const ID_TOKEN_ALG = "RS256";
/** The provider's key set is cached this long; an unknown `kid` refetches it (at most every 30 s). */
export const JWKS_CACHE_MS = 60 * 60 * 1000;

export interface OidcClientOptions {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: Secret; // SECRET: never log
  readonly name: string;
  readonly scopes: string;
  /** As registered at the provider (default client_secret_basic, the OAuth default). */
  readonly clientAuthMethod?: "client_secret_basic" | "client_secret_post";
  readonly redirectUri: string;
  /** Trusted roots (system plus BROKER_UPSTREAM_CA_FILE); undefined: the system roots. */
  readonly ca?: readonly string[];
  /** Tests only: a fetch of their own. */
  readonly fetch?: typeof fetch;
}

export interface OidcClaims {
  readonly issuer: string;
  readonly subject: string;
  readonly email: string | undefined;
  readonly emailVerified: boolean | undefined;
}

export interface OidcClient {
  readonly name: string;
  readonly issuer: string;
  readonly redirectUri: string;
  buildAuthorizationUrl(p: { state: string; nonce: string; codeChallenge: string }): string;
  /** Validates the callback, redeems the code with the PKCE verifier and checks the ID token; throws on any failure. */
  redeem(callback: URL, expected: { state: string; nonce: string; codeVerifier: string }): Promise<OidcClaims>;
}

/** Thrown for every start-up problem; the message names BROKER_OIDC_ISSUER and why. */
export class OidcDiscoveryError extends Error {}

export async function createOidcClient(opts: OidcClientOptions): Promise<OidcClient> {
  const issuerUrl = new URL(opts.issuer);
  const httpFetch = opts.fetch ?? createTrustingFetch(opts.ca);
  const insecure = issuerUrl.protocol === "http:"; // config allows http only for loopback issuers
  const common = { [oauth.customFetch]: httpFetch, [oauth.allowInsecureRequests]: insecure };
  let as: oauth.AuthorizationServer;
  try {
    as = await oauth.processDiscoveryResponse(issuerUrl, await oauth.discoveryRequest(issuerUrl, { algorithm: "oidc", ...common }));
  } catch (err) {
    throw new OidcDiscoveryError(`BROKER_OIDC_ISSUER: cannot use ${opts.issuer} as an OpenID provider (${describe(err)})`);
  }
  if (!as.authorization_endpoint || !as.token_endpoint || !as.jwks_uri) {
    throw new OidcDiscoveryError(`BROKER_OIDC_ISSUER: the discovery document of ${opts.issuer} lacks authorization_endpoint, token_endpoint or jwks_uri`);
  }
  const client: oauth.Client = { client_id: opts.clientId, id_token_signed_response_alg: ID_TOKEN_ALG };
  // The method the client was registered with (BROKER_OIDC_CLIENT_AUTH_METHOD): providers such as Okta refuse
  // any other, whatever their discovery document lists.
  const secret = opts.clientSecret.reveal(); // reveal: sent only to the provider's token endpoint
  const clientAuth = opts.clientAuthMethod === "client_secret_post" ? oauth.ClientSecretPost(secret) : oauth.ClientSecretBasic(secret);
  const keys = jose.createRemoteJWKSet(new URL(as.jwks_uri), {
    cacheMaxAge: JWKS_CACHE_MS,
    // An unknown kid refetches the key set at once (a provider may have just rotated). ID tokens only arrive
    // on our own authenticated token request, so nobody outside can make the broker refetch at will.
    cooldownDuration: 0,
    [jose.customFetch]: (url, init) => httpFetch(url, init as RequestInit),
  });
  const authorizationEndpoint = as.authorization_endpoint;

  return {
    name: opts.name,
    issuer: as.issuer,
    redirectUri: opts.redirectUri,
    buildAuthorizationUrl({ state, nonce, codeChallenge }) {
      const url = new URL(authorizationEndpoint);
      url.searchParams.set("response_type", "code");
      url.searchParams.set("client_id", opts.clientId);
      url.searchParams.set("redirect_uri", opts.redirectUri);
      url.searchParams.set("scope", opts.scopes);
      url.searchParams.set("state", state);
      url.searchParams.set("nonce", nonce);
      url.searchParams.set("code_challenge", codeChallenge);
      url.searchParams.set("code_challenge_method", "S256");
      return url.href;
    },
    async redeem(callback, expected) {
      const params = oauth.validateAuthResponse(as, client, callback, expected.state);
      const response = await oauth.authorizationCodeGrantRequest(as, client, clientAuth, params, opts.redirectUri, expected.codeVerifier, common);
      const result = await oauth.processAuthorizationCodeResponse(as, client, response, { expectedNonce: expected.nonce, requireIdToken: true });
      // oauth4webapi checked iss, aud, exp, iat, nonce and the header alg; the signature is checked here.
      const { payload, protectedHeader } = await jose.jwtVerify(result.id_token!, keys, {
        algorithms: [ID_TOKEN_ALG],
        issuer: as.issuer,
        audience: opts.clientId,
      });
      if (protectedHeader.alg !== ID_TOKEN_ALG || typeof payload.sub !== "string" || payload.sub === "") throw new Error("ID token rejected");
      let claims: Record<string, unknown> = payload;
      if (typeof payload.email !== "string" && as.userinfo_endpoint && result.access_token) {
        // Providers that follow OIDC's default put the email scope's claims in userinfo only. The access token
        // is used for this one request and never stored; the answer must be about the same subject.
        const info = await oauth.userInfoRequest(as, client, result.access_token, common);
        claims = { ...payload, ...(await oauth.processUserInfoResponse(as, client, payload.sub, info)), sub: payload.sub };
      }
      return {
        issuer: as.issuer,
        subject: payload.sub,
        // As the provider sent it: oidc.ts decides whether it is usable before any case folding.
        email: typeof claims.email === "string" ? claims.email.trim() : undefined,
        emailVerified: typeof claims.email_verified === "boolean" ? claims.email_verified : undefined,
      };
    },
  };
}

/** fetch that verifies TLS against the given roots (system plus the upstream CA file), never without. */
export function createTrustingFetch(ca: readonly string[] | undefined): typeof fetch {
  const tls = ca ? { ca: [...ca], rejectUnauthorized: true } : { rejectUnauthorized: true };
  return ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, { ...init, redirect: "manual", tls } as RequestInit)) as typeof fetch;
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === "string" ? `${code}: ${err.message}` : err.message;
  }
  return "unknown error";
}
