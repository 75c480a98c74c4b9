// Approving proposals: through the API (who may, values required, concurrency) and on the
// /approve page (token lifetime, escaping of agent text, security headers, CSRF, sign-in, cookie
// principals). Credential values are checked against every response, page and log line.

import { beforeEach, describe, expect, test } from "bun:test";
import { createApi } from "../../../src/server/app.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import {
  addAgent,
  addUser,
  createHarness,
  createVault,
  expectNoLeak,
  headerPairs,
  HOUR,
  type Harness,
  MINUTE,
  mintScoped,
  PASSWORD,
  register,
  sentinel,
  setCredential,
} from "./fixtures.ts";

let h: Harness;
let owner: string;
let agent: { token: string; headers: Record<string, string> };
let page: ReturnType<typeof createApi>;
let pageLogs: string[];
const pages: string[] = []; // every page body and its headers

beforeEach(async () => {
  h = await createHarness();
  const log = createMemoryLogger();
  pageLogs = log.lines;
  page = createApi({ domain: h.domain, log }); // the same domain, for raw form posts and cookies
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  agent = await addAgent(h, owner, "v1", "admin", "bot");
});

const propose = (body: unknown) => h.call("POST", "/v1/proposals", { token: agent.token, headers: agent.headers, body });
const approve = (id: number, token: string, credentials: Record<string, string>, headers?: Record<string, string>) =>
  h.call("POST", `/v1/proposals/${id}/approve`, { token, headers, body: { credentials } });

async function fileOne(extra: Record<string, unknown> = {}) {
  const res = await propose({
    services: [{ action: "set", host: "api.example.com", description: "Example", auth: { type: "bearer", token: "NEW_KEY" } }],
    credentials: [{ action: "set", key: "NEW_KEY", description: "The key", obtain: "https://example.com/keys" }],
    ...extra,
  });
  expect(res.status).toBe(201);
  const url = new URL(res.body.approval_url);
  return { id: res.body.id as number, token: url.searchParams.get("token") as string, pagePath: `${url.pathname}${url.search}` };
}

/** Sends a request to the page app; records body and headers for leak checks. */
async function raw(
  method: string,
  path: string,
  opts: { form?: Record<string, string>; cookies?: Record<string, string>; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.cookies)
    headers.cookie = Object.entries(opts.cookies)
      .map(([k, v]) => `${k}=${v}`)
      .join("; ");
  if (opts.form) headers["content-type"] = "application/x-www-form-urlencoded";
  const res = await page.request(path, { method, headers, body: opts.form ? new URLSearchParams(opts.form).toString() : undefined });
  const text = await res.text();
  pages.push(text, JSON.stringify(headerPairs(res.headers)));
  return { status: res.status, text, headers: res.headers, cookies: res.headers.getSetCookie() };
}

function cookieValue(setCookies: string[], name: string): string | undefined {
  const c = setCookies.find((s) => s.startsWith(`${name}=`));
  return c?.slice(name.length + 1).split(";")[0];
}

/** Opens the page anonymously: its CSRF cookie and the matching hidden field. */
async function openPage(pagePath: string, cookies: Record<string, string> = {}) {
  const res = await raw("GET", pagePath, { cookies });
  expect(res.status).toBe(200);
  const csrf = cookies.broker_csrf ?? cookieValue(res.cookies, "broker_csrf") ?? "";
  expect(res.text).toContain(`name="csrf" value="${csrf}"`);
  return { ...res, csrf };
}

const SAME_ORIGIN = { origin: "http://localhost", "sec-fetch-site": "same-origin" };

async function signIn(id: number, token: string, pagePath: string, email: string) {
  const { csrf } = await openPage(pagePath);
  const res = await raw("POST", `/approve/${id}/login`, {
    form: { token, csrf, email, password: PASSWORD },
    cookies: { broker_csrf: csrf },
    headers: SAME_ORIGIN,
  });
  return { res, csrf, session: cookieValue(res.cookies, "broker_session") };
}

function expectNoLeakAnywhere(value: string, allow: (r: { method: string; path: string }) => boolean = () => false) {
  expectNoLeak(h, value, allow);
  for (const p of pages) expect(p.includes(value)).toBe(false);
  for (const l of pageLogs) expect(l.includes(value)).toBe(false);
}

