// The console's Proposals, Agents and Members pages through app.request(): names instead of
// principal ids, approve (typed values) / deny / a new approval link, agent and person invites
// shown once (never in a flash cookie or URL), revocations, refusals for proxy-role and member
// people (the same domain rules as the API), CSRF refusals, and no sentinel value in any page.

import { beforeEach, describe, expect, test } from "bun:test";
import { addAgent, addUser, createVault, type Harness, pathOf, register, sentinel, setCredential } from "./fixtures.ts";
import { type PageBrowser, SAME_ORIGIN, setUpOwnerConsole, signIn as signInAs } from "./console-fixtures.ts";

let h: Harness;
let owner: string;
let b: PageBrowser;

const signIn = (email: string) => signInAs(h, email);

beforeEach(async () => {
  ({ h, owner, b } = await setUpOwnerConsole());
});

const slot = (key: string, extra: Record<string, unknown> = {}) => ({
  action: "set",
  key,
  description: `${key} for the API`,
  obtain: "https://example.com/keys",
  ...extra,
});
const service = (host: string, token: string) => ({ action: "set", host, description: "the API", auth: { type: "bearer", token } });

async function fileProposal(agent: { token: string; headers: Record<string, string> }, body: Record<string, unknown>) {
  const res = await h.call("POST", "/v1/proposals", { token: agent.token, headers: agent.headers, body });
  expect(res.status).toBe(201);
  return res.body as { id: number; approval_url: string };
}

/** The flash shown on the page a 303 leads to. */
async function follow(browser: PageBrowser, res: { status: number; location: string | null }) {
  expect(res.status).toBe(303);
  return browser.get(res.location!);
}

