/** @jsxImportSource hono/jsx */
// `/vaults/:vault/agents`: invite an agent (the link is shown once, in the POST's answer, with the
// redeem command), the vault's agents with role and active sessions, revoke one, and the pending
// agent invites. Every action is the API's domain function (createAgentInvite, listVaultAgents,
// revokeAgent, listInvites, revokeInvite) on a vault opened for "manage", as the API opens it; the
// invite form is read by the API's AgentInviteInput. An agent's name opens its own page (vault-agent.tsx).

import { Hono } from "hono";
import { AgentInviteInput, PageAfterName, parseWith } from "../../contract/index.ts";
import { BrokerError } from "../../errors.ts";
import {
  createAgentInvite,
  listInvites,
  listVaultAgents,
  listWorkloadsSeen,
  mayInVault,
  revokeAgent,
  revokeInvite,
  type AgentView,
} from "../../identity/index.ts";
import { readPageQuery } from "../kit/index.ts";
import { CONSOLE_PAGE_SIZE, PageLinks } from "./page-links.tsx";
import type { OpenVault, VaultRole } from "../../identity/index.ts";
import { Badge, Button, ConfirmForm, EmptyState, FormField, Name, PostForm, Section, Table, Time, toneOf } from "../ui/index.ts";
import {
  describeError,
  formOf,
  openConsoleVault,
  plural,
  redirectWithFlash,
  renderPage,
  requireConfirmation,
  requireSignedIn,
  runAction,
  signedIn,
  type ConsoleContext,
  type ConsoleEnv,
} from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { COPY_SCRIPT_NAME, CopyField, RoleSelect, SubmitRow } from "./one-time-link.tsx";
import { agentPath, agentPageRoutes } from "./vault-agent.tsx";
import { WorkloadsSeenSection } from "./vault-workloads-seen.tsx";

const TOKEN_LIFETIMES: readonly [string, string][] = [
  ["", "No expiry (revoke it here when done)"],
  ["86400", "1 day"],
  ["2592000", "30 days"],
  ["31536000", "1 year"],
];

/**
 * What an agent of each role may do in the vault (mayInVault's rule for machines): never read or set
 * credentials, change services or decide anything, whatever the role; people's roles say more (one-time-link.tsx).
 */
export const AGENT_ROLE_HELP: Record<VaultRole, string> = {
  proxy: "proxy: uses the vault's services through the broker",
  member: "member: also reads the vault's request log",
  admin: "admin: also invites agents and changes the vault's settings",
};

/** The same, in a sentence of its own (the invite's page). */
const AGENT_ROLE_MEANING: Record<VaultRole, string> = {
  proxy: "uses the vault's services through the broker",
  member: "uses the vault's services and reads its request log",
  admin: "uses the vault's services, reads its request log, invites agents and changes the vault's settings",
};

/** The instance role every agent a vault invite makes holds, in words (no agent invite makes an owner). */
const AGENT_INSTANCE_ROLE = "member (the broker-wide role of every invited agent: it creates no vaults)";

function vaultOf(open: OpenVault) {
  return { name: open.vault.name, role: open.role, section: "agents" as const };
}

const agentsPath = (vault: string) => vaultPath(vault, "agents");

function InviteForm(props: { open: OpenVault }) {
  return (
    <PostForm action={`${agentsPath(props.open.vault.name)}/invite`} id="invite-agent" label="Invite an agent">
      <FormField
        label="Agent name"
        name="name"
        pattern="[a-z0-9][a-z0-9\-]{0,62}"
        maxlength={63}
        autocomplete="off"
        placeholder="e.g. billing-bot"
        hint="Lower-case letters, digits and dashes; shown in proposals and logs. Leave empty for a generated name."
      />
      <RoleSelect ceiling={props.open.role} selected="proxy" label={`Role in vault ${props.open.vault.name}`} help={AGENT_ROLE_HELP} />
      <p class="hint agent-role-note" id="agent-role-note">
        Whatever its role, an agent never reads or sets a credential, changes a service or approves anything: it asks for those with a proposal.
      </p>
      <div class="field">
        <label for="f-token_ttl_seconds">Agent token lifetime</label>
        <select id="f-token_ttl_seconds" name="token_ttl_seconds">
          {TOKEN_LIFETIMES.map(([value, label]) => (
            <option value={value}>{label}</option>
          ))}
        </select>
      </div>
      <SubmitRow label="Create invite link" id="invite-agent-submit" />
    </PostForm>
  );
}

