/** @jsxImportSource hono/jsx */
// /v1/auth/oidc and /v1/account/identities: sign-in with an identity provider (contract Authentication §10).
// Off (404 not_found) unless BROKER_OIDC_ISSUER is set, except GET /v1/auth/oidc which says so.
// Never logs codes, states, tokens or ID tokens: only the internal reason of a refused callback.

import { timingSafeEqual } from "node:crypto";
import { Hono, type Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { InvalidRequest, NotFound, Unauthorized } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { Domain, OidcClient } from "../../identity/index.ts";
import { IdentityList, OidcCliExchangeInput, OidcStatus, SignedIn } from "../../contract/index.ts";
import { beginOidc, completeOidc, exchangeCliCode, isCliNonce, isSafeReturnTo, listIdentities, publicUser, unlinkIdentity } from "../../identity/index.ts";
import { requirePrincipal } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { authTier, sessionClientOf } from "../kit/index.ts";
import { Brand, Document } from "../ui/index.ts";
import { assertSameOrigin, readForm, readSessionCookie, setPageHeaders, setSessionCookie } from "../ui/index.ts";
import { jsonBody } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";
import { bearerToken } from "../kit/index.ts";

const OFF = "identity-provider sign-in is not configured";

/**
 * The browser that starts a flow must be the one that finishes it (RFC 6749 §10.12): the state also goes
 * into a short-lived cookie only the callback path sees, and the callback refuses a state its browser
 * does not hold. Without it, a callback URL (or a link flow) started by someone else could sign a victim
 * into the attacker's account, or link the victim's provider identity to it. SameSite=Lax: the provider's
 * redirect back is a cross-site top-level navigation, which Strict would strip the cookie from.
 */
const FLOW_COOKIE_PATH = "/v1/auth/oidc/callback";

function flowCookieName(d: Domain): string {
  return d.publicUrl.startsWith("https://") ? "__Secure-broker_oidc" : "broker_oidc";
}

/** Redirects to the provider, remembering the flow's state in this browser. */
function redirectToProvider(c: Context, d: Domain, url: string, status: 302 | 303) {
  const state = new URL(url).searchParams.get("state") ?? "";
  setCookie(c, flowCookieName(d), state, { httpOnly: true, sameSite: "Lax", path: FLOW_COOKIE_PATH, maxAge: 600, secure: d.publicUrl.startsWith("https://") });
  return c.redirect(url, status);
}

/** Whether this browser started the flow whose state the callback carries. */
function startedHere(c: Context, d: Domain): boolean {
  const held = getCookie(c, flowCookieName(d)) ?? "";
  const sent = new URL(c.req.url).searchParams.get("state") ?? "";
  deleteCookie(c, flowCookieName(d), { path: FLOW_COOKIE_PATH, secure: d.publicUrl.startsWith("https://") });
  return held.length > 0 && held.length === sent.length && timingSafeEqual(Buffer.from(held), Buffer.from(sent));
}

function requireOidc(d: Domain): OidcClient {
  if (!d.oidc) throw new NotFound(OFF);
  return d.oidc;
}

export function oidcRoutes(d: Domain, log: Logger) {
  const r = new Hono<ApiEnv>();

  const tags = ["sign-in"];
  r.get(
    "/",
    describe({ summary: "Whether identity-provider sign-in is on, and the provider's name", tags, auth: "none", success: { status: 200, schema: OidcStatus } }),
    (c) => c.json(d.oidc ? { enabled: true, name: d.oidc.name } : { enabled: false }),
  );

  r.get(
    "/login",
    describe({
      summary: "Start signing in with the identity provider (redirects to it)",
      tags,
      auth: "none",
      query: { return_to: "a path on this site to land on", cli_port: "the CLI's loopback port (broker auth login --sso)", cli_nonce: "the CLI's nonce" },
      success: { status: 302, description: "Redirect to the provider" },
    }),
    authTier(d.rateLimiter),
    async (c) => {
      const o = requireOidc(d);
      const port = c.req.query("cli_port");
      const cliNonce = c.req.query("cli_nonce");
      if (port !== undefined || cliNonce !== undefined) {
        const cliPort = Number(port);
        if (!/^\d{4,5}$/.test(port ?? "") || cliPort < 1024 || cliPort > 65535)
          throw new InvalidRequest("cli_port must be a port from 1024 to 65535", "cli_port");
        if (!cliNonce || !isCliNonce(cliNonce)) throw new InvalidRequest("cli_nonce must be 43 base64url characters", "cli_nonce");
        return redirectToProvider(c, d, await beginOidc(d, o, { purpose: "cli", cliPort, cliNonce }), 302);
      }
      const returnTo = c.req.query("return_to");
      if (returnTo !== undefined && !isSafeReturnTo(returnTo)) throw new InvalidRequest("return_to must be a path on this site", "return_to");
      return redirectToProvider(c, d, await beginOidc(d, o, { purpose: "login", returnTo }), 302);
    },
  );

  r.post(
    "/link",
    describe({
      summary: "Link your account to an identity at the provider (redirects to it)",
      tags,
      auth: ["bearer", "cookie"],
      success: { status: 303, description: "Redirect to the provider" },
    }),
    authTier(d.rateLimiter),
    async (c) => {
      const o = requireOidc(d);
      return redirectToProvider(c, d, await beginOidc(d, o, { purpose: "link", principal: await linkingPrincipal(c, d) }), 303);
    },
  );

  r.get(
    "/callback",
    describe({
      summary: "Where the provider returns the browser (signs in, links, or hands the CLI a code)",
      tags,
      auth: "none",
      success: { status: 303, description: "Redirect into the console, or a page saying what failed" },
    }),
    authTier(d.rateLimiter),
    async (c) => {
      const o = requireOidc(d);
      if (!startedHere(c, d)) {
        log.info("oidc_rejected", { reason: "flow_not_started_in_this_browser" });
        return failurePage(c, o.name);
      }
      try {
        const outcome = await completeOidc(d, o, new URL(c.req.url), (reason) => log.info("oidc_rejected", { reason }), sessionClientOf(c, "oidc"));
        if (outcome.purpose === "login") {
          setSessionCookie(c, d, outcome.token.reveal()); // reveal: the browser's own new session, cookie only
          return c.redirect(outcome.returnTo, 303);
        }
        if (outcome.purpose === "link") return c.redirect("/account?linked=1", 303);
        return c.redirect(`http://127.0.0.1:${outcome.cliPort}/callback?code=${encodeURIComponent(outcome.code)}`, 303);
      } catch (err) {
        if (!(err instanceof Unauthorized)) log.warn("oidc_callback_error", { error: err instanceof Error ? err.name : "error" });
        return failurePage(c, o.name);
      }
    },
  );

  r.post(
    "/cli-exchange",
    describe({ summary: "The CLI trades its one-time code for a session", tags, auth: "none", success: { status: 200, schema: SignedIn } }),
    authTier(d.rateLimiter),
    jsonBody(OidcCliExchangeInput),
    async (c) => {
      const o = requireOidc(d);
      const { user, token } = await exchangeCliCode(d, o, c.req.valid("json"), sessionClientOf(c, "oidc_cli"));
      return c.json({ token: token.reveal(), user: publicUser(user) }); // reveal: the CLI's own new session token
    },
  );

  return r;
}

/** GET /v1/account/identities and DELETE /v1/account/identities/:id (a user session). */
export function identityRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", async (c, next) => {
    requireOidc(d);
    await next();
  });
  r.use("*", requirePrincipal(d));
  r.get(
    "/",
    describe({
      summary: "Your linked identities at the provider",
      tags: ["sign-in"],
      auth: "bearer",
      who: "user sessions",
      success: { status: 200, schema: IdentityList },
    }),
    async (c) => c.json({ identities: await listIdentities(d, c.get("principal")) }),
  );
  r.delete(
    "/:id",
    describe({ summary: "Unlink an identity", tags: ["sign-in"], auth: "bearer", who: "user sessions", success: { status: 204 } }),
    async (c) => {
      const id = Number(c.req.param("id"));
      if (!Number.isSafeInteger(id) || id <= 0) throw new NotFound("no such linked identity");
      await unlinkIdentity(d, c.get("principal"), id);
      return c.body(null, 204);
    },
  );
  return r;
}

/** A bearer user session (API), or the console cookie with a same-origin form carrying its CSRF token. */
async function linkingPrincipal(c: Context<ApiEnv>, d: Domain) {
  const bearer = bearerToken(c);
  if (bearer) return d.auth.authenticate(bearer);
  const cookie = readSessionCookie(c, d);
  if (!cookie) throw new Unauthorized("sign in first");
  try {
    assertSameOrigin(c, d, await readForm(c));
  } catch {
    throw new Unauthorized("sign in first");
  }
  return d.auth.authenticate(cookie);
}

function failurePage(c: Context, name: string) {
  setPageHeaders(c);
  return c.html(
    <Document title="Sign-in failed" colorScheme>
      <Brand />
      <main class="message">
        <h1>Sign-in failed</h1>
        <p>Sign-in with {name} failed. Try again, or sign in with your password.</p>
        <p>
          <a href="/">Back to sign-in</a>
        </p>
      </main>
    </Document>,
    401,
  );
}
