// The web console's foundation through app.request(): first-user registration, sign-in (wrong
// password, throttle), sign-out (server-side), the allowed-domains rule, CSRF refusals, the page
// security headers on every HTML response, JSON kept for API clients, the session cookie shared
// with the approval page, the password change, and a stored sentinel value never in any page.

import { beforeEach, describe, expect, test } from "bun:test";
import { addAgent, createHarness, createVault, type Harness, PASSWORD, register, sentinel, setCredential } from "./fixtures.ts";
import { createPageBrowser, type PageBrowser, registerInPage, SAME_ORIGIN, sessionOf, signInPage } from "./console-fixtures.ts";

let h: Harness;
let b: PageBrowser;
beforeEach(async () => {
  h = await createHarness();
  b = createPageBrowser(h.domain);
});

describe("sign-in, registration, sign-out", () => {
  test("a fresh instance offers the owner registration; it signs the browser in", async () => {
    const first = await b.get("/");
    expect(first.status).toBe(200);
    expect(first.text).toContain("Create the owner account");
    const res = await registerInPage(b, "owner@example.com");
    expect(res.status).toBe(303);
    expect(res.location).toBe("/");
    const cookie = b.setCookies.find((c) => c.startsWith("broker_session="))!;
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Strict/i);
    expect(cookie).toMatch(/Path=\//);
    expect(cookie).not.toMatch(/Secure/);
    const who = await h.call("GET", "/v1/auth/whoami", { token: sessionOf(b) });
    expect(who.body.user).toEqual({ id: expect.any(Number), email: "owner@example.com", role: "owner" });
    const home = await b.get("/");
    expect(home.text).toContain("You are the owner of this broker");
    expect(home.text).toContain("No vaults yet");
    expect((await b.get("/")).text).not.toContain("You are the owner"); // the flash shows once
  });

  test("the two registration passwords must match; nothing is created otherwise", async () => {
    await b.get("/");
    const res = await b.post("/register", { email: "owner@example.com", password: PASSWORD, password_again: "something else" });
    expect(res.status).toBe(400);
    expect(res.text).toContain("The two passwords differ");
    expect(res.text).toContain('value="owner@example.com"');
    expect(await h.store.users.count()).toBe(0);
  });

  test("later registrations obey the allowed domains, as POST /v1/auth/register does", async () => {
    const owner = (await register(h, "owner@example.com")).token;
    expect((await h.call("PATCH", "/v1/owner/settings", { token: owner, body: { allowed_domains: ["example.com"] } })).status).toBe(200);
    const page = await b.get("/");
    expect(page.text).toContain("Sign in");
    expect(page.text).not.toContain("Create the owner account");
    const refused = await registerInPage(b, "eve@elsewhere.org");
    expect(refused.status).toBe(403);
    expect(refused.text).toContain("Sign-ups from this email domain are not allowed");
    expect(refused.text).toContain('value="eve@elsewhere.org"');
    expect(sessionOf(b)).toBeUndefined();
    const ok = await registerInPage(b, "bob@example.com");
    expect(ok.status).toBe(303);
    expect((await h.call("GET", "/v1/auth/whoami", { token: sessionOf(b) })).body.user.role).toBe("member");
  });

  test("a wrong password keeps the email and sets no session; the right one signs in; sign-out revokes server-side", async () => {
    await register(h, "owner@example.com");
    const bad = await signInPage(b, "owner@example.com", "wrong password 1");
    expect(bad.status).toBe(401);
    expect(bad.text).toContain("do not match an account");
    expect(bad.text).toContain('value="owner@example.com"');
    expect(bad.text).not.toContain("wrong password 1");
    expect(sessionOf(b)).toBeUndefined();

    const good = await signInPage(b, "owner@example.com");
    expect(good.status).toBe(303);
    const token = sessionOf(b)!;
    expect((await h.call("GET", "/v1/auth/whoami", { token })).status).toBe(200);
    expect((await b.get("/")).text).toContain("Your vaults");

    const out = await b.post("/logout", {});
    expect(out.status).toBe(303);
    expect(out.location).toBe("/");
    expect(sessionOf(b)).toBeUndefined();
    expect((await h.call("GET", "/v1/auth/whoami", { token })).status).toBe(401);
    const after = await b.get("/");
    expect(after.text).toContain("You are signed out.");
    expect(after.text).toContain('action="/login"');
  });

  test("the sign-in throttle's 429 is shown politely with the wait", async () => {
    await register(h, "owner@example.com");
    let last = await signInPage(b, "owner@example.com", "wrong password 0");
    for (let i = 1; i < 8 && last.status !== 429; i++) last = await b.post("/login", { email: "owner@example.com", password: `wrong password ${i}` });
    expect(last.status).toBe(429);
    expect(Number(last.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(last.text).toMatch(/Too many failed sign-in attempts\. For your account&#39;s safety, wait \d+ seconds? before trying again\./);
    expect(last.text).toContain('value="owner@example.com"');
  });

  test("signed-out visitors of signed-in pages are sent to /", async () => {
    for (const path of ["/account", "/vaults/v1"]) {
      const res = await b.get(path);
      expect({ path, status: res.status, location: res.location }).toEqual({ path, status: 303, location: "/" });
    }
  });
});

describe("vaults and account", () => {
  test("create a vault from the form (the API's createVault); a bad name is a flash, not a crash", async () => {
    await registerInPage(b, "owner@example.com");
    const made = await b.post("/vaults", { name: "payments" });
    expect(made.status).toBe(303);
    expect(made.location).toBe("/vaults/payments");
    const overview = await b.get("/vaults/payments");
    expect(overview.text).toContain("Vault payments created. You are its admin.");
    expect(overview.text).toContain('href="/vaults/payments/credentials"');
    expect((await b.get("/")).text).toContain('href="/vaults/payments"');
    const dup = await b.post("/vaults", { name: "payments" });
    expect(dup.location).toBe("/");
    expect((await b.get("/")).text).toContain("A vault named payments already exists.");
    await b.post("/vaults", { name: "<b>Bad</b>" });
    const bad = await b.get("/");
    expect(bad.text).toContain("flash-error");
    expect(bad.text).not.toContain("<b>Bad</b>");
  });

  test("a vault the person cannot use is a 404 page, like the API", async () => {
    const owner = (await register(h, "owner@example.com")).token;
    await createVault(h, owner, "hidden");
    await registerInPage(b, "bob@example.com");
    const res = await b.get("/vaults/hidden");
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toStartWith("text/html");
    expect(res.text).toContain("Vault not found (or you have no access to it).");
    const none = await b.get("/settings/no-such-page");
    expect(none.status).toBe(404);
    expect(none.text).toContain("There is no page at this address.");
  });

  test("changing the password ends every session, this browser's too; the new one signs in", async () => {
    await registerInPage(b, "owner@example.com");
    const cli = (await h.call("POST", "/v1/auth/login", { body: { email: "owner@example.com", password: PASSWORD } })).body.token;
    const wrong = await b.post("/account/password", {
      current_password: "not it at all",
      new_password: "new password 42",
      new_password_again: "new password 42",
    });
    expect(wrong.location).toBe("/account");
    expect((await b.get("/account")).text).toContain("The current password is not right");
    const res = await b.post("/account/password", { current_password: PASSWORD, new_password: "new password 42", new_password_again: "new password 42" });
    expect(res.status).toBe(303);
    expect(res.location).toBe("/");
    expect(sessionOf(b)).toBeUndefined();
    expect((await h.call("GET", "/v1/auth/whoami", { token: cli })).status).toBe(401);
    expect((await h.domain.store.sessions.activeForUser(1, h.clock.now(), 0, 100)).filter((s) => s.revokedAt === null)).toEqual([]);
    expect((await b.get("/")).text).toContain("Password changed.");
    expect((await signInPage(b, "owner@example.com", "new password 42")).status).toBe(303);
  });

  test("sessions are listed and revoked from the account page", async () => {
    await registerInPage(b, "owner@example.com");
    const cli = (await h.call("POST", "/v1/auth/login", { body: { email: "owner@example.com", password: PASSWORD } })).body.token;
    const page = await b.get("/account");
    expect(page.text).toContain("this browser");
    const ids = [...page.text.matchAll(/action="\/account\/sessions\/(ses_[^/"]+)\/revoke"/g)].map((m) => m[1]!);
    expect(ids.length).toBe(2);
    const me = (await h.call("GET", "/v1/auth/whoami", { token: sessionOf(b) })).body.session.id;
    const other = ids.find((id) => id !== me)!;
    expect((await b.post(`/account/sessions/${other}/revoke`, {})).location).toBe("/account");
    expect((await h.call("GET", "/v1/auth/whoami", { token: cli })).status).toBe(401);
    expect((await b.get("/account")).text).toContain("Session revoked.");
    const self = await b.post(`/account/sessions/${me}/revoke`, {});
    expect(self.location).toBe("/");
    expect(sessionOf(b)).toBeUndefined();
  });
});

describe("page security", () => {
  test("cross-site or token-less posts are refused and change nothing", async () => {
    await registerInPage(b, "owner@example.com");
    const attempts: [Record<string, string>, boolean][] = [
      [{ origin: "http://evil.example" }, true],
      [{ "sec-fetch-site": "cross-site" }, true],
      [{ origin: "null", "sec-fetch-site": "cross-site" }, true],
      [SAME_ORIGIN, false], // no csrf field
    ];
    for (const [headers, withCsrf] of attempts) {
      const res = await b.post("/vaults", { name: "csrf-test" }, headers, withCsrf);
      expect({ headers, status: res.status }).toEqual({ headers, status: 403 });
      expect(res.text).toContain("Form refused");
    }
    const forged = await b.post("/vaults", { name: "csrf-test", csrf: "A".repeat(43) });
    expect(forged.status).toBe(403);
    expect(await h.store.vaults.byName("csrf-test")).toBeUndefined();
    const token = sessionOf(b)!;
    expect((await b.post("/logout", {}, { origin: "http://evil.example" })).status).toBe(403);
    expect((await h.call("GET", "/v1/auth/whoami", { token })).status).toBe(200);
    // The sign-in form is checked the same way (no login CSRF).
    const fresh = createPageBrowser(h.domain);
    await fresh.get("/");
    expect((await fresh.post("/login", { email: "owner@example.com", password: PASSWORD }, { "sec-fetch-site": "cross-site" })).status).toBe(403);
    expect(sessionOf(fresh)).toBeUndefined();
  });

  test("every HTML response carries the page security headers", async () => {
    await b.get("/");
    await b.post("/register", { email: "owner@example.com", password: PASSWORD, password_again: "nope nope nope" });
    await registerInPage(b, "owner@example.com");
    await b.post("/vaults", { name: "v1" });
    for (const path of ["/", "/account", "/vaults/v1", "/vaults/nope"]) await b.get(path);
    await b.post("/vaults", { name: "x" }, { origin: "http://evil.example" });
    expect(b.pages.length).toBeGreaterThanOrEqual(8);
    for (const p of b.pages) {
      const csp = p.headers.get("content-security-policy") ?? "";
      const where = `${p.path} ${p.status}`;
      expect({ where, csp }).toEqual({ where, csp: expect.stringContaining("default-src 'none'") });
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("form-action 'self'");
      expect(csp).not.toContain("unsafe-inline");
      expect(p.headers.get("cache-control")).toBe("no-store");
      expect(p.headers.get("x-content-type-options")).toBe("nosniff");
      expect(p.headers.get("referrer-policy")).toBe("no-referrer");
      expect(p.headers.get("x-frame-options")).toBe("DENY");
      expect(p.html).not.toContain("<script");
      expect(p.html).not.toMatch(/ style=/);
    }
  });

  test("API clients keep JSON: Accept: application/json on console paths, and every /v1 path", async () => {
    for (const path of ["/", "/account", "/vaults/v1"]) {
      const res = await b.get(path, { accept: "application/json" });
      expect({ path, status: res.status, type: res.headers.get("content-type") }).toEqual({ path, status: 404, type: "application/json; charset=utf-8" });
      expect(JSON.parse(res.text).error).toBe("not_found");
    }
    const api = await b.get("/v1/no-such-thing");
    expect(api.headers.get("content-type")).toStartWith("application/json");
    expect((await h.call("GET", "/v1/vaults")).status).toBe(401);
    expect((await h.call("GET", "/v1/vaults")).headers.get("content-type")).toStartWith("application/json");
  });

  test("under https the cookies are Secure with the __Host- prefix", async () => {
    const tls = createPageBrowser({ ...h.domain, publicUrl: "https://broker.test" }, "https://broker.test");
    await tls.get("/");
    await tls.post(
      "/register",
      { email: "owner@example.com", password: PASSWORD, password_again: PASSWORD },
      { origin: "https://broker.test", "sec-fetch-site": "same-origin" },
    );
    const names = tls.setCookies.map((c) => c.slice(0, c.indexOf("=")));
    expect(names).toContain("__Host-broker_session");
    expect(names).toContain("__Host-broker_csrf");
    for (const c of tls.setCookies) {
      expect(c).toMatch(/; Secure/);
      expect(c).toMatch(/Path=\//);
      expect(c).not.toMatch(/Domain=/i);
    }
    expect((await tls.get("/")).text).toContain("Your vaults");
  });

  test("one session cookie for the console and the approval page", async () => {
    await registerInPage(b, "owner@example.com");
    await b.post("/vaults", { name: "v1" });
    const agent = await addAgent(h, sessionOf(b)!, "v1", "admin", "bot");
    const filed = await h.call("POST", "/v1/proposals", {
      token: agent.token,
      headers: agent.headers,
      body: { services: [{ host: "api.example.com", auth: { type: "bearer", token: "K" } }], credentials: [{ key: "K" }] },
    });
    expect(filed.status).toBe(201);
    const url = new URL(filed.body.approval_url);
    const page = await b.get(`${url.pathname}${url.search}`);
    expect(page.text).toContain('value="allow"'); // signed in already: the decision form, not the sign-in form
    expect(page.text).not.toContain("Sign in to decide");
  });

  test("a stored credential value appears in no page", async () => {
    const secret = sentinel("console");
    await registerInPage(b, "owner@example.com");
    await b.post("/vaults", { name: "v1" });
    await setCredential(h, { token: sessionOf(b)! }, "v1", "API_KEY", secret);
    for (const path of ["/", "/account", "/vaults/v1"]) await b.get(path);
    await b.post("/logout", {});
    await b.get("/");
    expect(b.pages.length).toBeGreaterThan(4);
    for (const p of b.pages) expect({ path: p.path, leaked: p.html.includes(secret) }).toEqual({ path: p.path, leaked: false });
    for (const line of b.logs) expect(line.includes(secret)).toBe(false);
  });
});
