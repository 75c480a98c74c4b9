/** @jsxImportSource hono/jsx */
// `/vaults/:vault/credentials`: key names and update times for every role; setting, replacing and
// deleting values, and revealing one after the password is typed again, for human members and
// admins, through the API's own calls (setCredential, deleteCredential, revealCredential) so the
// permission rule is decided in one place, and the API's own schemas (KeyName, CredentialInput) read
// what is typed. A value is never prefilled, never put in a URL or a
// flash, and appears in exactly one response: the no-store page that answers the reveal post.

import { Hono } from "hono";
import { BrokerError, NotFound, Unauthorized } from "../../errors.ts";
import { CredentialInput, KeyName, Password, parseWith } from "../../contract/index.ts";
import { authenticateUser, mayInVault, type OpenVault } from "../../identity/index.ts";
import {
  authKeys,
  deleteCredential,
  listCredentials,
  listEveryService,
  operatorClient,
  revealCredential,
  setCredential,
  type ConnectDeps,
  type ServiceView,
} from "../../workflows/index.ts";
import { clientIp } from "../kit/index.ts";
import { Badge, Button, ConfirmForm, EmptyState, FormField, LinkButton, Name, PostForm, Section, Table, Time } from "../ui/index.ts";
import {
  describeError,
  formOf,
  openConsoleVault,
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

const KEY_PATTERN = "[A-Z][A-Z0-9_]*";
const KEY_HINT = "Capital letters, digits and underscores, starting with a letter, e.g. STRIPE_API_KEY.";

interface CredentialItem {
  key: string;
  updated_at: string;
  usedBy: string[];
}

function credentialPath(vault: string, key?: string, action?: "reveal" | "delete"): string {
  return `${vaultPath(vault, "credentials")}${key ? `/${encodeURIComponent(key)}` : ""}${action ? `/${action}` : ""}`;
}

function vaultOf(open: OpenVault) {
  return { name: open.vault.name, role: open.role, section: "credentials" as const };
}

/** The value field: write-only. `new-password` keeps the browser from filling in the person's own sign-in password. */
function ValueField(props: { label: string; autofocus?: boolean }) {
  return (
    <FormField
      label={props.label}
      name="value"
      type="password"
      required
      autocomplete="new-password"
      maxlength={8192}
      autofocus={props.autofocus}
      hint="Stored encrypted. Agents never see it: the broker injects it into their requests. A member or admin can reveal it only after typing their password again."
    />
  );
}

// `keyName`, not `key`: JSX strips a prop named key. It arrives from the services form (?key=), a new key to store.
function SetCredentialForm(props: { vault: string; keyName?: string }) {
  return (
    <PostForm action={credentialPath(props.vault)} id="set-credential" label="Set a credential">
      <FormField
        label="Key name"
        name="key"
        value={props.keyName}
        required
        pattern={KEY_PATTERN}
        maxlength={128}
        autocomplete="off"
        placeholder="e.g. STRIPE_API_KEY"
        hint={`${KEY_HINT} Using an existing name replaces its value.`}
      />
      <ValueField label="Value" autofocus={props.keyName !== undefined} />
      <div class="actions">
        <Button variant="primary">Save credential</Button>
      </div>
    </PostForm>
  );
}

function UsedBy(props: { hosts: string[] }) {
  if (props.hosts.length === 0) return <span class="muted">no service yet</span>;
  return (
    <>
      {props.hosts.map((h, i) => (
        <>
          {i > 0 ? " " : ""}
          <Name>{h}</Name>
        </>
      ))}
    </>
  );
}

function CredentialsTable(props: { vault: string; rows: CredentialItem[]; canWrite: boolean; empty: any }) {
  const columns = [
    { label: "Key", cell: (r: CredentialItem) => <Name>{r.key}</Name> },
    { label: "Used by", cell: (r: CredentialItem) => <UsedBy hosts={r.usedBy} /> },
    { label: "Updated", cell: (r: CredentialItem) => <Time iso={r.updated_at} /> },
  ];
  if (props.canWrite) {
    columns.push({
      label: "",
      class: "actions-cell",
      cell: (r: CredentialItem) => (
        <a href={credentialPath(props.vault, r.key)} class="btn btn-secondary btn-small" aria-label={`Manage ${r.key}`}>
          Manage
        </a>
      ),
    } as (typeof columns)[number]);
  }
  return <Table id="credentials" rows={props.rows} columns={columns} empty={props.empty} />;
}

/** The hosts whose services send `key`; a connected account's client id and secret are the operator's app's, not the vault's. */
function usersOf(services: ServiceView[], key: string, connect: ConnectDeps | undefined): string[] {
  return services.filter((s) => authKeys(s.auth).includes(key) && !operatorClient(connect, s.auth)?.keys.includes(key)).map((s) => s.host);
}

async function renderList(c: ConsoleContext) {
  const { d } = c.get("kit");
  const open = await openConsoleVault(c, "read");
  const canWrite = mayInVault(open.principal, open.role, "write_secrets");
  const services = await listEveryService(d, open); // which services send each key: every one of them
  const rows = (await listCredentials(d, open, false)).map((r) => ({
    key: r.key,
    updated_at: r.updated_at,
    usedBy: usersOf(services, r.key, c.get("kit").connect),
  }));
  // A key name to store next (after adding a service that names it): prefilled only when it is one.
  const key = c.req.query("key");
  const asked = key !== undefined && new RegExp(`^${KEY_PATTERN}$`).test(key) && key.length <= 128 ? key : undefined;
  const empty = (
    <EmptyState title="No credentials yet">
      {canWrite ? (
        <p>Save an API key or token below, then add a service on the Services tab that tells the broker which host receives it.</p>
      ) : (
        <p>A member or admin of this vault adds credentials. Agents can also ask for one by filing a proposal.</p>
      )}
    </EmptyState>
  );
  const body = (
    <>
      <Section title="Stored credentials" description={canWrite ? "Values are write-only. Open a key to replace, reveal or delete it." : undefined}>
        {canWrite ? null : (
          <p class="note" id="read-only-note">
            Your role ({open.role}) uses these credentials through services but cannot see or change their values.
          </p>
        )}
        <CredentialsTable vault={open.vault.name} rows={rows} canWrite={canWrite} empty={empty} />
      </Section>
      {canWrite ? (
        <Section title="Set a credential" description="Adds a new key, or replaces the value of an existing one.">
          <SetCredentialForm vault={open.vault.name} keyName={asked} />
        </Section>
      ) : null}
    </>
  );
  return renderPage(c, { title: "Credentials", nav: "vaults", vault: vaultOf(open), lead: "The secret values agents use, by key name." }, body);
}

async function requireKey(c: ConsoleContext, open: OpenVault, key: string): Promise<CredentialItem> {
  const row = (await listCredentials(c.get("kit").d, open, false)).find((r) => r.key === key);
  if (!row) throw new NotFound("this vault has no credential by that name"); // the name came from the URL: never quoted back
  return { ...row, usedBy: usersOf(await listEveryService(c.get("kit").d, open), key, c.get("kit").connect) };
}

async function renderManage(c: ConsoleContext) {
  const open = await openConsoleVault(c, "write_secrets");
  const item = await requireKey(c, open, c.req.param("key") ?? "");
  const vault = open.vault.name;
  const body = (
    <>
      <Section title="Replace the value" description="The new value takes effect for every service at once.">
        <PostForm action={credentialPath(vault, item.key)} id="replace-credential" label={`Replace ${item.key}`}>
          <ValueField label="New value" />
          <div class="actions">
            <Button variant="primary">Replace value</Button>
            <LinkButton href={credentialPath(vault)}>Cancel</LinkButton>
          </div>
        </PostForm>
      </Section>
      <Section title="Reveal the value" description="Shows the stored value once, after you type your password again.">
        <LinkButton href={credentialPath(vault, item.key, "reveal")}>Reveal {item.key}…</LinkButton>
      </Section>
      <Section
        title="Delete"
        tone="danger"
        description={item.usedBy.length ? "Services that use this key stop getting a credential until you set it again." : "No service uses this key."}
      >
        <ConfirmForm action={credentialPath(vault, item.key, "delete")} phrase={item.key} button="Delete credential" />
      </Section>
    </>
  );
  const lead = (
    <>
      Updated <Time iso={item.updated_at} /> · used by <UsedBy hosts={item.usedBy} />
    </>
  );
  return renderPage(c, { title: `Credential ${item.key}`, nav: "vaults", vault: vaultOf(open), lead }, body);
}

// `keyName`, not `key`: JSX strips a prop named key.
function PasswordForm(props: { vault: string; keyName: string }) {
  return (
    <PostForm action={credentialPath(props.vault, props.keyName, "reveal")} id="reveal-form" label={`Reveal ${props.keyName}`}>
      <FormField
        label="Your password"
        name="password"
        type="password"
        autocomplete="current-password"
        required
        autofocus
        hint="The same password you sign in with. Wrong attempts count towards the sign-in limit."
      />
      <div class="actions">
        <Button variant="primary" id="reveal">
          Reveal value
        </Button>
        <LinkButton href={credentialPath(props.vault, props.keyName)}>Cancel</LinkButton>
      </div>
    </PostForm>
  );
}

async function renderRevealForm(c: ConsoleContext) {
  const open = await openConsoleVault(c, "reveal");
  const item = await requireKey(c, open, c.req.param("key") ?? "");
  const body = (
    <Section title="Confirm it is you" description="The value is shown once on the next page. It is not stored in your browser's cache; nobody else is told.">
      <PasswordForm vault={open.vault.name} keyName={item.key} />
    </Section>
  );
  return renderPage(c, { title: `Reveal ${item.key}`, nav: "vaults", vault: vaultOf(open) }, body);
}

/** The one response that carries a value: after the password check, no-store like every page (setPageHeaders). */
async function revealAfterPassword(c: ConsoleContext) {
  const { d } = c.get("kit");
  const user = signedIn(c);
  const open = await openConsoleVault(c, "reveal");
  const key = c.req.param("key") ?? "";
  const back = credentialPath(open.vault.name, key, "reveal");
  const wrong = "That password is not right. Nothing was shown.";
  let password;
  try {
    password = parseWith(Password, formOf(c).password, "password");
  } catch {
    return redirectWithFlash(c, back, "error", wrong);
  }
  let cred;
  try {
    // The sign-in check itself: same Argon2id verification, same throttle keyed on the email.
    await authenticateUser(d, { email: user.email, password }, clientIp(c));
    cred = await revealCredential(d, open, parseWith(KeyName, key, "key"));
  } catch (err) {
    if (!(err instanceof BrokerError)) throw err;
    return redirectWithFlash(c, back, "error", err instanceof Unauthorized ? wrong : describeError(err));
  }
  c.get("kit").log.info("console_credential_revealed", { vault: open.vault.name, key, user: user.userId });
  const body = (
    <Section title={`Value of ${cred.key}`} description="Copy it now. Leaving or reloading this page hides it again.">
      <pre class="note revealed" id="revealed-value">
        {cred.value?.reveal() /* reveal: a member/admin typed their password to see this one value */ ?? `lives in a secret store: ${cred.reference?.text}`}
      </pre>
      <div class="actions">
        <LinkButton href={credentialPath(open.vault.name)} variant="primary">
          Done
        </LinkButton>
      </div>
    </Section>
  );
  const lead = (
    <>
      Updated <Time iso={cred.updated_at} /> · <Badge tone="warning">shown once</Badge>
    </>
  );
  return renderPage(c, { title: `Credential ${cred.key}`, nav: "vaults", vault: vaultOf(open), lead }, body);
}

export function vaultCredentialRoutes() {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/credentials", requireSignedIn);
  r.use("/vaults/:vault/credentials/*", requireSignedIn);

  r.get("/vaults/:vault/credentials", renderList);

  const save = (c: ConsoleContext, key: string, replacing: boolean) => {
    const list = vaultPath(c.req.param("vault") ?? "", "credentials");
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "write_secrets");
        const name = parseWith(KeyName, key, "key");
        return setCredential(c.get("kit").d, open, name, parseWith(CredentialInput, { value: formOf(c).value }));
      },
      success: (r) => (replacing ? `The value of ${r.key} was replaced.` : `Credential ${r.key} saved.`),
      redirect: list,
      failure: replacing ? credentialPath(c.req.param("vault") ?? "", key) : list,
    });
  };
  r.post("/vaults/:vault/credentials", (c) => save(c, (formOf(c).key ?? "").trim(), false));
  r.post("/vaults/:vault/credentials/:key", (c) => save(c, c.req.param("key"), true));

  r.get("/vaults/:vault/credentials/:key", renderManage);
  r.get("/vaults/:vault/credentials/:key/reveal", renderRevealForm);
  r.post("/vaults/:vault/credentials/:key/reveal", revealAfterPassword);

  r.post("/vaults/:vault/credentials/:key/delete", (c) => {
    const key = c.req.param("key");
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "write_secrets");
        requireConfirmation(c, key);
        await deleteCredential(c.get("kit").d, open, parseWith(KeyName, key, "key"));
      },
      success: `Credential ${key} deleted.`,
      redirect: vaultPath(c.req.param("vault") ?? "", "credentials"),
      failure: credentialPath(c.req.param("vault") ?? "", key),
    });
  });

  return r;
}
