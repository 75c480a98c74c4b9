// The webhook event a budget's soft threshold sends (issue 38): the budget as the API shows it, counts and money only.

import type { BudgetEvent, Domain } from "../identity/index.ts";
import type { BudgetRow } from "../store/index.ts";
import { viewBudget } from "./budgets.ts";

export async function budgetEvent(d: Domain, vault: string, b: BudgetRow, currency: string): Promise<BudgetEvent> {
  const v = await viewBudget(d, b);
  return {
    event: "budget.soft_threshold",
    vault,
    budget: {
      name: v.name,
      scope: v.scope,
      period: v.period,
      currency,
      soft_percent: v.soft_percent,
      soft_action: v.soft_action,
      limits: { ...v.limits },
      used: { ...v.used },
      resets_at: v.resets_at,
    },
    console_url: `${d.publicUrl}/vaults/${encodeURIComponent(vault)}/settings`,
  };
}
