// /v1/vaults/:vault/budgets: how much the vault's agents may spend, in requests, LLM tokens and money per period
// (issue 38). Human admins set, reset and remove them; whoever may read the vault's logs lists them.

import { Hono } from "hono";
import { BudgetInput, BudgetList, BudgetView } from "../../contract/index.ts";
import type { Domain } from "../../identity/index.ts";
import { listBudgets, removeBudget, resetBudget, setBudget } from "../../workflows/index.ts";
import { jsonBody, openVaultFor, requirePrincipal, type ApiEnv } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";

const tags = ["budgets"];
const admins = "human admins of the vault; agents and scoped sessions get 403";

export function budgetRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/:vault/budgets", requirePrincipal(d));
  r.use("/:vault/budgets/*", requirePrincipal(d));
  r.get(
    "/:vault/budgets",
    describe({
      summary: "The vault's budgets, each with what it counted this period and when the period ends",
      tags,
      auth: "bearer",
      who: "whoever may read the vault's logs",
      success: { status: 200, schema: BudgetList },
    }),
    async (c) => c.json({ budgets: await listBudgets(d, await openVaultFor(d, c, "read_logs")) }),
  );
  r.put(
    "/:vault/budgets/:name",
    describe({
      summary: "Set a budget (create or replace; what it counted this period stays)",
      tags,
      auth: "bearer",
      who: admins,
      success: { status: 200, schema: BudgetView },
    }),
    jsonBody(BudgetInput),
    async (c) => c.json(await setBudget(d, await openVaultFor(d, c, "manage"), c.req.param("name"), c.req.valid("json"))),
  );
  r.post(
    "/:vault/budgets/:name/reset",
    describe({
      summary: "Start the budget's current period again from nothing",
      tags,
      auth: "bearer",
      who: admins,
      success: { status: 200, schema: BudgetView },
      errors: [404],
    }),
    async (c) => c.json(await resetBudget(d, await openVaultFor(d, c, "manage"), c.req.param("name"))),
  );
  r.delete(
    "/:vault/budgets/:name",
    describe({ summary: "Remove a budget", tags, auth: "bearer", who: admins, success: { status: 204 }, errors: [404] }),
    async (c) => {
      await removeBudget(d, await openVaultFor(d, c, "manage"), c.req.param("name"));
      return c.body(null, 204);
    },
  );
  return r;
}