describe("proposals", () => {
  test("pending first with the agent's name, note, hosts, slots and warning; approve by typing the value; history names the approver", async () => {
    const value = sentinel("proposal");
    const old = sentinel("old");
    await setCredential(h, { token: owner }, "v1", "OLD_KEY", old);
    const agent = await addAgent(h, owner, "v1", "proxy", "billing-bot");
    const first = await fileProposal(agent, {
      services: [service("api.example.com", "API_KEY")],
      credentials: [slot("API_KEY", { obtain_instructions: "Open <b>settings</b> & create a key" })],
      message: "Need the billing API <script>alert(1)</script>",
    });
    const second = await fileProposal(agent, { services: [service("new.example.com", "OLD_KEY")], message: "reuse the old key" });

    const page = await b.get("/vaults/v1/proposals");
    expect(page.status).toBe(200);
    expect(page.text).toContain("billing-bot");
    expect(page.text).not.toMatch(/agent:\d/);
    expect(page.text).toContain("Need the billing API &lt;script&gt;alert(1)&lt;/script&gt;");
    expect(page.text).toContain("Open &lt;b&gt;settings&lt;/b&gt; &amp; create a key");
    expect(page.text).toContain('href="https://example.com/keys"');
    expect(page.text).toContain("api.example.com");
    expect(page.text).toContain("sends your existing credential OLD_KEY to a new host, new.example.com");
    expect(page.text).toContain(`name="value_API_KEY"`);
    expect(page.text).toContain('type="password"');
    expect(page.text).toContain("No decided proposals yet");

    const missing = await b.post(`/vaults/v1/proposals/${first.id}/approve`, {});
    expect((await follow(b, missing)).text).toContain("A value for API_KEY is required");
    const ok = await b.post(`/vaults/v1/proposals/${first.id}/approve`, { value_API_KEY: value });
    const after = await follow(b, ok);
    expect(after.text).toContain(`Proposal #${first.id} approved`);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services.map((s: { host: string }) => s.host)).toContain("api.example.com");
    expect((await h.call("GET", `/v1/proposals/${first.id}`, { token: agent.token, headers: agent.headers })).body.status).toBe("applied");

    const denied = await follow(b, await b.post(`/vaults/v1/proposals/${second.id}/deny`, {}));
    expect(denied.text).toContain(`Proposal #${second.id} denied`);
    expect(denied.text).toContain("Nothing to decide");
    const history = denied.text.slice(denied.text.indexOf('id="proposal-history"'));
    expect(history).toContain("applied");
    expect(history).toContain("rejected");
    expect(history).toContain("by owner@example.com");
    expect(history).toContain("billing-bot");
    // Deciding twice is the domain's conflict, shown as a flash.
    expect((await follow(b, await b.post(`/vaults/v1/proposals/${second.id}/deny`, {}))).text).toContain("already decided");
    for (const p of b.pages) {
      expect(p.html.includes(value)).toBe(false);
      expect(p.html.includes(old)).toBe(false);
    }
    for (const line of h.logs) expect(line.includes(value)).toBe(false);
  });

  test("a proxy-role person sees proposals but cannot decide; a member can", async () => {
    await addUser(h, owner, "v1", "proxy@example.com", "proxy");
    await addUser(h, owner, "v1", "member@example.com", "member");
    const agent = await addAgent(h, owner, "v1", "proxy", "bot");
    const p = await fileProposal(agent, { services: [service("api.example.com", "K")], credentials: [slot("K")] });
    const proxy = await signIn("proxy@example.com");
    const page = await proxy.get("/vaults/v1/proposals");
    expect(page.status).toBe(200);
    expect(page.text).toContain("bot");
    expect(page.text).not.toContain('name="value_K"');
    expect(page.text).toContain("can see proposals but not decide them");
    for (const action of ["approve", "deny", "approval-link"]) {
      const res = await follow(proxy, await proxy.post(`/vaults/v1/proposals/${p.id}/${action}`, { value_K: "x" }));
      expect(res.text).toContain("Your role in this vault (proxy) does not allow this");
    }
    expect((await h.call("GET", `/v1/proposals/${p.id}`, { token: owner })).body.status).toBe("pending");
    const member = await signIn("member@example.com");
    expect((await member.get("/vaults/v1/proposals")).text).toContain('name="value_K"');
    expect((await follow(member, await member.post(`/vaults/v1/proposals/${p.id}/approve`, { value_K: "v" }))).text).toContain("approved");
  });

  test("a new approval link is shown once; the old one stops working; the API route agrees; agents are refused", async () => {
    const agent = await addAgent(h, owner, "v1", "admin", "bot");
    const p = await fileProposal(agent, { services: [service("api.example.com", "K")], credentials: [slot("K")] });
    const res = await b.post(`/vaults/v1/proposals/${p.id}/approval-link`, {});
    expect(res.status).toBe(200);
    const link = /value="(http:\/\/broker\.test\/approve\/\d+\?token=av_appr_[^"]+)"/.exec(res.text)?.[1];
    expect(link).toBeDefined();
    expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(res.text).toContain('src="/assets/copy.js"');
    expect(b.setCookies.some((c) => c.includes("av_appr_"))).toBe(false);
    expect((await b.get(pathOf(p.approval_url) + new URL(p.approval_url).search)).status).toBe(404);
    expect((await b.get(pathOf(link!) + new URL(link!.replaceAll("&amp;", "&")).search)).status).toBe(200);
    const api = await h.call("POST", `/v1/proposals/${p.id}/approval-link`, { token: owner });
    expect(api.status).toBe(201);
    expect(api.body.approval_url).toContain("token=av_appr_");
    expect((await h.call("POST", `/v1/proposals/${p.id}/approval-link`, { token: agent.token, headers: agent.headers })).status).toBe(403);
    await b.post(`/vaults/v1/proposals/${p.id}/deny`, {});
    expect((await follow(b, await b.post(`/vaults/v1/proposals/${p.id}/approval-link`, {}))).text).toContain("already decided");
  });

  test("a proposal of another vault is not reachable through this vault's path", async () => {
    await createVault(h, owner, "v2");
    const agent = await addAgent(h, owner, "v2", "proxy", "bot2");
    const p = await fileProposal(agent, { services: [service("api.example.com", "K")], credentials: [slot("K")] });
    expect((await follow(b, await b.post(`/vaults/v1/proposals/${p.id}/deny`, {}))).text).toContain("No such proposal");
    expect((await h.call("GET", `/v1/proposals/${p.id}`, { token: owner })).body.status).toBe("pending");
  });
});

