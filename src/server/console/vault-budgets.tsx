/** @jsxImportSource hono/jsx */
// Budgets in the console (issue 38): the "Budgets" section of `/vaults/:vault/settings` (the vault's budgets with
// what each counted this period; for human admins Change, Reset, Remove and the form that sets one) and the same
// table and form on one agent's page (vault-agent.tsx), there for that agent only. Every write is the API's: the
// form is read by BudgetInput, then setBudget, resetBudget and removeBudget decide (human admins only); whoever may
// read the vault's logs sees the table (listBudgets). A refused form is shown again as typed, the refusal as the flash.
// Here: the section and its routes; the table, the form and the form's reading are vault-budget-{table,form,draft}.

import { budgetDraftOf, budgetRefusal, EMPTY_DRAFT, readDraft, type BudgetDraft } from "./vault-budget-draft.ts";
import { BudgetForm, type BudgetChoices } from "./vault-budget-form.tsx";
import { BudgetTable, budgetsPath, MEASURES, money, number, RemoveBudget } from "./vault-budget-table.tsx";
import { Hono } from "hono";
import { BudgetInput } from "../../contract/index.ts";
import { BrokerError } from "../../errors.ts";
import { listVaultAgents, mayInVault, type OpenVault } from "../../identity/index.ts";
import { listBudgets, listEveryService, removeBudget, resetBudget, setBudget, type BudgetView } from "../../workflows/index.ts";
import { Section } from "../ui/index.ts";
import { formOf, openConsoleVault, requireConfirmation, requireSignedIn, runAction, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { vaultPath } from "./layout.tsx";

export const BUDGETS_DESCRIPTION =
  "How much the vault's agents may spend per period, in requests, LLM tokens and money. A request that finds a limit reached is refused until the budget resets; at the soft threshold the broker tells your webhooks or holds requests for a person to approve.";

export async function budgetChoices(c: ConsoleContext, open: OpenVault): Promise<BudgetChoices> {
  const d = c.get("kit").d;
  const page = await listVaultAgents(d, open, { limit: 200 });
  const services = await listEveryService(d, open);
  return {
    agents: page.agents.map((a) => a.name),
    moreAgents: page.next_cursor !== null,
    services: services.map((s) => ({ host: s.host, description: s.description })),
  };
}

/** Who may do what with the vault's budgets: read the table (logs readers), change them (human admins). */
export function budgetRights(open: OpenVault) {
  return {
    read: mayInVault(open.principal, open.role, "read_logs"),
    manage: open.principal.kind === "user" && mayInVault(open.principal, open.role, "manage"),
  };
}

/** The "Budgets" section of the vault's settings; `draft` is a refused form to show again. */
export async function renderBudgets(props: { c: ConsoleContext; open: OpenVault; draft?: BudgetDraft }) {
  const { c, open } = props;
  const rights = budgetRights(open);
  const vault = open.vault.name;
  if (!rights.read)
    return (
      <Section title="Budgets" id="budgets" description={BUDGETS_DESCRIPTION}>
        <p class="muted" id="budgets-refused">
          Your role here ({open.role}) does not show the vault's budgets: members and admins see them.
        </p>
      </Section>
    );
  const budgets = await listBudgets(c.get("kit").d, open);
  const editing = c.req.query("budget");
  const chosen = editing ? budgets.find((b) => b.name === editing) : undefined;
  const draft = props.draft ?? (chosen ? budgetDraftOf(chosen) : EMPTY_DRAFT);
  const settings = vaultPath(vault, "settings");
  const agentLink = rights.manage ? (name: string) => `${vaultPath(vault, "agents")}/${encodeURIComponent(name)}` : undefined;
  const empty = (
    <p class="muted" id="budgets-empty">
      No budgets yet: agents may send as many requests, and spend as many tokens, as the rate limits allow.
    </p>
  );
  return (
    <Section title="Budgets" id="budgets" description={BUDGETS_DESCRIPTION}>
      <BudgetTable vault={vault} budgets={budgets} empty={empty} actions={rights.manage ? { changeBase: settings } : undefined} agentLink={agentLink} />
      {rights.manage ? (
        <>
          <RemoveBudget vault={vault} budgets={budgets} name={c.req.query("remove")} actions={{ changeBase: settings }} />
          <h3 id="budget-form-title">{chosen && !props.draft ? `Change budget ${chosen.name}` : "Set a budget"}</h3>
          <BudgetForm action={budgetsPath(vault)} draft={draft} choices={await budgetChoices(c, open)} currency={budgets[0]?.currency ?? "USD"} />
        </>
      ) : (
        <p class="muted" id="budgets-readonly">
          Only a human admin of the vault sets, resets and removes budgets.
        </p>
      )}
    </Section>
  );
}

/** Sets the budget the form describes; a refusal comes back to `rerender` with the flash set. */
export async function saveBudget(
  c: ConsoleContext,
  opts: {
    draft: BudgetDraft;
    redirect: string;
    rerender: (status: 400 | 403 | 404) => Response | Promise<Response>;
    /** A check of the vault first (the agent's page: that the agent is one of the vault's). */
    check?: (open: OpenVault) => Promise<unknown>;
  },
): Promise<Response> {
  try {
    const open = await openConsoleVault(c, "manage");
    await opts.check?.(open);
    const body = readDraft(opts.draft);
    const saved = await setBudget(c.get("kit").d, open, opts.draft.name.trim(), body);
    c.get("kit").flash.write(c, { kind: "success", text: `Budget ${saved.name} saved: ${summary(saved)}.` });
    return c.redirect(opts.redirect, 303);
  } catch (err) {
    if (!(err instanceof BrokerError)) throw err;
    c.set("flash", { kind: "error", text: budgetRefusal(err) });
    return opts.rerender(err.status === 403 ? 403 : err.status === 404 ? 404 : 400);
  }
}

/** "1,000 requests and 20.00 USD per day". */
function summary(b: BudgetView): string {
  const parts = MEASURES.filter(([m]) => b.limits[m] !== null).map(([m, label]) =>
    m === "cost" ? money(b.limits.cost!, b.currency) : `${number(b.limits[m]!)} ${label.toLowerCase()}`,
  );
  const limits = parts.length > 1 ? `${parts.slice(0, -1).join(", ")} and ${parts.at(-1)}` : (parts[0] ?? "");
  return `${limits} ${b.period === "none" ? "in all" : `per ${b.period}`}`;
}

/** Where Reset and Remove come back to: the agent's page they were pressed on, else the settings' section. */
function backFrom(c: ConsoleContext): string {
  const vault = c.req.param("vault") ?? "";
  const agent = formOf(c).agent_page;
  return agent ? `${vaultPath(vault, "agents")}/${encodeURIComponent(agent)}#budgets` : `${vaultPath(vault, "settings")}#budgets`;
}

/** Reset and Remove, and the settings' form (set in vault-settings.tsx, which shows the page again when refused). */
export function vaultBudgetRoutes() {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/settings/budgets/*", requireSignedIn);
  // The address a refused form is shown at: reloading it goes back to the section.
  r.get("/vaults/:vault/settings/budgets", requireSignedIn, (c) => c.redirect(`${vaultPath(c.req.param("vault"), "settings")}#budgets`, 303));

  r.post("/vaults/:vault/settings/budgets/:name/reset", (c) => {
    const name = c.req.param("name");
    return runAction(c, {
      run: async () => resetBudget(c.get("kit").d, await openConsoleVault(c, "manage"), name),
      success: (b) => `Budget ${b.name} counts again from nothing${b.period === "none" ? "" : ` this ${b.period}`}.`,
      redirect: backFrom(c),
    });
  });

  r.post("/vaults/:vault/settings/budgets/:name/delete", (c) => {
    const name = c.req.param("name");
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "manage");
        requireConfirmation(c, name);
        await removeBudget(c.get("kit").d, open, name);
      },
      success: `Budget ${name} removed; its limits no longer apply.`,
      redirect: backFrom(c),
    });
  });
  return r;
}
