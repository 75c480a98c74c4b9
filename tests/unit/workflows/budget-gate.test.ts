// The budget gate (issue 38) on a real store: a request limit lets exactly that many requests through however many
// race for it, a refused or held request's count is taken back, tokens and money count once an answer ends and stop
// the next request, the soft threshold asks for a person once it is passed, and each budget counts only the requests
// it names (an agent's, a service's, a host set's).

import { beforeEach, describe, expect, test } from "bun:test";
import { BudgetExceeded } from "../../../src/errors.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createBudgetGate, type BudgetCharge, type CachingBudgetGate } from "../../../src/workflows/index.ts";
import { addAgent, createHarness, createVault, register, type Harness } from "../server/fixtures.ts";

let h: Harness;
let owner: string;
let gate: CachingBudgetGate;
let vault: { id: number; name: string };

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "team");
  vault = { id: (await h.store.vaults.byName("team"))!.id, name: "team" };
  gate = createBudgetGate(h.domain, { trustMs: (n) => n, log: createMemoryLogger() });
});

const put = async (name: string, body: unknown) => {
  const r = await h.call("PUT", `/v1/vaults/team/budgets/${name}`, { token: owner, body });
  expect(r.status).toBe(200);
  gate.invalidate(vault.id);
};
const used = async (name: string) =>
  (await h.call("GET", "/v1/vaults/team/budgets", { token: owner })).body.budgets.find((b: { name: string }) => b.name === name).used;
const charge = (over: Partial<BudgetCharge> = {}): BudgetCharge => ({
  vault,
  principal: "agent:1",
  service: "api.openai.com",
  host: "api.openai.com",
  port: 443,
  ...over,
});
/** Lets the gate's writes after the answer land (they are not awaited by the request). */
const settled = () => Bun.sleep(50);

describe("counting requests", () => {
  test("a vault with no budget: nothing counted, nothing read twice", async () => {
    expect(await gate.admit(charge())).toBeUndefined();
  });

  test("twenty requests racing for a limit of five: exactly five go", async () => {
    await put("five", { scope: "vault", period: "day", limits: { requests: 5 } });
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => gate.admit(charge())));
    const went = results.filter((r) => r.status === "fulfilled");
    const refused = results.filter((r) => r.status === "rejected").map((r) => (r as PromiseRejectedResult).reason);
    expect(went.length).toBe(5);
    expect(refused.every((e) => e instanceof BudgetExceeded)).toBe(true);
    await settled();
    expect((await used("five")).requests).toBe(5);
    const e = refused[0] as BudgetExceeded;
    expect(e.extra()).toMatchObject({ budget: "five", measure: "requests", limit: 5, used: 5 });
    const retry = Number(e.headers()["retry-after"]);
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(86_400);
    expect(e.headers()["x-should-retry"]).toBe("false");
  });

  test("a released request's count is taken back", async () => {
    await put("two", { scope: "vault", period: "hour", limits: { requests: 2 } });
    const a = (await gate.admit(charge()))!;
    a.release();
    await settled();
    expect((await used("two")).requests).toBe(0);
    await gate.admit(charge());
    await gate.admit(charge());
    await expect(gate.admit(charge())).rejects.toBeInstanceOf(BudgetExceeded);
  });

  test("a budget without a period has no Retry-After", async () => {
    await put("ever", { scope: "vault", period: "none", limits: { requests: 1 } });
    await gate.admit(charge());
    const e = await gate.admit(charge()).then(
      () => {
        throw new Error("not refused");
      },
      (err: unknown) => err as BudgetExceeded,
    );
    expect(e).toBeInstanceOf(BudgetExceeded);
    expect(e.headers()["retry-after"]).toBeUndefined();
    expect(e.extra()).toMatchObject({ resets_at: null });
  });
});

describe("counting tokens and money", () => {
  test("tokens count when the answer ends; the next request past the limit is refused", async () => {
    await put("tokens", { scope: "vault", period: "day", limits: { total_tokens: 100, cost: 1 } });
    const t = (await gate.admit(charge()))!;
    t.settle({ model: "gpt-4o", inputTokens: 60, outputTokens: 50, totalTokens: 110, costMicros: 1234, chargedMicros: 1234 });
    await settled();
    expect(await used("tokens")).toMatchObject({ requests: 1, input_tokens: 60, output_tokens: 50, total_tokens: 110, cost: 0.001234, unpriced_calls: 0 });
    const e = await gate.admit(charge()).then(
      () => {
        throw new Error("not refused");
      },
      (err: unknown) => err as BudgetExceeded,
    );
    expect(e).toBeInstanceOf(BudgetExceeded);
    expect(e.extra()).toMatchObject({ measure: "total_tokens", limit: 100, used: 110 });
    expect(e.message).toContain("100 tokens");
  });

  test("money is judged in the currency; an unpriced call counts its tokens, says so, and is charged what the pipeline charged", async () => {
    await put("money", { scope: "vault", period: "month", limits: { cost: 0.5 } });
    (await gate.admit(charge()))!.settle({ model: "mystery", inputTokens: 5, outputTokens: 5, totalTokens: 10, costMicros: undefined, chargedMicros: 100 });
    (await gate.admit(charge()))!.settle({ model: "gpt-4o", inputTokens: 1, outputTokens: 1, totalTokens: 2, costMicros: 600_000, chargedMicros: 600_000 });
    await settled();
    // The unpriced call is charged at the table's dearest prices (the charge the pipeline computes): 100 micro-units.
    expect(await used("money")).toMatchObject({ total_tokens: 12, cost: 0.6001, unpriced_calls: 1 });
    const e = await gate.admit(charge()).then(
      () => {
        throw new Error("not refused");
      },
      (err: unknown) => err as BudgetExceeded,
    );
    expect(e.extra()).toMatchObject({ measure: "cost", limit: 0.5, used: 0.6001 });
    expect(e.message).toContain("0.5 USD");
  });

  test("settle and release count once between them", async () => {
    await put("once", { scope: "vault", period: "day", limits: { requests: 10 } });
    const t = (await gate.admit(charge()))!;
    t.settle({ model: "m", inputTokens: 1, outputTokens: 1, totalTokens: 2, costMicros: 1, chargedMicros: 1 });
    t.release();
    t.settle({ model: "m", inputTokens: 1, outputTokens: 1, totalTokens: 2, costMicros: 1, chargedMicros: 1 });
    await settled();
    expect(await used("once")).toMatchObject({ requests: 1, total_tokens: 2 });
  });
});

