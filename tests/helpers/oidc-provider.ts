// A REAL OpenID provider for tests: `oidc-provider` (panva, certified) on http://127.0.0.1:<port>,
// started in-process. The broker accepts http issuers on loopback (src/config-oidc.ts), so no TLS.
//
// What it is configured as:
//   - one confidential client: client_secret_post (or _basic; discovery lists only that one), response_type code, ID tokens RS256 (a fresh
//     2048-bit RSA key per provider), PKCE required for every request (S256 is the only method);
//   - the accounts you pass in (`users`); `sub`, `email`, `email_verified` go INTO the ID token
//     (conformIdTokenClaims: false, as Google, Entra, Keycloak do) so the broker needs no userinfo call;
//   - no login page: every authorization request goes through a built-in interaction route that
//     signs in the "next" user (`nextLogin(email)`, sticky; the first user until you say otherwise)
//     and grants the requested scopes at once. So a plain fetch client that follows the redirects
//     (redirect: "manual", keeping the provider's cookies between provider requests) lands on the
//     broker's callback, and so does a real browser (Chromium) with no clicks.
//   - every authorization request re-runs that interaction (no silent SSO from an older session),
//     so switching `nextLogin` takes effect on the next flow, even in one browser profile.
//   - `denyNext()`: the next flow ends with error=access_denied sent to the redirect URI.
//
// Usage:
//   const idp = await startOidcProvider({ users: [{ sub: "u1", email: "a@example.com", email_verified: true }],
//     clientId: "broker", clientSecret: "s3cret", redirectUris: [`${brokerUrl}/v1/auth/oidc/callback`] });
//   broker env: { BROKER_OIDC_ISSUER: idp.issuer, BROKER_OIDC_CLIENT_ID: "broker", BROKER_OIDC_CLIENT_SECRET: "s3cret" }
//   (idp.env(...) builds exactly that). The broker's port is often unknown until it starts: start the
//   provider with any placeholder redirect URI, then `idp.setRedirectUris([...])` once the broker is up
//   (the provider checks redirect_uri at authorization time, discovery does not need it).
//   idp.nextLogin("a@example.com"); ... idp.stop();

