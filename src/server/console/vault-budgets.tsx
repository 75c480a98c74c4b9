/** @jsxImportSource hono/jsx */
// Budgets in the console (issue 38): the "Budgets" section of `/vaults/:vault/settings` (the vault's budgets with
// what each counted this period; for human admins Change, Reset, Remove and the form that sets one) and the same
// table and form on one agent's page (vault-agent.tsx), there for that agent only. Every write is the API's: the
// form is read by BudgetInput, then setBudget, resetBudget and removeBudget decide (human admins only); whoever may
// read the vault's logs sees the table (listBudgets). A refused form is shown again as typed, the refusal as the flash.

import { Hono } from "hono";
import type { Child } from "hono/jsx";
import { BudgetInput, parseWith } from "../../contract/index.ts";
import { BrokerError } from "../../errors.ts";
import { listVaultAgents, mayInVault, type OpenVault } from "../../identity/index.ts";
import { listBudgets, listEveryService, removeBudget, resetBudget, setBudget, type BudgetView } from "../../workflows/index.ts";
import { Badge, Button, ConfirmForm, FormField, formatTime, Name, PostForm, Section, Table, type BadgeTone } from "../ui/index.ts";
import {
  describeError,
  formOf,
  openConsoleVault,
  plural,
  requireConfirmation,
  requireSignedIn,
  runAction,
  type ConsoleContext,
  type ConsoleEnv,
} from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { SubmitRow } from "./one-time-link.tsx";

export const BUDGETS_DESCRIPTION =
  "How much the vault's agents may spend per period, in requests, LLM tokens and money. A request that finds a limit reached is refused until the budget resets; at the soft threshold the broker tells your webhooks or holds requests for a person to approve.";

/** The fields of the budget form, as typed (all text: a refused form comes back exactly as it was sent). */
export interface BudgetDraft {
  readonly name: string;
  readonly scope: string;
  readonly agent: string;
  readonly service: string;
  readonly hosts: string;
  readonly period: string;
  readonly requests: string;
  readonly input_tokens: string;
  readonly output_tokens: string;
  readonly total_tokens: string;
  readonly cost: string;
  readonly soft_percent: string;
  readonly soft_action: string;
}

const FIELDS = [
  "name",
  "scope",
  "agent",
  "service",
  "hosts",
  "period",
  "requests",
  "input_tokens",
  "output_tokens",
  "total_tokens",
  "cost",
  "soft_percent",
  "soft_action",
] as const;

export const EMPTY_DRAFT: BudgetDraft = {
  name: "",
  scope: "vault",
  agent: "",
  service: "",
  hosts: "",
  period: "day",
  requests: "",
  input_tokens: "",
  output_tokens: "",
  total_tokens: "",
  cost: "",
  soft_percent: "",
  soft_action: "notify",
};

/** The form as posted. */
export function draftOf(form: Record<string, string>): BudgetDraft {
  return Object.fromEntries(FIELDS.map((f) => [f, form[f] ?? EMPTY_DRAFT[f]])) as unknown as BudgetDraft;
}

/** A budget as the form shows it for a change (Change… on a row). */
export function budgetDraftOf(b: BudgetView): BudgetDraft {
  const s = (n: number | null) => (n === null ? "" : String(n));
  return {
    name: b.name,
    scope: b.scope,
    agent: b.agent ?? "",
    service: b.service ?? "",
    hosts: (b.hosts ?? []).join("\n"),
    period: b.period,
    requests: s(b.limits.requests),
    input_tokens: s(b.limits.input_tokens),
    output_tokens: s(b.limits.output_tokens),
    total_tokens: s(b.limits.total_tokens),
    cost: s(b.limits.cost),
    soft_percent: s(b.soft_percent),
    soft_action: b.soft_action,
  };
}

/** A number field: empty is "no limit", anything else goes to the schema as a number (NaN is refused there, by name). */
const amount = (v: string) => (v.trim() === "" ? undefined : Number(v.trim()));

/** The form as the API's body would carry it, read by BudgetInput; only the field of the chosen scope goes along. */
function readDraft(draft: BudgetDraft) {
  const scope = draft.scope;
  const hosts = draft.hosts
    .split(/[\s,]+/)
    .map((h) => h.trim())
    .filter(Boolean);
  return parseWith(BudgetInput, {
    scope,
    ...(scope === "agent" && draft.agent.trim() !== "" && { agent: draft.agent.trim() }),
    ...(scope === "service" && draft.service.trim() !== "" && { service: draft.service.trim() }),
    ...(scope === "hosts" && hosts.length > 0 && { hosts }),
    period: draft.period,
    limits: {
      requests: amount(draft.requests),
      input_tokens: amount(draft.input_tokens),
      output_tokens: amount(draft.output_tokens),
      total_tokens: amount(draft.total_tokens),
      cost: amount(draft.cost),
    },
    ...(draft.soft_percent.trim() !== "" && { soft_percent: amount(draft.soft_percent) }),
    soft_action: draft.soft_action === "approve" ? "approve" : "notify",
  });
}

