/** @jsxImportSource hono/jsx */
// `/vaults/:vault/agents/:name`: one agent of the vault, for the vault's admins (as the Agents list is): its role
// here, its sessions and other vaults, and the budgets that count its requests alone (issue 38), each with what
// it used this period, and a form that sets one for it (the settings' form with the agent fixed). The agent is
// read by viewVaultAgent, budgets by listBudgets and setBudget, as the API reads them.

import { Hono } from "hono";
import { mayInVault, viewVaultAgent, type OpenVault } from "../../identity/index.ts";
import { listBudgets } from "../../workflows/index.ts";
import { Badge, Name, Section, Time, toneOf } from "../ui/index.ts";
import { formOf, openConsoleVault, renderPage, requireSignedIn, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { budgetDraftOf, draftOf, EMPTY_DRAFT, type BudgetDraft } from "./vault-budget-draft.ts";
import { BudgetForm } from "./vault-budget-form.tsx";
import { BudgetTable, RemoveBudget } from "./vault-budget-table.tsx";
import { budgetRights, saveBudget } from "./vault-budgets.tsx";

export const agentPath = (vault: string, agent: string) => `${vaultPath(vault, "agents")}/${encodeURIComponent(agent)}`;

/** The page; `refused` is a budget form the domain refused, shown again as typed (the flash says why). */
async function renderAgent(c: ConsoleContext, refused?: { draft: BudgetDraft; status: 400 | 403 | 404 }) {
  const d = c.get("kit").d;
  const open: OpenVault = await openConsoleVault(c, "read");
  const vault = open.vault.name;
  const name = c.req.param("name") ?? "";
  const layoutVault = { name: vault, role: open.role, section: "agents" as const };
  if (!mayInVault(open.principal, open.role, "manage")) {
    const body = (
      <Section title="Agent">
        <p id="not-admin">Your role here ({open.role}) does not manage agents. Ask an admin of this vault.</p>
      </Section>
    );
    return renderPage(c, { title: "Agent", nav: "vaults", vault: layoutVault }, body);
  }
  const agent = await viewVaultAgent(d, open, name);
  const role = agent.vaults.find((v) => v.name === vault)?.role ?? "proxy";
  const others = agent.vaults.filter((v) => v.name !== vault);
  const rights = budgetRights(open);
  const budgets = (await listBudgets(d, open)).filter((b) => b.scope === "agent" && b.agent === agent.name);
  const here = agentPath(vault, agent.name);
  const editing = c.req.query("budget");
  const chosen = editing ? budgets.find((b) => b.name === editing) : undefined;
  const draft: BudgetDraft = refused?.draft ?? (chosen ? budgetDraftOf(chosen) : EMPTY_DRAFT);
  const body = (
    <>
      <Section title="About this agent" id="agent-facts">
        <dl class="overview" id="agent-overview">
          <dt>Role in {vault}</dt>
          <dd>
            <Badge tone={toneOf(role)}>{role}</Badge>
          </dd>
          <dt>Active sessions</dt>
          <dd>{String(agent.sessions)}</dd>
          <dt>Other vaults</dt>
          <dd>{others.length ? others.map((v) => `${v.name} (${v.role})`).join(", ") : "none"}</dd>
          <dt>Joined</dt>
          <dd>
            <Time iso={agent.created_at} />
          </dd>
        </dl>
      </Section>
      <Section
        title="Budgets"
        id="budgets"
        description={
          <>
            What this agent may spend per period, its sessions included. Budgets of the whole vault, a service or hosts count its requests too: see{" "}
            <a href={`${vaultPath(vault, "settings")}#budgets`}>the vault's settings</a>.
          </>
        }
      >
        <BudgetTable
          vault={vault}
          budgets={budgets}
          hideCounts
          actions={rights.manage ? { changeBase: here, agentPage: agent.name } : undefined}
          empty={
            <p class="muted" id="agent-budgets-empty">
              No budget counts this agent alone.
            </p>
          }
        />
        {rights.manage ? (
          <>
            <RemoveBudget vault={vault} budgets={budgets} name={c.req.query("remove")} actions={{ changeBase: here, agentPage: agent.name }} />
            <h3 id="budget-form-title">{chosen && !refused ? `Change budget ${chosen.name}` : `Set a budget for ${agent.name}`}</h3>
            <BudgetForm action={`${here}/budgets`} draft={draft} agent={agent.name} currency={budgets[0]?.currency ?? "USD"} />
          </>
        ) : null}
      </Section>
    </>
  );
  const lead = (
    <>
      An agent of <Name>{vault}</Name>. <a href={vaultPath(vault, "agents")}>All agents</a>
    </>
  );
  return renderPage(c, { title: `Agent ${agent.name}`, status: refused?.status, nav: "vaults", vault: layoutVault, lead }, body);
}

export function agentPageRoutes() {
  const r = new Hono<ConsoleEnv>();
  r.get("/vaults/:vault/agents/:name", requireSignedIn, (c) => renderAgent(c));
  r.post("/vaults/:vault/agents/:name/budgets", requireSignedIn, (c) => {
    const name = c.req.param("name");
    // The agent is the page's, whatever the form says.
    const draft: BudgetDraft = { ...draftOf(formOf(c)), scope: "agent", agent: name };
    return saveBudget(c, {
      draft,
      redirect: `${agentPath(c.req.param("vault"), name)}#budgets`,
      rerender: (status) => renderAgent(c, { draft, status }),
      check: (open) => viewVaultAgent(c.get("kit").d, open, name),
    });
  });
  return r;
}
