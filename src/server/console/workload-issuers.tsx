/** @jsxImportSource hono/jsx */
// What the Workload identity page shows (workload-identity.tsx routes it): how workload identity works and how a job
// uses it, and each trusted issuer as a card — where its keys come from, its audiences, skew and jti rule, its
// bindings (conditions as `claim = pattern` lines, vault, role, longest session, agent) with Remove behind a typed
// confirmation, and the forms to add a binding, change the issuer or remove it. Only names, addresses, claims and
// public key ids are shown: a platform token never reaches the broker's pages.

import type { WorkloadBindingViewBody, WorkloadIssuerViewBody } from "../../contract/index.ts";
import type { Child } from "hono/jsx";
import { Badge, Button, CONFIRM_FIELD, EmptyState, FormField, Name, PostForm, Section, Table, Time, toneOf } from "../ui/index.ts";
import { plural } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { duration } from "./secret-store-pages.tsx";
import { BindingForm } from "./workload-binding-form.tsx";
import { conditionLines } from "./workload-draft.ts";
import { IssuerForm, type FormState } from "./workload-issuer-form.tsx";

export const WORKLOAD_BASE = "/settings/workload-identity";

/** An issuer's form route (`/issuers/<name>` changes it), or one of its actions. */
export function issuerPath(name: string, action?: "delete" | "bindings"): string {
  return `${WORKLOAD_BASE}/issuers/${encodeURIComponent(name)}${action ? `/${action}` : ""}`;
}

export const bindingPath = (issuer: string, name: string) => `${issuerPath(issuer, "bindings")}/${encodeURIComponent(name)}/delete`;

/** Where a page shows an issuer's card. */
export const issuerAnchor = (name: string) => `issuer-${name}`;

/**
 * The UI kit's ConfirmForm with an id of its own for its field: a page of several issuers holds several confirmations,
 * and each label must name its own input. The server checks the phrase again (requireConfirmation).
 */
function TypedConfirm(props: { id: string; action: string; phrase: string; button: string; children?: Child }) {
  return (
    <PostForm action={props.action} class="confirm-form" id={props.id}>
      {props.children}
      <FormField
        label={`Type ${props.phrase} to confirm`}
        name={CONFIRM_FIELD}
        id={`${props.id}-confirm`}
        required
        autocomplete="off"
        pattern={props.phrase.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}
        hint="This cannot be undone."
      />
      <div class="actions">
        <Button variant="danger" id={`${props.id}-submit`}>
          {props.button}
        </Button>
      </div>
    </PostForm>
  );
}

export function HowItWorks() {
  return (
    <Section title="How it works" id="workload-how">
      <ol class="steps">
        <li class="step">
          <span class="step-mark" aria-hidden="true" />
          <div class="step-body">
            <p class="step-title">Trust the platform's issuer</p>
            <p class="small muted">
              The OIDC issuer of your CI or cluster, such as <code>https://token.actions.githubusercontent.com</code>. The broker checks each token's signature
              with the issuer's keys, its audience and its expiry.
            </p>
          </div>
        </li>
        <li class="step">
          <span class="step-mark" aria-hidden="true" />
          <div class="step-body">
            <p class="step-title">Bind claims to a vault</p>
            <p class="small muted">
              A binding names the claims a token must carry (<code>repository = my-org/app</code>) and the vault and role its job gets. The first of the
              issuer's bindings whose conditions all hold is used.
            </p>
          </div>
        </li>
        <li class="step">
          <span class="step-mark" aria-hidden="true" />
          <div class="step-body">
            <p class="step-title">Run the job through the broker</p>
            <pre class="command" id="workload-run-command" aria-label="Command to run">
              <code>broker vault run --identity-token-file &lt;path&gt; -- &lt;command&gt;</code>
            </pre>
            <p class="small muted">
              <code>&lt;path&gt;</code> is the file holding the platform's token (a projected service-account token, a CI job's OIDC token). It is exchanged for
              a session that ends no later than the token; removing a binding or its issuer ends its sessions at once.
            </p>
          </div>
        </li>
      </ol>
    </Section>
  );
}

