/** @jsxImportSource hono/jsx */
// What every console route runs inside: the page headers, the signed-in user (from the session
// cookie the approval page shares), the CSRF check of every POST, the flash message, and helpers
// to render a page and to run a form action through the same domain functions as the JSON API,
// turning a BrokerError into a flash message. Never renders a cookie or credential value.

import type { Context, MiddlewareHandler } from "hono";
import type { Child } from "hono/jsx";
import { BrokerError, InvalidRequest, NotFound, RateLimited, toErrorResponse, Unauthorized } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { Domain, OpenVault, Principal, UserPrincipal, VaultAction } from "../../identity/index.ts";
import { openVault } from "../../identity/index.ts";
import type { ConnectDeps, PendingSummary } from "../../workflows/index.ts";
import { summariseVault } from "../../workflows/index.ts";
import { enforce } from "../kit/index.ts";
import { assertSameOrigin, CsrfRejected, csrfToken, readForm, readSessionCookie, setPageHeaders } from "../ui/index.ts";
import { CONFIRM_FIELD } from "../ui/index.ts";
import { createFlashSigner, type Flash, type FlashKind, type FlashSigner } from "./flash.ts";
import { Layout, type LayoutProps } from "./layout.tsx";

export interface ConsoleKit {
  readonly d: Domain;
  readonly log: Logger;
  readonly flash: FlashSigner;
  /** Connecting accounts at templates' providers; absent when no provider is set up. */
  readonly connect?: ConnectDeps;
}

export type ConsoleEnv = {
  Variables: {
    kit: ConsoleKit;
    /** The signed-in person; undefined when signed out (requireSignedIn guarantees it). */
    user: UserPrincipal | undefined;
    /** The same principal, under the name the API's helpers read. Set only when signed in. */
    principal: Principal;
    csrf: string;
    flash: Flash | undefined;
    /** The posted form (POST only), already checked for CSRF. */
    form: Record<string, string>;
  };
};

export type ConsoleContext = Context<ConsoleEnv>;

/** A JSON client (Accept names JSON, not HTML) keeps the API's JSON answers on console paths. */
export function wantsJson(c: Context): boolean {
  const accept = (c.req.header("accept") ?? "").toLowerCase();
  return accept.includes("application/json") && !accept.includes("text/html");
}

/** Sets up a console request; every console path runs it first (see routes.tsx). */
export function consoleContext(d: Domain, log: Logger, extra: { connect?: ConnectDeps; flash?: FlashSigner } = {}): MiddlewareHandler<ConsoleEnv> {
  const kit: ConsoleKit = { d, log, flash: extra.flash ?? createFlashSigner(d), connect: extra.connect };
  return async (c, next) => {
    if (wantsJson(c)) return toErrorResponse(new NotFound("no such endpoint"), log);
    c.set("kit", kit);
    c.set("csrf", csrfToken(c, d));
    c.set("flash", kit.flash.take(c));
    const user = await sessionUser(c, d);
    c.set("user", user);
    if (user) {
      c.set("principal", user);
      if (d.rateLimiter) enforce(d.rateLimiter.check("AUTHED", user.id)); // the API's per-session budget
    }
    if (c.req.method === "POST") {
      const form = await readForm(c);
      try {
        assertSameOrigin(c, d, form);
      } catch (err) {
        if (!(err instanceof CsrfRejected)) throw err;
        return renderMessage(
          c,
          "Form refused",
          "This form was not sent from a page of this broker, so nothing was changed. Go back, reload the page and try again.",
          403,
        );
      }
      c.set("form", form);
    }
    await next();
    // A page rendered with renderPage already set its headers (maybe allowing its script): keep them.
    if ((c.res.headers.get("content-type") ?? "").startsWith("text/html") && !c.res.headers.has("content-security-policy")) setPageHeaders(c);
  };
}

/** The user behind the session cookie; agents' and scoped tokens never sign a browser in. */
async function sessionUser(c: Context, d: Domain): Promise<UserPrincipal | undefined> {
  const token = readSessionCookie(c, d);
  if (!token) return undefined;
  const p = await d.auth.authenticate(token).catch(() => undefined);
  return p?.kind === "user" ? p : undefined;
}

/** Route guard: signed-out visitors are sent to the sign-in page at `/`. */
export const requireSignedIn: MiddlewareHandler<ConsoleEnv> = async (c, next) => {
  if (!c.get("user")) {
    if (c.req.method !== "GET") c.get("kit").flash.write(c, { kind: "info", text: "Your session has ended. Sign in again." });
    return c.redirect("/", 303);
  }
  await next();
};

/** The signed-in user of a route behind requireSignedIn. */
export function signedIn(c: ConsoleContext): UserPrincipal {
  const user = c.get("user");
  if (!user) throw new Unauthorized("sign in first");
  return user;
}

/** Opens the `:vault` of the path for the signed-in user, exactly as the API's openVaultFor does. */
export function openConsoleVault(c: ConsoleContext, action: VaultAction): Promise<OpenVault> {
  return openVault(c.get("kit").d, signedIn(c), c.req.param("vault") ?? "", action);
}

export interface PageOptions extends Omit<LayoutProps, "csrf" | "user" | "flash" | "children"> {
  readonly status?: 200 | 400 | 401 | 403 | 404 | 409 | 413 | 429 | 500 | 503;
  /** Serve with `script-src 'self'` (for a page that sets `script`). */
  readonly scripts?: boolean;
  /** Other origins this page's forms may be redirected to (see PageHeaderOptions.formTargets). */
  readonly formTargets?: readonly string[];
}

