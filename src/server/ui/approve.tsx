/** @jsxImportSource hono/jsx */
// The approval page: a read-only view of a proposal for anyone holding the approval link, a
// sign-in form (and "Sign in with <provider>" when one is configured), and, for a signed-in admin or member of the vault, one password field per slot
// (or a reference into a secret store the vault may use, slot-answers.tsx),
// a rules box per service (to narrow what was asked; each host's rules are shown in words beside today's)
// and Approve / Deny (posted as decision=allow|deny). All agent-written text is rendered as escaped text (hono/jsx escapes), links
// only for https URLs; no inline script or style exists (the CSP forbids them).

import type { Child } from "hono/jsx";
import { requesterPrefix } from "../../identity/index.ts";
import { type ProposalView } from "../../workflows/index.ts";
import type { RequesterKind } from "../../identity/index.ts";
import type { Rules } from "../../policy/index.ts";
import { describeProposalChange, isPemSlot, PEM_HINT, slotUses } from "../../words/index.ts";
import { ProviderSignIn, type SignInProvider } from "./sign-in-provider.tsx";
import { Brand, Document } from "./document.tsx";
import { RulesBox, RulesReview } from "./rules-field.tsx";
import { TemplateChoice } from "./template-choice.tsx";
import { formatRulesText, rulesFieldName } from "./rules-text.ts";
import { SlotReference } from "./slot-answers.tsx";

export type Viewer = { kind: "anonymous" } | { kind: "not-allowed"; email: string } | { kind: "approver"; email: string };

export interface ApprovePageProps {
  readonly proposal: ProposalView;
  /** Who asked, by name, with their current role in the vault (null when they hold none). */
  readonly requester: { readonly name: string; readonly kind: RequesterKind; readonly role: string | null };
  /** The server's clock, for "expires in 6 days". */
  readonly now: number;
  readonly warnings: readonly string[];
  readonly viewer: Viewer;
  readonly token: string;
  readonly csrf: string;
  readonly existingKeys: readonly string[];
  /** The vault's services today, by host (for "Allowed now" and what a proposal widens). */
  /** By host; a Map, so a host named `constructor` or `toString` finds no inherited entry. */
  readonly currentServices: ReadonlyMap<string, { readonly rules?: Rules }>;
  /** The rules boxes as the person typed them (a refused decision shows them again), by host. */
  readonly typedRules?: Readonly<Record<string, string>>;
  readonly notice?: string;
  /** A decision's result reads as a success; anything else as a warning. */
  readonly noticeKind?: "success" | "warning";
  /** The identity provider to offer beside the password form (absent: that sign-in is off). */
  readonly provider?: SignInProvider;
  /** The secret store connections the vault may use, by name: a slot may be answered with a reference into one (none: values only). */
  readonly connections?: readonly string[];
}

const UNITS: [number, string][] = [
  [86_400_000, "day"],
  [3_600_000, "hour"],
  [60_000, "minute"],
];

/** "in 6 days", "3 hours ago": the largest whole unit, so a person reads it at a glance. */
/** "the agent ", "a `broker vault run` session of " (the command set as code), or nothing: before the requester's name. */
export function RequesterPrefix(props: { kind: RequesterKind }) {
  return props.kind === "session" ? (
    <>
      a <code>broker vault run</code> session of{" "}
    </>
  ) : (
    <>{requesterPrefix(props.kind)}</>
  );
}

export function relativeTime(iso: string, now: number): string {
  const delta = Date.parse(iso) - now;
  const abs = Math.abs(delta);
  const [size, unit] = UNITS.find(([ms]) => abs >= ms) ?? [60_000, "minute"];
  if (abs < 60_000) return delta > 0 ? "in under a minute" : "just now"; // "now" itself is past: it just happened
  const n = Math.max(1, Math.round(abs / size));
  const text = `${n} ${unit}${n === 1 ? "" : "s"}`;
  return delta >= 0 ? `in ${text}` : `${text} ago`;
}

function When(props: { iso: string; now: number }) {
  return (
    <time datetime={props.iso} title={props.iso}>
      {relativeTime(props.iso, props.now)}
    </time>
  );
}

function ObtainLink(props: { url: string }) {
  if (!props.url.startsWith("https://")) return <span class="muted">none given</span>;
  return (
    <a href={props.url} target="_blank" rel="noopener noreferrer nofollow">
      {props.url}
    </a>
  );
}

