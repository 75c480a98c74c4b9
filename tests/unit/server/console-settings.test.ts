// The console's Logs, Vault settings and Instance settings pages through app.request(): names
// instead of principal ids, filters and paging, the live tail's feed, unmatched hosts, typed
// vault deletion (human admins only), the owner-only settings page (allowed domains, rate limits,
// read-only under BROKER_RATELIMIT_LOCK, retention, the root CA and its rotation) and CSRF.

import { beforeEach, describe, expect, test } from "bun:test";
import { createMemoryLogger } from "../../../src/log.ts";
import { createRateLimiter, resolveSettings } from "../../../src/ratelimit/index.ts";
import { createApi } from "../../../src/server/app.ts";
import type { CaHolder } from "../../../src/crypto/index.ts";
import { loadRootCa, rotateRootCa, type RootCa } from "../../../src/crypto/index.ts";
import { createBrowser, BASE, SAME_ORIGIN } from "./console-fixtures.ts";
import { addAgent, addUser, createHarness, createVault, type Harness, register } from "./fixtures.ts";

interface Setup {
  h: Harness;
  app: ReturnType<typeof createApi>;
  ca: CaHolder;
}

async function setUp(locked = false): Promise<Setup> {
  const h = await createHarness({ rateLimiter: (now) => createRateLimiter(resolveSettings("default", {}, locked), now) });
  let root: RootCa = await loadRootCa(h.store, h.domain.dataKey, h.clock.now());
  const ca: CaHolder = {
    get current() {
      return root;
    },
    async rotate() {
      root = await rotateRootCa(h.store, h.domain.dataKey, h.clock.now() + 1000);
      return root;
    },
  };
  const app = createApi({ domain: h.domain, log: createMemoryLogger(), ca, auditRetention: { days: 30, maxRows: 1_000_000 } });
  return { h, app, ca };
}

/** A page client of the set-up's app, signed in with `token` (the console shares the API's session). */
const browserFor = (s: Setup, token?: string) => createBrowser(s.app, { session: token });

async function auditRows(s: Setup, vault: string, principal: string, n: number, host = "api.example.com", status = 200) {
  const v = (await s.h.store.vaults.byName(vault))!;
  const rows = Array.from({ length: n }, (_, i) => ({
    at: s.h.clock.now() + i,
    principal,
    vaultId: v.id,
    vault,
    ingress: "explicit",
    method: "GET",
    host,
    path: `/item/${i}`,
    service: host,
    credentialKeys: "API_KEY",
    status,
    bytesIn: 0,
    bytesOut: 10,
    durationMs: 12,
    error: null,
    contained: false,
    approvedBy: null,
  }));
  await s.h.store.audit.insert(rows);
}

let s: Setup;
let owner: string;
beforeEach(async () => {
  s = await setUp();
  owner = (await register(s.h, "owner@example.com")).token;
  await createVault(s.h, owner, "main");
});

