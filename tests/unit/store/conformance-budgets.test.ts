// Budgets in the store (src/store/budgets.ts, migration 26), on every backend: a budget is created, replaced by name
// (its usage kept), listed and removed (with its usage, and with its vault); usage is added atomically, so 200
// additions at once lose none and each caller sees the total its own addition made; a period's soft threshold is
// marked told exactly once; a reset starts the period from nothing.

import { expect, test } from "bun:test";
import { NO_USAGE, type Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const LIMITS = { requests: 100, inputTokens: null, outputTokens: null, totalTokens: 5000, costMicros: 2_000_000 };

async function withBudget(store: Store) {
  const vault = await store.vaults.create("v", 1);
  const budget = await store.budgets.put(
    { vaultId: vault.id, name: "daily", scope: "vault", scopeRef: null, period: "day", limits: LIMITS, softPercent: 80, softAction: "approve" },
    10,
  );
  return { vault, budget };
}

forEachBackend((backend) => {
  test("created, replaced by name with its usage kept, listed, removed", async () => {
    const store = await backend.open();
    const { vault, budget } = await withBudget(store);
    expect(budget).toMatchObject({
      vaultId: vault.id,
      name: "daily",
      scope: "vault",
      period: "day",
      limits: LIMITS,
      softPercent: 80,
      softAction: "approve",
      createdAt: 10,
    });
    await store.budgets.add(budget.id, 0, { ...NO_USAGE, requests: 3 });
    const replaced = await store.budgets.put(
      {
        vaultId: vault.id,
        name: "daily",
        scope: "agent",
        scopeRef: "7",
        period: "day",
        limits: { ...LIMITS, requests: 50 },
        softPercent: null,
        softAction: "notify",
      },
      20,
    );
    expect(replaced).toMatchObject({ id: budget.id, scope: "agent", scopeRef: "7", limits: { requests: 50 }, softPercent: null, createdAt: 10, updatedAt: 20 });
    expect((await store.budgets.usage(budget.id, 0)).requests).toBe(3);
    await store.budgets.put(
      {
        vaultId: vault.id,
        name: "all-time",
        scope: "hosts",
        scopeRef: '["api.openai.com"]',
        period: "none",
        limits: LIMITS,
        softPercent: null,
        softAction: "notify",
      },
      30,
    );
    expect((await store.budgets.list(vault.id)).map((b) => b.name)).toEqual(["all-time", "daily"]);
    expect(await store.budgets.remove(vault.id, "daily")).toBe(true);
    expect(await store.budgets.remove(vault.id, "daily")).toBe(false);
    expect(await store.budgets.get(vault.id, "daily")).toBeUndefined();
    expect(await store.budgets.usage(budget.id, 0)).toEqual(NO_USAGE);
    // A vault's budgets go with it.
    await store.vaults.remove(vault.id);
    expect(await store.budgets.list(vault.id)).toEqual([]);
  });

  test("200 additions at once: none lost, each sees the total its own addition made, periods apart", async () => {
    const store = await backend.open();
    const { budget } = await withBudget(store);
    const one = { ...NO_USAGE, requests: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15, costMicros: 7 };
    const totals = await Promise.all(Array.from({ length: 200 }, () => store.budgets.add(budget.id, 1000, one)));
    expect(totals.map((t) => t.requests).sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(await store.budgets.usage(budget.id, 1000)).toEqual({
      requests: 200,
      inputTokens: 2000,
      outputTokens: 1000,
      totalTokens: 3000,
      costMicros: 1400,
      unpricedCalls: 0,
    });
    expect(await store.budgets.usage(budget.id, 2000)).toEqual(NO_USAGE);
    await store.budgets.add(budget.id, 1000, { ...NO_USAGE, unpricedCalls: 1, inputTokens: 3 });
    expect((await store.budgets.usage(budget.id, 1000)).unpricedCalls).toBe(1);
    await store.budgets.reset(budget.id, 1000, 2000);
    expect(await store.budgets.usage(budget.id, 1000)).toEqual(NO_USAGE);
  });

  test("a period's soft threshold is marked told once, whoever asks at the same moment", async () => {
    const store = await backend.open();
    const { budget } = await withBudget(store);
    await store.budgets.add(budget.id, 5, { ...NO_USAGE, requests: 81 });
    const marks = await Promise.all(Array.from({ length: 20 }, () => store.budgets.markSoftNotified(budget.id, 5, 99)));
    expect(marks.filter(Boolean).length).toBe(1);
    // Another period is told again.
    await store.budgets.add(budget.id, 6, { ...NO_USAGE, requests: 81 });
    expect(await store.budgets.markSoftNotified(budget.id, 6, 100)).toBe(true);
  });
});
