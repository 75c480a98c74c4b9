// Budgets, the domain side (issue 38): a vault's human admins set, list, reset and remove them; each view says what
// the budget limits, what it counted this period, whether it is past its soft threshold or its limit, and when the
// period ends. Money is kept in micro-units and shown in the price table's currency.

import { InvalidRequest, NotFound, PermissionDenied } from "../errors.ts";
import type { Domain, OpenVault } from "../identity/index.ts";
import { iso, requireInVault, requireUnmanaged } from "../identity/index.ts";
import { limitReached, periodEnd, periodStart, softCrossed } from "../policy/index.ts";
import { templateById } from "../templates/index.ts";
import type { BudgetPeriod, BudgetRow, BudgetScope, BudgetUsage, SoftAction } from "../store/index.ts";

/** A budget as a person sets it (contract/budgets.ts reads the body into this). */
export interface BudgetRequest {
  readonly scope: BudgetScope;
  readonly agent?: string | undefined;
  readonly service?: string | undefined;
  readonly hosts?: readonly string[] | undefined;
  /** With scope "hosts", instead of hosts: a catalogue template's hosts. */
  readonly template?: string | undefined;
  readonly period: BudgetPeriod;
  readonly limits: {
    readonly requests?: number | null | undefined;
    readonly input_tokens?: number | null | undefined;
    readonly output_tokens?: number | null | undefined;
    readonly total_tokens?: number | null | undefined;
    readonly cost?: number | null | undefined;
  };
  readonly soft_percent?: number | null | undefined;
  readonly soft_action?: SoftAction | undefined;
}

interface Measures {
  requests: number | null;
  input_tokens: number | null;
  output_tokens: number | null;
  total_tokens: number | null;
  cost: number | null;
}

/** A budget as the API, the console and the CLI show it (contract/budgets.ts BudgetView). */
export interface BudgetView {
  name: string;
  scope: BudgetScope;
  agent: string | null;
  service: string | null;
  hosts: string[] | null;
  period: BudgetPeriod;
  currency: string;
  limits: Measures;
  soft_percent: number | null;
  soft_action: SoftAction;
  used: Measures & { unpriced_calls: number };
  state: "ok" | "soft" | "exceeded";
  period_start: string | null;
  resets_at: string | null;
}

/** The currency budgets' money is counted in when the operator's price table names none (the shipped table's). */
export const BUDGET_CURRENCY = "USD";
const MICROS = 1_000_000;

const NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/** Budgets bound what agents may spend: human admins set them, never an agent or a scoped session. */
function requireBudgetAdmin(open: OpenVault): void {
  requireInVault(open, "manage");
  if (open.principal.kind !== "user") throw new PermissionDenied("only a human admin of the vault sets its budgets; ask one");
}

function checkName(name: string): void {
  if (!NAME.test(name)) throw new InvalidRequest("the budget's name must be 1 to 64 lower-case letters, digits, '.', '_' or '-'", "name");
}

export async function viewBudget(d: Domain, b: BudgetRow): Promise<BudgetView> {
  const now = d.now();
  const start = periodStart(b.period, now);
  const used = await d.store.budgets.usage(b.id, start);
  const agent = b.scope === "agent" && b.scopeRef ? ((await d.store.agents.byId(Number(b.scopeRef)))?.name ?? `agent ${b.scopeRef} (removed)`) : null;
  const money = (micros: number | null) => (micros === null ? null : micros / MICROS);
  const end = periodEnd(b.period, now);
  return {
    name: b.name,
    scope: b.scope,
    agent,
    service: b.scope === "service" ? b.scopeRef : null,
    hosts: b.scope === "hosts" ? (JSON.parse(b.scopeRef ?? "[]") as string[]) : null,
    period: b.period,
    currency: d.prices?.current().currency ?? BUDGET_CURRENCY,
    limits: {
      requests: b.limits.requests,
      input_tokens: b.limits.inputTokens,
      output_tokens: b.limits.outputTokens,
      total_tokens: b.limits.totalTokens,
      cost: money(b.limits.costMicros),
    },
    soft_percent: b.softPercent,
    soft_action: b.softAction,
    used: viewUsage(used),
    state: limitReached(b.limits, used) ? "exceeded" : softCrossed(b, used) ? "soft" : "ok",
    period_start: b.period === "none" ? null : iso(start),
    resets_at: end === undefined ? null : iso(end),
  };
}

