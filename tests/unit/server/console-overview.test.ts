// The console's words and counts: a vault's overview (counts, what waits, next steps), pending badges on
// its tabs and on the vault list (per role), one word pair for decisions (Approve / Deny) on the approval
// pages and the console, the agents page's role words (what an agent of each role may do, instance role
// against role in the vault), and the Account page's sessions named by kind, client and address.

import { beforeEach, describe, expect, test } from "bun:test";
import { createRequestApprovalGate } from "../../../src/workflows/index.ts";
import { createPageBrowser, SAME_ORIGIN, setUpOwnerConsole, signIn, type PageBrowser } from "./console-fixtures.ts";
import { addAgent, addUser, fileAgentProposal, type Harness, login, PASSWORD, pathOf, setCredential } from "./fixtures.ts";

let h: Harness;
let owner: string;
let b: PageBrowser;

beforeEach(async () => {
  ({ h, owner, b } = await setUpOwnerConsole("v1"));
});

/** Holds one request of agent `name` in v1, as the pipeline's gate does for a rule with approve: each. */
async function holdRequest(name: string, path = "/v1/refunds"): Promise<string> {
  const vault = (await h.store.vaults.byName("v1"))!;
  const agentId = (await h.store.agents.byName(name))!.id;
  const refused = await createRequestApprovalGate(h.domain)
    .pass(
      {
        vault: { id: vault.id, name: "v1" },
        principal: `agent:${agentId}`,
        viaSession: false,
        fingerprint: path.padEnd(64, "f"),
        method: "POST",
        host: "api.example.com",
        target: path,
        service: "api.example.com",
        headers: [["content-type", "application/json"]],
        bodyPreview: '{"amount":5}',
        bodyBytes: 12,
        bodySha256: "b".repeat(64),
      },
      { waitMs: 0 },
    )
    .catch((e: { links?: { approval_id: string } }) => e);
  return (refused as { links: { approval_id: string } }).links.approval_id;
}

/** The text inside the element with `id` (tags stripped), for assertions on words. */
function textOf(html: string, id: string): string {
  const start = html.indexOf(`id="${id}"`);
  if (start < 0) return "";
  const tag = html.lastIndexOf("<", start);
  const name = /^<(\w+)/.exec(html.slice(tag))![1]!;
  let depth = 0;
  const re = new RegExp(`<(/?)${name}\\b[^>]*>`, "g");
  re.lastIndex = tag;
  for (let m = re.exec(html); m; m = re.exec(html)) {
    depth += m[1] ? -1 : 1;
    if (depth === 0)
      return decode(html.slice(tag, m.index).replace(/<[^>]+>/g, " "))
        .replace(/\s+/g, " ")
        .trim();
  }
  return "";
}

const decode = (text: string) =>
  text.replaceAll("&#39;", "'").replaceAll("&quot;", '"').replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&amp;", "&");

/** The vault tab link for `slug`, as text. */
const tab = (html: string, slug: string) => {
  const m = new RegExp(`<a href="/vaults/v1/${slug}"[^>]*>(.*?)</a>`).exec(html);
  return m ? m[1]!.replace(/<[^>]+>/g, "") : "";
};