const FIELD_LABELS: Record<string, string> = {
  scope: "What it counts",
  agent: "Agent",
  service: "Service",
  hosts: "Hosts",
  period: "Period",
  "limits.requests": "Requests",
  "limits.input_tokens": "Input tokens",
  "limits.output_tokens": "Output tokens",
  "limits.total_tokens": "Total tokens",
  "limits.cost": "Cost",
  soft_percent: "Soft threshold",
  soft_action: "At the soft threshold",
};

/** The refusal in the form's words: the field's label instead of its path in the API's body. */
export function budgetRefusal(err: BrokerError): string {
  const text = describeError(err);
  const field = (err as { field?: string }).field ?? "";
  if (field === "limits") return "Set at least one limit: requests, tokens or cost.";
  if (field === "soft_percent" && /required/.test(text)) return "Give a soft threshold percent to hold requests for approval at it.";
  const path = field.replace(/\[\d+\]$/, "");
  const label = FIELD_LABELS[path];
  if (!label) return text;
  const spelled = field.charAt(0).toUpperCase() + field.slice(1);
  return text.startsWith(spelled) ? `${label}${text.slice(spelled.length)}` : text;
}

const PERIODS: readonly [string, string][] = [
  ["hour", "Per hour"],
  ["day", "Per day"],
  ["week", "Per week (from Monday)"],
  ["month", "Per month"],
  ["none", "No period (never resets by itself)"],
];
const PERIOD_WORDS: Record<string, string> = { hour: "Per hour", day: "Per day", week: "Per week", month: "Per month", none: "No period" };

const STATE: Record<BudgetView["state"], { tone: BadgeTone; words: string }> = {
  ok: { tone: "success", words: "Within budget" },
  soft: { tone: "warning", words: "Past soft threshold" },
  exceeded: { tone: "danger", words: "Limit reached" },
};

const number = (n: number) => n.toLocaleString("en-US");

/** Money with cents; an amount under a cent keeps its first digits (a few LLM calls cost that). */
function money(n: number, currency: string): string {
  const text = n > 0 && n < 0.01 ? n.toFixed(6).replace(/0+$/, "") : n.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  return `${text} ${currency}`;
}

type Measure = "requests" | "input_tokens" | "output_tokens" | "total_tokens" | "cost";
const MEASURES: readonly [Measure, string][] = [
  ["requests", "Requests"],
  ["input_tokens", "Input tokens"],
  ["output_tokens", "Output tokens"],
  ["total_tokens", "Tokens"],
  ["cost", "Cost"],
];

/** Each limit the budget sets: what it used of it, in words and as a bar coloured by how close it is. */
function Usage(props: { b: BudgetView }) {
  const b = props.b;
  const rows = MEASURES.filter(([m]) => b.limits[m] !== null);
  return (
    <>
      <ul class="budget-usage">
        {rows.map(([m, label]) => {
          const limit = b.limits[m]!;
          const used = b.used[m] ?? 0;
          const state = used >= limit ? "exceeded" : b.soft_percent !== null && used * 100 >= limit * b.soft_percent ? "soft" : "ok";
          const show = (n: number) => (m === "cost" ? money(n, b.currency) : number(n));
          const percent = Math.floor((used / limit) * 100);
          return (
            <li class="budget-measure">
              <span class="budget-measure-line">
                <span class="budget-measure-label">{label}</span>
                <span class="budget-measure-n">
                  {show(used)} / {show(limit)}
                  <span class="muted"> ({percent}%)</span>
                </span>
              </span>
              <progress class={`budget-bar budget-bar-${state}`} max={limit} value={Math.min(used, limit)} aria-hidden="true" />
            </li>
          );
        })}
      </ul>
      {b.used.unpriced_calls > 0 ? (
        <p class="small muted budget-unpriced">
          {plural(b.used.unpriced_calls, "LLM call")} with a model the price table does not name: {b.used.unpriced_calls === 1 ? "its" : "their"} tokens are
          counted, not {b.used.unpriced_calls === 1 ? "its" : "their"} cost.
        </p>
      ) : null}
    </>
  );
}

