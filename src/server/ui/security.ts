// Security of every server-rendered page (approval page and console): the response headers, the
// cookies (session, CSRF, flash) and the check every form post passes. One place, so a page cannot
// forget a header or skip the CSRF check. Never logs or renders a cookie value.

import { timingSafeEqual } from "node:crypto";
import type { Context, MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { Domain } from "../../identity/index.ts";
import { randomBytes } from "../../crypto/index.ts";
import { readCappedText } from "../kit/index.ts";

/** No inline code of any kind; scripts (where a page opts in) only from our own origin. */
const BASE_CSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
const SCRIPT_CSP = `${BASE_CSP}; script-src 'self'; connect-src 'self'`;

/** Form posts are small: a bigger body is refused before it is held in memory. */
export const MAX_FORM_BYTES = 64 * 1024;
/** The user session lives as long as the API's idle limit allows; the server decides validity, not the cookie. */
const SESSION_MAX_AGE_SEC = 30 * 86_400;

export interface PageHeaderOptions {
  /** Allow `script-src 'self'` (and `connect-src 'self'`) for a page that loads a small external script. */
  readonly scripts?: boolean;
  /**
   * Origins a form on the page may end up at beside our own: form-action also covers the redirects after
   * a post (the identity provider's link flow answers a same-origin post with a 303 to the provider).
   */
  readonly formTargets?: readonly string[];
}

/** The headers every HTML response carries (app.ts adds nosniff and the rest to every response too). */
export function setPageHeaders(c: Context, opts: PageHeaderOptions = {}): void {
  const csp = opts.scripts ? SCRIPT_CSP : BASE_CSP;
  const targets = (opts.formTargets ?? []).map((t) => new URL(t).origin).filter((o) => o !== "null"); // an origin only: no path, space or ';'
  c.header("content-security-policy", targets.length ? csp.replace("form-action 'self'", `form-action 'self' ${targets.join(" ")}`) : csp);
  c.header("x-frame-options", "DENY");
  c.header("x-content-type-options", "nosniff");
  c.header("referrer-policy", "no-referrer");
  c.header("cache-control", "no-store");
  c.header("cross-origin-opener-policy", "same-origin");
}

/** Middleware: page headers on whatever a page route answers, error pages included. */
export function pageHeaders(opts: PageHeaderOptions = {}): MiddlewareHandler {
  return async (c, next) => {
    await next();
    if ((c.res.headers.get("content-type") ?? "").startsWith("text/html")) setPageHeaders(c, opts);
  };
}

/** Secure cookies (and the `__Host-` prefix, which forbids Domain and any path but /) when served over TLS. */
export function isSecure(d: Domain): boolean {
  return d.publicUrl.startsWith("https://");
}

export type CookieKind = "session" | "csrf" | "flash";

/** `broker_session`, or `__Host-broker_session` under https (a sibling sub-domain cannot plant or shadow it). */
export function cookieName(d: Domain, kind: CookieKind): string {
  return `${isSecure(d) ? "__Host-" : ""}broker_${kind}`;
}

function cookieOptions(d: Domain, maxAge?: number) {
  return { httpOnly: true, sameSite: "Strict", path: "/", secure: isSecure(d), ...(maxAge === undefined ? {} : { maxAge }) } as const;
}

export function setPageCookie(c: Context, d: Domain, kind: CookieKind, value: string, maxAgeSec?: number): void {
  setCookie(c, cookieName(d, kind), value, cookieOptions(d, maxAgeSec));
}

export function readPageCookie(c: Context, d: Domain, kind: CookieKind): string | undefined {
  return getCookie(c, cookieName(d, kind));
}

export function clearPageCookie(c: Context, d: Domain, kind: CookieKind): void {
  deleteCookie(c, cookieName(d, kind), cookieOptions(d));
}

/** Signs the browser in: the token goes only into an HttpOnly, SameSite=Strict cookie shared by every page. */
export function setSessionCookie(c: Context, d: Domain, token: string): void {
  setPageCookie(c, d, "session", token, SESSION_MAX_AGE_SEC);
}

/** The raw session token from the cookie, if any (validity is the authenticator's business). */
export function readSessionCookie(c: Context, d: Domain): string | undefined {
  return readPageCookie(c, d, "session");
}

const CSRF_SHAPE = /^[A-Za-z0-9_-]{43}$/;

/** The CSRF token of this browser: the cookie's, or a fresh one set now. Forms carry it as `csrf`. */
export function csrfToken(c: Context, d: Domain): string {
  const existing = readPageCookie(c, d, "csrf");
  if (existing && CSRF_SHAPE.test(existing)) return existing;
  const fresh = Buffer.from(randomBytes(32)).toString("base64url");
  setPageCookie(c, d, "csrf", fresh);
  return fresh;
}

/** A form post that did not come from one of our own pages. */
export class CsrfRejected extends Error {
  constructor() {
    super("cross-site form post refused");
  }
}

/** Throws CsrfRejected unless the post is same-origin and echoes the CSRF cookie in its `csrf` field. */
export function assertSameOrigin(c: Context, d: Domain, form: Record<string, unknown>): void {
  const origin = c.req.header("origin");
  const site = c.req.header("sec-fetch-site");
  const own = new URL(c.req.url).origin;
  const cookie = readPageCookie(c, d, "csrf") ?? "";
  const sent = typeof form.csrf === "string" ? form.csrf : "";
  // Only a token this server could have minted counts: a cookie planted by a sibling origin (`x`) does not.
  const tokensMatch = CSRF_SHAPE.test(cookie) && cookie.length === sent.length && timingSafeEqual(Buffer.from(cookie), Buffer.from(sent));
  // Under Referrer-Policy: no-referrer, Chromium sends `Origin: null` even for same-origin posts;
  // accept that only when the browser itself vouches for the same origin (Sec-Fetch-Site).
  const originOk = !origin || origin === own || origin === publicOrigin(d) || (origin === "null" && site === "same-origin");
  if (!originOk || (site && site !== "same-origin" && site !== "none") || !tokensMatch) throw new CsrfRejected();
}

function publicOrigin(d: Domain): string | undefined {
  try {
    return new URL(d.publicUrl).origin;
  } catch {
    return undefined;
  }
}

/** Reads an urlencoded form body, capped at MAX_FORM_BYTES. Repeated names keep the last value. */
export async function readForm(c: Context): Promise<Record<string, string>> {
  const text = await readCappedText(c, MAX_FORM_BYTES);
  return Object.fromEntries(new URLSearchParams(text));
}