function Services(props: { proposal: ProposalView; current: ApprovePageProps["currentServices"]; typed?: ApprovePageProps["typedRules"]; editable: boolean }) {
  if (props.proposal.services.length === 0) return null;
  const pending = props.proposal.status === "pending";
  return (
    <section id="services">
      <h2>Hosts the agent wants to reach</h2>
      {props.proposal.services.map((s, i) => {
        const change = describeProposalChange(s, props.current.get(s.host), pending);
        return (
          <fieldset class="service" id={`service-${i}`}>
            <legend>
              <code>{s.host}</code> {pending ? <span class="badge">{change.status}</span> : null}
            </legend>
            {s.description ? <p>{s.description}</p> : null}
            <dl class="overview">
              <TemplateChoice service={s} />
              <dt>Credential</dt>
              <dd>{change.auth}</dd>
              <RulesReview change={change.rules} id={`service-${i}-rules`} />
            </dl>
            {props.editable ? (
              <RulesBox
                id={`rules-${i}`}
                name={rulesFieldName(s.host)}
                value={props.typed?.[s.host] ?? formatRulesText(s.rules)}
                label={`Allowed requests to ${s.host} after approval`}
                intro={
                  s.rules
                    ? "Delete lines or paths to narrow what the agent asked for."
                    : "The agent asked for every method and path; write rules to narrow that."
                }
                empty={s.rules ? "To allow nothing, Deny the request." : undefined}
              />
            ) : null}
          </fieldset>
        );
      })}
    </section>
  );
}

function Slot(props: {
  slot: ProposalView["credentials"][number];
  services: ProposalView["services"];
  editable: boolean;
  exists: boolean;
  connections?: readonly string[];
}) {
  const { slot } = props;
  const connections = props.connections ?? [];
  const uses = slotUses(props.services, slot.key);
  return (
    <fieldset>
      <legend>
        <code>{slot.key}</code>
        {props.exists ? <span class="badge">already stored</span> : null}
      </legend>
      <p>{slot.description}</p>
      {uses.length ? (
        <p class="muted" id={`uses_${slot.key}`}>
          Used as {uses.join("; ")}.
        </p>
      ) : null}
      <p>
        Where to get it: <ObtainLink url={slot.obtain} />
      </p>
      {slot.obtain_instructions ? <div class="instructions">{slot.obtain_instructions}</div> : null}
      {props.editable ? (
        <>
          <label for={`value_${slot.key}`}>
            Value for {slot.key}
            {props.exists ? " (leave empty to keep the stored value)" : ""}
          </label>
          {/* Required only when no reference could answer it instead (the server says what is missing either way). */}
          <input type="password" id={`value_${slot.key}`} name={`value_${slot.key}`} autocomplete="off" required={!props.exists && connections.length === 0} />
          {isPemSlot(props.services, slot.key) ? <p class="hint">{PEM_HINT}</p> : null}
          {connections.length ? <SlotReference slotKey={slot.key} idPrefix="" connections={connections} /> : null}
        </>
      ) : null}
    </fieldset>
  );
}

function SignIn(props: { id: number; token: string; csrf: string; provider?: SignInProvider }) {
  return (
    <>
      <PageSignInForm action={`/approve/${props.id}/login`} csrf={props.csrf} token={props.token} heading="Sign in to decide">
        Only a human who is an admin or member of this vault can approve or deny.
      </PageSignInForm>
      {/* Back to this very page (the token is in its query) once the provider has said who this is. */}
      <ProviderSignIn provider={props.provider} returnTo={`/approve/${props.id}?token=${encodeURIComponent(props.token)}`} />
    </>
  );
}

/** An approval page's email and password form (the proposal page also carries its link's token). */
export function PageSignInForm(props: { action: string; csrf: string; token?: string; heading: string; children?: Child }) {
  return (
    <form method="post" action={props.action}>
      <h2>{props.heading}</h2>
      <p class="muted">{props.children}</p>
      {props.token !== undefined ? <input type="hidden" name="token" value={props.token} /> : null}
      <input type="hidden" name="csrf" value={props.csrf} />
      <label for="email">Email</label>
      <input type="email" id="email" name="email" autocomplete="username" required />
      <label for="password">Password</label>
      <input type="password" id="password" name="password" autocomplete="current-password" required />
      <div class="actions">
        <button type="submit" class="btn btn-primary">
          Sign in
        </button>
      </div>
    </form>
  );
}