describe("agents", () => {
  test("invite shows the link once with the curl command; the agent redeems it; listed with its session; revoke needs the typed name", async () => {
    const empty = await b.get("/vaults/v1/agents");
    expect(empty.text).toContain("No agents yet");
    const res = await b.post("/vaults/v1/agents/invite", { name: "ci-bot", role: "member", token_ttl_seconds: "" });
    expect(res.status).toBe(200);
    const url = /value="(http:\/\/broker\.test\/invite\/av_inv_[^"]+)"/.exec(res.text)?.[1];
    expect(url).toBeDefined();
    expect(res.text).toContain(`curl -X POST ${url}`);
    expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(b.setCookies.some((c) => c.includes("av_inv_"))).toBe(false);
    expect(res.location).toBeNull();

    const listed = await b.get("/vaults/v1/agents");
    expect(listed.text).toContain("ci-bot");
    expect(listed.text.includes(url!)).toBe(false); // shown once
    expect(listed.text).toContain('id="agent-invites"');

    const red = await h.call("POST", pathOf(url!));
    expect(red.status).toBe(201);
    expect(red.body.vaults).toEqual([{ name: "v1", role: "member" }]);
    const page = await b.get("/vaults/v1/agents");
    const row = page.text.slice(page.text.indexOf('id="agents"'));
    expect(row).toContain("ci-bot");
    expect(row).toMatch(/data-label="Active sessions"><span class="cell">1</);

    const wrong = await follow(b, await b.post("/vaults/v1/agents/ci-bot/revoke", { confirm: "nope" }));
    expect(wrong.text).toContain("Type ci-bot exactly to confirm");
    expect((await h.call("GET", "/discover", { token: red.body.token, headers: { "x-vault": "v1" } })).status).toBe(200);
    const gone = await follow(b, await b.post("/vaults/v1/agents/ci-bot/revoke", { confirm: "ci-bot" }));
    expect(gone.text).toContain("Agent ci-bot revoked");
    expect((await h.call("GET", "/discover", { token: red.body.token, headers: { "x-vault": "v1" } })).status).toBe(401);
  });

  test("pending agent invites are listed and revoked; a bad name is a flash", async () => {
    await b.post("/vaults/v1/agents/invite", { name: "later-bot", role: "proxy" });
    const list = await h.call("GET", "/v1/vaults/v1/agent-invites", { token: owner });
    const id = list.body.invites[0].id as string;
    expect((await b.get("/vaults/v1/agents")).text).toContain("later-bot");
    const revoked = await follow(b, await b.post(`/vaults/v1/agents/invites/${id}/revoke`, {}));
    expect(revoked.text).toContain("Agent invite revoked");
    expect((await h.call("GET", "/v1/vaults/v1/agent-invites", { token: owner })).body.invites).toEqual([]);
    const bad = await follow(b, await b.post("/vaults/v1/agents/invite", { name: "Bad Name!" }));
    expect(bad.text).toContain("Name must be 1-63 lower-case letters");
  });

  test("members and proxy-role people neither see nor invite nor revoke agents", async () => {
    await addAgent(h, owner, "v1", "proxy", "bot");
    for (const [email, role] of [
      ["member@example.com", "member"],
      ["proxy@example.com", "proxy"],
    ] as const) {
      await addUser(h, owner, "v1", email, role);
      const them = await signIn(email);
      const page = await them.get("/vaults/v1/agents");
      expect(page.text).toContain(`Your role here (${role}) does not manage agents`);
      expect(page.text).not.toContain('id="invite-agent"');
      const inv = await follow(them, await them.post("/vaults/v1/agents/invite", { name: `x-${role}` }));
      expect(inv.text).toContain(`Your role in this vault (${role}) does not allow this`);
      const rev = await follow(them, await them.post("/vaults/v1/agents/bot/revoke", { confirm: "bot" }));
      expect(rev.text).toContain(`Your role in this vault (${role}) does not allow this`);
    }
    expect((await h.call("GET", "/v1/vaults/v1/agent-invites", { token: owner })).body.invites).toEqual([]);
    expect(await h.store.agents.byName("bot")).toBeDefined();
  });
});