import { generateKeyPairSync, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Provider, { interactionPolicy } from "oidc-provider";

export interface OidcTestUser {
  sub: string;
  email: string;
  email_verified?: boolean;
  name?: string;
}

export interface OidcProviderOptions {
  /** Follow OIDC's default: the email scope's claims only in userinfo, not in the ID token. */
  emailInUserinfoOnly?: boolean;
  users: OidcTestUser[];
  clientId?: string;
  clientSecret?: string;
  /** Exact redirect URIs the client may use (replaceable later with setRedirectUris). */
  redirectUris: string[];
  /** How the client authenticates at the token endpoint (default client_secret_post). Discovery lists only
   *  this method, as a provider that enforces the registered method effectively offers only it. */
  clientAuthMethod?: "client_secret_post" | "client_secret_basic";
  /** Seconds an ID token lives (default 3600). */
  idTokenTtl?: number;
}

export interface TestOidcProvider {
  /** http://127.0.0.1:<port> (no trailing slash), as in the discovery document. */
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** The broker's BROKER_OIDC_* variables for this provider (plus `extra`). */
  env(extra?: Record<string, string>): Record<string, string>;
  /** Who signs in at the provider from now on (sticky). Throws for an unknown email. */
  nextLogin(email: string): void;
  /** The next authorization request ends with error=access_denied instead of a sign-in (one flow only). */
  denyNext(): void;
  /** Adds (or replaces, by sub) an account. */
  addUser(u: OidcTestUser): void;
  /** Replaces the redirect URIs the client may use. */
  setRedirectUris(uris: string[]): void;
  /** Number of completed interactions (sign-ins) and of token-endpoint requests seen. */
  readonly stats: { logins: number; tokenRequests: number };
  /** Every ID, access and refresh token the token endpoint handed out (for "never logged/stored" checks). */
  readonly issued: readonly string[];
  /** The underlying oidc-provider instance, for anything else. */
  readonly provider: Provider;
  stop(): Promise<void>;
}

export async function startOidcProvider(opts: OidcProviderOptions): Promise<TestOidcProvider> {
  const clientId = opts.clientId ?? "broker-test";
  const clientSecret = opts.clientSecret ?? randomBytes(24).toString("base64url");
  const authMethod = opts.clientAuthMethod ?? "client_secret_post";
  const users = new Map<string, OidcTestUser>(); // by sub
  for (const u of opts.users) users.set(u.sub, { ...u });
  if (users.size === 0) throw new Error("startOidcProvider: give at least one user");
  let next: string = opts.users[0]!.sub;
  let deny = false;
  let redirectUris = [...opts.redirectUris];
  const stats = { logins: 0, tokenRequests: 0 };
  const issued: string[] = [];

  // Bind first: the issuer must name the port.
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: "jwk" }), kid: `k-${randomBytes(4).toString("hex")}`, alg: "RS256", use: "sig" };

  // Every authorization request (not its resumption after our interaction) goes through the interaction.
  const policy = interactionPolicy.base();
  policy
    .get("login")!
    .checks.add(
      new interactionPolicy.Check("test_always_interact", "the test provider signs in the chosen user on every request", (ctx) =>
        ctx.oidc.result ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT,
      ),
    );

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: redirectUris.length ? redirectUris : ["http://127.0.0.1/placeholder"],
        token_endpoint_auth_method: authMethod,
        grant_types: ["authorization_code"],
        response_types: ["code"],
        id_token_signed_response_alg: "RS256",
      },
    ],
    clientAuthMethods: [authMethod],
    jwks: { keys: [jwk as any] },
    cookies: { keys: [randomBytes(32).toString("hex")] },
    pkce: { required: () => true },
    conformIdTokenClaims: opts.emailInUserinfoOnly ?? false,
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    scopes: ["openid", "email", "profile"],
    features: { devInteractions: { enabled: false } },
    interactions: { policy, url: (_ctx: unknown, interaction: { uid: string }) => `/test-interaction/${interaction.uid}` },
    ttl: { IdToken: opts.idTokenTtl ?? 3600, AccessToken: 600, AuthorizationCode: 60, Interaction: 600, Session: 3600, Grant: 3600 },
    async findAccount(_ctx: unknown, sub: string) {
      const u = users.get(sub);
      if (!u) return undefined;
      return {
        accountId: sub,
        async claims() {
          const c: Record<string, unknown> = { sub: u.sub, email: u.email };
          if (u.email_verified !== undefined) c.email_verified = u.email_verified;
          if (u.name !== undefined) c.name = u.name;
          return c as { sub: string };
        },
      };
    },
    renderError(ctx: { type: string; body: string }, out: { error: string; error_description?: string }) {
      ctx.type = "text/plain";
      ctx.body = `oidc-provider error: ${out.error}: ${out.error_description ?? ""}`;
    },
  });

  // Redirect URIs may change after start (the broker's port is known only once it listens).
  const client = (provider as any).Client;
  client.prototype.redirectUriAllowed = function (uri: string) {
    return this.clientId === clientId && redirectUris.includes(uri);
  };

  provider.on("grant.success", (ctx: { body?: Record<string, unknown> }) => {
    stats.tokenRequests++;
    for (const k of ["id_token", "access_token", "refresh_token"]) if (typeof ctx.body?.[k] === "string") issued.push(ctx.body[k] as string);
  });
  provider.on("grant.error", () => void stats.tokenRequests++);

  const callback = provider.callback();
  handler = (req, res) => {
    const m = /^\/test-interaction\/([A-Za-z0-9_-]+)$/.exec((req.url ?? "").split("?")[0] ?? "");
    if (req.method === "GET" && m) {
      void interact(req, res).catch((err) => {
        res.statusCode = 500;
        res.end(`test interaction failed: ${err instanceof Error ? err.message : String(err)}`);
      });
      return;
    }
    callback(req, res);
  };

  async function interact(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const details = await provider.interactionDetails(req, res);
    if (deny) {
      deny = false;
      await provider.interactionFinished(req, res, { error: "access_denied", error_description: "the test user declined" }, { mergeWithLastSubmission: false });
      return;
    }
    const accountId = next;
    const clientIdOf = details.params.client_id as string;
    const grant = new provider.Grant({ accountId, clientId: clientIdOf });
    grant.addOIDCScope(String(details.params.scope ?? "openid"));
    const grantId = await grant.save();
    stats.logins++;
    await provider.interactionFinished(req, res, { login: { accountId }, consent: { grantId } }, { mergeWithLastSubmission: false });
  }

  return {
    issuer,
    clientId,
    clientSecret,
    env(extra = {}) {
      return {
        BROKER_OIDC_ISSUER: issuer,
        BROKER_OIDC_CLIENT_ID: clientId,
        BROKER_OIDC_CLIENT_SECRET: clientSecret,
        BROKER_OIDC_CLIENT_AUTH_METHOD: authMethod,
        ...extra,
      };
    },
    nextLogin(email) {
      const want = email.toLowerCase();
      const u = [...users.values()].find((x) => x.email.toLowerCase() === want);
      if (!u) throw new Error(`test provider: no user with email ${email}`);
      next = u.sub;
    },
    denyNext() {
      deny = true;
    },
    addUser(u) {
      users.set(u.sub, { ...u });
    },
    setRedirectUris(uris) {
      redirectUris = [...uris];
    },
    stats,
    issued,
    provider,
    async stop() {
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
