// Services from catalogue templates over the API: the catalogue endpoints, a service made from a
// template (its auth and the chosen operations' rules, recorded and said in words), the refusals that
// keep a template's choice unambiguous, proposals naming a template, /discover's catalogue, the
// proposal hint for a host a template serves, and a catalogue update that waits for a person.

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { buildProposalHint } from "../../../src/egress/hint.ts";
import { templateById } from "../../../src/templates/index.ts";
import { addAgent, createHarness, createVault, expectNoLeak, expectNoTokensInLogs, type Harness, register, sentinel, setCredential } from "./fixtures.ts";

let h: Harness;
let owner: string;
let secret: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  secret = sentinel("templates");
  await setCredential(h, { token: owner }, "v1", "GITHUB_TOKEN", secret);
});

afterEach(() => {
  expectNoLeak(h, secret);
  expectNoTokensInLogs(h);
});

const add = (body: Record<string, unknown>) => h.call("POST", "/v1/vaults/v1/services", { token: owner, body });
const github = templateById("github")!;
const stripe = templateById("stripe")!;
const rulesOf = (t: typeof github, ...ops: ("read" | "write" | "destructive")[]) => ops.flatMap((op) => t.operations[op]!.rules);

describe("the catalogue", () => {
  test("GET /v1/templates lists at least 40 templates without signing in; one by id; 404 for none", async () => {
    const list = await h.call("GET", "/v1/templates");
    expect(list.status).toBe(200);
    expect(list.body.templates.length).toBeGreaterThanOrEqual(40);
    const one = await h.call("GET", "/v1/templates/github");
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: "github", hosts: github.hosts, keys: [{ field: "token", suggested: github.auth.token }] });
    expect(one.body.operations.map((o: { name: string }) => o.name)).toEqual(expect.arrayContaining(["read", "write"]));
    const none = await h.call("GET", "/v1/templates/no-such");
    expect(none.status).toBe(404);
  });
});