/** What the budget counts, in words; an agent's name links to its page for those who may open it. */
function Counts(props: { b: BudgetView; agentLink?: (name: string) => string | undefined }) {
  const b = props.b;
  if (b.scope === "vault") return <>Whole vault</>;
  if (b.scope === "service") return <>Service {b.service ? <Name>{b.service}</Name> : null}</>;
  if (b.scope === "hosts")
    return (
      <>
        {(b.hosts ?? []).length === 1 ? "Host" : "Hosts"}{" "}
        {(b.hosts ?? []).map((h, i) => (
          <>
            {i > 0 ? ", " : ""}
            <Name>{h}</Name>
          </>
        ))}
      </>
    );
  const href = b.agent ? props.agentLink?.(b.agent) : undefined;
  return (
    <>
      Agent{" "}
      {href ? (
        <a href={href}>
          <Name>{b.agent}</Name>
        </a>
      ) : (
        <Name>{b.agent}</Name>
      )}
    </>
  );
}

/** The period's end as the console writes times, breaking between the date and the hour only (never inside the date). */
function ResetTime(props: { iso: string }) {
  const [day, ...rest] = formatTime(props.iso).split(" ");
  return (
    <time datetime={props.iso}>
      <span class="budget-nowrap">{day}</span> <span class="budget-nowrap">{rest.join(" ")}</span>
    </time>
  );
}

/** Where the row's buttons post, and the page they come back to. */
export interface BudgetActions {
  /** The page the Change link opens with the budget in the form. */
  readonly changeBase: string;
  /** Sent along with Reset and Remove so the answer comes back to the agent's page. */
  readonly agentPage?: string;
}

export const budgetsPath = (vault: string) => `${vaultPath(vault, "settings")}/budgets`;

function RowActions(props: { vault: string; b: BudgetView; actions: BudgetActions }) {
  const { b, vault, actions } = props;
  const at = `${budgetsPath(vault)}/${encodeURIComponent(b.name)}`;
  const name = encodeURIComponent(b.name);
  return (
    <div class="budget-actions">
      <a class="btn btn-secondary btn-small" href={`${actions.changeBase}?budget=${name}#budget-form`} aria-label={`Change ${b.name}`}>
        Change
      </a>
      <PostForm action={`${at}/reset`} class="inline-form" label={`Reset ${b.name}`}>
        {actions.agentPage ? <input type="hidden" name="agent_page" value={actions.agentPage} /> : null}
        <Button small>Reset</Button>
      </PostForm>
      <a class="btn btn-danger btn-small" href={`${actions.changeBase}?remove=${name}#remove-budget`} aria-label={`Remove ${b.name}…`}>
        Remove…
      </a>
    </div>
  );
}

/**
 * The typed confirmation of a removal, under the table (Remove… on a row opens the page with it): in the row it
 * would widen a table that already fills the page.
 */
export function RemoveBudget(props: { vault: string; budgets: readonly BudgetView[]; name: string | undefined; actions: BudgetActions }) {
  const b = props.name === undefined ? undefined : props.budgets.find((x) => x.name === props.name);
  if (!b) return null;
  const hidden = props.actions.agentPage ? { agent_page: props.actions.agentPage } : undefined;
  return (
    <div class="remove-box" id="remove-budget" role="region" aria-labelledby="remove-budget-title">
      <h3 id="remove-budget-title">Remove budget {b.name}?</h3>
      <ConfirmForm action={`${budgetsPath(props.vault)}/${encodeURIComponent(b.name)}/delete`} phrase={b.name} button="Remove budget" hidden={hidden}>
        <p>
          Its limits stop applying at once, and what it counted is gone. To start counting again from nothing instead, use <strong>Reset</strong>.
        </p>
      </ConfirmForm>
      <p class="small">
        <a href={`${props.actions.changeBase}#budgets`}>Cancel: keep it</a>
      </p>
    </div>
  );
}