function viewUsage(u: BudgetUsage): BudgetView["used"] {
  return {
    requests: u.requests,
    input_tokens: u.inputTokens,
    output_tokens: u.outputTokens,
    total_tokens: u.totalTokens,
    cost: u.costMicros / MICROS,
    unpriced_calls: u.unpricedCalls,
  };
}

/** The hosts a "hosts" budget counts: as listed, or a catalogue template's. */
function hostsOf(body: BudgetRequest): readonly string[] {
  if (body.template === undefined) return body.hosts!;
  const t = templateById(body.template);
  if (!t) throw new InvalidRequest(`there is no template ${body.template}; see GET /v1/templates`, "template");
  return t.hosts;
}

/** What a budget row stores for `body`: its scope's reference looked up (an agent of this vault), money in micro-units. */
export async function budgetRowFor(
  d: Domain,
  vault: { id: number; name: string },
  name: string,
  body: BudgetRequest,
): Promise<Omit<BudgetRow, "id" | "createdAt" | "updatedAt">> {
  checkName(name);
  let scopeRef: string | null = null;
  if (body.scope === "agent") {
    const agent = await d.store.agents.byName(body.agent!);
    // Only an agent of this vault: another vault's agent is not named here (nor told apart from one that does not exist).
    const granted = agent && (await d.store.access.grantsOfAgent(agent.id)).some((g) => g.vaultId === vault.id);
    if (!agent || !granted) throw new InvalidRequest(`vault ${vault.name} has no agent named ${body.agent}`, "agent");
    scopeRef = String(agent.id);
  } else if (body.scope === "service") scopeRef = body.service!.toLowerCase();
  else if (body.scope === "hosts") scopeRef = JSON.stringify([...new Set(hostsOf(body).map((h) => h.toLowerCase()))]);
  const l = body.limits;
  return {
    vaultId: vault.id,
    name,
    scope: body.scope,
    scopeRef,
    period: body.period,
    limits: {
      requests: l.requests ?? null,
      inputTokens: l.input_tokens ?? null,
      outputTokens: l.output_tokens ?? null,
      totalTokens: l.total_tokens ?? null,
      costMicros: l.cost === undefined || l.cost === null ? null : Math.round(l.cost * MICROS),
    },
    softPercent: body.soft_percent ?? null,
    softAction: body.soft_action ?? "notify",
  };
}

/** Sets (creates or replaces) the vault's budget `name`; its usage this period stays. Human admins. */
export async function setBudget(d: Domain, open: OpenVault, name: string, body: BudgetRequest): Promise<BudgetView> {
  requireBudgetAdmin(open);
  await requireUnmanaged(d, open);
  const row = await d.store.budgets.put(await budgetRowFor(d, open.vault, name, body), d.now());
  d.onVaultChange?.(open.vault.id); // the budget gate's cached list
  return viewBudget(d, row);
}

/** The vault's budgets with what each counted this period (whoever may read the vault's logs). */
export async function listBudgets(d: Domain, open: OpenVault): Promise<BudgetView[]> {
  requireInVault(open, "read_logs");
  return Promise.all((await d.store.budgets.list(open.vault.id)).map((b) => viewBudget(d, b)));
}

async function budgetNamed(d: Domain, open: OpenVault, name: string): Promise<BudgetRow> {
  const b = await d.store.budgets.get(open.vault.id, name);
  if (!b) throw new NotFound(`vault ${open.vault.name} has no budget named ${name}`);
  return b;
}

/** Starts the budget's current period again from nothing. Human admins. */
export async function resetBudget(d: Domain, open: OpenVault, name: string): Promise<BudgetView> {
  requireBudgetAdmin(open);
  const b = await budgetNamed(d, open, name);
  await d.store.budgets.reset(b.id, periodStart(b.period, d.now()), d.now());
  d.onVaultChange?.(open.vault.id); // the budget gate forgets that it was spent
  return viewBudget(d, b);
}

export async function removeBudget(d: Domain, open: OpenVault, name: string): Promise<void> {
  requireBudgetAdmin(open);
  await requireUnmanaged(d, open);
  await budgetNamed(d, open, name);
  await d.store.budgets.remove(open.vault.id, name);
  d.onVaultChange?.(open.vault.id); // the budget gate's cached list
}
