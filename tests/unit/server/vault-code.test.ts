// Vaults as code (issue 39) through the API: GET /v1/export writes a vault as a file (keys and references, never a
// value; receiver URLs masked) that POST /v1/apply reproduces on a fresh instance; the plan says every change in
// words and what is left for a person; a second apply changes nothing; a dry run changes nothing; the whole file is
// one transaction; only people who administer the vaults export or apply; a vault marked managed refuses every
// other write (API and console) with 409 vault_managed, except a value for a key its file lists and invites of the
// agents and people it names.

import { beforeEach, describe, expect, test } from "bun:test";
import { addAgent, addUser, createAgentInvite, createHarness, createVault, type Harness, pathOf, register, sentinel, setCredential } from "./fixtures.ts";
import { setUpOwnerConsole } from "./console-fixtures.ts";

const MANAGED = "vault pay is managed as code: change its file and run broker apply";

type File = { version: 1; vaults: Record<string, Record<string, any>> };

/** A vault with one of everything a file holds, set through the API. */
async function furnish(h: Harness, owner: string) {
  await createVault(h, owner, "pay");
  const value = sentinel("stripe");
  await setCredential(h, { token: owner }, "pay", "STRIPE_KEY", value);
  const call = async (method: string, path: string, body?: unknown, status = 200) => {
    const res = await h.call(method, path, { token: owner, body });
    expect({ path, status: res.status, body: res.body }).toMatchObject({ path, status });
    return res;
  };
  await call(
    "POST",
    "/v1/secret-stores",
    { name: "kv", kind: "vault", address: "https://vault.example.com:8200/", auth: { method: "token", token: sentinel("kv") } },
    201,
  );
  await call("PUT", "/v1/secret-stores/kv/vaults/pay");
  await call("PUT", "/v1/vaults/pay/credentials/DB_PASSWORD", { ref: "kv:secret/db#password" });
  await call("POST", "/v1/vaults/pay/services", { template: "stripe", operations: ["read", "write"], keys: { token: "STRIPE_KEY" } }, 201);
  await call("POST", "/v1/vaults/pay/services", { template: "jira", host: "acme.atlassian.net", settings: { username: "ops@example.com" } }, 201);
  await call(
    "POST",
    "/v1/vaults/pay/services",
    {
      host: "api.example.com:8443",
      description: "internal",
      auth: { type: "header", token: "EX_KEY", header: "X-Api-Key", prefix: "Key " },
      rules: [{ methods: ["GET"], paths: ["/v1/*"] }],
    },
    201,
  );
  await call(
    "POST",
    "/v1/vaults/pay/services",
    {
      host: "auth.example.org",
      enabled: false,
      auth: { type: "oauth2_client_credentials", token_url: "https://auth.example.org/token", client_id: "CID", client_secret: "CSECRET", scopes: ["read"] },
    },
    201,
  );
  await call("PATCH", "/v1/vaults/pay", { unmatched_hosts: "deny" });
  await addAgent(h, owner, "pay", "proxy", "ci-bot");
  await addUser(h, owner, "pay", "bob@example.com", "member");
  await call("PUT", "/v1/vaults/pay/budgets/daily-llm", { scope: "vault", period: "day", limits: { total_tokens: 100000, cost: 12.5 }, soft_percent: 80 });
  await call("PUT", "/v1/vaults/pay/budgets/bot", { scope: "agent", agent: "ci-bot", period: "month", limits: { requests: 1000 } });
  await call("POST", "/v1/vaults/pay/webhooks", { url: "https://hooks.slack.com/services/T0/B0/XXXX", format: "slack" }, 201);
  return { value };
}

const exportOf = async (h: Harness, token: string, vault = "pay") => {
  const res = await h.call("GET", `/v1/export?vault=${vault}`, { token });
  expect(res.status).toBe(200);
  return res.body as File;
};
const apply = async (h: Harness, token: string, file: unknown, dryRun = false) =>
  h.call("POST", `/v1/apply${dryRun ? "?dry_run=true" : ""}`, { token, body: file });