describe("the soft threshold", () => {
  test("past it, an approve budget holds requests, a notify budget does not", async () => {
    await put("held", { scope: "vault", period: "day", limits: { requests: 10 }, soft_percent: 50, soft_action: "approve" });
    for (let i = 0; i < 5; i++) expect((await gate.admit(charge()))!.holdFor).toBeUndefined();
    expect((await gate.admit(charge()))!.holdFor).toBe("held");
    await put("held", { scope: "vault", period: "day", limits: { requests: 10 }, soft_percent: 50, soft_action: "notify" });
    expect((await gate.admit(charge()))!.holdFor).toBeUndefined();
  });

  test("crossing it tells the vault's webhooks once per period, counts and money only", async () => {
    const events: unknown[] = [];
    const log = createMemoryLogger();
    const d = {
      ...h.domain,
      webhooks: { notify: (_: number, e: unknown) => events.push(e) },
      store: { ...h.store, webhooks: { ...h.store.webhooks, count: async () => 1 } },
    };
    const told = createBudgetGate(d as never, { trustMs: (n) => n, log });
    await put("soft", { scope: "vault", period: "week", limits: { requests: 4, total_tokens: 1000 }, soft_percent: 50, soft_action: "notify" });
    for (let i = 0; i < 4; i++) await told.admit(charge());
    await settled();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      event: "budget.soft_threshold",
      vault: "team",
      budget: { name: "soft", period: "week", currency: "USD", soft_percent: 50, soft_action: "notify", limits: { requests: 4, total_tokens: 1000 } },
    });
    expect((events[0] as { console_url: string }).console_url).toMatch(/\/vaults\/team\/settings$/);
    expect(log.lines.filter((l) => l.includes("budget_soft_threshold"))).toHaveLength(1);
  });
});

describe("what each budget counts", () => {
  test("an agent's budget counts its requests (and its sessions'), not another's; hosts and services likewise", async () => {
    const bot = await addAgent(h, owner, "team", "proxy", "ci-bot");
    void bot;
    const agentId = (await h.store.agents.byName("ci-bot"))!.id;
    await put("bot", { scope: "agent", agent: "ci-bot", period: "day", limits: { requests: 1 } });
    await put("anthropic", { scope: "hosts", hosts: ["api.anthropic.com", "llm.local:8443"], period: "day", limits: { requests: 1 } });
    await put("openai", { scope: "service", service: "api.openai.com", period: "day", limits: { requests: 1 } });
    expect(await gate.admit(charge({ principal: "user:1", service: "other.example", host: "other.example" }))).toBeUndefined();
    await gate.admit(charge({ principal: `agent:${agentId}`, service: "other.example", host: "other.example" }));
    await expect(gate.admit(charge({ principal: `agent:${agentId}`, service: "other.example", host: "other.example" }))).rejects.toBeInstanceOf(BudgetExceeded);
    await gate.admit(charge({ principal: "user:1", service: "anthropic", host: "llm.local", port: 8443 }));
    await expect(gate.admit(charge({ principal: "user:1", service: "anthropic", host: "llm.local", port: 8443 }))).rejects.toBeInstanceOf(BudgetExceeded);
    expect(await gate.admit(charge({ principal: "user:1", service: "anthropic", host: "llm.local", port: 9443 }))).toBeUndefined();
    await gate.admit(charge({ principal: "user:1" }));
    const e = await gate.admit(charge({ principal: "user:1" })).then(
      () => {
        throw new Error("not refused");
      },
      (err: unknown) => err as BudgetExceeded,
    );
    expect(e.extra()).toMatchObject({ budget: "openai" });
  });

  test("a budget set through the domain is seen at once (the cached list is dropped)", async () => {
    expect(await gate.admit(charge())).toBeUndefined();
    // Not through put(): no explicit invalidate. The domain announces the vault change.
    let announced = 0;
    const d = { ...h.domain, onVaultChange: (id: number) => (announced++, gate.invalidate(id)) };
    const { setBudget } = await import("../../../src/workflows/index.ts");
    const open = { vault: { id: vault.id, name: "team" }, role: "admin", principal: { kind: "user" } } as never;
    await setBudget(d, open, "late", { scope: "vault", period: "day", limits: { requests: 1 } });
    expect(announced).toBe(1);
    expect(await gate.admit(charge())).toBeDefined();
  });
});
