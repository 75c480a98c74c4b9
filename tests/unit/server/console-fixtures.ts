// Shared set-up for the console page tests: a cookie-keeping client of the page app (CSRF field
// filled from the cookie, every HTML page and Set-Cookie recorded) and the sign-in steps a person
// takes. Pages only through app.request(); never reaches into the store.

import { expect } from "bun:test";
import { createMemoryLogger } from "../../../src/log.ts";
import { createApi } from "../../../src/server/app.ts";
import type { Domain } from "../../../src/identity/index.ts";
import { createHarness, createVault, type Harness, PASSWORD, register } from "./fixtures.ts";

export const BASE = "http://broker.test";
export const SAME_ORIGIN = { origin: BASE, "sec-fetch-site": "same-origin" };

/** Anything that answers a Request the way a Hono app's `request()` does. */
export interface PageApp {
  request(url: string, init: RequestInit): Response | Promise<Response>;
}

export interface Page {
  method: string;
  path: string;
  status: number;
  html: string;
  headers: Headers;
}

export interface BrowserOptions {
  /** The origin requests go to (default BASE). */
  readonly base?: string;
  /** A session token to start signed in with (the console shares the API's session cookie). */
  readonly session?: string;
}

/** The CSRF cookie's value, whatever its prefix (`__Host-` under https). */
const csrfOf = (jar: Map<string, string>) => [...jar].find(([k]) => k.endsWith("broker_csrf"))?.[1];

/** A cookie-keeping client of `app`, recording every HTML page and Set-Cookie it receives. */
export function createBrowser(app: PageApp, opts: BrowserOptions = {}) {
  const base = opts.base ?? BASE;
  const jar = new Map<string, string>();
  if (opts.session) jar.set("broker_session", opts.session);
  const pages: Page[] = [];
  const setCookies: string[] = [];

  async function send(method: string, path: string, form?: Record<string, string>, extra: Record<string, string> = {}, csrf = true) {
    const headers: Record<string, string> = { accept: "text/html", ...extra };
    if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
    let body: string | undefined;
    if (form) {
      headers["content-type"] = "application/x-www-form-urlencoded";
      body = new URLSearchParams({ ...(csrf ? { csrf: csrfOf(jar) ?? "" } : {}), ...form }).toString();
    }
    const res = await app.request(`${base}${path}`, { method, headers, body });
    for (const sc of res.headers.getSetCookie()) keepCookie(jar, sc, setCookies);
    const text = await res.text();
    if ((res.headers.get("content-type") ?? "").startsWith("text/html")) pages.push({ method, path, status: res.status, html: text, headers: res.headers });
    return { status: res.status, text, headers: res.headers, location: res.headers.get("location") };
  }

  const get = (path: string, headers: Record<string, string> = {}) => send("GET", path, undefined, headers);
  const post = (path: string, form: Record<string, string>, headers: Record<string, string> = SAME_ORIGIN, csrf = true) =>
    send("POST", path, form, headers, csrf);
  /** Posts as a person would (a page first for the CSRF cookie) and follows a 303 to the page it shows, flash included. */
  async function submit(path: string, form: Record<string, string>) {
    if (csrfOf(jar) === undefined) await get("/");
    const res = await post(path, form);
    if (res.status !== 303) return res;
    return { ...(await get(res.location!)), location: res.location };
  }
  return { jar, pages, setCookies, get, post, submit };
}
export type Browser = ReturnType<typeof createBrowser>;

function keepCookie(jar: Map<string, string>, setCookie: string, seen: string[]): void {
  seen.push(setCookie);
  const [pair = ""] = setCookie.split(";");
  const name = pair.slice(0, pair.indexOf("="));
  const value = pair.slice(pair.indexOf("=") + 1);
  if (/max-age=0/i.test(setCookie) || value === "") jar.delete(name);
  else jar.set(name, value);
}

/** A browser of a fresh page app on `domain`, with that app's log lines. */
export function createPageBrowser(domain: Domain, base = BASE) {
  const log = createMemoryLogger();
  return { ...createBrowser(createApi({ domain, log }), { base }), logs: log.lines };
}
export type PageBrowser = ReturnType<typeof createPageBrowser>;

export const sessionOf = (browser: Browser) => browser.jar.get("broker_session");

/** Opens the sign-in page, then posts the registration form. */
export async function registerInPage(browser: Browser, email: string, password = PASSWORD) {
  await browser.get("/");
  return browser.post("/register", { email, password, password_again: password });
}

/** Opens the sign-in page, then posts the sign-in form. */
export async function signInPage(browser: Browser, email: string, password = PASSWORD) {
  await browser.get("/");
  return browser.post("/login", { email, password });
}

/** A new page browser on `h`, signed in as `email` (asserted). */
export async function signIn(h: Harness, email: string, password = PASSWORD): Promise<PageBrowser> {
  const browser = createPageBrowser(h.domain);
  expect((await signInPage(browser, email, password)).status).toBe(303);
  return browser;
}

/** A fresh harness whose owner (owner@example.com) has created `vault` and is signed in to the console. */
export async function setUpOwnerConsole(vault = "v1"): Promise<{ h: Harness; owner: string; b: PageBrowser }> {
  const h = await createHarness();
  const owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, vault);
  return { h, owner, b: await signIn(h, "owner@example.com") };
}