const said = (res: { body: any }) => res.body.vaults.flatMap((v: any) => v.changes.map((c: any) => c.said)) as string[];
const pending = (res: { body: any }) => res.body.vaults.flatMap((v: any) => v.pending.map((c: any) => c.said)) as string[];

describe("export, then apply on a fresh instance", () => {
  test("reproduces the vault: services, references, settings, grants, members, budgets; values and hidden URLs are left for a person", async () => {
    const a = await createHarness();
    const ownerA = (await register(a, "owner@example.com")).token;
    const { value } = await furnish(a, ownerA);
    const file = await exportOf(a, ownerA);
    expect(JSON.stringify(file)).not.toContain(value);
    const pay = file.vaults.pay!;
    expect(pay.credentials).toEqual([{ key: "DB_PASSWORD", ref: "kv:secret/db#password" }, { key: "STRIPE_KEY" }]);
    expect(pay.services).toContainEqual({ host: "api.stripe.com", template: "stripe", operations: ["read", "write"], keys: { token: "STRIPE_KEY" } });
    expect(pay.services).toContainEqual({ host: "acme.atlassian.net", template: "jira", operations: ["read"], settings: { username: "ops@example.com" } });
    expect(pay.webhooks).toEqual([{ url: "https://hooks.slack.com/services/…", format: "slack" }]);
    expect(pay.agents).toEqual([{ name: "ci-bot", role: "proxy" }]);
    expect(pay.budgets).toEqual({
      "daily-llm": { scope: "vault", period: "day", limits: { total_tokens: 100000, cost: 12.5 }, soft_percent: 80, soft_action: "notify" },
      bot: { scope: "agent", agent: "ci-bot", period: "month", limits: { requests: 1000 } },
    });
    // Applying it where it came from changes nothing.
    expect((await apply(a, ownerA, file)).body).toMatchObject({ changes: 0 });

    const b = await createHarness();
    const ownerB = (await register(b, "owner@example.com")).token;
    await register(b, "bob@example.com");
    expect(
      (
        await b.call("POST", "/v1/secret-stores", {
          token: ownerB,
          body: { name: "kv", kind: "vault", address: "https://vault.example.com:8200/", auth: { method: "token", token: sentinel("kv") } },
        })
      ).status,
    ).toBe(201);
    const dry = await apply(b, ownerB, file, true);
    expect(dry.status).toBe(200);
    expect(dry.body.dry_run).toBe(true);
    expect((await b.call("GET", "/v1/vaults", { token: ownerB })).body.vaults).toEqual([]); // the dry run created nothing
    const first = await apply(b, ownerB, file);
    expect(first.status).toBe(200);
    expect(said(first)).toEqual(said(dry)); // the dry run's plan is the apply's
    expect(said(first)).toEqual([
      "create vault pay (you are its admin)",
      "unmatched hosts: tunnel → deny",
      "add service acme.atlassian.net (template jira, operations read)",
      "add service api.example.com:8443 (header x-api-key: Key <EX_KEY>; GET on /v1/*)",
      "add service api.stripe.com (template stripe, operations read, write)",
      "add service auth.example.org (oauth2_client_credentials CID/CSECRET at auth.example.org/token scopes read; every method and path, disabled)",
      "add member bob@example.com (member)",
      "add budget daily-llm (the vault: 100000 total tokens, cost 12.5 per day, soft at 80% (notify))",
    ]);
    // A reference needs a connection the vault may use: the owner shares it, and a second apply sets it.
    expect(pending(first).join("\n")).toContain("this vault has no secret store connection named kv");
    expect(pending(first)).toContain(
      "credential STRIPE_KEY has no value here: set its value with broker credential set STRIPE_KEY --vault pay (the file holds keys, never values)",
    );
    expect(pending(first).join("\n")).toContain("agent ci-bot is not on this instance: an agent joins by invite");
    expect(pending(first).join("\n")).toContain("budget bot: vault pay has no agent named ci-bot");
    expect(pending(first).join("\n")).toContain("webhook https://hooks.slack.com/services/…: the file hides its URL");

    // What a person does by hand: share the connection, set the value, invite the agent; the URL is given in full.
    expect((await b.call("PUT", "/v1/secret-stores/kv/vaults/pay", { token: ownerB })).status).toBe(200);
    await setCredential(b, { token: ownerB }, "pay", "STRIPE_KEY", sentinel("stripe"));
    await addAgent(b, ownerB, "pay", "proxy", "ci-bot");
    const full = structuredClone(file);
    full.vaults.pay!.webhooks = [{ url: "https://hooks.slack.com/services/T0/B0/XXXX", format: "slack" }];
    const second = await apply(b, ownerB, full);
    expect(said(second)).toEqual([
      "add credential DB_PASSWORD (reference kv:secret/db#password)",
      "add webhook https://hooks.slack.com/services/… (slack)",
      "add budget bot (agent ci-bot: 1000 requests per month)",
    ]);
    expect(second.body.webhook_secrets).toEqual([{ vault: "pay", url: "https://hooks.slack.com/services/…", secret: expect.stringMatching(/^whsec_/) }]);
    expect(pending(second)).toEqual([]);

    // The two vaults are the same file now; the same file again changes nothing, and the export applies as a no-op too.
    expect(await exportOf(b, ownerB)).toEqual(file);
    const third = await apply(b, ownerB, full);
    expect(third.body).toMatchObject({ changes: 0, webhook_secrets: [] });
    expect((await apply(b, ownerB, file)).body).toMatchObject({ changes: 0 });
  });
});