describe("vault overview", () => {
  test("an empty vault: zero counts, the next steps (Add a service goes to the new page) and the line to run", async () => {
    const page = await b.get("/vaults/v1");
    expect(page.status).toBe(200);
    for (const id of ["count-credentials", "count-services", "count-agents", "count-proposals", "count-requests"])
      expect(textOf(page.text, id)).toStartWith("0 ");
    expect(page.text).toContain('href="/vaults/v1/credentials#set-credential"');
    expect(page.text).toContain('href="/vaults/v1/services/new"');
    expect(page.text).toContain('href="/vaults/v1/agents#invite"');
    expect(textOf(page.text, "next-steps")).toContain("Add a credential");
    expect(textOf(page.text, "run-command")).toBe("broker vault run --vault v1 -- <command>");
    expect(page.text).not.toContain('id="waiting"');
    // The glossary is gone; one short line remains, and it names Requests.
    expect(page.text).not.toContain("What each section does");
    expect(textOf(page.text, "sections-note")).toContain("Requests");
    expect(page.text).not.toContain("<script");
  });

  test("a busy vault: counts link to their tabs, what waits is said first, the tabs and the vault list carry badges", async () => {
    await setCredential(h, { token: owner }, "v1", "API_KEY", "s3cr3t-overview");
    const svc = await h.call("POST", "/v1/vaults/v1/services", { token: owner, body: { host: "api.example.com", auth: { type: "bearer", token: "API_KEY" } } });
    expect(svc.status).toBe(201);
    await fileAgentProposal(h, owner, "v1"); // an admin-role agent "bot" files one proposal
    await holdRequest("bot", "/v1/refunds");
    await holdRequest("bot", "/v1/payouts");

    const page = await b.get("/vaults/v1");
    expect(textOf(page.text, "count-credentials")).toBe("1 Credential values, by key name");
    expect(textOf(page.text, "count-services")).toStartWith("1 Service");
    expect(textOf(page.text, "count-agents")).toStartWith("1 Agent");
    expect(textOf(page.text, "count-proposals")).toStartWith("1 Pending proposal");
    expect(textOf(page.text, "count-requests")).toStartWith("2 Held requests");
    expect(page.text).toContain('href="/vaults/v1/requests" class="tile tile-alert" id="count-requests"');
    expect(textOf(page.text, "waiting")).toBe("1 proposal and 2 held requests wait for a decision: approve or deny them.");
    // Set up: no next steps, the line to run stays.
    expect(page.text).not.toContain('id="next-steps"');
    expect(textOf(page.text, "run-command")).toBe("broker vault run --vault v1 -- <command>");
    expect(page.text).not.toContain("s3cr3t-overview");

    // Every vault page's tabs carry the counts (not just the overview).
    const creds = await b.get("/vaults/v1/credentials");
    expect(tab(creds.text, "proposals")).toBe("Proposals (1 waiting)");
    expect(tab(creds.text, "requests")).toBe("Requests (2 waiting)");
    expect(tab(creds.text, "logs")).toBe("Logs");

    // The vault list: what waits in each vault, linked; a vault with nothing says so.
    await h.call("POST", "/v1/vaults", { token: owner, body: { name: "quiet" } });
    const list = await b.get("/");
    const row = (name: string) => list.text.split("<tr>").find((r) => r.includes(`href="/vaults/${name}" class="strong-link"`)) ?? "";
    expect(row("v1")).toContain('<a href="/vaults/v1/proposals" class="pending-link"><span class="count">1</span> proposal</a>');
    expect(row("v1")).toContain('<a href="/vaults/v1/requests" class="pending-link"><span class="count">2</span> held requests</a>');
    expect(row("quiet")).toContain("nothing");
  });

  test("a proxy-role person sees the counts of the pages they may open only", async () => {
    await fileAgentProposal(h, owner, "v1");
    await holdRequest("bot");
    await addUser(h, owner, "v1", "pat@example.com", "proxy");
    const pat = await signIn(h, "pat@example.com");
    const page = await pat.get("/vaults/v1");
    expect(textOf(page.text, "count-proposals")).toStartWith("1 ");
    expect(page.text).not.toContain('id="count-requests"');
    expect(page.text).not.toContain('id="count-agents"');
    expect(tab(page.text, "requests")).toBe("Requests");
    expect(textOf(page.text, "waiting")).toBe("1 proposal waits for a decision by an admin or member of this vault.");
    // Steps they cannot take say who does them, without a link.
    expect(page.text).not.toContain('href="/vaults/v1/services/new"');
    expect(textOf(page.text, "step-service")).toContain("A member or admin of this vault does this.");
    const list = await pat.get("/");
    expect(list.text).toContain('href="/vaults/v1/proposals" class="pending-link"');
    expect(list.text).not.toContain('href="/vaults/v1/requests" class="pending-link"');
  });
});

describe("one word pair for decisions: Approve and Deny", () => {
  test("the proposal approval page says Approve and takes decision=approve as well as allow", async () => {
    const { id, path, token } = await fileAgentProposal(h, owner, "v1");
    const page = await b.get(path);
    expect(page.text).toContain('value="allow" class="allow">Approve</button>');
    expect(page.text).not.toMatch(/>\s*Allow\s*</);
    const refused = await b.post(`/approve/${id}/decide`, { token, decision: "maybe" });
    expect(refused.text).toContain("Choose Approve or Deny.");
    const decided = await b.post(`/approve/${id}/decide`, { token, decision: "approve", value_K: "v-approve" });
    expect(decided.status).toBe(303);
    expect((await b.get(decided.location!)).text).toContain("Approved.");
  });

  test("a held request: Approve on its page and on the console's Requests page, whose flash says Approved", async () => {
    await addAgent(h, owner, "v1", "proxy", "ci-bot");
    const first = await holdRequest("ci-bot", "/v1/refunds");
    const held = await b.get(`/approve/requests/${first}`);
    expect(held.text).toContain('value="allow" class="allow">Approve</button>');
    expect(held.text).toContain("Approve sends this exact request once");
    expect(held.text).not.toMatch(/>\s*Allow\s*</);
    const list = await b.get("/vaults/v1/requests");
    expect(list.text).toContain(">Approve</button>");
    expect(list.text).not.toMatch(/>\s*Allow\s*</);
    const done = await b.submit(`/vaults/v1/requests/${first}/approve`, {});
    expect(textOf(done.text, "flash")).toBe("Approved POST https://api.example.com/v1/refunds: the agent's identical request is sent once.");
    const second = await holdRequest("ci-bot", "/v1/payouts");
    const byPage = await b.post(`/approve/requests/${second}/decide`, { decision: "approve" });
    expect(byPage.status).toBe(303);
    expect(textOf((await b.get(byPage.location!)).text, "notice")).toBe("Approved. The agent's identical request will now be sent once.");
  });
});

