/** @jsxImportSource hono/jsx */
// `/vaults/:vault/members`: the people of a vault with their roles, and invites for people (create,
// with the link shown once in the POST's answer; list; revoke). The API's domain functions decide
// (listMembers and listInvites on "manage", createVaultInvite on "invite_people": human admins
// only, never agents), so the page and the API refuse the same people; the invite form is read by
// the API's VaultInviteInput.

import { Hono } from "hono";
import { parseWith, VaultInviteInput } from "../../contract/index.ts";
import { BrokerError } from "../../errors.ts";
import { createVaultInvite, listInvites, listMembers, mayInVault, revokeInvite } from "../../identity/index.ts";
import type { OpenVault } from "../../identity/index.ts";
import { Badge, Button, EmptyState, FormField, PostForm, Section, Table, Time, toneOf } from "../ui/index.ts";
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
import { COPY_SCRIPT_NAME, CopyField, RoleSelect, SubmitRow } from "./one-time-link.tsx";

function vaultOf(open: OpenVault) {
  return { name: open.vault.name, role: open.role, section: "members" as const };
}

const membersPath = (vault: string) => vaultPath(vault, "members");

type Member = Awaited<ReturnType<typeof listMembers>>[number];
type Invite = Awaited<ReturnType<typeof listInvites>>[number];

function MemberTable(props: { members: readonly Member[]; me: string }) {
  return (
    <Table
      id="members"
      rows={props.members}
      empty={<EmptyState title="No members">Invite a person below.</EmptyState>}
      columns={[
        {
          label: "Person",
          cell: (m) => (
            <>
              {m.email}
              {m.email === props.me ? <span class="muted small"> (you)</span> : null}
            </>
          ),
        },
        { label: "Role", cell: (m) => <Badge tone={toneOf(m.role)}>{m.role}</Badge> },
      ]}
    />
  );
}

function InviteTable(props: { vault: string; invites: readonly Invite[] }) {
  return (
    <Table
      id="vault-invites"
      rows={props.invites}
      empty={<p class="muted">No pending invites. An invite for a person lasts 48 hours.</p>}
      columns={[
        { label: "For", cell: (i) => ("email" in i && i.email ? i.email : <span class="muted">anyone with the link</span>) },
        { label: "Role", cell: (i) => <Badge tone={toneOf(i.role)}>{i.role}</Badge> },
        { label: "Expires", cell: (i) => <Time iso={i.expires_at} /> },
        {
          label: "",
          class: "actions-cell",
          cell: (i) => (
            <PostForm action={`${membersPath(props.vault)}/invites/${encodeURIComponent(i.id)}/revoke`} class="inline-form">
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

function InviteForm(props: { open: OpenVault }) {
  return (
    <PostForm action={`${membersPath(props.open.vault.name)}/invite`} id="invite-person" label="Invite a person">
      <FormField
        label="Email (optional)"
        name="email"
        type="email"
        autocomplete="off"
        placeholder="name@example.com"
        hint="With an email, only that person can accept. Without, anyone holding the link can, once."
      />
      <RoleSelect ceiling={props.open.role} selected="member" />
      <SubmitRow label="Create invite link" id="invite-person-submit" />
    </PostForm>
  );
}

async function renderMembers(c: ConsoleContext) {
  const open = await openConsoleVault(c, "read");
  const d = c.get("kit").d;
  const user = signedIn(c);
  const lead = "The people who can use this vault, and the invites waiting for someone to accept.";
  if (!mayInVault(user, open.role, "manage")) {
    const body = (
      <Section title="Members">
        <p id="not-admin">Your role here ({open.role}) does not show the member list. Ask an admin of this vault to invite someone or change a role.</p>
      </Section>
    );
    return renderPage(c, { title: "Members", nav: "vaults", vault: vaultOf(open), lead }, body);
  }
  const manage = await openConsoleVault(c, "manage");
  const members = await listMembers(d, manage);
  const invites = await listInvites(d, manage, "vault");
  const body = (
    <>
      <Section title={`People (${members.length})`} id="people">
        <MemberTable members={members} me={user.email} />
      </Section>
      {mayInVault(user, open.role, "invite_people") ? (
        <Section
          title="Invite a person"
          id="invite"
          description="You get a link to send them. They accept it with their account, or register through it. Agents are invited on the Agents page."
        >
          <InviteForm open={open} />
        </Section>
      ) : null}
      <Section title="Pending invites" id="pending-invites">
        <InviteTable vault={open.vault.name} invites={invites} />
      </Section>
    </>
  );
  return renderPage(c, { title: "Members", nav: "vaults", vault: vaultOf(open), lead }, body);
}

export function memberPages() {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/members/*", requireSignedIn);
  r.get("/vaults/:vault/members", requireSignedIn, renderMembers);

  // The invite link is shown once, in this answer only (no flash, no URL, no log).
  r.post("/vaults/:vault/members/invite", async (c) => {
    const back = membersPath(c.req.param("vault"));
    const form = formOf(c);
    let open: OpenVault;
    let invite: Awaited<ReturnType<typeof createVaultInvite>>;
    try {
      open = await openConsoleVault(c, "invite_people");
      const email = (form.email ?? "").trim();
      const request = parseWith(VaultInviteInput, { email: email === "" ? undefined : email, role: form.role || undefined });
      invite = await createVaultInvite(c.get("kit").d, signedIn(c), open, request);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return redirectWithFlash(c, back, "error", describeError(err));
    }
    const body = (
      <Section title="Invite created" id="person-invite">
        <p>
          Send this link to {invite.email ?? "the person you are inviting"}. It works once, until <Time iso={invite.expires_at} />, and makes them a{" "}
          <Badge tone={toneOf(invite.role)}>{invite.role}</Badge> of this vault.
        </p>
        <CopyField id="invite-url" label="Invite link" value={invite.invite_url} hint="Shown only once: this page is the only place it appears." />
        <CopyField id="join-command" label="Or, from a terminal" value={`broker vault join ${invite.invite_url}`} />
        <p>
          <a href={back}>Back to members</a>
        </p>
      </Section>
    );
    return renderPage(c, { title: "Person invited", nav: "vaults", vault: vaultOf(open), scripts: true, script: COPY_SCRIPT_NAME }, body);
  });

  r.post("/vaults/:vault/members/invites/:id/revoke", (c) =>
    runAction(c, {
      run: async () => revokeInvite(c.get("kit").d, await openConsoleVault(c, "manage"), "vault", c.req.param("id")),
      success: "Invite revoked; its link no longer works.",
      redirect: membersPath(c.req.param("vault")),
    }),
  );
  return r;
}