describe("the plan", () => {
  let h: Harness;
  let owner: string;
  let file: File;
  beforeEach(async () => {
    h = await createHarness();
    owner = (await register(h, "owner@example.com")).token;
    await furnish(h, owner);
    file = await exportOf(h, owner);
  });

  test("says each change in words: added, changed, removed; a dry run changes nothing", async () => {
    const pay = file.vaults.pay!;
    pay.budgets["daily-llm"].limits.total_tokens = 200000;
    pay.services = pay.services.filter((s: any) => s.host !== "auth.example.org");
    pay.services.find((s: any) => s.host === "api.stripe.com").operations = ["read"];
    pay.services.find((s: any) => s.host === "api.example.com:8443").rules = [{ methods: ["GET", "POST"], paths: ["/v1/*"] }];
    pay.services.push({ host: "api.openai.com", auth: { type: "bearer", token: "OPENAI_API_KEY" } });
    pay.credentials = pay.credentials.filter((c: any) => c.key !== "STRIPE_KEY");
    pay.agents = [{ name: "ci-bot", role: "member" }];
    pay.members = pay.members.filter((m: any) => m.email !== "bob@example.com");
    pay.webhooks = [];
    pay.unmatched_hosts = "tunnel";
    const before = await exportOf(h, owner);
    const dry = await apply(h, owner, file, true);
    expect(await exportOf(h, owner)).toEqual(before);
    expect(dry.body.changes).toBe(10);
    expect(said(dry)).toEqual([
      "unmatched hosts: deny → tunnel",
      "change service api.example.com:8443: rules: GET and POST on /v1/*",
      "change service api.stripe.com: template stripe (read, write) → stripe (read); rules: GET and HEAD on /v1/**",
      "add service api.openai.com (bearer OPENAI_API_KEY; every method and path)",
      "remove service auth.example.org",
      "remove credential STRIPE_KEY (its stored value is deleted)",
      "agent ci-bot: role proxy → member",
      "remove member bob@example.com (member)",
      "remove webhook https://hooks.slack.com/services/…",
      "change budget daily-llm: total_tokens 100000 → 200000",
    ]);
    const done = await apply(h, owner, file);
    expect(said(done)).toEqual(said(dry));
    expect(said(await apply(h, owner, file))).toEqual([]);
    const after = (await exportOf(h, owner)).vaults.pay!;
    expect(after.budgets["daily-llm"].limits.total_tokens).toBe(200000);
    expect(after.members).toEqual([{ email: "owner@example.com", role: "admin" }]);
    expect((await h.call("GET", "/v1/vaults/pay/credentials/STRIPE_KEY", { token: owner })).status).toBe(404);
  });

  test("a hidden receiver keeps its URL through a change of format; a reference becomes a value to set, and back", async () => {
    const pay = file.vaults.pay!;
    pay.webhooks[0].format = "json";
    pay.credentials = pay.credentials.map((c: any) => (c.key === "DB_PASSWORD" ? { key: "DB_PASSWORD" } : c));
    const res = await apply(h, owner, file);
    expect(said(res)).toEqual([
      "credential DB_PASSWORD: the reference kv:secret/db#password is removed (the file keeps a value here)",
      "webhook https://hooks.slack.com/services/…: format slack → json (a new signing secret)",
    ]);
    expect(pending(res)).toContain(
      "credential DB_PASSWORD: set its value with broker credential set DB_PASSWORD --vault pay (the file holds keys, never values)",
    );
    expect(res.body.webhook_secrets).toEqual([{ vault: "pay", url: "https://hooks.slack.com/services/…", secret: expect.stringMatching(/^whsec_/) }]);
    const hooks = await h.call("GET", "/v1/vaults/pay/webhooks", { token: owner });
    expect(hooks.body.webhooks.map((w: any) => [w.url, w.format])).toEqual([["https://hooks.slack.com/services/…", "json"]]);
    pay.credentials = pay.credentials.map((c: any) => (c.key === "DB_PASSWORD" ? { key: "DB_PASSWORD", ref: "kv:secret/db#password", version: "3" } : c));
    expect(said(await apply(h, owner, file))).toEqual(["add credential DB_PASSWORD (reference kv:secret/db#password (version 3))"]);
    expect((await exportOf(h, owner)).vaults.pay!.credentials).toContainEqual({ key: "DB_PASSWORD", ref: "kv:secret/db#password", version: "3" });
  });

  test("a section left out is left as it is; the whole file is one transaction", async () => {
    const pay = file.vaults.pay!;
    for (const k of ["services", "credentials", "agents", "members", "webhooks"]) delete pay[k];
    pay.budgets = { ...pay.budgets, extra: { scope: "vault", period: "hour", limits: { requests: 5 } } };
    expect(said(await apply(h, owner, file, true))).toEqual(["add budget extra (the vault: 5 requests per hour)"]);
    // A second vault whose webhook cannot be added (a duplicate): nothing of the first vault is applied either.
    const bad = {
      version: 1,
      vaults: {
        ...file.vaults,
        other: { webhooks: [{ url: "https://hooks.example.com/a" }, { url: "https://hooks.example.com/a", format: "slack" }] },
      },
    };
    const refused = await apply(h, owner, bad);
    expect(refused.status).toBe(409);
    expect((await h.call("GET", "/v1/vaults/pay/budgets", { token: owner })).body.budgets.map((b: any) => b.name).sort()).toEqual(["bot", "daily-llm"]);
    expect((await h.call("GET", "/v1/vaults/other", { token: owner })).status).toBe(404);
  });

  test("a file is read by the endpoints' own schemas, strictly: an unknown key or a duplicate is refused, naming its field", async () => {
    const pay = file.vaults.pay!;
    pay.services[1].auth = { ...pay.services[1].auth, tokn: "X" };
    let res = await apply(h, owner, file);
    expect(res.status).toBe(400);
    expect(res.body.field).toBe("vaults.pay.services[1].auth.tokn");
    res = await apply(h, owner, {
      version: 1,
      vaults: {
        pay: {
          agents: [
            { name: "a", role: "proxy" },
            { name: "a", role: "admin" },
          ],
        },
      },
    });
    expect(res.body).toMatchObject({ field: "vaults.pay.agents[1].name", message: "vaults.pay.agents[1].name: the agent a is in the list twice" });
    res = await apply(h, owner, { version: 2, vaults: {} });
    expect(res.body.field).toBe("version");
  });
});