type AgentItem = AgentView;

function AgentTable(props: { vault: string; agents: readonly AgentItem[]; later: boolean }) {
  const roleHere = (a: AgentItem) => a.vaults.find((v) => v.name === props.vault)?.role ?? "proxy";
  return (
    <Table
      id="agents"
      rows={props.agents}
      empty={
        props.later ? (
          <p class="muted">No more agents.</p>
        ) : (
          <EmptyState title="No agents yet">
            <p>
              Invite one below: it redeems the link once with curl and gets its own token. Its requests then go through the broker with this vault's
              credentials.
            </p>
          </EmptyState>
        )
      }
      columns={[
        {
          label: "Agent",
          cell: (a) => (
            <a class="strong-link" href={agentPath(props.vault, a.name)}>
              <Name>{a.name}</Name>
            </a>
          ),
        },
        { label: `Role in ${props.vault}`, cell: (a) => <Badge tone={toneOf(roleHere(a))}>{roleHere(a)}</Badge> },
        { label: "Active sessions", class: "num", cell: (a) => String(a.sessions) },
        {
          label: "Other vaults",
          cell: (a) =>
            a.vaults.length > 1 ? (
              a.vaults
                .filter((v) => v.name !== props.vault)
                .map((v) => v.name)
                .join(", ")
            ) : (
              <span class="muted">none</span>
            ),
        },
        { label: "Joined", cell: (a) => <Time iso={a.created_at} /> },
        {
          label: "",
          class: "actions-cell",
          cell: (a) => (
            <details class="disclosure">
              <summary>Revoke…</summary>
              <ConfirmForm action={`${agentsPath(props.vault)}/${encodeURIComponent(a.name)}/revoke`} phrase={a.name} button={`Revoke ${a.name}`}>
                <p class="small">The agent is removed with every session it holds, in every vault. It would need a new invite.</p>
              </ConfirmForm>
            </details>
          ),
        },
      ]}
    />
  );
}

type InviteItem = Awaited<ReturnType<typeof listInvites>>[number];

function InviteTable(props: { vault: string; invites: readonly InviteItem[] }) {
  return (
    <Table
      id="agent-invites"
      rows={props.invites}
      empty={<p class="muted">No pending agent invites. An invite lasts 15 minutes and works once.</p>}
      columns={[
        { label: "Agent name", cell: (i) => <Name>{"name" in i ? i.name : ""}</Name> },
        { label: "Role", cell: (i) => <Badge tone={toneOf(i.role)}>{i.role}</Badge> },
        { label: "Expires", cell: (i) => <Time iso={i.expires_at} /> },
        {
          label: "",
          class: "actions-cell",
          cell: (i) => (
            <PostForm action={`${agentsPath(props.vault)}/invites/${encodeURIComponent(i.id)}/revoke`} class="inline-form">
              <Button variant="danger" small>
                Revoke invite
              </Button>
            </PostForm>
          ),
        },
      ]}
    />
  );
}

async function renderAgents(c: ConsoleContext) {
  const open = await openConsoleVault(c, "read");
  const d = c.get("kit").d;
  const user = signedIn(c);
  const lead = "Agents use this vault's services through the broker with their own token; they never see a credential value.";
  if (!mayInVault(user, open.role, "manage")) {
    const body = (
      <Section title="Agents">
        <p id="not-admin">Your role here ({open.role}) does not manage agents. Ask an admin of this vault to invite or revoke one.</p>
      </Section>
    );
    return renderPage(c, { title: "Agents", nav: "vaults", vault: vaultOf(open), lead }, body);
  }
  const manage = await openConsoleVault(c, "manage");
  const { after } = readPageQuery(c, PageAfterName);
  const page = await listVaultAgents(d, manage, { limit: CONSOLE_PAGE_SIZE, after });
  const { agents: count } = await d.store.vaultCounts.of(open.vault.id, d.now());
  const invites = await listInvites(d, manage, "agent");
  const workloads = await listWorkloadsSeen(d, manage);
  const body = (
    <>
      <Section title={`Agents (${count})`} id="agent-list">
        <AgentTable vault={open.vault.name} agents={page.agents} later={after !== undefined} />
        <PageLinks id="agent-pages" label="Agent pages" base={agentsPath(open.vault.name)} param="after" next={page.next_cursor} later={after !== undefined} />
      </Section>
      <WorkloadsSeenSection vault={open.vault.name} workloads={workloads} />
      <Section
        title="Invite an agent"
        id="invite"
        description="You get a link to give the agent once. It redeems it with a POST and receives its token; the link then stops working."
      >
        <InviteForm open={open} />
      </Section>
      <Section title="Pending agent invites" id="pending-invites">
        <InviteTable vault={open.vault.name} invites={invites} />
      </Section>
    </>
  );
  return renderPage(c, { title: "Agents", nav: "vaults", vault: vaultOf(open), lead }, body);
}

