// Report mode in the console and the API (architecture.md D33): the vault settings page's "Report mode" section
// (the mode, the last 24 hours' would-be-refused requests with a link to them, the form for human admins only), a
// service's "Rules mode" section and its badge in the services list, the Logs page's would_refuse filter and badge
// (table and live-tail feed), and who may switch a mode: human admins; never members, agents (whatever their role)
// or a proposal.

import { beforeEach, describe, expect, test } from "bun:test";
import type { AuditRow } from "../../../src/store/index.ts";
import { setUpOwnerConsole, signIn, type PageBrowser } from "./console-fixtures.ts";
import { addAgent, addUser, HOUR, type Harness } from "./fixtures.ts";

let h: Harness;
let owner: string;
let b: PageBrowser;

beforeEach(async () => {
  ({ h, owner, b } = await setUpOwnerConsole("v1"));
  expect((await h.call("PUT", "/v1/vaults/v1/credentials/API_KEY", { token: owner, body: { value: "sk-console-report" } })).status).toBe(200);
  const service = { host: "api.example.com", auth: { type: "bearer", token: "API_KEY" }, rules: [{ methods: ["GET"], paths: ["/items/**"] }] };
  expect((await h.call("POST", "/v1/vaults/v1/services", { token: owner, body: service })).status).toBe(201);
});

/** Audit records of v1, `ago` ms before now, each with its error. */
async function records(rows: { error: string | null; ago: number; path?: string }[]) {
  const v = (await h.store.vaults.byName("v1"))!;
  const base: Omit<AuditRow, "id" | "at" | "error" | "path"> = {
    principal: "agent:1",
    vaultId: v.id,
    vault: "v1",
    ingress: "transparent",
    method: "DELETE",
    host: "api.example.com",
    service: "api.example.com",
    credentialKeys: "API_KEY",
    status: 204,
    bytesIn: 0,
    bytesOut: 0,
    durationMs: 3,
    contained: false,
    approvedBy: null,
  };
  await h.store.audit.insert(rows.map((r, i) => ({ ...base, at: h.clock.now() - r.ago, error: r.error, path: r.path ?? `/items/${i}` })));
}

