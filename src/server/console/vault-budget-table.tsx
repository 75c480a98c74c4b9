/** @jsxImportSource hono/jsx */
// The budgets table (issue 38): each budget with what it counted this period, a bar per limit, its state and when it
// resets; for human admins Change, Reset and Remove (typed). On the vault's Settings page and an agent's page.

import type { Child } from "hono/jsx";
import { type BudgetView } from "../../workflows/index.ts";
import { Badge, Button, ConfirmForm, formatTime, Name, PostForm, Table, type BadgeTone } from "../ui/index.ts";
import { plural } from "./context.tsx";
import { vaultPath } from "./layout.tsx";

export const PERIODS: readonly [string, string][] = [
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

export const number = (n: number) => n.toLocaleString("en-US");

/** Money with cents; an amount under a cent keeps its first digits (a few LLM calls cost that). */
export function money(n: number, currency: string): string {
  const text = n > 0 && n < 0.01 ? n.toFixed(6).replace(/0+$/, "") : n.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  return `${text} ${currency}`;
}

export type Measure = "requests" | "input_tokens" | "output_tokens" | "total_tokens" | "cost";
export const MEASURES: readonly [Measure, string][] = [
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
