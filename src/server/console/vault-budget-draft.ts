// The budget form's fields as typed (a refused form comes back exactly as sent), read into the API's body, and a
// refusal said in the form's words (issue 38). Shared by the vault's Settings section and an agent's page.

import { BudgetInput, parseWith } from "../../contract/index.ts";
import { BrokerError } from "../../errors.ts";
import { type BudgetView } from "../../workflows/index.ts";
import { describeError } from "./context.tsx";

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
export function readDraft(draft: BudgetDraft) {
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