describe("who may export and apply", () => {
  test("people who administer the vault; never agents; a member is refused; nobody takes their own admin role away", async () => {
    const h = await createHarness();
    const owner = (await register(h, "owner@example.com")).token;
    await furnish(h, owner);
    const file = await exportOf(h, owner);
    const agent = await addAgent(h, owner, "pay", "admin", "root-bot");
    expect((await h.call("POST", "/v1/apply", { token: agent.token, headers: agent.headers, body: file })).status).toBe(403);
    expect((await h.call("GET", "/v1/export", { token: agent.token, headers: agent.headers })).status).toBe(403);
    const member = await addUser(h, owner, "pay", "mia@example.com", "member");
    expect((await apply(h, member, file)).status).toBe(403);
    expect((await h.call("GET", "/v1/export?vault=pay", { token: member })).status).toBe(403);
    expect((await h.call("GET", "/v1/export", { token: member })).body).toEqual({ version: 1, vaults: {} });
    const admin = await addUser(h, owner, "pay", "ada@example.com", "admin");
    const fresh = await exportOf(h, admin);
    fresh.vaults.pay!.members = fresh.vaults.pay!.members.filter((m: any) => m.email !== "ada@example.com");
    const res = await apply(h, admin, fresh);
    expect(res.status).toBe(400);
    expect(res.body.message).toContain("the file takes your own admin role in vault pay away");
  });
});