describe("members", () => {
  test("people with roles; a person invite shown once; listed; revoked", async () => {
    await addUser(h, owner, "v1", "member@example.com", "member");
    const page = await b.get("/vaults/v1/members");
    expect(page.text).toContain("owner@example.com");
    expect(page.text).toContain("member@example.com");
    expect(page.text).toContain("No pending invites");
    const res = await b.post("/vaults/v1/members/invite", { email: "New@Example.com", role: "proxy" });
    expect(res.status).toBe(200);
    const url = /value="(http:\/\/broker\.test\/v1\/vault-invites\/av_uinv_[^"]+\/accept)"/.exec(res.text)?.[1];
    expect(url).toBeDefined();
    expect(res.text).toContain(`broker vault join ${url}`);
    expect(b.setCookies.some((c) => c.includes("av_uinv_"))).toBe(false);
    const listed = await b.get("/vaults/v1/members");
    expect(listed.text).toContain("new@example.com");
    expect(listed.text.includes(url!)).toBe(false);
    const id = (await h.call("GET", "/v1/vaults/v1/invites", { token: owner })).body.invites[0].id as string;
    expect((await follow(b, await b.post(`/vaults/v1/members/invites/${id}/revoke`, {}))).text).toContain("Invite revoked");
    const { token } = await register(h, "new@example.com");
    expect((await h.call("POST", pathOf(url!), { token })).status).toBe(404);
  });

  test("members and proxy-role people cannot list or invite people; a role above one's own is refused", async () => {
    for (const [email, role] of [
      ["member@example.com", "member"],
      ["proxy@example.com", "proxy"],
    ] as const) {
      await addUser(h, owner, "v1", email, role);
      const them = await signIn(email);
      const page = await them.get("/vaults/v1/members");
      expect(page.text).toContain(`Your role here (${role}) does not show the member list`);
      expect(page.text).not.toContain("owner@example.com</");
      const inv = await follow(them, await them.post("/vaults/v1/members/invite", { role: "member" }));
      expect(inv.text).toContain(`Your role in this vault (${role}) does not allow this`);
    }
    expect((await h.call("GET", "/v1/vaults/v1/invites", { token: owner })).body.invites).toEqual([]);
    expect((await follow(b, await b.post("/vaults/v1/members/invite", { role: "superuser" }))).text).toContain("Role must be admin, member or proxy");
  });
});

describe("page security", () => {
  test("cross-site or token-less posts change nothing", async () => {
    const agent = await addAgent(h, owner, "v1", "proxy", "bot");
    const p = await fileProposal(agent, { services: [service("api.example.com", "K")], credentials: [slot("K")] });
    const posts: [string, Record<string, string>][] = [
      [`/vaults/v1/proposals/${p.id}/approve`, { value_K: "v" }],
      [`/vaults/v1/proposals/${p.id}/deny`, {}],
      [`/vaults/v1/proposals/${p.id}/approval-link`, {}],
      ["/vaults/v1/agents/invite", { name: "evil-bot" }],
      ["/vaults/v1/agents/bot/revoke", { confirm: "bot" }],
      ["/vaults/v1/members/invite", { email: "evil@example.com" }],
    ];
    for (const [path, form] of posts) {
      expect((await b.post(path, form, { origin: "http://evil.example" })).status).toBe(403);
      expect((await b.post(path, form, SAME_ORIGIN, false)).status).toBe(403);
    }
    expect((await h.call("GET", `/v1/proposals/${p.id}`, { token: owner })).body.status).toBe("pending");
    expect(await h.store.agents.byName("bot")).toBeDefined();
    expect((await h.call("GET", "/v1/vaults/v1/agent-invites", { token: owner })).body.invites).toEqual([]);
    expect((await h.call("GET", "/v1/vaults/v1/invites", { token: owner })).body.invites).toEqual([]);
  });

  test("the pages carry the CSP; the copy script is served from /assets", async () => {
    for (const path of ["/vaults/v1/proposals", "/vaults/v1/agents", "/vaults/v1/members"]) {
      const res = await b.get(path);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
      expect(res.headers.get("content-security-policy")).not.toContain("script-src");
    }
    const js = await b.get("/assets/copy.js");
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toContain("javascript");
    expect(js.text).toContain("navigator.clipboard");
  });
});
