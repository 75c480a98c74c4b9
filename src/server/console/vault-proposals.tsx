/** @jsxImportSource hono/jsx */
// `/vaults/:vault/proposals`: agents' requests, pending first, with who asked (by name), its note,
// hosts (new or changed, how the credential is sent, rules beside today's: worded by words/ as on the
// approval page), the credentials asked for and the new-host warnings; approve (typing each value
// into a password field, narrowing each host's rules in its box) or deny, and a fresh approval
// link, through the API's domain functions (readProposalFor, approveProposal, rejectProposal,
// reissueApprovalLink), so only human admins and members decide. A slot may be answered with a
// reference into a secret store the vault may use instead of a value (ui/slot-answers.tsx). A typed
// value goes straight into a Secret; no page ever shows one.

import { Hono } from "hono";
import { BrokerError, NotFound } from "../../errors.ts";
import { PageBeforeId, parseWith, ProposalApprovalInput } from "../../contract/index.ts";
import type { Secret } from "../../secret.ts";
import {
  approveProposal,
  listSecretStores,
  readProposalFor,
  readProposalId,
  rejectProposal,
  reissueApprovalLink,
  reviewProposals,
} from "../../workflows/index.ts";
import { mayInVault } from "../../identity/index.ts";
import { servicesOfHosts, viewProposal } from "../../workflows/index.ts";
import { readPageQuery } from "../kit/index.ts";
import { CONSOLE_PAGE_SIZE } from "./page-links.tsx";
import { ProposalHistory } from "./vault-proposal-history.tsx";
import type { OpenVault, VaultRole } from "../../identity/index.ts";
import type { ProposalReview } from "../../workflows/index.ts";
import type { CredentialSource, Rules } from "../../policy/index.ts";
import { RulesBox, RulesReview, TemplateChoice } from "../ui/index.ts";
import { formatRulesText, readChosenRules, rulesFieldName, typedRules } from "../ui/index.ts";
import { Badge, Button, EmptyState, Name, PostForm, Section, SlotReference, slotAnswers, Time, toneOf } from "../ui/index.ts";
import {
  describeError,
  formOf,
  openConsoleVault,
  redirectWithFlash,
  renderPage,
  requireSignedIn,
  runAction,
  signedIn,
  type ConsoleContext,
  type ConsoleEnv,
} from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { COPY_SCRIPT_NAME, CopyField } from "./one-time-link.tsx";
import { describeProposalChange, isPemSlot, PEM_HINT, slotUses } from "../../words/index.ts";

const VALUE_PREFIX = "value_";

function vaultOf(open: OpenVault) {
  return { name: open.vault.name, role: open.role, section: "proposals" as const };
}

function proposalPath(vault: string, id: number, action: "approve" | "deny" | "approval-link"): string {
  return `${vaultPath(vault, "proposals")}/${id}/${action}`;
}

/** An obtain URL as a link only when it is https (the domain accepts nothing else); otherwise plain text. */
function ObtainLink(props: { url: string }) {
  if (!props.url) return <span class="muted">none given</span>;
  if (!props.url.startsWith("https://")) return <span>{props.url}</span>;
  return (
    <a href={props.url} target="_blank" rel="noopener noreferrer nofollow">
      {props.url}
    </a>
  );
}

/** The vault's services today, by host: what "Allowed now" and "wider than now" compare against. */
/** By host; a Map, so a host named `constructor` finds no inherited entry. */
type CurrentServices = ReadonlyMap<string, { readonly rules?: Rules }>;

/** A refused approval's rules boxes, as typed, to show them again. */
interface TypedRules {
  readonly id: number;
  readonly rules: Readonly<Record<string, string>>;
}