export function NoIssuers() {
  return (
    <EmptyState title="No trusted issuers yet">
      <p>Trust one below, then add a binding to say which of its workloads get which vault.</p>
    </EmptyState>
  );
}

/** Where the issuer's keys come from, in words. */
function KeySource(props: { i: WorkloadIssuerViewBody }) {
  const { i } = props;
  if (i.jwks_kids !== null) return i.jwks_kids.length ? <>key set given: {i.jwks_kids.join(", ")}</> : <>key set given (its keys name no kid)</>;
  if (i.jwks_url !== null)
    return (
      <>
        JWKS URL <code>{i.jwks_url}</code>
      </>
    );
  return <>OIDC discovery from the issuer URL</>;
}

function IssuerFacts(props: { i: WorkloadIssuerViewBody }) {
  const { i } = props;
  return (
    <dl class="overview" id={`issuer-facts-${i.name}`}>
      <dt>Issuer URL</dt>
      <dd>
        <code>{i.issuer}</code>
      </dd>
      <dt>Keys</dt>
      <dd class="issuer-keys">
        <KeySource i={i} />
      </dd>
      <dt>Audiences</dt>
      <dd>
        {i.audiences.map((a, n) => (
          <>
            {n > 0 ? " " : ""}
            <Name>{a}</Name>
          </>
        ))}
      </dd>
      <dt>Clock skew</dt>
      <dd>{plural(i.clock_skew_seconds, "second")}</dd>
      <dt>Token id (jti)</dt>
      <dd>{i.require_jti ? "required: each token is exchanged once" : "not required"}</dd>
      <dt>Trusted since</dt>
      <dd>
        <Time iso={i.created_at} />
      </dd>
    </dl>
  );
}

/** A name in a cell: a short one stays on one line (a hyphen is a break opportunity), a long one may still wrap. */
function CellName(props: { name: string }) {
  return (
    <span class={props.name.length <= 24 ? "budget-nowrap" : undefined}>
      <Name>{props.name}</Name>
    </span>
  );
}

function BindingTable(props: { issuer: string; bindings: readonly WorkloadBindingViewBody[] }) {
  return (
    <Table
      id={`bindings-${props.issuer}`}
      rows={props.bindings}
      empty={
        <p class="muted" id={`bindings-${props.issuer}-empty`}>
          No bindings yet: no token of this issuer is let in. Add one below.
        </p>
      }
      columns={[
        { label: "Binding", cell: (b) => <CellName name={b.name} /> },
        {
          label: "Conditions",
          cell: (b) => (
            <span class="conditions">
              {conditionLines(b.conditions).map((line, n) => (
                <>
                  {n > 0 ? <br /> : null}
                  <code>{line}</code>
                </>
              ))}
            </span>
          ),
        },
        {
          label: "Vault",
          cell: (b) => (
            <a href={vaultPath(b.vault)}>
              <CellName name={b.vault} />
            </a>
          ),
        },
        { label: "Role", cell: (b) => <Badge tone={toneOf(b.role)}>{b.role}</Badge> },
        { label: "Longest session", cell: (b) => duration(b.max_session_seconds) },
        { label: "Agent", cell: (b) => (b.agent === null ? <Badge tone="danger">revoked</Badge> : <CellName name={b.agent} />) },
        {
          label: "",
          class: "actions-cell",
          cell: (b) => (
            <a href={removeBindingLink(props.issuer, b.name)} id={`remove-${props.issuer}-${b.name}`} aria-label={`Remove binding ${b.name}`}>
              Remove…
            </a>
          ),
        },
      ]}
    />
  );
}

/** The page with binding `name`'s removal asked for (a GET: the confirmation shows under the issuer's table). */
const removeBindingLink = (issuer: string, name: string) => `${WORKLOAD_BASE}?${new URLSearchParams({ issuer, remove: name }).toString()}#remove-binding`;

