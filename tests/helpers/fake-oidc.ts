// A minimal, deliberately scriptable OpenID provider for HOSTILE sign-in tests (issue 13): it serves
// discovery, a JWKS that can rotate, an /authorize that answers at once (no login page) and a /token
// that checks client authentication and the PKCE verifier, then returns an ID token shaped by the
// current scenario (good, forged, expired, mis-addressed...). Plain http on 127.0.0.1: the contract
// allows http only for loopback issuers. The happy-path tests against a real provider use
// `oidc-provider`; this one exists to produce what a real provider never would.

import { createHash, randomBytes } from "node:crypto";
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type JWK } from "jose";

export type Scenario =
  /** A valid RS256 ID token from the current key. */
  | "good"
  /** RS256, signed by a key the provider never published, carrying the published key's kid. */
  | "wrong-key"
  /** RS256, signed by a key the provider never published, with a kid nobody knows (even after a refetch). */
  | "wrong-key-unknown-kid"
  /** `alg: none`, empty signature. */
  | "alg-none"
  /** HS256 with the provider's RSA public key (SPKI PEM) as the HMAC secret: the classic key-confusion forgery. */
  | "hs256-public-key"
  | "wrong-iss"
  | "wrong-aud"
  /** exp an hour in the past (well beyond any clock tolerance). */
  | "expired"
  /** The nonce of another flow. */
  | "wrong-nonce"
  /** /authorize answers `error=access_denied` (with the state) instead of a code. */
  | "authorize-error"
  /** /authorize records a challenge that is not the one the client sent, so its verifier fails at /token. */
  | "tampered-challenge";

export interface AuthorizationRecord {
  readonly params: Record<string, string>;
  /** The code handed back, when one was. */
  readonly code: string | undefined;
  /** Where /authorize sent the browser back to (the broker's callback with code or error). */
  readonly location: string;
}

export interface TokenRequestRecord {
  readonly params: Record<string, string>;
  readonly clientAuth: "basic" | "post" | "none";
  /** Whether a code_verifier was sent at all. */
  readonly verifierPresent: boolean;
  /** Whether S256(code_verifier) equals the challenge recorded at /authorize for this code. */
  readonly verifierMatched: boolean;
  /** `issued`, or the OAuth error code returned. */
  readonly outcome: string;
  readonly idToken?: string;
  readonly accessToken?: string;
  readonly refreshToken?: string;
}

export interface FakeOidcUser {
  sub: string;
  email: string;
  emailVerified?: boolean;
}

export interface FakeOidc {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** Env for the broker: BROKER_OIDC_ISSUER, _CLIENT_ID, _CLIENT_SECRET, _NAME. */
  readonly env: Record<string, string>;
  setScenario(s: Scenario): void;
  /** Whom the next ID token is about. */
  setUser(u: FakeOidcUser): void;
  /** New current signing key (new kid). `keepOld` keeps the old key in the JWKS too. */
  rotateKeys(opts?: { keepOld?: boolean }): Promise<void>;
  readonly authorizations: AuthorizationRecord[];
  readonly tokenRequests: TokenRequestRecord[];
  readonly counts: { discovery: number; jwks: number; authorize: number; token: number };
  stop(): Promise<void>;
}

interface SigningKey {
  kid: string;
  privateKey: Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];
  publicJwk: JWK;
  spkiPem: string;
}

interface Grant {
  clientId: string;
  redirectUri: string;
  nonce: string | undefined;
  challenge: string | undefined;
  challengeMethod: string | undefined;
}

async function newKey(): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
  const kid = randomBytes(8).toString("hex");
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" };
  // The PEM as a file holds it (trailing newline): what a naive verifier would be handed as its "key".
  return { kid, privateKey, publicJwk, spkiPem: `${(await exportSPKI(publicKey)).trim()}\n` };
}

const b64url = (b: Buffer | string) => Buffer.from(b).toString("base64url");
export const s256 = (verifier: string) => createHash("sha256").update(verifier).digest("base64url");