describe("Logs", () => {
  test("names agents and people, never agent:1; the JSON API keeps principal and adds principal_name", async () => {
    const agent = await addAgent(s.h, owner, "main", "proxy", "deploy-bot");
    const agentId = (await s.h.store.agents.byName("deploy-bot"))!.id;
    const ownerId = (await s.h.store.users.byEmail("owner@example.com"))!.id;
    await auditRows(s, "main", `agent:${agentId}`, 2);
    await auditRows(s, "main", `user:${ownerId}`, 1, "other.example.com", 403);
    const b = browserFor(s, owner);
    const page = await b.get("/vaults/main/logs");
    expect(page.status).toBe(200);
    expect(page.text).toContain("deploy-bot");
    expect(page.text).toContain("owner@example.com");
    expect(page.text).not.toContain(`agent:${agentId}`);
    expect(page.text).toContain("GET api.example.com/item/1");
    expect(page.text).toMatch(/<time datetime="2026-01-01T00:00:00\.\d+Z">2026-01-01 00:00 UTC<\/time>/);
    expect(page.text).toContain('src="/assets/log-tail.js"');
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    const api = await s.h.call("GET", "/v1/vaults/main/logs", { token: owner });
    expect(api.body.logs[0]).toMatchObject({ principal: `user:${ownerId}`, principal_name: "owner@example.com", principal_kind: "user", status: 403 });
    expect(api.body.logs[1]).toMatchObject({ principal: `agent:${agentId}`, principal_name: "deploy-bot", principal_kind: "agent" });
    // The API filter takes a name too (as `broker logs --who`).
    const byName = await s.h.call("GET", "/v1/vaults/main/logs?principal=deploy-bot", { token: owner });
    expect(byName.body.logs.map((r: { principal_name: string }) => r.principal_name)).toEqual(["deploy-bot", "deploy-bot"]);
    expect((await s.h.call("GET", "/v1/vaults/main/logs?principal=nobody", { token: owner })).body.logs).toEqual([]);
    expect(agent.token).toBeTruthy();
  });

  test("filters by who, host and status; a bad status is explained", async () => {
    await addAgent(s.h, owner, "main", "proxy", "deploy-bot");
    const agentId = (await s.h.store.agents.byName("deploy-bot"))!.id;
    await auditRows(s, "main", `agent:${agentId}`, 2, "api.example.com", 200);
    await auditRows(s, "main", "user:1", 1, "other.example.com", 502);
    const b = browserFor(s, owner);
    const byWho = await b.get("/vaults/main/logs?who=deploy-bot");
    expect(byWho.text).toContain("api.example.com/item/0");
    expect(byWho.text).not.toContain("other.example.com/item");
    expect(byWho.text).toContain('value="deploy-bot"');
    const byEmail = await b.get("/vaults/main/logs?who=owner%40example.com");
    expect(byEmail.text).toContain("other.example.com/item/0");
    expect(byEmail.text).not.toContain("api.example.com/item");
    const byHost = await b.get("/vaults/main/logs?host=other.example.com&status=502");
    expect(byHost.text).toContain("other.example.com/item/0");
    expect(byHost.text).toContain("badge-danger");
    const none = await b.get("/vaults/main/logs?status=404");
    expect(none.text).toContain("No records match this filter");
    const bad = await b.get("/vaults/main/logs?status=abc");
    expect(bad.status).toBe(400);
    expect(bad.text).toContain("Status must be a number");
  });

  test("an empty log says what will appear; older and newer pages", async () => {
    const b = browserFor(s, owner);
    expect((await b.get("/vaults/main/logs")).text).toContain("No requests yet");
    await auditRows(s, "main", "user:1", 120);
    const first = await b.get("/vaults/main/logs");
    expect(first.text).toContain("/item/119<");
    expect(first.text).toContain("/item/70<");
    expect(first.text).not.toContain("/item/69<");
    const older = /href="([^"]*before=\d+)"/.exec(first.text)![1]!.replaceAll("&amp;", "&");
    const second = await b.get(older);
    expect(second.text).toContain("/item/69<");
    expect(second.text).toContain("/item/20<");
    expect(second.text).not.toContain("/item/70<");
    expect(second.text).not.toContain('src="/assets/log-tail.js"'); // the tail runs on the newest page only
    const newer = /href="([^"]*after=\d+)"/.exec(second.text)![1]!.replaceAll("&amp;", "&");
    const back = await b.get(newer);
    expect(back.text).toContain("/item/119<");
    expect(back.text).toContain("/item/70<");
    expect(back.text).not.toContain("/item/69<");
  });

  test("the tail's feed returns newer records as display text; the script is served under script-src 'self'", async () => {
    await auditRows(s, "main", "user:1", 3);
    const b = browserFor(s, owner);
    const feed = await b.get("/vaults/main/logs/feed?after=1");
    expect(feed.status).toBe(200);
    const body = JSON.parse(feed.text) as { logs: { id: number; who: string; request: string; status_tone: string; time_text: string }[] };
    expect(body.logs.map((r) => r.id)).toEqual([2, 3]);
    expect(body.logs[0]).toMatchObject({
      who: "owner@example.com",
      request: "GET api.example.com/item/1",
      status_tone: "success",
      time_text: "2026-01-01 00:00 UTC",
    });
    const script = await s.app.request(`${BASE}/assets/log-tail.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toContain("javascript");
    const js = await script.text();
    expect(js).toContain("textContent");
    expect(js).not.toContain("innerHTML");
    // Signed out, the feed is no JSON at all (a redirect to sign in).
    expect((await browserFor(s).get("/vaults/main/logs/feed")).status).toBe(303);
  });

  test("a proxy-role person sees no log, on the page or in the feed", async () => {
    const proxy = await addUser(s.h, owner, "main", "pat@example.com", "proxy");
    await auditRows(s, "main", "user:1", 1);
    const b = browserFor(s, proxy);
    const page = await b.get("/vaults/main/logs");
    expect(page.status).toBe(403);
    expect(page.text).toContain("does not show the log");
    expect(page.text).not.toContain("/item/0");
    const feed = await b.get("/vaults/main/logs/feed");
    expect(feed.status).toBe(403);
    expect(feed.text).not.toContain("/item/0");
  });
});

describe("Vault settings", () => {
  test("an admin switches unmatched hosts to deny, as PATCH /v1/vaults/:vault does", async () => {
    const b = browserFor(s, owner);
    const page = await b.get("/vaults/main/settings");
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/id="unmatched-tunnel"[^>]*checked/);
    expect(page.text).toContain("blind tunnel");
    const saved = await b.submit("/vaults/main/settings/unmatched-hosts", { unmatched_hosts: "deny" });
    expect(saved.text).toContain("hosts that match no service are now refused");
    expect(saved.text).toMatch(/id="unmatched-deny"[^>]*checked/);
    expect((await s.h.call("GET", "/v1/vaults/main", { token: owner })).body.unmatched_hosts).toBe("deny");
    const bad = await b.submit("/vaults/main/settings/unmatched-hosts", { unmatched_hosts: "maybe" });
    expect(bad.text).toContain("Unmatched_hosts must be tunnel or deny");
  });

  test("a member sees the setting read-only and cannot change it or delete the vault", async () => {
    const member = await addUser(s.h, owner, "main", "mia@example.com", "member");
    const b = browserFor(s, member);
    const page = await b.get("/vaults/main/settings");
    expect(page.text).not.toContain('id="unmatched-hosts"');
    expect(page.text).toContain("Only an admin of the vault can change this");
    expect(page.text).toContain("Only a human admin of the vault can delete it");
    const change = await b.submit("/vaults/main/settings/unmatched-hosts", { unmatched_hosts: "deny" });
    expect(change.text).toContain("does not allow this");
    const del = await b.submit("/vaults/main/settings/delete", { confirm: "main" });
    expect(del.text).toContain("does not allow this");
    expect(await s.h.store.vaults.byName("main")).toBeDefined();
  });

  test("deleting needs the vault's name typed; then the vault is gone", async () => {
    const b = browserFor(s, owner);
    const wrong = await b.submit("/vaults/main/settings/delete", { confirm: "mian" });
    expect(wrong.location).toBe("/vaults/main/settings");
    expect(wrong.text).toContain("Type main exactly to confirm");
    expect(await s.h.store.vaults.byName("main")).toBeDefined();
    const done = await b.submit("/vaults/main/settings/delete", { confirm: "main" });
    expect(done.location).toBe("/");
    expect(done.text).toContain("Vault main deleted");
    expect(await s.h.store.vaults.byName("main")).toBeUndefined();
  });

  test("a cross-site post changes nothing", async () => {
    const b = browserFor(s, owner);
    await b.get("/vaults/main/settings");
    const res = await b.post("/vaults/main/settings/delete", { confirm: "main" }, { origin: "https://evil.example", "sec-fetch-site": "cross-site" });
    expect(res.status).toBe(403);
    const noToken = await b.post("/vaults/main/settings/unmatched-hosts", { unmatched_hosts: "deny" }, SAME_ORIGIN, false);
    expect(noToken.status).toBe(403);
    expect(await s.h.store.vaults.byName("main")).toMatchObject({ unmatchedHosts: "tunnel" });
  });
});

describe("Instance settings", () => {
  test("anyone but the owner gets a 403 page and cannot post", async () => {
    const member = await addUser(s.h, owner, "main", "mia@example.com", "admin");
    const b = browserFor(s, member);
    const page = await b.get("/settings");
    expect(page.status).toBe(403);
    expect(page.text).toContain("Only the instance owner can do this");
    expect(page.text).not.toContain('id="rate-limits"');
    expect(page.text).not.toContain('href="/settings"'); // no Settings entry in the navigation
    const post = await b.submit("/settings/rate-limits", { profile: "off" });
    expect(post.text).toContain("Only the instance owner can do this");
    expect(s.h.domain.rateLimiter!.settings().profile).toBe("default");
    const rotate = await b.submit("/settings/ca/rotate", { confirm: "rotate" });
    expect(rotate.text).toContain("Only the instance owner can do this");
    expect((await browserFor(s).get("/settings")).status).toBe(303); // signed out: to the sign-in page
  });

  test("the owner sets allowed domains, as PATCH /v1/owner/settings does", async () => {
    const b = browserFor(s, owner);
    const page = await b.get("/settings");
    expect(page.status).toBe(200);
    expect(page.text).toContain("Who may sign up");
    const saved = await b.submit("/settings/domains", { allowed_domains: "Example.com\n@example.org, example.com" });
    expect(saved.text).toContain("only example.com, example.org may sign up");
    expect((await s.h.call("GET", "/v1/owner/settings", { token: owner })).body.allowed_domains).toEqual(["example.com", "example.org"]);
    const bad = await b.submit("/settings/domains", { allowed_domains: "not a domain" });
    expect(bad.text).toContain("is not a domain name");
    const cleared = await b.submit("/settings/domains", { allowed_domains: "" });
    expect(cleared.text).toContain("anyone may sign up");
  });

  test("rate limits: a profile and single values change at once; bad values are named", async () => {
    const b = browserFor(s, owner);
    const page = await b.get("/settings");
    expect(page.text).toContain('id="rate-limits"');
    expect(page.text).toMatch(/name="proxy\.rps" value="50"/);
    const form = {
      profile: "default",
      "auth.rps": "5",
      "auth.burst": "20",
      "authed.rps": "20",
      "authed.burst": "100",
      "proxy.rps": "50",
      "proxy.burst": "200",
      "global.rps": "2000",
      "global.inflight": "512",
    };
    const saved = await b.submit("/settings/rate-limits", { ...form, "proxy.rps": "75" });
    expect(saved.text).toContain("Saved: rate limits now follow the default profile");
    expect(s.h.domain.rateLimiter!.settings().proxy).toEqual({ rps: 75, burst: 200 });
    expect(saved.text).toMatch(/name="proxy\.rps" value="75"/);
    // A new profile restarts from its numbers; the knob changed in the same save wins.
    await b.submit("/settings/rate-limits", { ...form, "proxy.rps": "75", profile: "strict", "authed.burst": "77" });
    expect(s.h.domain.rateLimiter!.settings()).toMatchObject({ profile: "strict", proxy: { rps: 25, burst: 100 }, authed: { rps: 10, burst: 77 } });
    const bad = await b.submit("/settings/rate-limits", { ...form, profile: "strict", "global.inflight": "1.5" });
    expect(bad.text).toContain("inflight: must be a positive integer");
    expect((await s.h.call("GET", "/v1/owner/settings", { token: owner })).body.rate_limits.authed.burst).toBe(77);
  });

  test("BROKER_RATELIMIT_LOCK: the values are shown read-only with the reason; a post is refused", async () => {
    s = await setUp(true);
    const token = (await register(s.h, "owner@example.com")).token;
    const b = browserFor(s, token);
    const page = await b.get("/settings");
    expect(page.status).toBe(200);
    expect(page.text).not.toContain('id="rate-limits"');
    expect(page.text).not.toContain('name="proxy.rps"');
    expect(page.text).toContain("BROKER_RATELIMIT_LOCK=true");
    expect(page.text).toContain('id="rate-limits-table"');
    const refused = await b.submit("/settings/rate-limits", { profile: "off", "proxy.rps": "1" });
    expect(refused.text).toContain("Rate limits are pinned by BROKER_RATELIMIT_LOCK");
    expect(s.h.domain.rateLimiter!.settings()).toMatchObject({ profile: "default", proxy: { rps: 50 } });
  });

  test("retention from the environment, read-only with the variables' names", async () => {
    const page = await browserFor(s, owner).get("/settings");
    expect(page.text).toContain("BROKER_AUDIT_RETENTION_DAYS");
    expect(page.text).toContain("30 days");
    expect(page.text).toContain("1,000,000 records");
  });

  test("the root CA: download link, fingerprint, expiry, per-client trust; rotation needs the typed word", async () => {
    const b = browserFor(s, owner);
    const page = await b.get("/settings");
    const der = new Uint8Array(await crypto.subtle.digest("SHA-256", s.ca.current.cert.rawData));
    const fingerprint = [...der].map((x) => x.toString(16).padStart(2, "0").toUpperCase()).join(":");
    expect(page.text).toContain(fingerprint);
    expect(page.text).toContain('href="/v1/ca.pem"');
    expect(page.text).toContain(new Date(s.ca.current.notAfter).toISOString().slice(0, 10));
    for (const how of ["curl --cacert", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "http.sslCAInfo", "update-ca-certificates", "add-trusted-cert"])
      expect(page.text).toContain(how);
    expect(page.text).not.toContain("PRIVATE KEY");
    const before = s.ca.current.certPem;
    const wrong = await b.submit("/settings/ca/rotate", { confirm: "yes" });
    expect(wrong.text).toContain("Type rotate exactly to confirm");
    expect(s.ca.current.certPem).toBe(before);
    const done = await b.submit("/settings/ca/rotate", { confirm: "rotate" });
    expect(done.text).toContain("Rotated: a new root certificate is active");
    expect(s.ca.current.certPem).not.toBe(before);
    expect(await (await s.app.request(`${BASE}/v1/ca.pem`)).text()).toBe(s.ca.current.certPem);
  });

  test("a cross-site post to the owner's forms changes nothing", async () => {
    const b = browserFor(s, owner);
    await b.get("/settings");
    const res = await b.post("/settings/rate-limits", { profile: "off" }, { origin: "https://evil.example", "sec-fetch-site": "cross-site" });
    expect(res.status).toBe(403);
    expect(res.text).toContain("Form refused");
    const noToken = await b.post("/settings/domains", { allowed_domains: "evil.example" }, SAME_ORIGIN, false);
    expect(noToken.status).toBe(403);
    expect(s.h.domain.rateLimiter!.settings().profile).toBe("default");
    expect((await s.h.call("GET", "/v1/owner/settings", { token: owner })).body.allowed_domains).toEqual([]);
  });
});
