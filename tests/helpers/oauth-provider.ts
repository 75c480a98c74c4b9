// A REAL OAuth 2.0 authorization server for the minted-credential tests: `oidc-provider` (panva,
// certified) served over HTTPS on 127.0.0.1 with a test-PKI certificate, configured for machine
// clients: the client credentials grant, refresh tokens (offline_access, rotated on every use),
// token introspection (for a resource server) and revocation. A sibling of oidc-provider.ts (the
// sign-in provider, plain http, untouched): this one never renders a page either.
//
//   - `clients`: confidential clients, each client_secret_basic or client_secret_post, either for the
//     client credentials grant or for authorization code + refresh_token (redirect URI REDIRECT_URI,
//     PKCE S256), each with its own access-token lifetime in seconds;
//   - RESOURCE_CLIENT ("resource-server", secret `resourceSecret`) may introspect any token;
//   - `obtainRefreshToken(clientId)` drives an authorization-code flow with offline_access and
//     prompt=consent (the interaction signs in the one account and grants at once) and answers the
//     refresh token, as a human would paste it into the vault;
//   - every token-endpoint request is recorded (`tokenRequests`: form, Authorization header, status,
//     error), and every token handed out is kept in `issued` for leak checks.

import { createHash, generateKeyPairSync, randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import Provider, { interactionPolicy } from "oidc-provider";
import type { TestPki } from "./pki.ts";

export const REDIRECT_URI = "https://client.invalid/callback";
export const RESOURCE_CLIENT = "resource-server";
const ACCOUNT = "machine-owner";

export interface OAuthTestClient {
  id: string;
  secret: string;
  authMethod: "client_secret_basic" | "client_secret_post";
  grant: "client_credentials" | "refresh_token";
  /** Seconds an access token issued to this client lives. */
  accessTokenTtl: number;
}

export interface TokenRequest {
  grantType: string;
  /** The parsed form as received (client_secret and refresh_token included: compare, never print). */
  form: Record<string, string>;
  authorization: string;
  /** The broker sends "broker (credential broker)"; this helper's own calls send "oauth-test-client". */
  userAgent: string;
  clientId: string | undefined;
  status: number;
  /** The OAuth error code of a refused request. */
  error: string | undefined;
}

/** The little of Koa's context the recording middleware touches (tests/types has no Koa types). */
interface KoaContext {
  method: string;
  path: string;
  status: number;
  body: unknown;
  get(header: string): string;
  req: IncomingMessage;
  oidc?: { body?: Record<string, unknown>; client?: { clientId: string } };
}

export interface TestOAuthProvider {
  /** https://127.0.0.1:<port> */
  readonly issuer: string;
  readonly tokenUrl: string;
  readonly resourceSecret: string;
  readonly tokenRequests: TokenRequest[];
  /** Every access and refresh token the token endpoint handed out. */
  readonly issued: string[];
  /** The refresh token of a fresh grant for `clientId` (authorization code flow with offline_access). */
  obtainRefreshToken(clientId: string): Promise<string>;
  /** RFC 7009 revocation of a refresh token by its client: oidc-provider revokes the whole grant. */
  revoke(clientId: string, refreshToken: string): Promise<void>;
  /** RFC 7662 introspection as the resource server. */
  introspect(token: string, hint?: "access_token" | "refresh_token"): Promise<Record<string, unknown>>;
  /** The next token request gets this HTTP status and no answer (an outage), before oidc-provider sees it. */
  failNext(status: number): void;
  /** A token request as a client would make it (client_secret_post), for "does this still work" checks. */
  refreshDirectly(clientId: string, refreshToken: string): Promise<{ status: number; body: Record<string, unknown> }>;
  stop(): Promise<void>;
}

export async function startOAuthProvider(opts: { pki: TestPki; clients: OAuthTestClient[] }): Promise<TestOAuthProvider> {
  const resourceSecret = randomBytes(24).toString("base64url");
  const byId = new Map(opts.clients.map((c) => [c.id, c]));
  const tokenRequests: TokenRequest[] = [];
  const issued: string[] = [];

  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server = createServer({ cert: opts.pki.certPem, key: opts.pki.keyPem }, (req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: "jwk" }), kid: `k-${randomBytes(4).toString("hex")}`, alg: "RS256", use: "sig" };
  const policy = interactionPolicy.base();
  policy
    .get("login")!
    .checks.add(
      new interactionPolicy.Check("test_always_interact", "sign in on every authorization request", (ctx) =>
        ctx.oidc.result ? interactionPolicy.Check.NO_NEED_TO_PROMPT : interactionPolicy.Check.REQUEST_PROMPT,
      ),
    );
  const ttlOf = (client: { clientId: string } | undefined) => byId.get(client?.clientId ?? "")?.accessTokenTtl ?? 600;

  const provider = new Provider(issuer, {
    clients: [
      ...opts.clients.map((c) => ({
        client_id: c.id,
        client_secret: c.secret,
        token_endpoint_auth_method: c.authMethod,
        grant_types: c.grant === "client_credentials" ? ["client_credentials"] : ["authorization_code", "refresh_token"],
        response_types: c.grant === "client_credentials" ? [] : ["code"],
        redirect_uris: c.grant === "client_credentials" ? [] : [REDIRECT_URI],
        scope: c.grant === "client_credentials" ? "read write" : undefined,
      })),
      {
        client_id: RESOURCE_CLIENT,
        client_secret: resourceSecret,
        token_endpoint_auth_method: "client_secret_basic",
        grant_types: [],
        response_types: [],
        redirect_uris: [],
      },
    ] as any,
    clientAuthMethods: ["client_secret_basic", "client_secret_post"],
    jwks: { keys: [jwk as any] },
    cookies: { keys: [randomBytes(32).toString("hex")] },
    pkce: { required: () => true },
    scopes: ["openid", "offline_access", "read", "write"],
    rotateRefreshToken: true,
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: true, allowedPolicy: async (_ctx: unknown, client: { clientId: string }) => client.clientId === RESOURCE_CLIENT },
      revocation: {
        enabled: true,
        allowedPolicy: async (_ctx: unknown, client: { clientId: string }, token: { clientId: string }) => client.clientId === token.clientId,
      },
    },
    interactions: { policy, url: (_ctx: unknown, interaction: { uid: string }) => `/test-interaction/${interaction.uid}` },
    ttl: {
      AccessToken: (_ctx: unknown, _token: unknown, client: { clientId: string }) => ttlOf(client),
      ClientCredentials: (_ctx: unknown, _token: unknown, client: { clientId: string }) => ttlOf(client),
      RefreshToken: 3600,
      AuthorizationCode: 60,
      IdToken: 3600,
      Interaction: 600,
      Session: 3600,
      Grant: 3600,
    } as any,
    async findAccount(_ctx: unknown, sub: string) {
      return sub === ACCOUNT ? { accountId: sub, claims: async () => ({ sub }) } : undefined;
    },
    renderError(ctx: { type: string; body: string }, out: { error: string; error_description?: string }) {
      ctx.type = "text/plain";
      ctx.body = `oidc-provider error: ${out.error}: ${out.error_description ?? ""}`;
    },
  });

  // Records every token-endpoint exchange once oidc-provider has answered it.
  let failing: number | undefined;
  (provider as unknown as { use(mw: (ctx: KoaContext, next: () => Promise<void>) => Promise<void>): void }).use(async (ctx, next) => {
    let outage: Record<string, string> | undefined;
    if (failing !== undefined && ctx.method === "POST" && ctx.path === "/token") {
      // oidc-provider never sees this request: its form is read here, for the record.
      const chunks: Buffer[] = [];
      for await (const c of ctx.req) chunks.push(c as Buffer);
      outage = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString()));
      ctx.status = failing;
      ctx.body = { message: "temporarily unavailable" };
      failing = undefined;
    } else await next();
    if (ctx.method !== "POST" || ctx.path !== "/token") return;
    const oidc = ctx.oidc;
    const form = outage ?? Object.fromEntries(Object.entries((oidc?.body ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
    const body = ctx.body as Record<string, unknown> | undefined;
    tokenRequests.push({
      grantType: form.grant_type ?? "",
      form,
      authorization: ctx.get("authorization"),
      userAgent: ctx.get("user-agent"),
      clientId: oidc?.client?.clientId ?? form.client_id ?? basicId(ctx.get("authorization")),
      status: ctx.status,
      error: typeof body?.error === "string" ? body.error : undefined,
    });
    for (const k of ["access_token", "refresh_token"]) if (typeof body?.[k] === "string") issued.push(body[k] as string);
  });

  /** The client a refused request claimed to be (oidc-provider sets ctx.oidc.client only once authenticated). */
  const basicId = (auth: string) => {
    const m = /^Basic (.+)$/i.exec(auth);
    const raw = m ? Buffer.from(m[1]!, "base64").toString("utf8") : "";
    return raw.includes(":") ? decodeURIComponent(raw.slice(0, raw.indexOf(":")).replace(/\+/g, " ")) : undefined;
  };

  const callback = provider.callback();
  handler = (req, res) => {
    const m = /^\/test-interaction\/([A-Za-z0-9_-]+)$/.exec((req.url ?? "").split("?")[0] ?? "");
    if (req.method !== "GET" || !m) return void callback(req, res);
    void (async () => {
      const details = await provider.interactionDetails(req, res);
      const grant = new provider.Grant({ accountId: ACCOUNT, clientId: details.params.client_id as string });
      grant.addOIDCScope(String(details.params.scope ?? "openid"));
      const grantId = await grant.save();
      await provider.interactionFinished(req, res, { login: { accountId: ACCOUNT }, consent: { grantId } }, { mergeWithLastSubmission: false });
    })().catch((err) => {
      res.statusCode = 500;
      res.end(`test interaction failed: ${err instanceof Error ? err.message : String(err)}`);
    });
  };

  const tls = { ca: opts.pki.caPem };
  const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")}`;
  const clientOf = (id: string) => {
    const c = byId.get(id);
    if (!c) throw new Error(`test OAuth provider: no client ${id}`);
    return c;
  };
  /** A form POST authenticated the way the client is registered. */
  async function post(path: string, id: string, secret: string, method: OAuthTestClient["authMethod"], form: Record<string, string>) {
    const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded", "user-agent": "oauth-test-client" };
    const body = new URLSearchParams(form);
    if (method === "client_secret_basic") headers.authorization = basic(id, secret);
    else body.set("client_id", id), body.set("client_secret", secret);
    const res = await fetch(`${issuer}${path}`, { method: "POST", headers, body, tls } as RequestInit);
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
  }

  return {
    issuer,
    tokenUrl: `${issuer}/token`,
    resourceSecret,
    tokenRequests,
    issued,
    async obtainRefreshToken(clientId) {
      const c = clientOf(clientId);
      const verifier = randomBytes(32).toString("base64url");
      const auth = new URL(`${issuer}/auth`);
      for (const [k, v] of Object.entries({
        client_id: clientId,
        response_type: "code",
        redirect_uri: REDIRECT_URI,
        scope: "openid offline_access",
        prompt: "consent",
        state: randomBytes(8).toString("hex"),
        code_challenge: createHash("sha256").update(verifier).digest("base64url"),
        code_challenge_method: "S256",
      }))
        auth.searchParams.set(k, v);
      const jar = new Map<string, string>();
      let url = auth;
      for (let hop = 0; hop < 10 && !url.href.startsWith(REDIRECT_URI); hop++) {
        const res = await fetch(url, { redirect: "manual", headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") }, tls } as RequestInit);
        for (const set of res.headers.getSetCookie()) {
          const pair = set.split(";")[0] ?? "";
          jar.set(pair.slice(0, pair.indexOf("=")).trim(), pair.slice(pair.indexOf("=") + 1).trim());
        }
        const loc = res.headers.get("location");
        if (!loc) throw new Error(`authorization flow stopped at ${url.pathname}: ${res.status} ${await res.text()}`);
        await res.body?.cancel();
        url = new URL(loc, issuer);
      }
      const code = url.searchParams.get("code");
      if (!code) throw new Error(`authorization flow ended without a code: ${url.search}`);
      const out = await post("/token", c.id, c.secret, c.authMethod, {
        grant_type: "authorization_code",
        code,
        redirect_uri: REDIRECT_URI,
        code_verifier: verifier,
      });
      const rt = out.body.refresh_token;
      if (out.status !== 200 || typeof rt !== "string") throw new Error(`code exchange: ${out.status} ${JSON.stringify(out.body.error ?? out.body)}`);
      return rt;
    },
    async revoke(clientId, refreshToken) {
      const c = clientOf(clientId);
      const out = await post("/token/revocation", c.id, c.secret, c.authMethod, { token: refreshToken, token_type_hint: "refresh_token" });
      if (out.status !== 200) throw new Error(`revocation: ${out.status}`);
    },
    async introspect(token, hint) {
      return (await post("/token/introspection", RESOURCE_CLIENT, resourceSecret, "client_secret_basic", { token, ...(hint && { token_type_hint: hint }) }))
        .body;
    },
    failNext(status) {
      failing = status;
    },
    async refreshDirectly(clientId, refreshToken) {
      const c = clientOf(clientId);
      return post("/token", c.id, c.secret, c.authMethod, { grant_type: "refresh_token", refresh_token: refreshToken });
    },
    async stop() {
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
