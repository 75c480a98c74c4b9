/** @jsxImportSource hono/jsx */
// `/account`: the signed-in person's password, sessions (each named by kind, client, address and last
// use, in words/'s terms; never a token) and linked sign-in providers, through the
// API's own calls (changePassword, listOwnSessions, revokeOwnSession, listIdentities,
// unlinkIdentity; linking is the API's POST /v1/auth/oidc/link). Changing the password ends every session,
// this browser's included (contract): the person signs in again with the new one.

import { Hono } from "hono";
import { ChangePasswordInput, PageAfterId, parseWith } from "../../contract/index.ts";
import { BrokerError, InvalidRequest } from "../../errors.ts";
import { changePassword, listIdentities, listOwnSessions, logout, revokeOwnSession, unlinkIdentity, type SessionView } from "../../identity/index.ts";
import { clientIp, readPageQuery, sessionClientOf } from "../kit/index.ts";
import { CONSOLE_PAGE_SIZE, PageLinks } from "./page-links.tsx";
import { clearPageCookie } from "../ui/index.ts";
import { Badge, Button, formatTime, FormField, Name, PostForm, relativeTime, Section, Table, Time } from "../ui/index.ts";
import { describeClient, describeSessionKind } from "../../words/index.ts";
import {
  describeError,
  formOf,
  redirectWithFlash,
  renderPage,
  requireSignedIn,
  runAction,
  signedIn,
  type ConsoleContext,
  type ConsoleEnv,
} from "./context.tsx";
import { IdentitiesSection, issuerHost, providerOrigin } from "../ui/index.ts";

/** What kind of session, in words/'s terms; a scoped one also says its role in which vault. */
function SessionKind(props: { s: SessionView }) {
  const s = props.s;
  return (
    <>
      <span class="session-kind">{describeSessionKind(s)}</span>
      {s.kind === "scoped" ? (
        <span class="muted small">
          {" "}
          ({s.role} in <Name>{s.vault ?? "deleted vault"}</Name>)
        </span>
      ) : null}
      {s.current ? (
        <>
          {" "}
          <Badge tone="info">this browser</Badge>
        </>
      ) : null}
    </>
  );
}

/** "3 minutes ago", with the exact time in the title and `datetime`. */
function Ago(props: { iso: string; now: number }) {
  return (
    <time datetime={props.iso} title={formatTime(props.iso)}>
      {relativeTime(props.iso, props.now)}
    </time>
  );
}

function SessionsTable(props: { sessions: SessionView[]; now: number }) {
  return (
    <Table
      id="sessions"
      rows={props.sessions}
      columns={[
        { label: "Session", cell: (s) => <SessionKind s={s} /> },
        {
          label: "Client",
          cell: (s) => (
            <span class="session-client" title={s.client ?? undefined}>
              {describeClient(s.client)}
            </span>
          ),
        },
        { label: "From", cell: (s) => (s.address ? <Name>{s.address}</Name> : <span class="muted">not recorded</span>) },
        { label: "Started", cell: (s) => <Time iso={s.created_at} /> },
        { label: "Last used", cell: (s) => <Ago iso={s.last_seen_at} now={props.now} /> },
        { label: "Expires", cell: (s) => <Time iso={s.expires_at} empty="never" /> },
        {
          label: "",
          class: "actions-cell",
          cell: (s) => (
            <PostForm action={`/account/sessions/${encodeURIComponent(s.id)}/revoke`} class="inline-form">
              <Button variant="danger" small>
                {s.current ? "Sign out here" : "Revoke"}
              </Button>
            </PostForm>
          ),
        },
      ]}
    />
  );
}

function ChangePasswordForm() {
  return (
    <PostForm action="/account/password" id="change-password" label="Change password">
      <FormField label="Current password" name="current_password" type="password" autocomplete="current-password" required />
      <FormField label="New password" name="new_password" type="password" autocomplete="new-password" required minlength={8} hint="At least 8 characters." />
      <FormField label="Repeat the new password" name="new_password_again" type="password" autocomplete="new-password" required minlength={8} />
      <div class="actions">
        <Button variant="primary">Change password</Button>
      </div>
    </PostForm>
  );
}