describe("a service from a template", () => {
  test("github, read: the template's auth with the person's key, the read rules, recorded and said in words", async () => {
    const res = await add({ template: "github", operations: ["read"], keys: { token: "GITHUB_TOKEN" } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      host: github.hosts[0],
      auth: { ...github.auth, token: "GITHUB_TOKEN" },
      rules: rulesOf(github, "read"),
      template: { id: "github", name: github.name, operations: ["read"], said: `${github.name} (${github.hosts[0]}), read only` },
    });
    expect(res.body.template.catalogue_rules).toBeUndefined();
    const listed = (await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services[0];
    expect(listed.template.said).toBe(`${github.name} (${github.hosts[0]}), read only`);
  });

  test("operations default to read; several are joined in catalogue order whatever order they are named in", async () => {
    expect((await add({ template: "github" })).body.template.operations).toEqual(["read"]);
    await h.call("DELETE", `/v1/vaults/v1/services/${github.hosts[0]}`, { token: owner });
    const both = await add({ template: "github", operations: ["write", "read"] });
    expect(both.body.template.operations).toEqual(["read", "write"]);
    expect(both.body.rules).toEqual(rulesOf(github, "read", "write"));
  });

  test.each([
    [{ template: "no-such" }, "template", "no template is named"],
    [{ template: "github", operations: ["admin"] }, "operations[0]", "must be one of read, write, destructive"],
    [{ template: "github", operations: [] }, "operations", "at least one operation"],
    [{ template: "github", auth: { type: "bearer", token: "X" } }, "auth", "comes from the template"],
    [{ template: "github", rules: [{ methods: ["GET"], paths: ["/**"] }] }, "rules", "come from the template's operations"],
    [{ template: "github", keys: { header: "X" } }, "keys.header", "has no key field header"],
    [{ template: "github", keys: { token: "lower" } }, "keys.token", "credential key name"],
    [{ template: "github", host: "api.example.com" }, "host", "not api.example.com"],
    [{ host: "api.example.com", operations: ["read"], auth: { type: "bearer", token: "K" } }, "operations", "goes with template"],
  ])("%j is refused naming %s", async (body, field, words) => {
    const res = await add(body);
    expect(res.status).toBe(400);
    expect(res.body.field).toBe(field);
    expect(res.body.message).toContain(words);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services).toEqual([]);
  });

  test("a custom service still needs its host and auth, worded as before", async () => {
    const res = await add({ host: "api.example.com" });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe("auth.type");
  });

  test("changing the rules by hand makes it a custom service; naming the template again makes it the template's", async () => {
    await add({ template: "github", operations: ["read"] });
    const host = github.hosts[0];
    const hand = await h.call("PATCH", `/v1/vaults/v1/services/${host}`, { token: owner, body: { rules: [{ methods: ["GET"], paths: ["/user"] }] } });
    expect(hand.status).toBe(200);
    expect(hand.body.template).toBeUndefined();
    const again = await h.call("PATCH", `/v1/vaults/v1/services/${host}`, { token: owner, body: { template: "github", operations: ["read", "write"] } });
    expect(again.body).toMatchObject({ rules: rulesOf(github, "read", "write"), template: { operations: ["read", "write"] } });
    // A description change keeps the template.
    const described = await h.call("PATCH", `/v1/vaults/v1/services/${host}`, { token: owner, body: { description: "ours" } });
    expect(described.body.template.operations).toEqual(["read", "write"]);
  });

  test("a catalogue whose rules changed since is shown, not applied, until a person applies them", async () => {
    await add({ template: "github", operations: ["read"] });
    const host = github.hosts[0]!;
    // As if an older release had stored other rules for `read`.
    await h.domain.store.db.run("UPDATE services SET rules = ? WHERE host = ?", [JSON.stringify([{ methods: ["GET"], paths: ["/old"] }]), host]);
    const shown = (await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services[0];
    expect(shown.rules).toEqual([{ methods: ["GET"], paths: ["/old"] }]);
    expect(shown.template.catalogue_rules).toEqual(rulesOf(github, "read"));
    const applied = await h.call("PATCH", `/v1/vaults/v1/services/${host}`, { token: owner, body: { template: "github", operations: ["read"] } });
    expect(applied.body.rules).toEqual(rulesOf(github, "read"));
    expect(applied.body.template.catalogue_rules).toBeUndefined();
  });
});

describe("agents and templates", () => {
  test("a proposal naming stripe, read: approved, the service is Stripe's read rules with the template recorded", async () => {
    const agent = await addAgent(h, owner, "v1", "proxy", "bot");
    const key = stripe.auth.token!;
    const filed = await h.call("POST", "/v1/proposals", {
      token: agent.token,
      headers: agent.headers,
      body: { services: [{ template: "stripe", operations: ["read"] }], credentials: [{ key, description: "Stripe secret key" }] },
    });
    expect(filed.status).toBe(201);
    const proposal = await h.call("GET", `/v1/proposals/${filed.body.id}`, { token: owner, headers: { "x-vault": "v1" } });
    expect(proposal.body.services[0]).toMatchObject({ host: stripe.hosts[0], template: "stripe", operations: ["read"], rules: rulesOf(stripe, "read") });
    const value = sentinel("stripe");
    const approved = await h.call("POST", `/v1/proposals/${filed.body.id}/approve`, {
      token: owner,
      headers: { "x-vault": "v1" },
      body: { credentials: { [key]: value } },
    });
    expect(approved.status).toBe(200);
    const svc = (await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services.find((s: { host: string }) => s.host === stripe.hosts[0]);
    expect(svc).toMatchObject({ rules: rulesOf(stripe, "read"), template: { id: "stripe", operations: ["read"] } });
    expectNoLeak(h, value);
  });

  test("/discover lists the catalogue and each template-made service's template", async () => {
    await add({ template: "github", operations: ["read"] });
    const agent = await addAgent(h, owner, "v1", "proxy", "bot");
    const found = await h.call("GET", "/discover", { token: agent.token, headers: agent.headers });
    expect(found.body.templates.length).toBeGreaterThanOrEqual(40);
    expect(found.body.templates.find((t: { id: string }) => t.id === "stripe")).toMatchObject({ name: stripe.name, hosts: stripe.hosts });
    expect(found.body.services[0].template).toMatchObject({ id: "github", operations: ["read"] });
  });

  test("the proposal hint for a host a template serves names the template, and files as is", async () => {
    const agent = await addAgent(h, owner, "v1", "proxy", "bot");
    // The 403 forbidden's hint (egress/hint.ts; the e2e proxy tests see it on the wire).
    const hint = buildProposalHint("http://broker.test", stripe.hosts[0]!, 443) as any;
    expect(hint.template).toMatchObject({ id: "stripe", name: stripe.name });
    expect(hint.proposal.services).toEqual([expect.objectContaining({ template: "stripe", operations: ["read"] })]);
    expect(hint.proposal.credentials[0]).toMatchObject({ key: stripe.auth.token, obtain: stripe.obtain });
    const filed = await h.call("POST", "/v1/proposals", { token: agent.token, headers: agent.headers, body: hint.proposal });
    expect(filed.status).toBe(201);
  });
});

describe("templates whose settings are the person's own", () => {
  const twilio = templateById("twilio")!;
  const shopify = templateById("shopify")!;

  test("twilio needs the person's Account SID as the basic username; it goes through the auth's own checks", async () => {
    const missing = await add({ template: "twilio" });
    expect(missing.status).toBe(400);
    expect(missing.body.field).toBe("settings.username");
    const bad = await add({ template: "twilio", settings: { username: "AC1:2" } });
    expect(bad.body).toMatchObject({ field: "settings.username" });
    expect(bad.body.message).toContain("without ':'");
    const ok = await add({ template: "twilio", settings: { username: "AC0123456789abcdef" } });
    expect(ok.status).toBe(201);
    expect(ok.body.auth).toEqual({ ...twilio.auth, username: "AC0123456789abcdef" });
    const stray = await add({ template: "github", settings: { username: "x" } });
    expect(stray.body.field).toBe("settings.username");
  });

  test("shopify needs the person's store host, any store under myshopify.com, and nothing else", async () => {
    expect((await add({ template: "shopify" })).body.field).toBe("host");
    expect((await add({ template: "shopify", host: "acme.example.com" })).body.field).toBe("host");
    const ok = await add({ template: "shopify", host: "acme.myshopify.com" });
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ host: "acme.myshopify.com", auth: shopify.auth, template: { id: "shopify" } });
  });
});