export async function startFakeOidc(
  opts: { clientId?: string; clientSecret?: string /** clock for token times (default Date.now) */; now?: () => number } = {},
): Promise<FakeOidc> {
  const clientId = opts.clientId ?? "broker-test-client";
  const clientSecret = opts.clientSecret ?? b64url(randomBytes(24));
  const now = opts.now ?? Date.now;
  let scenario: Scenario = "good";
  let user: FakeOidcUser = { sub: "sub-default", email: "oidc-default@example.com" };
  let current = await newKey();
  let published: SigningKey[] = [current];
  const grants = new Map<string, Grant>();
  const authorizations: AuthorizationRecord[] = [];
  const tokenRequests: TokenRequestRecord[] = [];
  const counts = { discovery: 0, jwks: 0, authorize: 0, token: 0 };
  let issuer = "";

  const oauthError = (status: number, error: string) =>
    new Response(JSON.stringify({ error, error_description: `fake provider: ${error}` }), {
      status,
      headers: { "content-type": "application/json", "cache-control": "no-store" },
    });

  async function idToken(grant: Grant): Promise<string> {
    // Token times that hold whether the broker checks them on the real clock or on a moved test clock.
    const realSec = Math.floor(Date.now() / 1000);
    const clockSec = Math.floor(now() / 1000);
    let iat = Math.min(realSec, clockSec) - 60;
    let exp = Math.max(realSec, clockSec) + 3600;
    if (scenario === "expired") {
      exp = Math.min(realSec, clockSec) - 3600;
      iat = exp - 3600;
    }
    const claims: Record<string, unknown> = {
      sub: user.sub,
      email: user.email,
      email_verified: user.emailVerified ?? true,
      nonce: scenario === "wrong-nonce" ? b64url(randomBytes(16)) : grant.nonce,
      auth_time: iat,
    };
    const iss = scenario === "wrong-iss" ? `${issuer}/evil` : issuer;
    const aud = scenario === "wrong-aud" ? "some-other-client" : grant.clientId;
    const jwt = () => new SignJWT(claims).setIssuer(iss).setAudience(aud).setIssuedAt(iat).setExpirationTime(exp);

    switch (scenario) {
      case "alg-none": {
        const header = b64url(JSON.stringify({ alg: "none", typ: "JWT" }));
        const payload = b64url(JSON.stringify({ ...claims, iss, aud, iat, exp }));
        return `${header}.${payload}.`;
      }
      case "hs256-public-key":
        return jwt().setProtectedHeader({ alg: "HS256", typ: "JWT", kid: current.kid }).sign(new TextEncoder().encode(current.spkiPem));
      case "wrong-key": {
        const rogue = await newKey();
        return jwt().setProtectedHeader({ alg: "RS256", typ: "JWT", kid: current.kid }).sign(rogue.privateKey);
      }
      case "wrong-key-unknown-kid": {
        const rogue = await newKey();
        return jwt().setProtectedHeader({ alg: "RS256", typ: "JWT", kid: rogue.kid }).sign(rogue.privateKey);
      }
      default:
        return jwt().setProtectedHeader({ alg: "RS256", typ: "JWT", kid: current.kid }).sign(current.privateKey);
    }
  }

  function clientAuth(req: Request, form: URLSearchParams): { kind: "basic" | "post" | "none"; ok: boolean } {
    const h = req.headers.get("authorization");
    if (h?.startsWith("Basic ")) {
      const decoded = Buffer.from(h.slice(6), "base64").toString();
      const i = decoded.indexOf(":");
      const id = decodeURIComponent(decoded.slice(0, i));
      const secret = decodeURIComponent(decoded.slice(i + 1));
      return { kind: "basic", ok: id === clientId && secret === clientSecret };
    }
    if (form.has("client_secret")) return { kind: "post", ok: form.get("client_id") === clientId && form.get("client_secret") === clientSecret };
    return { kind: "none", ok: false };
  }

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      switch (url.pathname) {
        case "/.well-known/openid-configuration":
          counts.discovery++;
          return Response.json({
            issuer,
            authorization_endpoint: `${issuer}/authorize`,
            token_endpoint: `${issuer}/token`,
            jwks_uri: `${issuer}/jwks`,
            response_types_supported: ["code"],
            subject_types_supported: ["public"],
            id_token_signing_alg_values_supported: ["RS256"],
            scopes_supported: ["openid", "email", "profile"],
            token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
            code_challenge_methods_supported: ["S256"],
            grant_types_supported: ["authorization_code"],
            claims_supported: ["sub", "email", "email_verified", "iss", "aud", "exp", "iat", "nonce"],
          });
        case "/jwks":
          counts.jwks++;
          return Response.json({ keys: published.map((k) => k.publicJwk) });
        case "/authorize": {
          counts.authorize++;
          const params = Object.fromEntries(url.searchParams);
          const redirectUri = params.redirect_uri;
          if (!redirectUri || !/^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?\//.test(redirectUri)) return new Response("bad redirect_uri", { status: 400 });
          const back = new URL(redirectUri);
          let code: string | undefined;
          if (params.client_id !== clientId) {
            back.searchParams.set("error", "unauthorized_client");
          } else if (scenario === "authorize-error") {
            back.searchParams.set("error", "access_denied");
            back.searchParams.set("error_description", "The resource owner denied the request");
          } else if (params.response_type !== "code" || params.code_challenge_method !== "S256" || !params.code_challenge) {
            back.searchParams.set("error", "invalid_request");
          } else {
            code = b64url(randomBytes(24));
            grants.set(code, {
              clientId: params.client_id,
              redirectUri,
              nonce: params.nonce,
              // A challenge the client's verifier cannot meet: what an injected code from another flow looks like.
              challenge: scenario === "tampered-challenge" ? s256(b64url(randomBytes(32))) : params.code_challenge,
              challengeMethod: params.code_challenge_method,
            });
            back.searchParams.set("code", code);
          }
          if (params.state !== undefined) back.searchParams.set("state", params.state);
          back.searchParams.set("iss", issuer);
          authorizations.push({ params, code, location: back.href });
          return new Response(null, { status: 302, headers: { location: back.href } });
        }
        case "/token": {
          counts.token++;
          if (req.method !== "POST") return oauthError(405, "invalid_request");
          const form = new URLSearchParams(await req.text());
          const params = Object.fromEntries(form);
          const auth = clientAuth(req, form);
          const code = form.get("code") ?? "";
          const grant = grants.get(code);
          grants.delete(code); // codes are single use whatever happens
          const verifier = form.get("code_verifier");
          const verifierMatched = !!grant?.challenge && !!verifier && grant.challengeMethod === "S256" && s256(verifier) === grant.challenge;
          const record = (outcome: string, extra: Partial<TokenRequestRecord> = {}) =>
            tokenRequests.push({ params, clientAuth: auth.kind, verifierPresent: !!verifier, verifierMatched, outcome, ...extra });
          if (!auth.ok) return (record("invalid_client"), oauthError(401, "invalid_client"));
          if (form.get("grant_type") !== "authorization_code") return (record("unsupported_grant_type"), oauthError(400, "unsupported_grant_type"));
          if (!grant || grant.clientId !== clientId || form.get("redirect_uri") !== grant.redirectUri)
            return (record("invalid_grant"), oauthError(400, "invalid_grant"));
          if (!verifierMatched) return (record("invalid_grant"), oauthError(400, "invalid_grant"));
          const id_token = await idToken(grant);
          const access_token = `fake-at-${b64url(randomBytes(18))}`;
          const refresh_token = `fake-rt-${b64url(randomBytes(18))}`;
          record("issued", { idToken: id_token, accessToken: access_token, refreshToken: refresh_token });
          return new Response(
            JSON.stringify({ access_token, token_type: "Bearer", expires_in: 3600, refresh_token, id_token, scope: "openid email profile" }),
            {
              headers: { "content-type": "application/json", "cache-control": "no-store" },
            },
          );
        }
        default:
          return new Response("not found", { status: 404 });
      }
    },
  });
  issuer = `http://127.0.0.1:${server.port}`;

  return {
    issuer,
    clientId,
    clientSecret,
    env: { BROKER_OIDC_ISSUER: issuer, BROKER_OIDC_CLIENT_ID: clientId, BROKER_OIDC_CLIENT_SECRET: clientSecret, BROKER_OIDC_NAME: "Fake IdP" },
    setScenario(s) {
      scenario = s;
    },
    setUser(u) {
      user = u;
    },
    async rotateKeys(o = {}) {
      const next = await newKey();
      published = o.keepOld ? [...published, next] : [next];
      current = next;
    },
    authorizations,
    tokenRequests,
    counts,
    async stop() {
      await server.stop(true);
    },
  };
}