describe("the vault settings page", () => {
  test("an owner switches the vault to report mode and back, as PATCH /v1/vaults/:vault does", async () => {
    const page = await b.get("/vaults/v1/settings");
    expect(page.status).toBe(200);
    expect(page.text).toContain('id="policy-mode"');
    expect(page.text).toMatch(/id="policy-enforce"[^>]*checked/);
    expect(page.text).toContain("No request in the last 24 hours would have been refused.");
    const saved = await b.submit("/vaults/v1/settings/policy-mode", { policy_mode: "report" });
    expect(saved.text).toContain("Saved: report mode.");
    expect(saved.text).toMatch(/id="policy-report"[^>]*checked/);
    expect(saved.text).toContain("report only");
    expect((await h.call("GET", "/v1/vaults/v1", { token: owner })).body).toMatchObject({ policy_mode: "report", unmatched_hosts: "tunnel" });
    const back = await b.submit("/vaults/v1/settings/policy-mode", { policy_mode: "enforce" });
    expect(back.text).toContain("Saved: the rules and the unmatched-host setting are enforced.");
    expect((await h.store.vaults.byName("v1"))?.policyMode).toBe("enforce");
    const bad = await b.submit("/vaults/v1/settings/policy-mode", { policy_mode: "loose" });
    expect(bad.text).toContain("Policy_mode must be enforce or report");
  });

  test("the last 24 hours' would-be-refused requests are counted, with a link to them in the log", async () => {
    await records([
      { error: "would_refuse:request_not_allowed", ago: HOUR },
      { error: "would_refuse:forbidden", ago: 2 * HOUR },
      { error: "would_refuse:request_not_allowed,upstream_unreachable", ago: 23 * HOUR },
      { error: "would_refuse:request_not_allowed", ago: 25 * HOUR }, // older than a day
      { error: "request_not_allowed", ago: HOUR }, // refused, not let through
      { error: null, ago: HOUR },
    ]);
    const page = await b.get("/vaults/v1/settings");
    expect(page.text).toMatch(/id="would-refuse-count">[\s\S]*<strong>3 requests<\/strong> in the last 24 hours/);
    expect(page.text).toContain('href="/vaults/v1/logs?would_refuse=1"');
  });

  test("a member and an admin agent cannot switch it; an admin agent still sets unmatched_hosts", async () => {
    const member = await addUser(h, owner, "v1", "mia@example.com", "member");
    const mb = await signIn(h, "mia@example.com");
    const page = await mb.get("/vaults/v1/settings");
    expect(page.text).toContain('id="policy-mode-current"');
    expect(page.text).not.toContain('id="policy-mode-form"');
    expect(page.text).toContain("Only a human admin of the vault can change this.");
    expect((await mb.submit("/vaults/v1/settings/policy-mode", { policy_mode: "report" })).text).toContain("does not allow this");
    expect((await h.call("PATCH", "/v1/vaults/v1", { token: member, body: { policy_mode: "report" } })).status).toBe(403);

    const agent = await addAgent(h, owner, "v1", "admin", "tuner");
    const refused = await h.call("PATCH", "/v1/vaults/v1", { token: agent.token, headers: agent.headers, body: { policy_mode: "report" } });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toContain("agents never switch a vault or a service to report mode");
    const both = await h.call("PATCH", "/v1/vaults/v1", {
      token: agent.token,
      headers: agent.headers,
      body: { unmatched_hosts: "deny", policy_mode: "report" },
    });
    expect(both.status).toBe(403);
    expect(await h.store.vaults.byName("v1")).toMatchObject({ policyMode: "enforce", unmatchedHosts: "tunnel" }); // nothing of a refused change
    const allowed = await h.call("PATCH", "/v1/vaults/v1", { token: agent.token, headers: agent.headers, body: { unmatched_hosts: "deny" } });
    expect(allowed.status).toBe(200);
    expect(allowed.body).toMatchObject({ unmatched_hosts: "deny", policy_mode: "enforce" });
  });
});

describe("a service's rules mode", () => {
  test("an owner sets it on the service's edit page; the list shows its badge; 'as the vault' clears it", async () => {
    const edit = await b.get("/vaults/v1/services/api.example.com/edit");
    expect(edit.text).toContain('id="rules-mode"');
    expect(edit.text).toMatch(/id="rules-mode-vault"[^>]*checked/);
    const saved = await b.submit("/vaults/v1/services/api.example.com/rules-mode", { rules_mode: "report" });
    expect(saved.text).toContain("Saved: requests outside the rules of api.example.com go through, marked in the log.");
    expect(saved.text).toMatch(/id="rules-mode-report"[^>]*checked/);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services[0]).toMatchObject({
      host: "api.example.com",
      rules_mode: "report",
      rules: [{ methods: ["GET"], paths: ["/items/**"] }],
    });
    const list = await b.get("/vaults/v1/services");
    expect(list.text).toContain("report only");
    expect(list.text).toContain("requests outside these rules go through, marked in the log");
    await b.submit("/vaults/v1/services/api.example.com/rules-mode", { rules_mode: "enforce" });
    expect((await h.store.services.get(1, "api.example.com"))?.rulesMode).toBe("enforce");
    const cleared = await b.submit("/vaults/v1/services/api.example.com/rules-mode", { rules_mode: "vault" });
    expect(cleared.text).toContain("follow the vault&#39;s report mode setting");
    expect((await h.store.services.get(1, "api.example.com"))?.rulesMode).toBeNull();
    expect((await b.get("/vaults/v1/services")).text).not.toContain("report only");
    // The vault in report mode: a service that follows it shows the badge too.
    await h.call("PATCH", "/v1/vaults/v1", { token: owner, body: { policy_mode: "report" } });
    expect((await b.get("/vaults/v1/services")).text).toContain("report only");
  });

  test("a member edits the service but not its rules mode; a proposal cannot carry one", async () => {
    const member = await addUser(h, owner, "v1", "mia@example.com", "member");
    const mb = await signIn(h, "mia@example.com");
    const edit = await mb.get("/vaults/v1/services/api.example.com/edit");
    expect(edit.status).toBe(200);
    expect(edit.text).not.toContain('id="rules-mode"');
    expect((await mb.submit("/vaults/v1/services/api.example.com/rules-mode", { rules_mode: "report" })).text).toContain("does not allow this");
    const api = (body: Record<string, unknown>) => h.call("PATCH", "/v1/vaults/v1/services/api.example.com", { token: member, body });
    expect((await api({ rules_mode: "report" })).status).toBe(403);
    expect((await api({ description: "edited by a member" })).status).toBe(200);
    expect((await h.store.services.get(1, "api.example.com"))?.rulesMode).toBeNull();
    const add = await h.call("POST", "/v1/vaults/v1/services", {
      token: member,
      body: { host: "other.example.com", auth: { type: "passthrough" }, rules_mode: "report" },
    });
    expect(add.status).toBe(403);
    expect(await h.store.services.get(1, "other.example.com")).toBeUndefined();

    const agent = await addAgent(h, owner, "v1", "admin", "bot");
    const proposal = await h.call("POST", "/v1/proposals", {
      token: agent.token,
      headers: agent.headers,
      body: { services: [{ action: "set", host: "api.example.com", auth: { type: "bearer", token: "API_KEY" }, rules_mode: "report" }], credentials: [] },
    });
    expect(proposal.status).toBe(400);
  });
});