describe("approval through the API", () => {
  test("agents, scoped sessions and proxy-role users get 403; members and admins apply; values are required for new keys", async () => {
    const { id } = await fileOne();
    const value = sentinel("api-approve");
    expect((await approve(id, agent.token, { NEW_KEY: value }, agent.headers)).status).toBe(403);
    const scoped = await mintScoped(h, { token: owner }, "v1", { role: "admin" });
    expect((await approve(id, scoped.body.token, { NEW_KEY: value })).status).toBe(403);
    const proxyUser = await addUser(h, owner, "v1", "proxy@example.com", "proxy");
    expect((await approve(id, proxyUser, { NEW_KEY: value })).status).toBe(403);
    expect((await h.call("POST", `/v1/proposals/${id}/reject`, { token: proxyUser })).status).toBe(403);
    expect((await h.call("GET", `/v1/proposals/${id}`, { token: owner })).body.status).toBe("pending");

    const member = await addUser(h, owner, "v1", "member@example.com", "member");
    const missing = await approve(id, member, {});
    expect({ status: missing.status, field: missing.body.field }).toEqual({ status: 400, field: "NEW_KEY" });
    expect((await approve(id, member, { NEW_KEY: "" })).status).toBe(400);
    const ok = await approve(id, member, { NEW_KEY: value });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ id, status: "applied", decided_at: expect.any(String) });
    expect((await approve(id, owner, { NEW_KEY: value })).status).toBe(409);

    const discover = await h.call("GET", "/discover", agent);
    expect(discover.body.services).toEqual([{ host: "api.example.com", description: "Example", auth: { type: "bearer" } }]);
    expect(discover.body.available_credentials).toEqual(["NEW_KEY"]);
    const services = await h.call("GET", "/v1/vaults/v1/services", { token: owner });
    expect(services.body.services).toEqual([{ host: "api.example.com", description: "Example", auth: { type: "bearer", token: "NEW_KEY" }, enabled: true }]);
    const revealed = await h.call("GET", "/v1/vaults/v1/credentials/NEW_KEY", { token: owner });
    expect(revealed.body.value).toBe(value);
    expectNoLeakAnywhere(value, (r) => r.method === "GET" && r.path === "/v1/vaults/v1/credentials/NEW_KEY");
  });

  test("an existing key may be left empty (kept); the admin can approve", async () => {
    const old = sentinel("old");
    await setCredential(h, { token: owner }, "v1", "NEW_KEY", old);
    const { id } = await fileOne();
    expect((await approve(id, owner, {})).status).toBe(200);
    expect((await h.call("GET", "/v1/vaults/v1/credentials/NEW_KEY", { token: owner })).body.value).toBe(old);
  });

  test("two concurrent approvals: exactly one 200 and one 409, credentials written once", async () => {
    const { id } = await fileOne();
    const member = await addUser(h, owner, "v1", "member@example.com", "member");
    const [a, b] = [sentinel("race-a"), sentinel("race-b")];
    const results = await Promise.all([approve(id, owner, { NEW_KEY: a }), approve(id, member, { NEW_KEY: b })]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    const winner = results[0]!.status === 200 ? a : b;
    expect((await h.call("GET", "/v1/vaults/v1/credentials/NEW_KEY", { token: owner })).body.value).toBe(winner);
    expect(await h.store.credentials.keys((await h.store.vaults.byName("v1"))!.id)).toEqual(["NEW_KEY"]);
  });
});