function Hosts(props: { p: ProposalReview; current: CurrentServices; editable: boolean; typed?: Readonly<Record<string, string>> }) {
  if (props.p.services.length === 0) return null;
  return (
    <>
      <h3>Hosts</h3>
      <ul class="plain-list">
        {props.p.services.map((s, i) => {
          const id = `rules-${props.p.id}-${i}`;
          const pending = props.p.status === "pending";
          // The approval page words each host with the same call, so a proposal reads alike in both.
          const change = describeProposalChange(s, props.current.get(s.host), pending);
          return (
            <li class="proposed-host">
              <Name>{s.host}</Name> {pending ? <Badge>{change.status}</Badge> : null} <span class="muted small">{change.auth}</span>
              {s.description ? <span class="small"> · {s.description}</span> : null}
              <dl class="overview rules-review">
                <TemplateChoice service={s} />
                <RulesReview change={change.rules} id={id} />
              </dl>
              {props.editable ? (
                <RulesBox
                  id={`${id}-box`}
                  name={rulesFieldName(s.host)}
                  value={props.typed?.[s.host] ?? formatRulesText(s.rules)}
                  label={`Allowed requests to ${s.host} after approval`}
                  intro={s.rules ? "Delete lines or paths to narrow what was asked for." : "Every method and path was asked for; write rules to narrow that."}
                  empty={s.rules ? "To allow nothing, deny the proposal." : undefined}
                />
              ) : null}
            </li>
          );
        })}
      </ul>
    </>
  );
}

/** One requested credential: what it is, where to get it, and (for an approver) a password field, or a reference when the vault may use a store. */
function Slot(props: { p: ProposalReview; slot: ProposalReview["credentials"][number]; editable: boolean; exists: boolean; connections: readonly string[] }) {
  const { slot, p } = props;
  const id = `value-${p.id}-${slot.key}`;
  const uses = slotUses(p.services, slot.key);
  return (
    <fieldset class="slot">
      <legend>
        <Name>{slot.key}</Name> {props.exists ? <Badge tone="info">already stored</Badge> : null}
      </legend>
      {slot.description ? <p>{slot.description}</p> : null}
      {uses.length ? <p class="small muted">Used as {uses.join("; ")}.</p> : null}
      <p class="small">
        Where to get it: <ObtainLink url={slot.obtain} />
      </p>
      {slot.obtain_instructions ? <div class="note instructions">{slot.obtain_instructions}</div> : null}
      {props.editable ? (
        <div class="field">
          <label for={id}>
            Value for {slot.key}
            {props.exists ? " (leave empty to keep the stored value)" : ""}
          </label>
          {/* Required only when no reference could answer it instead (the server says what is missing either way). */}
          <input
            type="password"
            id={id}
            name={`${VALUE_PREFIX}${slot.key}`}
            autocomplete="off"
            required={!props.exists && props.connections.length === 0}
            spellcheck={false}
          />
          {isPemSlot(p.services, slot.key) ? <p class="hint">{PEM_HINT}</p> : null}
        </div>
      ) : null}
      {props.editable && props.connections.length ? <SlotReference slotKey={slot.key} idPrefix={`p${p.id}-`} connections={props.connections} /> : null}
    </fieldset>
  );
}