describe("agents: what each role may do, and which role is which", () => {
  test("the role menu says what an agent of each role can do, never that it sets credentials or approves", async () => {
    const page = await b.get("/vaults/v1/agents");
    const options = [...page.text.matchAll(/<option value="(\w+)"[^>]*>([^<]*)<\/option>/g)].map((m) => [m[1], m[2]]);
    expect(options.filter(([v]) => ["proxy", "member", "admin"].includes(v!))).toEqual([
      ["proxy", "proxy: uses the vault&#39;s services through the broker"],
      ["member", "member: also reads the vault&#39;s request log"],
      ["admin", "admin: also invites agents and changes the vault&#39;s settings"],
    ]);
    expect(page.text).not.toContain("approves proposals");
    expect(page.text).toContain("Role in vault v1");
    expect(textOf(page.text, "agent-role-note")).toContain("never reads or sets a credential");
  });

  test("a proxy-role invite says its role in the vault apart from the instance role, and the redeem answer names both", async () => {
    const created = await b.submit("/vaults/v1/agents/invite", { name: "runner", role: "proxy", token_ttl_seconds: "" });
    expect(textOf(created.text, "invite-roles")).toBe(
      "Role in vault v1 proxy uses the vault's services through the broker Instance role member (the broker-wide role of every invited agent: it creates no vaults)",
    );
    const url = /id="invite-url" value="([^"]+)"/.exec(created.text)![1]!;
    const red = await h.call("POST", pathOf(url.replaceAll("&amp;", "&")));
    expect(red.status).toBe(201);
    expect(red.body.agent).toEqual({ name: "runner", role: "member", instance_role: "member" });
    expect(red.body.vaults).toEqual([{ name: "v1", role: "proxy" }]);
    const list = await b.get("/vaults/v1/agents");
    expect(list.text).toContain('data-label="Role in v1"');
  });
});

describe("account: sessions by kind, client, address and last use", () => {
  const FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

  test("a browser sign-in, a CLI login, a curl login and a vault run session, each named; no token shown", async () => {
    const browser = createPageBrowser(h.domain);
    await browser.get("/");
    expect((await browser.post("/login", { email: "owner@example.com", password: PASSWORD }, { ...SAME_ORIGIN, "user-agent": FIREFOX })).status).toBe(303);
    const cli = await h.call("POST", "/v1/auth/login", {
      body: { email: "owner@example.com", password: PASSWORD },
      headers: { "user-agent": "broker-cli/0.1.0" },
      ip: "198.51.100.4",
    });
    const curl = await h.call("POST", "/v1/auth/login", { body: { email: "owner@example.com", password: PASSWORD }, headers: { "user-agent": "curl/8.5.0" } });
    const run = await h.call("POST", "/v1/sessions", { token: cli.body.token, body: { vault: "v1" }, headers: { "user-agent": "broker-cli/0.1.0" } });
    expect(run.status).toBe(201);

    const page = await browser.get("/account");
    const rows = [...textOf(page.text, "sessions").matchAll(/(Browser sign-in|CLI sign-in|API sign-in|Scoped session from vault run)/g)].map((m) => m[1]);
    // The owner's registration through the API and the curl login are API sign-ins; setUpOwnerConsole signed in on the page too.
    expect(rows.sort()).toEqual(["API sign-in", "API sign-in", "Browser sign-in", "Browser sign-in", "CLI sign-in", "Scoped session from vault run"]);
    const table = textOf(page.text, "sessions");
    expect(table).toContain("Browser sign-in this browser Firefox on Linux");
    expect(table).toContain("CLI sign-in broker CLI 0.1.0 198.51.100.4");
    expect(table).toContain("API sign-in curl");
    expect(table).toContain("Scoped session from vault run (admin in v1 ) broker CLI 0.1.0");
    expect(table).toContain("just now");
    expect(page.text).toContain(`title="${FIREFOX}"`);
    for (const t of [cli.body.token, curl.body.token, run.body.token]) expect(page.text).not.toContain(t);
    expect(page.text).not.toMatch(/av_(sess|agt)_/);
  });

  test("a session from before the broker recorded its client reads as a plain sign-in", async () => {
    const before = await login(h, "owner@example.com");
    expect(before.status).toBe(200);
    // As a row made before migration 18 has it: no channel, client or address.
    await h.store.db.run("UPDATE sessions SET channel = NULL, client_agent = NULL, client_address = NULL WHERE kind = ? AND channel = ?", ["user", "api"]);
    const table = textOf((await b.get("/account")).text, "sessions");
    expect(table).toContain("Sign-in Unknown client not recorded");
    // The console's own sign-in (this test posts no User-Agent) is still a browser sign-in, by its form.
    expect(table).toContain("Browser sign-in this browser Unknown client not recorded");
  });
});
