// A person's whole day in the web console, in real Chromium, on a fresh in-process broker with a
// local HTTPS upstream (trusted and allowlisted through config): first-run registration of the
// owner, sign-out and sign-in, a vault, a credential, a service, an agent invited from the page and
// redeemed with real curl, the agent's proposal for a second host approved from the Proposals list
// by typing the value, the injected request's log line read by the agent's name, a rate limit
// changed, a cross-site form post refused, sign-out (the old cookie is dead). Then: a proxy-role
// colleague sees no secret and no settings; BROKER_RATELIMIT_LOCK=true makes rate limits
// read-only. Every HTML response the browsers received carries the CSP and none holds a sentinel
// value; neither does any broker log line.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Page } from "playwright-core";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import {
  type BlankBroker,
  type BlankBrokerOptions,
  browserTestFor,
  openRecordingBrowser,
  type SeenPage,
  signInOnPage,
  startBlankBroker,
  submit,
} from "./browser.ts";

const browserTest = browserTestFor("console day");
const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const COLLEAGUE = { email: "pat@example.com", password: "pat's long passphrase" };
const VAULT = "day";
const AGENT = "report-bot";
const SECRETS = {
  set: `SENTINEL-day-set-${crypto.randomUUID()}`, // typed on the Credentials page
  approved: `SENTINEL-day-approved-${crypto.randomUUID()}`, // typed when approving the proposal
  team: `SENTINEL-day-team-${crypto.randomUUID()}`, // the proxy colleague's vault
  evil: `SENTINEL-day-evil-${crypto.randomUUID()}`, // what the cross-site form tries to store
};

let upstream: TestUpstream;
let broker: BlankBroker;
let locked: BlankBroker | undefined;
let mainHost: string; // the service the person adds: upstream.test:<port>
let reportsHost: string; // the host the agent proposes: reports.test:<port>
/** Every HTML response any browser of this file received from a broker. */
const htmlSeen: SeenPage[] = [];
const agentSaw: string[] = [];

function route(_req: IncomingMessage, res: ServerResponse) {
  // A fixed answer: the upstream never reflects what it received.
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ data: "upstream says hello" }));
}

beforeAll(async () => {
  upstream = await startUpstream(route, { names: { dns: ["upstream.test", "reports.test"], ips: ["127.0.0.1"] } });
  mainHost = `upstream.test:${upstream.port}`;
  reportsHost = `reports.test:${upstream.port}`;
  broker = await startDayBroker(
    { BROKER_RATELIMIT_PROFILE: "default" },
    { upstreamCaPem: upstream.pki.caPem, dns: { "upstream.test": ["127.0.0.1"], "reports.test": ["127.0.0.1"] } },
  );
});
afterAll(async () => {
  await broker?.stop();
  await locked?.stop();
  await upstream?.close();
});

/** A blank broker (no user yet) with the upstream timeout this file's slow steps need. */
const startDayBroker = (env: Record<string, string>, opts: BlankBrokerOptions) => startBlankBroker({ BROKER_UPSTREAM_TIMEOUT_MS: "15000", ...env }, opts);

async function goSection(page: Page, name: string) {
  await submit(page, `nav[aria-label="Vault sections"] >> text=${name}`);
  expect(await page.textContent("h1")).toBe(name === "Settings" ? "Vault settings" : name);
}