/** The form's fields as the API's body would carry them (empty fields left out; no TTL: never expires). */
function readInviteForm(form: Record<string, string>) {
  const name = (form.name ?? "").trim();
  const ttl = (form.token_ttl_seconds ?? "").trim();
  return { name: name === "" ? undefined : name, role: form.role || undefined, token_ttl_seconds: /^\d{1,10}$/.test(ttl) ? Number(ttl) : null };
}

export function agentPages() {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/agents/*", requireSignedIn);
  r.get("/vaults/:vault/agents", requireSignedIn, renderAgents);
  r.route("/", agentPageRoutes()); // /vaults/:vault/agents/:name, one agent with its budgets

  // The invite link is the agent's way in: it is shown once, in this answer only (no flash, no URL, no log).
  r.post("/vaults/:vault/agents/invite", async (c) => {
    const back = agentsPath(c.req.param("vault"));
    let open: OpenVault;
    let invite: Awaited<ReturnType<typeof createAgentInvite>>;
    try {
      open = await openConsoleVault(c, "manage");
      invite = await createAgentInvite(c.get("kit").d, signedIn(c), open, parseWith(AgentInviteInput, readInviteForm(formOf(c))));
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return redirectWithFlash(c, back, "error", describeError(err));
    }
    const minutes = Math.max(1, Math.round((Date.parse(invite.expires_at) - c.get("kit").d.now()) / 60_000));
    const body = (
      <Section title={`Invite for ${invite.name}`} id="agent-invite">
        <p>
          Give the agent this link. It works once, for the next {plural(minutes, "minute")} (until <Time iso={invite.expires_at} />
          ), and makes <Name>{invite.name}</Name> an agent of this broker.
        </p>
        <dl class="overview" id="invite-roles">
          <dt>Role in vault {open.vault.name}</dt>
          <dd>
            <Badge tone={toneOf(invite.role)}>{invite.role}</Badge> {AGENT_ROLE_MEANING[invite.role]}
          </dd>
          <dt>Instance role</dt>
          <dd>{AGENT_INSTANCE_ROLE}</dd>
        </dl>
        <CopyField id="invite-url" label="Invite link" value={invite.invite_url} hint="Shown only once: this page is the only place it appears." />
        <CopyField
          id="cli-redeem-command"
          label="With the broker CLI (the agent runs it)"
          value={`broker agent redeem ${invite.invite_url}`}
          hint="It saves the agent's token; then `broker vault run -- <command>` runs the agent with this vault's services."
        />
        <CopyField
          id="redeem-command"
          label="Or without the CLI"
          value={`curl -X POST ${invite.invite_url}`}
          hint="The answer holds the agent's token, broker URL and proxy settings; its vaults[].role is the role in each vault, agent.instance_role the broker-wide one."
        />
        <p>
          <a href={back}>Back to agents</a>
        </p>
      </Section>
    );
    return renderPage(c, { title: "Agent invite created", nav: "vaults", vault: vaultOf(open), scripts: true, script: COPY_SCRIPT_NAME }, body);
  });

  r.post("/vaults/:vault/agents/:name/revoke", (c) => {
    const name = c.req.param("name");
    return runAction(c, {
      run: async () => {
        await openConsoleVault(c, "manage");
        requireConfirmation(c, name);
        await revokeAgent(c.get("kit").d, signedIn(c), name);
      },
      success: `Agent ${name} revoked; its sessions have ended.`,
      redirect: agentsPath(c.req.param("vault")),
    });
  });

  r.post("/vaults/:vault/agents/invites/:id/revoke", (c) =>
    runAction(c, {
      run: async () => revokeInvite(c.get("kit").d, await openConsoleVault(c, "manage"), "agent", c.req.param("id")),
      success: "Agent invite revoked; its link no longer works.",
      redirect: agentsPath(c.req.param("vault")),
    }),
  );
  return r;
}
