// A REAL OAuth 2.0 authorization server standing in for a template's provider (GitHub's authorize and token
// endpoints) when a person connects an account: `oidc-provider` (panva, certified) over HTTPS on loopback with
// a test-PKI certificate, plain OAuth 2.0 (no openid scope, no ID token), configured as GitHub Apps behave:
//   - one confidential client (client_secret_basic), response_type code, PKCE S256 required, redirect URIs
//     settable once the broker listens (`setRedirectUris`);
//   - a refresh token with every code (GitHub Apps issue one without offline_access), rotated on each use;
//   - a sign-in page of its own (`/interaction/<uid>`): a login and password form with "Authorize" and
//     "Cancel" buttons, so a browser signs in and consents with clicks started on the provider's page;
//   - introspection for RESOURCE_CLIENT, so a resource server can check the access tokens it is shown;
//   - everything sensitive recorded for leak checks: every code in its redirects, every token it issued,
//     every PKCE verifier it received.

import { generateKeyPairSync, randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import Provider, { interactionPolicy } from "oidc-provider";
import type { TestPki } from "./pki.ts";

export const RESOURCE_CLIENT = "resource-server";

export interface ConnectTokenRequest {
  grantType: string;
  /** The Authorization header (Basic …): compare, never print. */
  authorization: string;
  userAgent: string;
  status: number;
  error: string | undefined;
  /** Form fields names (values are secrets). */
  fields: string[];
}

export interface TestConnectProvider {
  /** https://<host>:<port> */
  readonly issuer: string;
  readonly authorizeUrl: string;
  readonly tokenUrl: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly login: string;
  readonly password: string;
  /** Authorization codes the provider sent to the redirect URI. */
  readonly codes: string[];
  /** Access and refresh tokens the token endpoint handed out. */
  readonly issued: string[];
  /** The refresh tokens among them, in order (each rotation adds one). */
  readonly refreshTokens: string[];
  /** PKCE verifiers the token endpoint received. */
  readonly verifiers: string[];
  readonly tokenRequests: ConnectTokenRequest[];
  /** Scopes asked for by each authorization request, as sent. */
  readonly scopesAsked: (string | null)[];
  setRedirectUris(uris: string[]): void;
  /** RFC 7662 introspection as RESOURCE_CLIENT. */
  introspect(token: string): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

const ACCOUNT = "octocat";

export async function startConnectProvider(opts: { pki: TestPki; host?: string; scopes: string[] }): Promise<TestConnectProvider> {
  const clientId = "Iv1.connect-test-app";
  // Reserved characters: client_secret_basic form-urlencodes id and secret before base64 (RFC 6749 §2.3.1).
  const clientSecret = `gh-app-secret+${randomBytes(12).toString("hex")}/sentinel=connect`;
  const password = `provider password ${randomBytes(4).toString("hex")}`;
  const resourceSecret = randomBytes(24).toString("base64url");
  const codes: string[] = [];
  const issued: string[] = [];
  const refreshTokens: string[] = [];
  const verifiers: string[] = [];
  const tokenRequests: ConnectTokenRequest[] = [];
  const scopesAsked: (string | null)[] = [];
  let redirectUris: string[] = [];

  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server = createServer({ cert: opts.pki.certPem, key: opts.pki.keyPem }, (req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `https://${opts.host ?? "localhost"}:${(server.address() as AddressInfo).port}`;

  const policy = interactionPolicy.base();
  policy
    .get("login")!
    .checks.add(
      new interactionPolicy.Check("test_always_interact", "sign in on every authorization request", (ctx) =>
        ctx.oidc.result ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT,
      ),
    );

  // Signing keys of its own (no ID token is issued, but the provider wants a key set).
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: "jwk" }), kid: `k-${randomBytes(4).toString("hex")}`, alg: "RS256", use: "sig" };
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        token_endpoint_auth_method: "client_secret_basic",
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        redirect_uris: ["https://placeholder.invalid/callback"],
      },
      {
        client_id: RESOURCE_CLIENT,
        client_secret: resourceSecret,
        token_endpoint_auth_method: "client_secret_basic",
        grant_types: [],
        response_types: [],
        redirect_uris: [],
      },
    ] as any,
    clientAuthMethods: ["client_secret_basic"],
    jwks: { keys: [jwk] },
    cookies: { keys: [randomBytes(32).toString("hex")] },
    pkce: { required: () => true },
    scopes: opts.scopes,
    rotateRefreshToken: true,
    // As GitHub Apps: a refresh token with every code, not only for offline_access; it outlives the sign-in.
    issueRefreshToken: async (_ctx: unknown, client: { grantTypeAllowed(t: string): boolean }) => client.grantTypeAllowed("refresh_token"),
    expiresWithSession: async () => false,
    features: {
      devInteractions: { enabled: false },
      introspection: { enabled: true, allowedPolicy: async (_ctx: unknown, client: { clientId: string }) => client.clientId === RESOURCE_CLIENT },
    },
    interactions: { policy, url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    ttl: { AccessToken: 600, AuthorizationCode: 60, RefreshToken: 3600, Interaction: 600, Session: 3600, Grant: 3600 } as any,
    async findAccount(_ctx: unknown, sub: string) {
      return sub === ACCOUNT ? { accountId: sub, claims: async () => ({ sub }) } : undefined;
    },
    renderError(ctx: { type: string; body: string }, out: { error: string; error_description?: string }) {
      ctx.type = "text/plain";
      ctx.body = `oidc-provider error: ${out.error}: ${out.error_description ?? ""}`;
    },
  } as any);
  (provider as any).proxy = false;

  // Redirect URIs change after start: the broker's port is known only once it listens.
  (provider as any).Client.prototype.redirectUriAllowed = function (uri: string) {
    return this.clientId === clientId && redirectUris.includes(uri);
  };

  (provider as any).use(async (ctx: any, next: () => Promise<void>) => {
    if (ctx.method === "GET" && ctx.path === "/auth") scopesAsked.push(ctx.query.scope ?? null);
    await next();
    const location = ctx.response.get("location") as string;
    if (location && location.includes("code=")) {
      const code = new URL(location).searchParams.get("code");
      if (code) codes.push(code);
    }
    if (ctx.method !== "POST" || ctx.path !== "/token") return;
    const body = (ctx.body ?? {}) as Record<string, unknown>;
    tokenRequests.push({
      grantType: String(ctx.oidc?.params?.grant_type ?? ""),
      authorization: ctx.get("authorization"),
      userAgent: ctx.get("user-agent"),
      status: ctx.status,
      error: typeof body.error === "string" ? body.error : undefined,
      fields: Object.keys(ctx.oidc?.body ?? {}).sort(),
    });
    for (const k of ["access_token", "refresh_token"]) if (typeof body[k] === "string") issued.push(body[k] as string);
    if (typeof body.refresh_token === "string") refreshTokens.push(body.refresh_token);
    if (typeof ctx.oidc?.params?.code_verifier === "string") verifiers.push(ctx.oidc.params.code_verifier);
  });

  const callback = provider.callback();
  handler = (req, res) => {
    const m = /^\/interaction\/([A-Za-z0-9_-]+)$/.exec((req.url ?? "").split("?")[0] ?? "");
    if (!m) return void callback(req, res);
    const fail = (err: unknown) => {
      res.statusCode = 500;
      res.end(`test interaction failed: ${err instanceof Error ? err.message : String(err)}`);
    };
    if (req.method === "GET") return void signInPage(req, res, m[1]!).catch(fail);
    if (req.method === "POST") return void signIn(req, res).catch(fail);
    res.statusCode = 405;
    res.end();
  };

  async function signInPage(req: IncomingMessage, res: ServerResponse, uid: string): Promise<void> {
    const details = await provider.interactionDetails(req, res);
    res.setHeader("content-type", "text/html; charset=utf-8");
    res.end(`<!doctype html><title>Sign in to the test provider</title>
<h1>Sign in to authorize ${escape(String(details.params.client_id))}</h1>
<form method="post" action="/interaction/${uid}">
<label>Login <input id="login" name="login" autocomplete="username"></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="authorize" name="decision" value="allow">Authorize</button>
<button id="cancel" name="decision" value="deny">Cancel</button>
</form>`);
  }

  async function signIn(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
    const details = await provider.interactionDetails(req, res);
    if (form.get("decision") !== "allow") {
      await provider.interactionFinished(req, res, { error: "access_denied", error_description: "the person declined" }, { mergeWithLastSubmission: false });
      return;
    }
    if (form.get("login") !== ACCOUNT || form.get("password") !== password) {
      res.statusCode = 401;
      res.setHeader("content-type", "text/plain");
      res.end("wrong login or password");
      return;
    }
    const grant = new provider.Grant({ accountId: ACCOUNT, clientId: details.params.client_id as string });
    if (details.params.scope) grant.addOIDCScope(String(details.params.scope));
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { login: { accountId: ACCOUNT }, consent: { grantId } }, { mergeWithLastSubmission: false });
  }

  return {
    issuer,
    authorizeUrl: `${issuer}/auth`,
    tokenUrl: `${issuer}/token`,
    clientId,
    clientSecret,
    login: ACCOUNT,
    password,
    codes,
    issued,
    refreshTokens,
    verifiers,
    tokenRequests,
    scopesAsked,
    setRedirectUris(uris) {
      redirectUris = [...uris];
    },
    async introspect(token) {
      const res = await fetch(`${issuer}/token/introspection`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${Buffer.from(`${RESOURCE_CLIENT}:${resourceSecret}`).toString("base64")}`,
        },
        body: new URLSearchParams({ token, token_type_hint: "access_token" }),
        tls: { ca: opts.pki.caPem },
      } as RequestInit);
      return (await res.json()) as Record<string, unknown>;
    },
    async stop() {
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function escape(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}