/** The budgets with what each counted this period; buttons for those who may change them. */
export function BudgetTable(props: {
  vault: string;
  budgets: readonly BudgetView[];
  empty: Child;
  /** Present for human admins: the row's Change, Reset and Remove. */
  actions?: BudgetActions;
  /** Leave out "Counts" (one agent's page: they all count that agent). */
  hideCounts?: boolean;
  agentLink?: (name: string) => string | undefined;
}) {
  const columns = [
    {
      label: "Budget",
      // A short name stays on one line (a hyphen is a break opportunity); a long one may still wrap.
      cell: (b: BudgetView) => (
        <span class={b.name.length <= 24 ? "budget-nowrap" : undefined}>
          <Name>{b.name}</Name>
        </span>
      ),
    },
    ...(props.hideCounts ? [] : [{ label: "Counts", cell: (b: BudgetView) => <Counts b={b} agentLink={props.agentLink} /> }]),
    {
      label: "Period",
      cell: (b: BudgetView) => (
        <span class="budget-period">
          <span>{PERIOD_WORDS[b.period] ?? b.period}</span>
          <span class="small muted">
            {b.resets_at ? (
              <>
                resets at <ResetTime iso={b.resets_at} />
              </>
            ) : (
              "never resets by itself"
            )}
          </span>
        </span>
      ),
    },
    { label: "Used / limit", class: "budget-used-cell", cell: (b: BudgetView) => <Usage b={b} /> },
    {
      label: "State",
      cell: (b: BudgetView) => (
        <span class="budget-state">
          <Badge tone={STATE[b.state].tone}>{STATE[b.state].words}</Badge>
          {b.soft_percent !== null ? (
            <span class="small muted">
              soft at {b.soft_percent}%: {b.soft_action === "approve" ? "hold for approval" : "notify"}
            </span>
          ) : null}
        </span>
      ),
    },
    ...(props.actions
      ? [{ label: "", class: "actions-cell", cell: (b: BudgetView) => <RowActions vault={props.vault} b={b} actions={props.actions!} /> }]
      : []),
  ];
  return <Table id="budgets-table" rows={props.budgets} empty={props.empty} columns={columns} />;
}

function NumberField(props: { name: keyof BudgetDraft; label: string; value: string; hint?: string; money?: boolean; max?: number; min?: number }) {
  const id = `f-budget-${props.name}`;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <input
        type="number"
        id={id}
        name={props.name}
        value={props.value}
        min={props.money ? "0.01" : String(props.min ?? 1)}
        max={props.max === undefined ? undefined : String(props.max)}
        step={props.money ? "any" : "1"}
        inputmode={props.money ? "decimal" : "numeric"}
        autocomplete="off"
        aria-describedby={props.hint ? `${id}-hint` : undefined}
      />
      {props.hint ? (
        <p class="hint" id={`${id}-hint`}>
          {props.hint}
        </p>
      ) : null}
    </div>
  );
}

function ScopeChoice(props: { value: string; label: string; draft: BudgetDraft; disabled?: boolean; children?: Child }) {
  const id = `budget-scope-${props.value}`;
  return (
    <div class="scope-choice">
      <label class="choice" for={id}>
        <input type="radio" name="scope" id={id} value={props.value} checked={props.draft.scope === props.value} disabled={props.disabled} />
        <span>{props.label}</span>
      </label>
      {props.children ? <div class="scope-extra">{props.children}</div> : null}
    </div>
  );
}

/** What the form may offer as an agent or a service to count. */
export interface BudgetChoices {
  readonly agents: readonly string[];
  /** More agents than the select lists: the agent is typed (the first ones offered as suggestions). */
  readonly moreAgents: boolean;
  readonly services: readonly { host: string; description: string }[];
}