describe("the approval page", () => {
  test("the approval token is valid for 24 hours", async () => {
    const { pagePath, id } = await fileOne();
    h.clock.advance(24 * HOUR - MINUTE);
    expect((await raw("GET", pagePath)).status).toBe(200);
    h.clock.advance(MINUTE);
    const expired = await raw("GET", pagePath);
    expect(expired.status).toBe(404);
    expect(expired.text).toContain("Link not valid");
    expect((await raw("GET", `/approve/${id}?token=av_appr_wrong`)).status).toBe(404);
    expect((await raw("GET", `/approve/${id}`)).status).toBe(404);
  });

  test("security headers and the CSRF cookie", async () => {
    const { pagePath } = await fileOne();
    const res = await raw("GET", pagePath);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toContain("script-src");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    const csrf = res.cookies.find((c) => c.startsWith("broker_csrf="));
    expect(csrf).toMatch(/HttpOnly/i);
    expect(csrf).toMatch(/SameSite=Strict/i);
    expect(res.text).not.toContain("<script");
  });

  test("the warning when an existing credential would go to a new host", async () => {
    await setCredential(h, { token: owner }, "v1", "OLD_KEY", sentinel("old"));
    const res = await propose({ services: [{ host: "new.example.com", auth: { type: "bearer", token: "OLD_KEY" } }] });
    const url = new URL(res.body.approval_url);
    const html = (await raw("GET", `${url.pathname}${url.search}`)).text;
    expect(html).toContain("This proposal sends your existing credential OLD_KEY to a new host, new.example.com.");
  });

  test("a minted OAuth service reusing an existing credential warns about the token endpoint's host, where the value goes", async () => {
    await setCredential(h, { token: owner }, "v1", "STRIPE_KEY", sentinel("stripe"));
    await setCredential(h, { token: owner }, "v1", "IDP_ID", sentinel("idp"));
    const res = await propose({
      services: [
        {
          host: "api.example.com",
          auth: { type: "oauth2_client_credentials", token_url: "https://collector.evil.example/token", client_id: "IDP_ID", client_secret: "STRIPE_KEY" },
        },
      ],
    });
    expect(res.status).toBe(201);
    const url = new URL(res.body.approval_url);
    const html = (await raw("GET", `${url.pathname}${url.search}`)).text;
    expect(html).toContain("This proposal sends your existing credential STRIPE_KEY to a new host, collector.evil.example.");
    expect(html).toContain("This proposal sends your existing credential IDP_ID to a new host, collector.evil.example.");
    expect(html).not.toContain("to a new host, api.example.com");
    expect(html).toContain("collector.evil.example/token"); // the description names the token endpoint too
    // A GitHub App key signs JWTs that work for every installation: where they go is named as well.
    await setCredential(h, { token: owner }, "v1", "APP_PEM", sentinel("pem"));
    const gh = await propose({
      services: [
        {
          host: "api.github.com",
          auth: { type: "github_app", app_id: "1", installation_id: "2", private_key: "APP_PEM", api_url: "https://jwt-catcher.example" },
        },
      ],
    });
    const ghUrl = new URL(gh.body.approval_url);
    expect((await raw("GET", `${ghUrl.pathname}${ghUrl.search}`)).text).toContain(
      "This proposal sends your existing credential APP_PEM to a new host, jwt-catcher.example.",
    );
  });

  test("hostile agent text renders escaped; a javascript: obtain is refused at creation", async () => {
    const script = "<script>alert(1)</script>";
    const img = `"><img src=x onerror=alert(1)>`;
    const { pagePath } = await fileOne({
      message: `m ${script}`,
      user_message: `u ${img}`,
      services: [{ host: "api.example.com", description: `d ${script}`, auth: { type: "passthrough" } }],
      credentials: [{ key: "NEW_KEY", description: `c ${img}`, obtain_instructions: `i ${script} ${img}` }],
    });
    const html = (await raw("GET", pagePath)).text;
    expect(html).not.toContain("<script");
    expect(html).not.toContain("<img");
    expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(html).toContain("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;");
    const js = await propose({ credentials: [{ key: "JS_KEY", obtain: "javascript:alert(1)" }] });
    expect({ status: js.status, field: js.body.field }).toEqual({ status: 400, field: "credentials[0].obtain" });
  });

  test("cross-site or token-less decide posts are refused and the proposal stays pending", async () => {
    const { id, token, pagePath } = await fileOne();
    const { session, csrf } = await signIn(id, token, pagePath, "owner@example.com");
    expect(session).toBeDefined();
    const cookies = { broker_session: session!, broker_csrf: csrf };
    const form = { token, csrf, decision: "allow", value_NEW_KEY: sentinel("csrf") };
    const attempts: { form: Record<string, string>; cookies: Record<string, string>; headers: Record<string, string> }[] = [
      { form, cookies, headers: { origin: "http://evil.example" } },
      { form, cookies, headers: { "sec-fetch-site": "cross-site" } },
      { form: { ...form, csrf: "" }, cookies, headers: SAME_ORIGIN },
      { form: { token, decision: "allow", value_NEW_KEY: "x" }, cookies, headers: SAME_ORIGIN },
      { form: { ...form, csrf: `${csrf.slice(0, -1)}A` === csrf ? `${csrf.slice(0, -1)}B` : `${csrf.slice(0, -1)}A` }, cookies, headers: SAME_ORIGIN },
      { form, cookies: { broker_session: session! }, headers: SAME_ORIGIN },
    ];
    for (const a of attempts) {
      const res = await raw("POST", `/approve/${id}/decide`, a);
      expect(res.status).toBe(403);
    }
    expect((await h.store.proposals.byId(id))?.status).toBe("pending");
    expect(
      (
        await raw("POST", `/approve/${id}/login`, {
          form: { token, csrf, email: "owner@example.com", password: PASSWORD },
          cookies: { broker_csrf: csrf },
          headers: { origin: "http://evil.example" },
        })
      ).status,
    ).toBe(403);
  });

  test("signing in on the page, then Allow with the value, applies the proposal", async () => {
    const { id, token, pagePath } = await fileOne();
    await addUser(h, owner, "v1", "member@example.com", "member");
    const { res, session, csrf } = await signIn(id, token, pagePath, "member@example.com");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe(pagePath.replace(/token=(.*)$/, (_, t) => `token=${encodeURIComponent(t)}`));
    const cookie = res.cookies.find((c) => c.startsWith("broker_session="));
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Strict/i);
    const signedIn = await openPage(pagePath, { broker_session: session!, broker_csrf: csrf });
    expect(signedIn.text).toContain('name="value_NEW_KEY"');
    const value = sentinel("page");
    const decided = await raw("POST", `/approve/${id}/decide`, {
      form: { token, csrf, decision: "allow", value_NEW_KEY: value },
      cookies: { broker_session: session!, broker_csrf: csrf },
      headers: SAME_ORIGIN,
    });
    // Post-redirect-get: the decision answers 303 to the page itself, which then says what happened.
    expect(decided.status).toBe(303);
    const location = decided.headers.get("location")!;
    expect(location).toBe(`/approve/${id}?token=${encodeURIComponent(token)}&decided=1`);
    const result = await openPage(location, { broker_session: session!, broker_csrf: csrf });
    expect(result.text).toContain("Approved.");
    expect(result.text).toContain('action="/logout"'); // sign-out offered
    expect(result.text).toContain('href="/"'); // a way into the console
    expect((await h.call("GET", `/v1/proposals/${id}`, agent)).body.status).toBe("applied");
    expect((await h.call("GET", "/v1/vaults/v1/credentials/NEW_KEY", { token: owner })).body.value).toBe(value);
    expectNoLeakAnywhere(value, (r) => r.path === "/v1/vaults/v1/credentials/NEW_KEY");
  });

  test("the requester by name and role; expiry as a relative time; header auth names its header", async () => {
    const { pagePath } = await fileOne({
      services: [
        { action: "set", host: "api.example.com", description: "Example", auth: { type: "header", token: "NEW_KEY", header: "X-Api-Key", prefix: "Key " } },
      ],
    });
    const page = await openPage(pagePath);
    expect(page.text).toMatch(/expires <time datetime="[^"]+" title="[^"]+">in 7 days<\/time>/);
    expect(page.text).toContain("NEW_KEY in the x-api-key header after &quot;Key &quot;");
    expect(page.text).toMatch(/Requested by the agent\s*<strong>bot<\/strong><span class="muted"> \(admin in this vault\)<\/span>/);
    expect(page.text).not.toContain("agent:");
  });

  test("a value typed in the page gets the API's checks (line breaks, NUL)", async () => {
    const { id, token, pagePath } = await fileOne();
    const { csrf } = await openPage(pagePath);
    const { session } = await signIn(id, token, pagePath, "owner@example.com");
    for (const bad of ["sk-1\r\nX-Injected: yes", "sk-2\nHost: evil.example", "sk-3\u0000"]) {
      const res = await raw("POST", `/approve/${id}/decide`, {
        form: { token, csrf, decision: "allow", value_NEW_KEY: bad },
        cookies: { broker_session: session!, broker_csrf: csrf },
        headers: SAME_ORIGIN,
      });
      expect(res.status).toBe(400);
      expect(res.text).toContain("NEW_KEY must");
      expect((await h.store.proposals.byId(id))?.status).toBe("pending");
    }
  });

  test("a wrong password does not sign in; Deny rejects", async () => {
    const { id, token, pagePath } = await fileOne();
    const { csrf } = await openPage(pagePath);
    const bad = await raw("POST", `/approve/${id}/login`, {
      form: { token, csrf, email: "owner@example.com", password: "wrong password 1" },
      cookies: { broker_csrf: csrf },
      headers: SAME_ORIGIN,
    });
    expect(bad.status).toBe(403);
    expect(cookieValue(bad.cookies, "broker_session")).toBeUndefined();
    const { session } = await signIn(id, token, pagePath, "owner@example.com");
    const denied = await raw("POST", `/approve/${id}/decide`, {
      form: { token, csrf, decision: "deny" },
      cookies: { broker_session: session!, broker_csrf: csrf },
      headers: SAME_ORIGIN,
    });
    expect(denied.status).toBe(303);
    expect((await openPage(denied.headers.get("location")!, { broker_session: session!, broker_csrf: csrf })).text).toContain("Denied.");
    expect((await h.store.proposals.byId(id))?.status).toBe("rejected");
  });

  test("an agent token or a scoped session in the cookie cannot decide", async () => {
    const { id, token, pagePath } = await fileOne();
    const scoped = await mintScoped(h, { token: owner }, "v1", { role: "admin" });
    for (const principal of [agent.token, scoped.body.token as string]) {
      const { csrf } = await openPage(pagePath);
      const res = await raw("POST", `/approve/${id}/decide`, {
        form: { token, csrf, decision: "allow", value_NEW_KEY: "x" },
        cookies: { broker_session: principal, broker_csrf: csrf },
        headers: SAME_ORIGIN,
      });
      expect(res.status).toBe(403);
    }
    expect((await h.store.proposals.byId(id))?.status).toBe("pending");
  });
});