/** A JSON call as the agent (its bearer token and X-Vault); keeps every answer for the leak check. */
async function asAgent(token: string, method: string, path: string, body?: unknown) {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, "x-vault": VAULT };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${broker.apiUrl}${path}`, { method, headers, redirect: "manual", body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  agentSaw.push(text, JSON.stringify([...res.headers]));
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, body: json };
}

function authorizationOf(i: number): string[] {
  return upstream.received[i]!.rawHeaders.filter(([k]) => k.toLowerCase() === "authorization").map(([, v]) => v);
}

/** The browser's cookie `name` for the broker (HttpOnly, so read through the context). */
async function cookieValue(page: Page, name: string): Promise<string> {
  const c = (await page.context().cookies(broker.apiUrl)).find((x) => x.name === name);
  if (!c) throw new Error(`no ${name} cookie`);
  return c.value;
}

/** A page on another local origin that auto-submits a form to `action` (the attacker's page). */
function startAttacker(action: string, fields: Record<string, string>) {
  const inputs = Object.entries(fields)
    .map(([k, v]) => `<input type="hidden" name="${k}" value="${v}">`)
    .join("");
  const html = `<!doctype html><title>win a prize</title><form method="post" action="${action}">${inputs}</form><script>document.forms[0].submit()</script>`;
  return Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(html, { headers: { "content-type": "text/html" } }) });
}

describe("a person's day in the console (Chromium)", () => {
  browserTest(
    "register, sign in, vault, credential, service, agent via curl, proposal approved from the list, log line by name, rate limit, cross-site post refused, sign out",
    async () => {
      const browser = await openRecordingBrowser({ origin: broker.apiUrl, into: htmlSeen });
      const { page, flushed } = browser;
      const base = broker.apiUrl;
      try {
        // First run: `/` offers the owner's registration.
        await page.goto(`${base}/`);
        expect(await page.textContent("h1")).toBe("Set up this broker");
        await page.fill("#reg-email", OWNER.email);
        await page.fill("#reg-password", OWNER.password);
        await page.fill("#reg-password-again", OWNER.password);
        await submit(page, "#register");
        expect(page.url()).toBe(`${base}/`);
        expect(await page.textContent("#flash")).toContain("You are the owner");
        expect(await page.textContent("h1")).toBe("Vaults");

        // Sign out, then in again.
        await submit(page, "#sign-out button");
        expect(await page.textContent("h1")).toBe("Sign in");
        await signInOnPage(page, OWNER);
        expect(await page.textContent("h1")).toBe("Vaults");

        // A vault.
        await page.fill("#f-name", VAULT);
        await submit(page, "#create-vault button");
        expect(page.url()).toBe(`${base}/vaults/${VAULT}`);
        expect(await page.textContent("#flash")).toContain(`Vault ${VAULT} created`);

        // A credential, typed into the write-only field.
        await goSection(page, "Credentials");
        await page.fill("#f-key", "API_KEY");
        await page.fill("#f-value", SECRETS.set);
        await submit(page, "#set-credential button[type=submit]");
        expect(await page.textContent("#flash")).toBe("Credential API_KEY saved.");
        expect(await page.inputValue("#f-value")).toBe("");
        expect(await page.textContent("#credentials")).toContain("API_KEY");

        // A service for the upstream that receives it: Add a service, Custom service, Bearer token, then its fields.
        await goSection(page, "Services");
        await submit(page, "text=Add a service");
        await submit(page, "#custom-service");
        await submit(page, "#type-bearer");
        await page.fill("#f-host", mainHost);
        await page.selectOption("#f-credential_key", "API_KEY");
        await page.fill("#f-description", "Main data API");
        await submit(page, "#add-service-form button[type=submit]");
        if (await page.$("#confirm-service")) await submit(page, "#confirm-service");
        expect(await page.textContent("#flash")).toContain(`Service ${mainHost} added`);

        // An agent invite: the link is on this answer only.
        await goSection(page, "Agents");
        await page.fill("#f-name", AGENT);
        await page.selectOption("#f-role", "proxy");
        await submit(page, "#invite-agent-submit");
        expect(await page.textContent("h1")).toBe("Agent invite created");
        const inviteUrl = await page.inputValue("#invite-url");
        expect(inviteUrl).toStartWith(`${base}/invite/av_inv_`);
        expect(await page.inputValue("#redeem-command")).toBe(`curl -X POST ${inviteUrl}`);
        expect(page.url()).not.toContain("av_inv_");

        // The agent redeems it with real curl (async spawn: the broker runs in this process).
        const curl = Bun.spawn(["curl", "-sS", "-X", "POST", inviteUrl], { stdout: "pipe", stderr: "pipe" });
        const out = await new Response(curl.stdout).text();
        expect(await curl.exited).toBe(0);
        agentSaw.push(out);
        const redeemed = JSON.parse(out);
        expect(redeemed.agent.name).toBe(AGENT);
        expect(redeemed.vaults).toEqual([{ name: VAULT, role: "proxy" }]);
        const token: string = redeemed.token;
        const again = Bun.spawn(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", inviteUrl], { stdout: "pipe", stderr: "pipe" });
        expect(await new Response(again.stdout).text()).toMatch(/^4\d\d$/); // one time only
        await again.exited;

        // The service the person added works: the upstream gets the credential typed in the page.
        const first = await asAgent(token, "GET", `/proxy/${mainHost}/ping`);
        expect(first.status).toBe(200);
        expect(authorizationOf(upstream.received.length - 1)).toEqual([`Bearer ${SECRETS.set}`]);

        // The agent needs a second host: refused, then it files a proposal with a new credential slot.
        const refused = await asAgent(token, "GET", `/proxy/${reportsHost}/status`);
        expect(refused.status).toBe(403);
        const filed = await asAgent(token, "POST", "/v1/proposals", {
          services: [{ action: "set", host: reportsHost, description: "Daily reports API", auth: { type: "bearer", token: "REPORTS_TOKEN" } }],
          credentials: [{ action: "set", key: "REPORTS_TOKEN", description: "Read-only token for the reports API" }],
          message: "I need the daily reports to write today's summary.",
        });
        expect(filed.status).toBe(201);
        expect(filed.body.status).toBe("pending");
        const id = filed.body.id as number;

        // The person approves it from the Proposals list, typing the value.
        await goSection(page, "Proposals");
        const card = await page.textContent(`#proposal-${id}`);
        expect(card).toContain(AGENT);
        expect(card).not.toMatch(/agent:\d/);
        expect(card).toContain(reportsHost);
        expect(card).toContain("REPORTS_TOKEN");
        expect(card).toContain("today's summary");
        await page.fill(`#value-${id}-REPORTS_TOKEN`, SECRETS.approved);
        await submit(page, `#approve-${id}-button`);
        expect(await page.textContent("#flash")).toContain(`Proposal #${id} approved`);
        expect(await page.locator(`#proposal-${id}`).count()).toBe(0); // no longer pending
        expect((await asAgent(token, "GET", `/v1/proposals/${id}`)).body.status).toBe("applied");

        // The agent's next request to that host carries the approved credential.
        const before = upstream.received.length;
        const ok = await asAgent(token, "GET", `/proxy/${reportsHost}/daily?day=today`);
        expect(ok.status).toBe(200);
        expect(ok.body).toEqual({ data: "upstream says hello" });
        expect(upstream.received.length).toBe(before + 1);
        const got = upstream.received.at(-1)!;
        expect(got.url).toBe("/daily?day=today");
        expect(got.rawHeaders.find(([k]) => k.toLowerCase() === "host")?.[1]).toBe(reportsHost);
        expect(authorizationOf(upstream.received.length - 1)).toEqual([`Bearer ${SECRETS.approved}`]);

        // Its log line, found by the agent's name (audit records are written in batches: reload until there).
        await goSection(page, "Logs");
        await page.fill("#f-who", AGENT);
        await submit(page, "#log-filter button");
        expect(new URL(page.url()).searchParams.get("who")).toBe(AGENT);
        const want = `GET ${reportsHost}/daily`;
        const deadline = Date.now() + 10_000;
        while (!((await page.textContent("main")) ?? "").includes(want)) {
          if (Date.now() > deadline) throw new Error(`no log line ${want}: ${await page.textContent("main")}`);
          await page.reload();
        }
        const row = page.locator("#logs tbody tr", { hasText: want });
        expect(await row.count()).toBe(1);
        const line = (await row.textContent())!;
        expect(line).toContain(AGENT);
        expect(line).toContain("200");
        expect(line).toContain("REPORTS_TOKEN");
        expect(line).not.toContain("day=today");
        expect(line).not.toMatch(/agent:\d/);

        // A rate limit changed on the instance settings page.
        await submit(page, 'nav[aria-label="Main"] >> text=Settings');
        expect(await page.textContent("h1")).toBe("Instance settings");
        const rps = Number(await page.inputValue("#f-proxy-rps"));
        await page.fill("#f-proxy-rps", String(rps + 25));
        await submit(page, "#rate-limits button[type=submit]");
        expect(page.url()).toBe(`${base}/settings`);
        expect(await page.textContent("#flash")).toContain("Saved: rate limits");
        expect(await page.inputValue("#f-proxy-rps")).toBe(String(rps + 25));
        expect((await ownerSettings()).rate_limits.proxy.rps).toBe(rps + 25);

        // A cross-site form post, from a page on another local origin (same site, so the browser
        // even sends the SameSite=Strict cookies; the attacker also knows the CSRF token): refused.
        const attacker = startAttacker(`${base}/vaults/${VAULT}/credentials`, {
          csrf: await cookieValue(page, "broker_csrf"),
          key: "EVIL_KEY",
          value: SECRETS.evil,
        });
        try {
          const [res] = await Promise.all([
            page.waitForResponse((r) => r.url() === `${base}/vaults/${VAULT}/credentials` && r.request().method() === "POST"),
            page.goto(`http://127.0.0.1:${attacker.port}/`, { waitUntil: "commit" }),
          ]);
          expect(res.status()).toBe(403);
          // It really was the browser's post with this person's cookies, from the same site but another origin.
          const sent = await res.request().allHeaders();
          expect(sent.origin).toBe(`http://127.0.0.1:${attacker.port}`);
          expect(sent["sec-fetch-site"]).toBe("same-site");
          expect(sent.cookie).toContain("broker_session=");
          await page.waitForURL(`${base}/vaults/${VAULT}/credentials`);
          expect(await page.textContent("h1")).toBe("Form refused");
        } finally {
          attacker.stop(true);
        }
        // The same post as a plain HTTP client with the browser's cookies but a foreign Origin: refused.
        const cookie = `broker_session=${await cookieValue(page, "broker_session")}; broker_csrf=${await cookieValue(page, "broker_csrf")}`;
        for (const [origin, site] of [
          ["https://evil.example", "cross-site"],
          [`http://127.0.0.1:${upstream.port}`, "same-site"],
        ]) {
          const forged = await fetch(`${base}/settings/rate-limits`, {
            method: "POST",
            redirect: "manual",
            headers: { cookie, origin: origin!, "sec-fetch-site": site!, "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({ csrf: await cookieValue(page, "broker_csrf"), profile: "off", "proxy.rps": "1" }),
          });
          expect(forged.status).toBe(403);
          expect(forged.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
          expect(await forged.text()).toContain("Form refused");
        }
        // Nothing changed: no EVIL_KEY, the rate limits as the person left them.
        await page.goto(`${base}/vaults/${VAULT}/credentials`);
        expect(await page.textContent("#credentials")).not.toContain("EVIL_KEY");
        const settings = await ownerSettings();
        expect(settings.rate_limits.profile).toBe("default");
        expect(settings.rate_limits.proxy.rps).toBe(rps + 25);

        // Sign out: the session ends server-side, the old cookie no longer works.
        const oldSession = await cookieValue(page, "broker_session");
        await submit(page, "#sign-out button");
        expect(await page.textContent("#flash")).toContain("signed out");
        expect(await page.textContent("h1")).toBe("Sign in");
        const stale = await fetch(`${base}/vaults/${VAULT}/credentials`, { redirect: "manual", headers: { cookie: `broker_session=${oldSession}` } });
        expect(stale.status).toBe(303);
        expect(stale.headers.get("location")).toBe("/");
        const home = await fetch(`${base}/`, { headers: { cookie: `broker_session=${oldSession}` } });
        expect(await home.text()).toContain("Sign in");
        expect((await broker.api("GET", "/v1/auth/whoami", undefined, oldSession)).status).toBe(401);
        await page.context().addCookies([{ name: "broker_session", value: oldSession, url: base }]);
        await page.goto(`${base}/settings`);
        expect(page.url()).toBe(`${base}/`);
        expect(await page.textContent("h1")).toBe("Sign in");
      } finally {
        await flushed();
        await browser.close();
      }
      expect(htmlSeen.length).toBeGreaterThan(15);
    },
    60_000,
  );

  browserTest(
    "a proxy-role colleague sees no secret value, no set or reveal form, and no settings",
    async () => {
      const owner = (await broker.api("POST", "/v1/auth/login", OWNER)).body.token as string;
      expect((await broker.api("POST", "/v1/vaults", { name: "team" }, owner)).status).toBe(201);
      expect((await broker.api("PUT", "/v1/vaults/team/credentials/TEAM_KEY", { value: SECRETS.team }, owner)).status).toBe(200);
      const invite = await broker.api("POST", "/v1/vaults/team/invites", { email: COLLEAGUE.email, role: "proxy" }, owner);
      expect(invite.status).toBe(201);
      // The colleague registers through the invite link.
      const accepted = await fetch(invite.body.invite_url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(COLLEAGUE),
      });
      expect(accepted.status).toBe(200);
      expect(((await accepted.json()) as any).role).toBe("proxy");

      const browser = await openRecordingBrowser({ origin: broker.apiUrl, into: htmlSeen });
      const { page, flushed } = browser;
      const base = broker.apiUrl;
      try {
        await page.goto(`${base}/`);
        await signInOnPage(page, COLLEAGUE);
        expect(await page.textContent("h1")).toBe("Vaults");
        expect(await page.textContent("#vaults")).toContain("team");
        expect(await page.locator('nav[aria-label="Main"] >> text=Settings').count()).toBe(0);

        // Credentials: key names only, no set form, no manage or reveal link.
        await page.goto(`${base}/vaults/team/credentials`);
        expect(await page.textContent("#credentials")).toContain("TEAM_KEY");
        expect(await page.textContent("#read-only-note")).toContain("proxy");
        expect(await page.locator("#set-credential").count()).toBe(0);
        expect(await page.locator('input[type="password"]').count()).toBe(0);
        expect(await page.locator('a[href*="/credentials/TEAM_KEY"]').count()).toBe(0);
        expect(await page.locator("text=Reveal").count()).toBe(0);

        // Typing the addresses refuses too.
        for (const path of ["/vaults/team/credentials/TEAM_KEY", "/vaults/team/credentials/TEAM_KEY/reveal", "/vaults/team/logs", "/settings"]) {
          const res = await page.goto(`${base}${path}`);
          expect({ path, status: res?.status() }).toEqual({ path, status: 403 });
          expect(await page.locator("#f-password, #f-value, #rate-limits, #allowed-domains").count()).toBe(0);
        }
        expect(await page.textContent("h1")).toBe("Not allowed");
        // A reveal posted from the console's own origin, with the colleague's password: still refused.
        const csrf = await cookieValue(page, "broker_csrf");
        const cookie = `broker_session=${await cookieValue(page, "broker_session")}; broker_csrf=${csrf}`;
        const reveal = await fetch(`${base}/vaults/team/credentials/TEAM_KEY/reveal`, {
          method: "POST",
          redirect: "manual",
          headers: { cookie, origin: base, "sec-fetch-site": "same-origin", "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ csrf, password: COLLEAGUE.password }),
        });
        const revealHtml = await reveal.text();
        expect(reveal.status).toBe(403);
        expect(revealHtml).toContain("Not allowed");
        expect(revealHtml).not.toContain(SECRETS.team);

        // Vault settings: read-only for this role.
        await page.goto(`${base}/vaults/team/settings`);
        expect(await page.textContent("h1")).toBe("Vault settings");
        expect(await page.locator("#unmatched-hosts, form[action$='/settings/delete']").count()).toBe(0);
        expect(await page.textContent("#delete-refused")).toContain("Only a human admin");
      } finally {
        await flushed();
        await browser.close();
      }
    },
    60_000,
  );

  browserTest(
    "BROKER_RATELIMIT_LOCK=true: the rate limits are shown read-only, with the reason, and a post changes nothing",
    async () => {
      locked = await startDayBroker({ BROKER_RATELIMIT_PROFILE: "default", BROKER_RATELIMIT_LOCK: "true" }, { dns: {} });
      const owner = await locked.api("POST", "/v1/auth/register", OWNER);
      expect(owner.status).toBe(201);
      const before = (await locked.api("GET", "/v1/owner/settings", undefined, owner.body.token)).body.rate_limits;
      expect(before.locked).toBe(true);
      const base = locked.apiUrl;
      const browser = await openRecordingBrowser({ origin: base, into: htmlSeen });
      const { page, flushed } = browser;
      try {
        await page.goto(`${base}/`);
        await signInOnPage(page, OWNER);
        await submit(page, 'nav[aria-label="Main"] >> text=Settings');
        expect(await page.textContent("h1")).toBe("Instance settings");
        expect(await page.textContent("#rate-locked")).toContain("BROKER_RATELIMIT_LOCK=true");
        expect(await page.textContent("#rate-limits-table")).toContain("PROXY");
        expect(await page.locator("#rate-limits, #f-proxy-rps, #f-profile").count()).toBe(0);
        expect(await page.locator("text=Save rate limits").count()).toBe(0);
        expect(await page.locator("#allowed-domains").count()).toBe(1); // the rest of the page still works

        // A same-origin post with a valid CSRF token (as if the form were there): the domain refuses.
        const csrf = (await page.context().cookies(base)).find((c) => c.name === "broker_csrf")!.value;
        const session = (await page.context().cookies(base)).find((c) => c.name === "broker_session")!.value;
        const res = await fetch(`${base}/settings/rate-limits`, {
          method: "POST",
          redirect: "manual",
          headers: {
            cookie: `broker_session=${session}; broker_csrf=${csrf}`,
            origin: base,
            "sec-fetch-site": "same-origin",
            "content-type": "application/x-www-form-urlencoded",
          },
          body: new URLSearchParams({ csrf, profile: "off", "proxy.rps": "1" }),
        });
        expect(res.status).toBe(303);
        expect(res.headers.get("location")).toBe("/settings");
        const flash = res.headers.getSetCookie().find((c) => c.startsWith("broker_flash="));
        expect(flash).toBeDefined();
        await page.context().addCookies([{ name: "broker_flash", value: flash!.split(";")[0]!.slice("broker_flash=".length), url: base }]);
        await page.goto(`${base}/settings`);
        expect(await page.textContent("#flash")).toMatch(/BROKER_RATELIMIT_LOCK/);
        expect((await locked.api("PATCH", "/v1/owner/settings", { rate_limits: { proxy: { rps: 1 } } }, owner.body.token)).status).toBe(403);
        expect((await locked.api("GET", "/v1/owner/settings", undefined, owner.body.token)).body.rate_limits).toEqual(before);
      } finally {
        await flushed();
        await browser.close();
      }
    },
    60_000,
  );

  browserTest("every HTML page carried the CSP and no sentinel; no log line holds one", async () => {
    expect(htmlSeen.length).toBeGreaterThan(20);
    for (const p of htmlSeen) {
      const where = `${p.method} ${p.url} (${p.status})`;
      expect({ where, csp: p.csp }).toEqual({ where, csp: expect.stringContaining("default-src 'none'") });
      expect({ where, csp: p.csp?.includes("frame-ancestors 'none'") && !p.csp.includes("unsafe-inline") }).toEqual({ where, csp: true });
      for (const s of Object.values(SECRETS)) expect({ where, leaked: p.html.includes(s) }).toEqual({ where, leaked: false });
    }
    // Pages of every kind were seen: sign-in, forms' answers, refusals.
    expect(htmlSeen.some((p) => p.status === 403)).toBe(true);
    expect(htmlSeen.some((p) => p.method === "POST")).toBe(true);
    for (const s of Object.values(SECRETS)) for (const out of agentSaw) expect(out.includes(s)).toBe(false);
    for (const lines of [broker.logLines, locked?.logLines ?? []]) {
      expect(lines.length).toBeGreaterThan(0);
      for (const line of lines) for (const s of Object.values(SECRETS)) expect(line.includes(s)).toBe(false);
    }
  });
});

/** The instance settings as the API reports them (an owner API session of its own). */
async function ownerSettings(): Promise<any> {
  const login = await broker.api("POST", "/v1/auth/login", OWNER);
  const r = await broker.api("GET", "/v1/owner/settings", undefined, login.body.token);
  expect(r.status).toBe(200);
  return r.body;
}