function PendingProposal(props: {
  p: ProposalReview;
  vault: string;
  canDecide: boolean;
  role: VaultRole;
  existing: readonly string[];
  current: CurrentServices;
  typed?: TypedRules;
  connections: readonly string[];
}) {
  const { p, vault } = props;
  const slots = p.credentials.map((s) => (
    <Slot p={p} slot={s} editable={props.canDecide} exists={props.existing.includes(s.key)} connections={props.connections} />
  ));
  return (
    <article class="card proposal" id={`proposal-${p.id}`} aria-labelledby={`proposal-${p.id}-title`}>
      <h2 id={`proposal-${p.id}-title`}>
        #{p.id} from <span class="who">{p.requested_by}</span> <Badge tone={toneOf(p.status)}>{p.status}</Badge>
      </h2>
      <p class="muted small">
        {p.requested_by_kind === "agent" ? (
          "Filed by an agent"
        ) : p.requested_by_kind === "user" ? (
          "Filed by a person"
        ) : p.requested_by_kind === "session" ? (
          <>
            Filed by a <code>broker vault run</code> session of this person
          </>
        ) : (
          "Filed"
        )}{" "}
        <Time iso={p.created_at} /> · expires <Time iso={p.expires_at} />
      </p>
      {p.message ? (
        <div class="note" aria-label="The agent's note">
          {p.message}
        </div>
      ) : null}
      {p.user_message ? (
        <>
          <h3>Message for you</h3>
          <div class="note">{p.user_message}</div>
        </>
      ) : null}
      {p.warnings.map((w) => (
        <p class="warning" role="note">
          {w}
        </p>
      ))}
      {props.canDecide ? (
        <>
          <PostForm action={proposalPath(vault, p.id, "approve")} id={`approve-${p.id}`} label={`Approve proposal ${p.id}`}>
            <Hosts p={p} current={props.current} editable typed={props.typed?.id === p.id ? props.typed.rules : undefined} />
            {p.credentials.length ? <h3>Credentials asked for</h3> : null}
            {slots}
            <div class="actions">
              <Button variant="primary" id={`approve-${p.id}-button`}>
                Approve
              </Button>
              {/* These two submit their own forms below (the `form` attribute), not the typed values. */}
              <button type="submit" form={`deny-${p.id}`} class="btn btn-danger" id={`deny-${p.id}-button`}>
                Deny
              </button>
              <button type="submit" form={`link-${p.id}`} class="btn btn-link" id={`link-${p.id}-button`}>
                New approval link
              </button>
            </div>
          </PostForm>
          <PostForm action={proposalPath(vault, p.id, "deny")} id={`deny-${p.id}`} class="inline-form" label={`Deny proposal ${p.id}`} />
          <PostForm
            action={proposalPath(vault, p.id, "approval-link")}
            id={`link-${p.id}`}
            class="inline-form"
            label={`New approval link for proposal ${p.id}`}
          />
        </>
      ) : (
        <>
          <Hosts p={p} current={props.current} editable={false} />
          {p.credentials.length ? <h3>Credentials asked for</h3> : null}
          {slots}
          <p class="muted">Your role ({props.role}) can see proposals but not decide them: an admin or member of this vault approves or denies.</p>
        </>
      )}
    </article>
  );
}

async function renderProposals(c: ConsoleContext, typed?: TypedRules, status: 200 | 400 | 404 | 409 = 200) {
  const open = await openConsoleVault(c, "read");
  const d = c.get("kit").d;
  const { before } = readPageQuery(c, PageBeforeId);
  const { pending, decided, next_cursor } = await reviewProposals(d, open, { limit: CONSOLE_PAGE_SIZE, before });
  const canDecide = mayInVault(signedIn(c), open.role, "approve");
  const existing = await d.store.credentials.keys(open.vault.id);
  // The connections a slot may be answered from (the vault's own and the owner's shared with it), by name.
  const connections =
    canDecide && pending.some((p) => p.credentials.length)
      ? (await listSecretStores(d, signedIn(c)))
          .filter((s) => s.vault === open.vault.name || s.shared_with.includes(open.vault.name))
          .map((s) => s.name)
          .sort()
      : [];
  // The vault's services for the pending proposals' hosts only (their rules are shown beside the ones asked for).
  const current: CurrentServices = await servicesOfHosts(
    d,
    open.vault.id,
    pending.flatMap((p) => p.services.map((s) => s.host)),
  );
  const body = (
    <>
      {before !== undefined ? null : pending.length === 0 ? (
        <Section title="Waiting for a decision" id="pending">
          <EmptyState title="Nothing to decide">
            <p>
              When an agent needs a host or a credential this vault does not have, it files a proposal (POST /v1/proposals). It shows up here for an admin or
              member to approve, typing the values, or deny.
            </p>
          </EmptyState>
        </Section>
      ) : (
        <div id="pending">
          <h2 class="section-title">Waiting for a decision ({pending.length})</h2>
          {pending.map((p) => (
            <PendingProposal
              p={p}
              vault={open.vault.name}
              canDecide={canDecide}
              role={open.role}
              existing={existing}
              current={current}
              typed={typed}
              connections={connections}
            />
          ))}
        </div>
      )}
      <Section title="History" id="history" description="Applied, rejected and expired proposals, newest first.">
        <ProposalHistory rows={decided} vault={open.vault.name} next={next_cursor} later={before !== undefined} />
      </Section>
    </>
  );
  const lead = "Agents ask here for hosts and credentials. Approving writes the services and the values you type; the agent never sees them.";
  return renderPage(c, { title: "Proposals", nav: "vaults", vault: vaultOf(open), lead, status }, body);
}

