// Budgets over the API (issue 38): PUT /v1/vaults/:vault/budgets/:name sets one for the vault, an agent, a service or
// hosts, and each view says its limits, what it counted this period, its state and when the period ends; bad bodies
// are refused naming the field; agents, proxy sessions and members cannot set them, members can read them; a reset
// starts the period again, a removal takes its usage with it. Counting requests through the pipeline is not here yet.

import { beforeEach, describe, expect, test } from "bun:test";
import { addAgent, addUser, createHarness, createVault, register, type Harness } from "./fixtures.ts";

let h: Harness;
let owner: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "team");
});

const put = (name: string, body: unknown, token = owner) => h.call("PUT", `/v1/vaults/team/budgets/${name}`, { token, body });

describe("setting budgets", () => {
  test("a vault's daily token budget: its view, then an agent's, a service's and a host set's", async () => {
    const r = await put("daily-tokens", {
      scope: "vault",
      period: "day",
      limits: { total_tokens: 100000, cost: 12.5 },
      soft_percent: 80,
      soft_action: "approve",
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      name: "daily-tokens",
      scope: "vault",
      agent: null,
      period: "day",
      currency: "USD",
      limits: { requests: null, input_tokens: null, output_tokens: null, total_tokens: 100000, cost: 12.5 },
      soft_percent: 80,
      soft_action: "approve",
      used: { requests: 0, input_tokens: 0, output_tokens: 0, total_tokens: 0, cost: 0, unpriced_calls: 0 },
      state: "ok",
    });
    expect(r.body.period_start).toMatch(/T00:00:00\.000Z$/);
    expect(Date.parse(r.body.resets_at) - Date.parse(r.body.period_start)).toBe(86_400_000);
    await addAgent(h, owner, "team", "proxy", "ci-bot");
    expect((await put("bot", { scope: "agent", agent: "ci-bot", period: "hour", limits: { requests: 500 } })).body).toMatchObject({
      scope: "agent",
      agent: "ci-bot",
    });
    expect((await put("openai", { scope: "service", service: "API.openai.com", period: "month", limits: { cost: 50 } })).body).toMatchObject({
      service: "api.openai.com",
    });
    expect(
      (await put("llms", { scope: "hosts", hosts: ["api.openai.com", "API.anthropic.com", "api.openai.com"], period: "none", limits: { requests: 10 } })).body,
    ).toMatchObject({
      hosts: ["api.openai.com", "api.anthropic.com"],
      period_start: null,
      resets_at: null,
    });
    const list = await h.call("GET", "/v1/vaults/team/budgets", { token: owner });
    expect(list.body.budgets.map((b: { name: string }) => b.name)).toEqual(["bot", "daily-tokens", "llms", "openai"]);
  });

  test("bad bodies are refused, each naming what is wrong", async () => {
    const cases: [unknown, string][] = [
      [{ scope: "vault", period: "day", limits: {} }, "limits"],
      [{ scope: "agent", period: "day", limits: { requests: 1 } }, "agent"],
      [{ scope: "vault", agent: "x", period: "day", limits: { requests: 1 } }, "agent"],
      [{ scope: "vault", period: "fortnight", limits: { requests: 1 } }, "period"],
      [{ scope: "vault", period: "day", limits: { requests: 1.5 } }, "limits.requests"],
      [{ scope: "vault", period: "day", limits: { cost: -1 } }, "limits.cost"],
      [{ scope: "vault", period: "day", limits: { requests: 1 }, soft_action: "approve" }, "soft_percent"],
      [{ scope: "vault", period: "day", limits: { requests: 1 }, soft_percent: 100 }, "soft_percent"],
      [{ scope: "vault", period: "day", limits: { requests: 1 }, extra: true }, "extra"],
      [{ scope: "agent", agent: "nobody", period: "day", limits: { requests: 1 } }, "agent"],
    ];
    for (const [body, field] of cases) {
      const r = await put("b", body);
      expect({ body, status: r.status, field: r.body.field ?? r.body.message }).toMatchObject({
        body,
        status: 400,
        field: expect.stringContaining(field),
      });
    }
    expect((await put("Bad Name", { scope: "vault", period: "day", limits: { requests: 1 } })).status).toBe(400);
  });
});

describe("who may", () => {
  test("agents and members cannot set, reset or remove; members read; a reset and a removal", async () => {
    const agent = await addAgent(h, owner, "team", "admin", "bot");
    const member = await addUser(h, owner, "team", "member@example.com", "member");
    const body = { scope: "vault", period: "day", limits: { requests: 5 } };
    expect((await h.call("PUT", "/v1/vaults/team/budgets/b", { token: agent.token, headers: agent.headers, body })).status).toBe(403);
    expect((await put("b", body, member)).status).toBe(403);
    expect((await put("b", body)).status).toBe(200);
    expect((await h.call("GET", "/v1/vaults/team/budgets", { token: member })).body.budgets).toHaveLength(1);
    expect((await h.call("POST", "/v1/vaults/team/budgets/b/reset", { token: member })).status).toBe(403);
    expect((await h.call("POST", "/v1/vaults/team/budgets/b/reset", { token: owner })).body).toMatchObject({ name: "b", used: { requests: 0 } });
    expect((await h.call("DELETE", "/v1/vaults/team/budgets/b", { token: member })).status).toBe(403);
    expect((await h.call("DELETE", "/v1/vaults/team/budgets/b", { token: owner })).status).toBe(204);
    expect((await h.call("DELETE", "/v1/vaults/team/budgets/b", { token: owner })).status).toBe(404);
    expect((await h.call("POST", "/v1/vaults/team/budgets/b/reset", { token: owner })).status).toBe(404);
  });
});

describe("a template's host set", () => {
  test("scope hosts from a catalogue template: its hosts; an unknown template or both hosts and a template are refused", async () => {
    const r = await put("anthropic", { scope: "hosts", template: "anthropic", period: "day", limits: { total_tokens: 1000 } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ scope: "hosts", hosts: ["api.anthropic.com"] });
    const unknown = await put("x", { scope: "hosts", template: "no-such-template", period: "day", limits: { requests: 1 } });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ field: "template" });
    const both = await put("x", { scope: "hosts", template: "anthropic", hosts: ["a.example"], period: "day", limits: { requests: 1 } });
    expect(both.status).toBe(400);
    const wrongScope = await put("x", { scope: "vault", template: "anthropic", period: "day", limits: { requests: 1 } });
    expect(wrongScope.status).toBe(400);
    expect(wrongScope.body).toMatchObject({ field: "template" });
  });
});