/** Who is signed in, with a way into the console and out of the session. */
export function Session(props: { viewer: Viewer; csrf: string }) {
  if (props.viewer.kind === "anonymous") return null;
  return (
    <form method="post" action="/logout" class="session-bar" id="session">
      <input type="hidden" name="csrf" value={props.csrf} />
      <span class="muted">Signed in as {props.viewer.email}.</span> <a href="/">Open the console</a>{" "}
      <button type="submit" class="btn btn-link btn-small">
        Sign out
      </button>
    </form>
  );
}

export function ApprovePage(props: ApprovePageProps) {
  const p = props.proposal;
  const pending = p.status === "pending";
  const editable = pending && props.viewer.kind === "approver";
  const body = (
    <>
      <h1>
        Access request #{p.id} for vault <code>{p.vault}</code>
      </h1>
      <p id="requester">
        Requested by {props.requester.kind === "unknown" ? "a session of " : <RequesterPrefix kind={props.requester.kind} />}
        <strong>{props.requester.name}</strong>
        {props.requester.role ? <span class="muted"> ({props.requester.role} in this vault)</span> : null}
      </p>
      <p>
        Status:{" "}
        <span class="badge" id="status">
          {p.status}
        </span>{" "}
        <span class="muted">
          {pending ? "expires" : p.status === "expired" ? "expired" : "decided"}{" "}
          <When iso={pending || p.status === "expired" ? p.expires_at : (p.decided_at ?? p.expires_at)} now={props.now} />
        </span>
      </p>
      <Session viewer={props.viewer} csrf={props.csrf} />
      {props.notice ? (
        <p class={props.noticeKind === "success" ? "flash flash-success" : "warning"} id="notice" role="status">
          {props.notice}
        </p>
      ) : null}
      {p.message ? (
        <>
          <h2>The agent's note</h2>
          <div class="note">{p.message}</div>
        </>
      ) : null}
      {p.user_message ? (
        <>
          <h2>Message for you</h2>
          <div class="note">{p.user_message}</div>
        </>
      ) : null}
      {props.warnings.map((w) => (
        <p class="warning">{w}</p>
      ))}
      {editable ? (
        <form method="post" action={`/approve/${p.id}/decide`} autocomplete="off">
          <input type="hidden" name="token" value={props.token} />
          <input type="hidden" name="csrf" value={props.csrf} />
          <Services proposal={p} current={props.currentServices} typed={props.typedRules} editable />
          {p.credentials.length ? <h2>Credentials to supply</h2> : null}
          {p.credentials.map((s) => (
            <Slot slot={s} services={p.services} editable exists={props.existingKeys.includes(s.key)} connections={props.connections} />
          ))}
          <div class="actions">
            <button type="submit" name="decision" value="allow" class="allow">
              Approve
            </button>
            <button type="submit" name="decision" value="deny" class="deny" formnovalidate>
              Deny
            </button>
          </div>
        </form>
      ) : (
        <>
          <Services proposal={p} current={props.currentServices} editable={false} />
          {p.credentials.length ? <h2>{pending ? "Credentials to supply" : "Credentials asked for"}</h2> : null}
          {p.credentials.map((s) => (
            <Slot slot={s} services={p.services} editable={false} exists={props.existingKeys.includes(s.key)} />
          ))}
        </>
      )}
      {pending && props.viewer.kind === "anonymous" ? <SignIn id={p.id} token={props.token} csrf={props.csrf} provider={props.provider} /> : null}
      {pending && props.viewer.kind === "not-allowed" ? (
        <p class="warning">You are signed in as {props.viewer.email}, who is not an admin or member of this vault and cannot decide.</p>
      ) : null}
    </>
  );
  return (
    <Document title={`Access request #${p.id}`}>
      <Brand />
      {body}
    </Document>
  );
}

export function MessagePage(props: { title: string; message: string }) {
  return (
    <Document title={props.title}>
      <Brand />
      <h1>{props.title}</h1>
      <p id="message">{props.message}</p>
    </Document>
  );
}