/** The proposal of the path, opened for deciding exactly as POST /v1/proposals/:id/approve does. */
async function openForDecision(c: ConsoleContext) {
  const d = c.get("kit").d;
  const open = await openConsoleVault(c, "read");
  const found = await readProposalFor(d, signedIn(c), readProposalId(c.req.param("id") ?? ""), undefined, "approve");
  if (found.open.vault.id !== open.vault.id) throw new NotFound("no such proposal");
  return found;
}

/**
 * The values or references typed for each slot, read by the API's own schema (the same checks as a slot
 * posted as JSON); a value is wrapped in a Secret at once, and an empty one means "keep the stored value".
 */
function typedValues(form: Record<string, string>): Record<string, CredentialSource> {
  return parseWith(ProposalApprovalInput, { credentials: slotAnswers(form) }).credentials;
}

export function proposalPages() {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/proposals/*", requireSignedIn);
  r.get("/vaults/:vault/proposals", requireSignedIn, (c) => renderProposals(c));

  r.post("/vaults/:vault/proposals/:id/approve", async (c) => {
    const back = vaultPath(c.req.param("vault"), "proposals");
    let typed: TypedRules | undefined;
    try {
      const { row, open } = await openForDecision(c);
      const services = viewProposal(row, open.vault.name).services;
      typed = { id: row.id, rules: typedRules(formOf(c), services) };
      await approveProposal(c.get("kit").d, open, row, typedValues(formOf(c)), { rules: readChosenRules(formOf(c), services) });
      c.get("kit").log.info("proposal_applied", { proposal: row.id, by: signedIn(c).id, via: "console" });
      return redirectWithFlash(c, back, "success", `Proposal #${row.id} approved. The agent sees the change on its next request.`);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      if (!typed || Object.keys(typed.rules).length === 0) return redirectWithFlash(c, back, "error", describeError(err));
      // Shown now on the same page, so the rules as typed stay in their boxes (values are never echoed).
      c.set("flash", { kind: "error", text: describeError(err) });
      return renderProposals(c, typed, err.status === 409 ? 409 : err.status === 404 ? 404 : 400);
    }
  });

  r.post("/vaults/:vault/proposals/:id/deny", (c) => {
    const back = vaultPath(c.req.param("vault"), "proposals");
    return runAction(c, {
      run: async () => {
        const { row, open } = await openForDecision(c);
        await rejectProposal(c.get("kit").d, open, row);
        c.get("kit").log.info("proposal_rejected", { proposal: row.id, by: signedIn(c).id, via: "console" });
        return row;
      },
      success: (row) => `Proposal #${row.id} denied. The agent is told on its next poll.`,
      redirect: back,
    });
  });

  // The link holds a token: it is shown once in this answer, never put in a flash or a URL.
  r.post("/vaults/:vault/proposals/:id/approval-link", async (c) => {
    const back = vaultPath(c.req.param("vault"), "proposals");
    let link: Awaited<ReturnType<typeof reissueApprovalLink>>;
    let open: OpenVault;
    try {
      const found = await openForDecision(c);
      open = found.open;
      link = await reissueApprovalLink(c.get("kit").d, open, found.row);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return redirectWithFlash(c, back, "error", describeError(err));
    }
    const body = (
      <Section title={`Approval link for proposal #${link.id}`} id="approval-link">
        <p>
          Send this link to the person who should decide. It works until <Time iso={link.expires_at} />; the previous link no longer works.
        </p>
        <CopyField
          id="approval-url"
          label="Approval link"
          value={link.approval_url}
          hint="Shown only once. Anyone with the link can read the proposal; only a signed-in admin or member can decide it."
        />
        <p>
          <a href={back}>Back to proposals</a>
        </p>
      </Section>
    );
    return renderPage(c, { title: "New approval link", nav: "vaults", vault: vaultOf(open), scripts: true, script: COPY_SCRIPT_NAME }, body);
  });
  return r;
}