describe("the Logs page", () => {
  test("marks what report mode let through, and filters to it (table and live-tail feed)", async () => {
    await records([
      { error: null, ago: 3 * HOUR, path: "/items/plain" },
      { error: "would_refuse:request_not_allowed", ago: 2 * HOUR, path: "/admin/outside" },
      { error: "would_refuse:forbidden,upstream_unreachable", ago: HOUR, path: "/unmatched" },
    ]);
    const all = await b.get("/vaults/v1/logs");
    expect(all.text).toContain("/items/plain");
    expect(all.text).toContain("would be refused");
    expect(all.text).toContain("outside the service&#39;s rules (report mode let it through)");
    expect(all.text).toContain("no service for this host, and the vault refuses such hosts (report mode let it through); upstream_unreachable");
    expect(all.text).not.toMatch(/id="f-would-refuse"[^>]*checked/);

    const marked = await b.get("/vaults/v1/logs?would_refuse=1");
    expect(marked.status).toBe(200);
    expect(marked.text).toMatch(/id="f-would-refuse"[^>]*checked/);
    expect(marked.text).toContain("/admin/outside");
    expect(marked.text).not.toContain("/items/plain");
    expect(marked.text).toContain('data-feed="/vaults/v1/logs/feed?would_refuse=1"');

    const feed = await b.get("/vaults/v1/logs/feed?would_refuse=1&after=0");
    const rows = JSON.parse(feed.text).logs as { request: string; error: string; would_refuse?: string }[];
    expect(rows.map((r) => [r.request, r.would_refuse])).toEqual([
      ["DELETE api.example.com/admin/outside", "request_not_allowed"],
      ["DELETE api.example.com/unmatched", "forbidden"],
    ]);
    expect(rows[0]!.error).toBe("outside the service's rules (report mode let it through)");

    const apiPage = await h.call("GET", "/v1/vaults/v1/logs?would_refuse=true", { token: owner });
    expect(apiPage.body.logs.map((r: { path: string; error: string }) => [r.path, r.error])).toEqual([
      ["/unmatched", "would_refuse:forbidden,upstream_unreachable"],
      ["/admin/outside", "would_refuse:request_not_allowed"],
    ]);
    expect((await h.call("GET", "/v1/vaults/v1/logs?would_refuse=yes", { token: owner })).status).toBe(400);
    expect((await h.call("GET", "/v1/vaults/v1/logs?would_refuse=false", { token: owner })).body.logs.length).toBe(3);
  });
});
