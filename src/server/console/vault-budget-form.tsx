/** @jsxImportSource hono/jsx */
// The form that sets a budget (issue 38): name, period, what it counts (the vault's agents and services offered), the
// limits in the price table's currency, and the soft threshold. Read by the API's BudgetInput (vault-budget-draft.ts).

import type { BudgetDraft } from "./vault-budget-draft.ts";
import { PERIODS } from "./vault-budget-table.tsx";
import type { Child } from "hono/jsx";
import { BudgetInput } from "../../contract/index.ts";
import { FormField, Name, PostForm } from "../ui/index.ts";
import { SubmitRow } from "./one-time-link.tsx";

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