/**
 * Renders `body` inside the console layout with the user, CSRF token and flash of this request; a vault
 * page's tabs get the vault's pending counts (unless the page brought them).
 */
export async function renderPage(c: ConsoleContext, opts: PageOptions, body: Child): Promise<Response> {
  const user = c.get("user");
  const { status = 200, scripts, formTargets, ...layout } = opts;
  const vault = layout.vault && user && !layout.vault.pending ? { ...layout.vault, pending: await pendingOf(c, user, layout.vault.name) } : layout.vault;
  setPageHeaders(c, { scripts, formTargets });
  const props = {
    ...layout,
    vault,
    csrf: c.get("csrf") ?? "",
    flash: c.get("flash"),
    user: user && { email: user.email, owner: user.instanceRole === "owner" },
  };
  return c.html(<Layout {...props}>{body}</Layout>, status);
}

/** The tabs' badges: a count is decoration, so one that cannot be read (the vault just went) is left off. */
async function pendingOf(c: ConsoleContext, user: UserPrincipal, vault: string): Promise<PendingSummary | undefined> {
  const d = c.get("kit").d;
  return openVault(d, user, vault, "read")
    .then((open) => summariseVault(d, open))
    .catch(() => undefined);
}

/** A page that only says something (errors, refusals). */
export function renderMessage(c: ConsoleContext, title: string, message: string, status: PageOptions["status"] = 200): Response | Promise<Response> {
  return renderPage(c, { title, status, nav: undefined }, <p id="message">{message}</p>);
}

/** Redirects (303, post-redirect-get) with a flash message to show on the next page. */
export function redirectWithFlash(c: ConsoleContext, to: string, kind: FlashKind, text: string): Response {
  c.get("kit").flash.write(c, { kind, text });
  return c.redirect(to, 303);
}

/** A BrokerError as a sentence for a person: the API's message, capitalised, the wait spelled out. */
export function describeError(err: BrokerError): string {
  if (err instanceof RateLimited) return `Too many attempts. Try again in ${plural(err.retryAfterSec, "second")}.`;
  const text = err.message.charAt(0).toUpperCase() + err.message.slice(1);
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

export interface ActionOptions<T> {
  /** The domain call(s), the same ones the JSON API makes; may throw BrokerError. */
  readonly run: () => Promise<T>;
  /** Flash text on success. */
  readonly success: string | ((result: T) => string);
  /** Where to go after success. */
  readonly redirect: string | ((result: T) => string);
  /** Where to go when the domain refuses (default: `redirect` when it is a string, else the current path). */
  readonly failure?: string;
}

/**
 * Runs a form action and answers with a 303: success → flash + `redirect`; a BrokerError (refused,
 * invalid, conflict, rate limited) → its message as an error flash + `failure`. Anything else is a
 * bug and becomes the generic error page.
 */
export async function runAction<T>(c: ConsoleContext, opts: ActionOptions<T>): Promise<Response> {
  try {
    const result = await opts.run();
    const text = typeof opts.success === "function" ? opts.success(result) : opts.success;
    return redirectWithFlash(c, typeof opts.redirect === "function" ? opts.redirect(result) : opts.redirect, "success", text);
  } catch (err) {
    if (!(err instanceof BrokerError)) throw err;
    const back = opts.failure ?? (typeof opts.redirect === "string" ? opts.redirect : new URL(c.req.url).pathname);
    return redirectWithFlash(c, back, "error", describeError(err));
  }
}

/** The posted form of this request (POST routes only; CSRF already checked). */
export function formOf(c: ConsoleContext): Record<string, string> {
  return c.get("form") ?? {};
}

/** Throws unless the ConfirmForm's field holds exactly `phrase` (the server-side half of the typed confirmation). */
export function requireConfirmation(c: ConsoleContext, phrase: string): void {
  if ((formOf(c)[CONFIRM_FIELD] ?? "").trim() !== phrase) throw new InvalidRequest(`type ${phrase} exactly to confirm`, CONFIRM_FIELD);
}

/** Console error handler: a page for a person, never the JSON envelope or a stack trace. */
export function renderError(c: ConsoleContext, err: unknown): Response | Promise<Response> {
  if (wantsJson(c)) return toErrorResponse(err, c.get("kit")?.log);
  if (!c.get("csrf")) c.set("csrf", "");
  if (err instanceof BrokerError) {
    for (const [k, v] of Object.entries(err.headers())) c.header(k, v);
    const title = err.status === 404 ? "Not found" : err.status === 429 ? "Slow down" : err.status === 403 ? "Not allowed" : "Something went wrong";
    return renderMessage(c, title, describeError(err), statusOf(err.status));
  }
  c.get("kit")?.log.error("unhandled_error", { err });
  return renderMessage(
    c,
    "Something went wrong",
    "The broker hit an internal error. Nothing secret was shown; try again, and tell the operator if it keeps happening.",
    500,
  );
}

function statusOf(s: number): NonNullable<PageOptions["status"]> {
  const known = [400, 401, 403, 404, 409, 413, 429, 500, 503] as const;
  return (known as readonly number[]).includes(s) ? (s as NonNullable<PageOptions["status"]>) : 400;
}