async function renderAccount(c: ConsoleContext) {
  const user = signedIn(c);
  const { d } = c.get("kit");
  // The provider's link flow ends here (the API's callback sends ?linked=1): say it worked, in our words only.
  if (c.req.query("linked") === "1" && d.oidc && !c.get("flash"))
    c.set("flash", { kind: "success", text: `Linked ${d.oidc.name}. You can now sign in with it.` });
  const { after } = readPageQuery(c, PageAfterId);
  const page = await listOwnSessions(d, user, { limit: CONSOLE_PAGE_SIZE, after });
  const sessions = page.sessions.sort((a, b) => Number(b.current) - Number(a.current));
  const identities = await listIdentities(d, user);
  const body = (
    <>
      <Section
        title="Password"
        description="Changing it signs you out everywhere: every browser, CLI login and vault run session ends. Then sign in with the new one."
      >
        <ChangePasswordForm />
      </Section>
      <IdentitiesSection provider={d.oidc} identities={identities} />
      <Section
        title="Sessions"
        description="Where your account is signed in: how, with which client, from which address. Revoke anything you do not recognise."
      >
        <SessionsTable sessions={sessions} now={d.now()} />
        <PageLinks id="session-pages" label="Session pages" base="/account" param="after" next={page.next_cursor} later={after !== undefined} />
      </Section>
    </>
  );
  const lead = (
    <>
      {user.email} <Badge tone={user.instanceRole === "owner" ? "info" : "neutral"}>{user.instanceRole}</Badge>
    </>
  );
  return renderPage(c, { title: "Account", nav: "account", lead, formTargets: d.oidc ? [providerOrigin(d.oidc)] : undefined }, body);
}

export function accountRoutes() {
  const r = new Hono<ConsoleEnv>();
  r.use("/account/*", requireSignedIn);

  r.get("/account", renderAccount);

  r.post("/account/password", async (c) => {
    const { d } = c.get("kit");
    const user = signedIn(c);
    const form = formOf(c);
    try {
      if ((form.new_password ?? "") !== (form.new_password_again ?? "")) throw new InvalidRequest("the two new passwords differ; type the same one twice");
      const change = parseWith(ChangePasswordInput, { current_password: form.current_password, new_password: form.new_password });
      const fresh = await changePassword(d, user, change, clientIp(c), sessionClientOf(c, "form"));
      // Every session ended, as the contract says; the fresh one too, so this browser signs in again like every other.
      await logout(d, await d.auth.authenticate(fresh.reveal())); // reveal: only to look up and end the fresh session
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      if (err.status === 401) return redirectWithFlash(c, "/account", "error", "The current password is not right. Nothing was changed.");
      return redirectWithFlash(c, "/account", "error", describeError(err));
    }
    clearPageCookie(c, d, "session");
    return redirectWithFlash(c, "/", "success", "Password changed. Every session has ended: sign in with your new password.");
  });

  r.post("/account/identities/:id/unlink", async (c) => {
    const { d } = c.get("kit");
    const user = signedIn(c);
    const id = /^\d{1,15}$/.test(c.req.param("id")) ? Number(c.req.param("id")) : -1; // -1: the domain's "no such linked identity"
    return runAction(c, {
      run: async () => {
        const issuer = (await listIdentities(d, user)).find((i) => i.id === id)?.issuer;
        await unlinkIdentity(d, user, id);
        return issuer;
      },
      success: (issuer) => `Unlinked ${issuer ? issuerHost(issuer) : "the provider"}. It no longer signs you in.`,
      redirect: "/account#providers",
      failure: "/account#providers",
    });
  });

  r.post("/account/sessions/:id/revoke", async (c) => {
    const user = signedIn(c);
    const id = c.req.param("id");
    const current = id === user.sessionPublicId;
    return runAction(c, {
      run: async () => {
        await revokeOwnSession(c.get("kit").d, user, id);
        if (current) clearPageCookie(c, c.get("kit").d, "session");
      },
      success: current ? "This browser's session was revoked. You are signed out." : "Session revoked. It stops working at once.",
      redirect: current ? "/" : "/account",
    });
  });

  return r;
}