describe("a managed vault", () => {
  let h: Harness;
  let owner: string;
  beforeEach(async () => {
    h = await createHarness();
    owner = (await register(h, "owner@example.com")).token;
    await furnish(h, owner);
    const file = await exportOf(h, owner);
    file.vaults.pay!.managed = true;
    file.vaults.pay!.credentials.push({ key: "NEW_KEY" });
    file.vaults.pay!.agents.push({ name: "deploy-bot", role: "member" });
    file.vaults.pay!.members.push({ email: "new@example.com", role: "proxy" });
    const res = await apply(h, owner, file);
    expect(said(res)).toEqual(["manage vault pay as code: from now on it changes only through broker apply"]);
  });

  test("refuses every write from the API with 409 vault_managed, saying how to change it", async () => {
    const writes: [string, string, unknown?][] = [
      ["PATCH", "/v1/vaults/pay", { unmatched_hosts: "tunnel" }],
      ["DELETE", "/v1/vaults/pay"],
      ["POST", "/v1/vaults/pay/services", { host: "api.new.com", auth: { type: "bearer", token: "NEW_KEY" } }],
      ["PATCH", "/v1/vaults/pay/services/api.example.com:8443", { description: "edited" }],
      ["DELETE", "/v1/vaults/pay/services/api.stripe.com"],
      ["PUT", "/v1/vaults/pay/credentials/OTHER_KEY", { value: "v" }],
      ["PUT", "/v1/vaults/pay/credentials/NEW_KEY", { ref: "kv:secret/x#y" }],
      ["DELETE", "/v1/vaults/pay/credentials/STRIPE_KEY"],
      ["PUT", "/v1/vaults/pay/budgets/daily-llm", { scope: "vault", period: "day", limits: { requests: 1 } }],
      ["DELETE", "/v1/vaults/pay/budgets/daily-llm"],
      ["POST", "/v1/vaults/pay/webhooks", { url: "https://hooks.example.com/x" }],
      ["DELETE", "/v1/vaults/pay/webhooks/1"],
      ["POST", "/v1/vaults/pay/agent-invites", { name: "stranger", role: "proxy" }],
      ["POST", "/v1/vaults/pay/agent-invites", { name: "deploy-bot", role: "admin" }],
      ["POST", "/v1/vaults/pay/invites", { email: "new@example.com", role: "admin" }],
      ["POST", "/v1/vaults/pay/invites", { role: "member" }],
    ];
    for (const [method, path, body] of writes) {
      const res = await h.call(method, path, { token: owner, body });
      expect({ method, path, status: res.status, error: res.body?.error, message: res.body?.message?.slice(0, MANAGED.length) }).toEqual({
        method,
        path,
        status: 409,
        error: "vault_managed",
        message: MANAGED,
      });
    }
    expect((await h.call("POST", "/v1/vaults/pay/budgets/daily-llm/reset", { token: owner })).status).toBe(200); // counting is not configuration
  });

  test("still takes a value for a key its file lists, and invites of the agents and people it names, with their roles", async () => {
    await setCredential(h, { token: owner }, "pay", "NEW_KEY", sentinel("new"));
    await setCredential(h, { token: owner }, "pay", "STRIPE_KEY", sentinel("stripe-rotated"));
    const inv = await createAgentInvite(h, owner, "pay", { name: "deploy-bot", role: "member" });
    expect(inv.status).toBe(201);
    expect((await h.call("POST", pathOf(inv.body.invite_url))).status).toBe(201);
    expect((await h.call("POST", "/v1/vaults/pay/invites", { token: owner, body: { email: "new@example.com", role: "proxy" } })).status).toBe(201);
    // The file is the truth again: nothing to change.
    const file = await exportOf(h, owner);
    expect(file.vaults.pay!.managed).toBe(true);
    expect((await apply(h, owner, file)).body.changes).toBe(0);
  });

  test("a proposal's approval is refused (rejecting stays open); managed: false lets people edit again", async () => {
    const agent = await addAgentByFile(h, owner);
    const filed = await h.call("POST", "/v1/proposals", {
      token: agent.token,
      headers: agent.headers,
      body: {
        services: [{ action: "set", host: "api.new.com", description: "New", auth: { type: "bearer", token: "NEW_KEY" } }],
        credentials: [{ action: "set", key: "NEW_KEY", description: "A key" }],
      },
    });
    expect(filed.status).toBe(201);
    const approve = await h.call("POST", `/v1/proposals/${filed.body.id}/approve`, { token: owner, body: { credentials: {} } });
    expect(approve.body.error).toBe("vault_managed");
    expect(approve.body.message).toContain("add what the proposal asks for to the file, then reject the proposal");
    expect((await h.call("POST", `/v1/proposals/${filed.body.id}/reject`, { token: owner, body: {} })).status).toBe(200);

    const file = await exportOf(h, owner);
    file.vaults.pay!.managed = false;
    expect(said(await apply(h, owner, file))).toEqual(["stop managing vault pay as code"]);
    expect((await h.call("PATCH", "/v1/vaults/pay", { token: owner, body: { unmatched_hosts: "tunnel" } })).status).toBe(200);
  });

  test("refuses a console edit with the same clear message", async () => {
    const { h: ch, owner: o, b } = await setUpOwnerConsole("pay");
    const file = await exportOf(ch, o);
    file.vaults.pay!.managed = true;
    expect((await apply(ch, o, file)).status).toBe(200);
    const page = await b.submit("/vaults/pay/settings/unmatched-hosts", { unmatched_hosts: "deny" });
    expect(page.text).toContain(`<div class="flash flash-error" role="alert" id="flash">V${MANAGED.slice(1)}.</div>`);
    expect((await ch.call("GET", "/v1/vaults/pay", { token: o })).body.unmatched_hosts).toBe("tunnel");
  });
});

/** The file names deploy-bot: its invite is taken, and it files proposals like any agent. */
async function addAgentByFile(h: Harness, owner: string) {
  return addAgent(h, owner, "pay", "member", "deploy-bot");
}