/** The form that sets (adds or replaces) a budget; with `agent`, one for that agent only. */
export function BudgetForm(props: { action: string; draft: BudgetDraft; choices?: BudgetChoices; agent?: string; currency: string }) {
  const d = props.draft;
  const choices = props.choices ?? { agents: [], moreAgents: false, services: [] };
  return (
    <PostForm action={props.action} id="budget-form" label="Set a budget">
      <div class="form-grid">
        <FormField
          label="Name"
          name="name"
          id="f-budget-name"
          value={d.name}
          required
          pattern="[a-z0-9][a-z0-9._\-]{0,63}"
          maxlength={64}
          autocomplete="off"
          placeholder="e.g. daily-llm"
          hint="Lower-case letters, digits, '.', '_' or '-'. A budget of a name that exists is replaced; what it counted this period stays."
        />
        <div class="field">
          <label for="f-budget-period">Period</label>
          <select id="f-budget-period" name="period" aria-describedby="f-budget-period-hint">
            {PERIODS.map(([value, label]) => (
              <option value={value} selected={d.period === value}>
                {label}
              </option>
            ))}
          </select>
          <p class="hint" id="f-budget-period-hint">
            Periods are in UTC; the count starts again from nothing at the start of each.
          </p>
        </div>
      </div>
      {props.agent ? (
        <>
          <input type="hidden" name="scope" value="agent" />
          <input type="hidden" name="agent" value={props.agent} />
          <p class="hint" id="budget-scope-fixed">
            Counts the requests of agent <Name>{props.agent}</Name> in this vault, its sessions' too.
          </p>
        </>
      ) : (
        <fieldset class="budget-scope">
          <legend>What it counts</legend>
          <ScopeChoice value="vault" label="Every request of the vault (all its agents)" draft={d} />
          <ScopeChoice value="agent" label="One agent's requests (its sessions' too)" draft={d} disabled={choices.agents.length === 0 && !choices.moreAgents}>
            {choices.agents.length === 0 && !choices.moreAgents ? (
              <p class="hint">This vault has no agents yet.</p>
            ) : choices.moreAgents ? (
              <>
                <label for="f-budget-agent">Agent</label>
                <input type="text" id="f-budget-agent" name="agent" value={d.agent} list="budget-agents" autocomplete="off" />
                <datalist id="budget-agents">
                  {choices.agents.map((a) => (
                    <option value={a} />
                  ))}
                </datalist>
              </>
            ) : (
              <>
                <label for="f-budget-agent">Agent</label>
                <select id="f-budget-agent" name="agent">
                  {choices.agents.map((a) => (
                    <option value={a} selected={d.agent === a}>
                      {a}
                    </option>
                  ))}
                </select>
              </>
            )}
          </ScopeChoice>
          <ScopeChoice value="service" label="Requests to one service" draft={d} disabled={choices.services.length === 0}>
            {choices.services.length === 0 ? (
              <p class="hint">This vault has no services yet.</p>
            ) : (
              <>
                <label for="f-budget-service">Service</label>
                <select id="f-budget-service" name="service">
                  {choices.services.map((s) => (
                    <option value={s.host} selected={d.service === s.host}>
                      {s.description ? `${s.host} (${s.description})` : s.host}
                    </option>
                  ))}
                </select>
              </>
            )}
          </ScopeChoice>
          <ScopeChoice value="hosts" label="Requests to these hosts" draft={d}>
            <label for="f-budget-hosts">Hosts</label>
            <textarea id="f-budget-hosts" name="hosts" rows={3} autocomplete="off" spellcheck={false} aria-describedby="f-budget-hosts-hint">
              {d.hosts}
            </textarea>
            <p class="hint" id="f-budget-hosts-hint">
              One per line, or separated by commas: e.g. api.openai.com, api.anthropic.com.
            </p>
          </ScopeChoice>
        </fieldset>
      )}
      <fieldset>
        <legend>Limits</legend>
        <p class="hint" id="budget-limits-hint">
          Set at least one; leave the others empty. Tokens and cost count LLM calls the broker reads; cost is in {props.currency}, from the price table.
        </p>
        <div class="form-grid budget-limits">
          <NumberField name="requests" label="Requests" value={d.requests} />
          <NumberField name="total_tokens" label="Tokens (input and output)" value={d.total_tokens} />
          <NumberField name="input_tokens" label="Input tokens" value={d.input_tokens} />
          <NumberField name="output_tokens" label="Output tokens" value={d.output_tokens} />
          <NumberField name="cost" label={`Cost (${props.currency})`} value={d.cost} money />
        </div>
      </fieldset>
      <fieldset>
        <legend>Soft threshold (optional)</legend>
        <div class="form-grid">
          <NumberField
            name="soft_percent"
            label="Percent of a limit"
            value={d.soft_percent}
            min={1}
            max={99}
            hint="e.g. 80: something happens once a limit is 80% used. Empty: nothing before the limit."
          />
          <div class="field" role="radiogroup" aria-labelledby="budget-soft-action-label">
            <p class="field-label" id="budget-soft-action-label">
              Then
            </p>
            <label class="choice" for="budget-soft-notify">
              <input type="radio" name="soft_action" id="budget-soft-notify" value="notify" checked={d.soft_action !== "approve"} />
              <span>Notify: tell the vault's webhooks, requests go on</span>
            </label>
            <label class="choice" for="budget-soft-approve">
              <input type="radio" name="soft_action" id="budget-soft-approve" value="approve" checked={d.soft_action === "approve"} />
              <span>Hold each request for a person to approve</span>
            </label>
          </div>
        </div>
      </fieldset>
      <SubmitRow label="Save budget" id="budget-submit" />
    </PostForm>
  );
}

/** The agents and services the form offers (a page of agents; past it the agent is typed). */
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
