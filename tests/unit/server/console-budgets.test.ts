// Budgets in the console (issue 38) through app.request(): the Budgets section of the vault's settings lists each
// budget with used/limit and its state, a human admin sets one with the form (read as the API reads it), changes,
// resets and removes it (removal typed), a refused form comes back as typed with the refusal in the form's words;
// an agent's page shows the budgets of that agent and sets one for it; a member sees the table and no form.

import { beforeEach, describe, expect, test } from "bun:test";
import { addAgent, addUser, type Harness } from "./fixtures.ts";
import { type PageBrowser, setUpOwnerConsole, signIn } from "./console-fixtures.ts";

let h: Harness;
let owner: string;
let b: PageBrowser;

beforeEach(async () => {
  ({ h, owner, b } = await setUpOwnerConsole());
});

const budgets = async () => (await h.call("GET", "/v1/vaults/v1/budgets", { token: owner })).body.budgets as Array<Record<string, any>>;

const FORM = {
  name: "daily-llm",
  scope: "vault",
  agent: "",
  service: "",
  hosts: "",
  period: "day",
  requests: "1000",
  input_tokens: "",
  output_tokens: "",
  total_tokens: "200000",
  cost: "20",
  soft_percent: "80",
  soft_action: "notify",
};

/** Adds `delta` to the budget's usage this period, as the proxy's counting would. */
async function use(name: string, delta: Partial<{ requests: number; totalTokens: number; costMicros: number; unpricedCalls: number }>) {
  const vault = (await h.store.vaults.byName("v1"))!;
  const row = (await h.store.budgets.get(vault.id, name))!;
  const now = h.clock.now();
  const start = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), new Date(now).getUTCDate());
  await h.store.budgets.add(row.id, start, { requests: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, costMicros: 0, unpricedCalls: 0, ...delta });
}