/** The typed confirmation of a binding's removal, under its issuer's table. */
function RemoveBinding(props: { issuer: string; b: WorkloadBindingViewBody | undefined }) {
  const { b } = props;
  if (!b) return null;
  return (
    <div class="remove-box" id="remove-binding" role="region" aria-labelledby="remove-binding-title">
      <h3 id="remove-binding-title">Remove binding {b.name}?</h3>
      <TypedConfirm id="remove-binding-form" action={bindingPath(props.issuer, b.name)} phrase={b.name} button={`Remove binding ${b.name}`}>
        <p>
          Tokens of {props.issuer} that only it admits are refused from then on. Its agent {b.agent ? <Name>{b.agent}</Name> : null} goes with it, and every
          session exchanged under it ends at once.
        </p>
      </TypedConfirm>
      <p class="small">
        <a href={`${WORKLOAD_BASE}#${issuerAnchor(props.issuer)}`}>Cancel: keep it</a>
      </p>
    </div>
  );
}

/** What removing an issuer with `n` bindings takes with it. */
function removalWords(n: number): string {
  if (n === 0) return "Its tokens stop being accepted. It has no bindings.";
  if (n === 1)
    return "Its tokens stop being accepted, and its binding goes with it: the binding's agent is removed and every session exchanged under it ends at once.";
  return `Its tokens stop being accepted, and its ${n} bindings go with it: their agents are removed and every session exchanged under them ends at once.`;
}

/** Which of a card's forms is open, and what it holds (a refused form as typed). */
export interface IssuerForms {
  readonly binding: FormState;
  readonly change: FormState;
  readonly open?: "binding" | "change";
  /** The binding whose removal is asked for (`?issuer=…&remove=…`). */
  readonly removing?: string;
}

export function IssuerCard(props: { i: WorkloadIssuerViewBody; bindings: readonly WorkloadBindingViewBody[]; vaults: readonly string[]; forms: IssuerForms }) {
  const { i, bindings, forms } = props;
  const n = bindings.length;
  return (
    <Section title={`Issuer ${i.name}`} id={issuerAnchor(i.name)}>
      <IssuerFacts i={i} />
      <h3 id={`bindings-${i.name}-title`}>Bindings</h3>
      <p class="small muted">Tried in this order; the first whose conditions all hold gives the session.</p>
      <BindingTable issuer={i.name} bindings={bindings} />
      <RemoveBinding issuer={i.name} b={forms.removing === undefined ? undefined : bindings.find((b) => b.name === forms.removing)} />
      <ul class="plain-list">
        <li>
          <details class="disclosure" id={`add-binding-${i.name}-box`} open={forms.open === "binding" || n === 0}>
            <summary>Add a binding</summary>
            <BindingForm action={issuerPath(i.name, "bindings")} issuer={i.name} vaults={props.vaults} state={forms.binding} />
          </details>
        </li>
        <li>
          <details class="disclosure" id={`change-issuer-${i.name}-box`} open={forms.open === "change"}>
            <summary>Change this issuer (keys, audiences, skew)</summary>
            <p class="small muted">Its bindings, their agents and sessions stay; tokens are checked by what you save from then on.</p>
            <IssuerForm
              action={issuerPath(i.name)}
              id={`change-issuer-${i.name}`}
              prefix={`i-${i.name}`}
              state={forms.change}
              name={i.name}
              submit="Save changes"
            />
          </details>
        </li>
        <li>
          <details class="disclosure" id={`remove-issuer-${i.name}`}>
            <summary>Remove this issuer…</summary>
            <TypedConfirm id={`remove-issuer-${i.name}-form`} action={issuerPath(i.name, "delete")} phrase={i.name} button={`Remove issuer ${i.name}`}>
              <p class="warning">{removalWords(n)}</p>
            </TypedConfirm>
          </details>
        </li>
      </ul>
    </Section>
  );
}