describe("vault settings: Budgets", () => {
  test("an admin sets a budget with the form, sees its use and state, changes, resets and removes it", async () => {
    const empty = await b.get("/vaults/v1/settings");
    expect(empty.status).toBe(200);
    expect(empty.text).toContain('id="budgets-empty"');
    expect(empty.text).toContain('id="budget-form"');

    const saved = await b.submit("/vaults/v1/settings/budgets", FORM);
    expect(saved.location).toBe("/vaults/v1/settings#budgets");
    expect(saved.text).toContain("Budget daily-llm saved: 1,000 requests, 200,000 tokens and 20.00 USD per day.");
    expect(await budgets()).toMatchObject([
      { name: "daily-llm", scope: "vault", period: "day", limits: { requests: 1000, total_tokens: 200000, cost: 20 }, soft_percent: 80, soft_action: "notify" },
    ]);

    await use("daily-llm", { requests: 850, totalTokens: 1234, costMicros: 4_500_000, unpricedCalls: 2 });
    const page = await b.get("/vaults/v1/settings");
    expect(page.text).toContain("850 / 1,000");
    expect(page.text).toContain("1,234 / 200,000");
    expect(page.text).toContain("4.50 USD / 20.00 USD");
    expect(page.text).toContain("Past soft threshold");
    expect(page.text).toContain("soft at 80%: notify");
    expect(page.text).toContain("2 LLM calls with a model the price table does not name");
    expect(page.text).toMatch(/<progress class="budget-bar budget-bar-soft" max="1000" value="850"/);

    // Change: the form comes prefilled; the new limits replace the old, the use stays.
    const change = await b.get("/vaults/v1/settings?budget=daily-llm");
    expect(change.text).toContain("Change budget daily-llm");
    expect(change.text).toMatch(/name="requests" value="1000"/);
    await b.submit("/vaults/v1/settings/budgets", { ...FORM, requests: "800", soft_percent: "", cost: "" });
    const over = await b.get("/vaults/v1/settings");
    expect(over.text).toContain("Limit reached");
    expect((await budgets())[0]).toMatchObject({ state: "exceeded", limits: { requests: 800, cost: null }, used: { requests: 850 } });

    const reset = await b.submit("/vaults/v1/settings/budgets/daily-llm/reset", {});
    expect(reset.text).toContain("Budget daily-llm counts again from nothing this day.");
    expect((await budgets())[0]).toMatchObject({ state: "ok", used: { requests: 0 } });

    const asked = await b.get("/vaults/v1/settings?remove=daily-llm");
    expect(asked.text).toContain('id="remove-budget"');
    expect(asked.text).toContain("Remove budget daily-llm?");
    expect((await b.get("/vaults/v1/settings?remove=nothing")).text).not.toContain('id="remove-budget"');
    const wrong = await b.submit("/vaults/v1/settings/budgets/daily-llm/delete", { confirm: "daily" });
    expect(wrong.text).toContain("Type daily-llm exactly to confirm");
    expect(await budgets()).toHaveLength(1);
    const removed = await b.submit("/vaults/v1/settings/budgets/daily-llm/delete", { confirm: "daily-llm" });
    expect(removed.text).toContain("Budget daily-llm removed");
    expect(removed.text).toContain('id="budgets-empty"');
    expect(await budgets()).toEqual([]);
  });

  test("a refused form comes back as typed, the refusal in the form's words", async () => {
    await b.get("/vaults/v1/settings");
    const none = await b.post("/vaults/v1/settings/budgets", { ...FORM, name: "keep-me", requests: "", total_tokens: "", cost: "", soft_percent: "" });
    expect(none.status).toBe(400);
    expect(none.text).toContain("Set at least one limit: requests, tokens or cost.");
    expect(none.text).toMatch(/id="f-budget-name"[^>]*value="keep-me"|value="keep-me"[^>]*id="f-budget-name"/);

    const zero = await b.post("/vaults/v1/settings/budgets", { ...FORM, requests: "0" });
    expect(zero.text).toContain("Requests must be at least 1.");
    const words = await b.post("/vaults/v1/settings/budgets", { ...FORM, total_tokens: "lots" });
    expect(words.text).toContain("Total tokens must be a whole number of tokens.");
    const approve = await b.post("/vaults/v1/settings/budgets", { ...FORM, soft_percent: "", soft_action: "approve" });
    expect(approve.text).toContain("Give a soft threshold percent");
    const hosts = await b.post("/vaults/v1/settings/budgets", { ...FORM, scope: "hosts", hosts: " " });
    expect(hosts.text).toContain("Hosts is required");
    const agent = await b.post("/vaults/v1/settings/budgets", { ...FORM, scope: "agent", agent: "nobody" });
    expect(agent.text).toContain("Vault v1 has no agent named nobody.");
    const name = await b.post("/vaults/v1/settings/budgets", { ...FORM, name: "Daily LLM" });
    expect(name.text).toContain("name must be 1 to 64 lower-case letters");
    expect(await budgets()).toEqual([]);
    expect((await b.get("/vaults/v1/settings/budgets")).location).toBe("/vaults/v1/settings#budgets");
  });

  test("hosts and service scopes from the form; only the chosen scope's field is sent", async () => {
    await h.call("POST", "/v1/vaults/v1/services", { token: owner, body: { host: "api.openai.com", auth: { type: "passthrough" } } });
    const page = await b.get("/vaults/v1/settings");
    expect(page.text).toContain('<option value="api.openai.com"');
    await b.submit("/vaults/v1/settings/budgets", {
      ...FORM,
      name: "llm-hosts",
      scope: "hosts",
      hosts: "API.openai.com,\napi.anthropic.com",
      service: "api.openai.com",
    });
    await b.submit("/vaults/v1/settings/budgets", { ...FORM, name: "openai", scope: "service", service: "api.openai.com", hosts: "x" });
    expect(await budgets()).toMatchObject([
      { name: "llm-hosts", scope: "hosts", hosts: ["api.openai.com", "api.anthropic.com"], service: null },
      { name: "openai", scope: "service", service: "api.openai.com", hosts: null },
    ]);
    const list = await b.get("/vaults/v1/settings");
    expect(list.text).toContain("api.anthropic.com");
  });

  test("an agent's page shows its budgets and sets one for it; the settings link to it", async () => {
    await addAgent(h, owner, "v1", "proxy", "deploy-bot");
    await addAgent(h, owner, "v1", "proxy", "other-bot");
    await h.call("PUT", "/v1/vaults/v1/budgets/others", { token: owner, body: { scope: "agent", agent: "other-bot", period: "day", limits: { requests: 5 } } });
    const agents = await b.get("/vaults/v1/agents");
    expect(agents.text).toContain('href="/vaults/v1/agents/deploy-bot"');

    const page = await b.get("/vaults/v1/agents/deploy-bot");
    expect(page.status).toBe(200);
    expect(page.text).toContain("Agent deploy-bot");
    expect(page.text).toContain('id="agent-budgets-empty"');
    expect(page.text).not.toContain("budgets/others/");
    expect(page.text).toContain('name="agent" value="deploy-bot"');

    // The agent is the page's, whatever the form says.
    const saved = await b.submit("/vaults/v1/agents/deploy-bot/budgets", { ...FORM, name: "deploy-daily", scope: "vault", agent: "other-bot" });
    expect(saved.location).toBe("/vaults/v1/agents/deploy-bot#budgets");
    expect(saved.text).toContain("Budget deploy-daily saved");
    expect(saved.text).toContain("0 / 1,000");
    expect((await budgets()).find((x) => x.name === "deploy-daily")).toMatchObject({ scope: "agent", agent: "deploy-bot" });

    const refused = await b.post("/vaults/v1/agents/deploy-bot/budgets", { ...FORM, requests: "", total_tokens: "", cost: "" });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain("Set at least one limit");

    // Reset and Remove from the agent's page come back to it.
    const reset = await b.submit("/vaults/v1/settings/budgets/deploy-daily/reset", { agent_page: "deploy-bot" });
    expect(reset.location).toBe("/vaults/v1/agents/deploy-bot#budgets");
    const settings = await b.get("/vaults/v1/settings");
    expect(settings.text).toContain('href="/vaults/v1/agents/deploy-bot"');
    expect((await b.get("/vaults/v1/agents/nobody")).status).toBe(404);

    // An agent of another vault has no page here, and gets no budget through this one.
    await h.call("POST", "/v1/vaults", { token: owner, body: { name: "v2" } });
    await addAgent(h, owner, "v2", "proxy", "stranger");
    expect((await b.get("/vaults/v1/agents/stranger")).status).toBe(404);
    const theirs = await b.post("/vaults/v1/agents/stranger/budgets", { ...FORM, name: "stranger-daily" });
    expect(theirs.status).toBe(404);
    expect((await budgets()).some((x) => x.name === "stranger-daily")).toBe(false);
  });

  test("a member sees the budgets, no form and no buttons, and cannot set, reset or remove one", async () => {
    await h.call("PUT", "/v1/vaults/v1/budgets/daily", { token: owner, body: { scope: "vault", period: "day", limits: { requests: 10 } } });
    await addUser(h, owner, "v1", "mia@example.com", "member");
    const mia = await signIn(h, "mia@example.com");
    const page = await mia.get("/vaults/v1/settings");
    expect(page.text).toContain('id="budgets-table"');
    expect(page.text).toContain("0 / 10");
    expect(page.text).toContain('id="budgets-readonly"');
    expect(page.text).not.toContain('id="budget-form"');
    expect(page.text).not.toContain("/budgets/daily/reset");
    const set = await mia.submit("/vaults/v1/settings/budgets", { ...FORM, name: "mine" });
    expect(set.text).toContain("does not allow this");
    await mia.submit("/vaults/v1/settings/budgets/daily/delete", { confirm: "daily" });
    expect((await budgets()).map((x) => x.name)).toEqual(["daily"]);
    expect((await mia.get("/vaults/v1/agents/anyone")).text).toContain('id="not-admin"');
  });

  test("a proxy-role person sees neither the budgets nor the form", async () => {
    await addUser(h, owner, "v1", "pat@example.com", "proxy");
    const pat = await signIn(h, "pat@example.com");
    const page = await pat.get("/vaults/v1/settings");
    expect(page.text).toContain('id="budgets-refused"');
    expect(page.text).not.toContain('id="budget-form"');
  });
});
