/** @jsxImportSource hono/jsx */
// `/vaults/:vault/credentials`: key names and update times for every role; setting, replacing and
// deleting values, and revealing one after the password is typed again, for human members and
// admins, through the API's own calls (setCredential, deleteCredential, revealCredential) so the
// permission rule is decided in one place, and the API's own schemas (KeyName, CredentialInput) read
// what is typed. A credential may instead read its value from a secret store the vault may use, by
// reference (`<connection>:<path>#<field>`, issue 36): the list shows where it reads from and how its
// last read went, and such a credential has no Reveal (its value lives in the store). A value is never
// prefilled, never put in a URL or a flash, and appears in exactly one response: the no-store page
// that answers the reveal post.

import { Hono } from "hono";
import { BrokerError, InvalidRequest, NotFound, Unauthorized } from "../../errors.ts";
import { CredentialInput, KeyName, Password, parseWith } from "../../contract/index.ts";
import { authenticateUser, mayInVault, type OpenVault } from "../../identity/index.ts";
import {
  authKeys,
  deleteCredential,
  listCredentials,
  listEveryService,
  listSecretStores,
  operatorClient,
  revealCredential,
  setCredential,
  type ConnectDeps,
  type ReferenceView,
  type SecretStoreView,
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
import { kindSpec } from "./secret-store-fields.tsx";
import { ReadStatus, vaultStoresBase } from "./secret-store-pages.tsx";

const KEY_PATTERN = "[A-Z][A-Z0-9_]*";
const KEY_HINT = "Capital letters, digits and underscores, starting with a letter, e.g. STRIPE_API_KEY.";

interface CredentialItem {
  key: string;
  updated_at: string;
  usedBy: string[];
  /** Where a credential by reference reads its value, and how its last read went. */
  reference?: ReferenceView;
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

/** The secret store connections this vault may use: its own, and the owner's shared with it. */
async function usableConnections(c: ConsoleContext, open: OpenVault): Promise<SecretStoreView[]> {
  const name = open.vault.name;
  const all = await listSecretStores(c.get("kit").d, signedIn(c));
  return all.filter((s) => s.vault === name || s.shared_with.includes(name)).sort((a, b) => a.name.localeCompare(b.name, "en"));
}

/**
 * A credential by reference: a connection the vault may use, the path and field of the secret in its
 * store and an optional version, or the whole reference typed as one text. `current` prefills the
 * fields with a reference credential's own (names only: never a value).
 */
function ReferenceForm(props: {
  action: string;
  id: string;
  label: string;
  submit: string;
  connections: readonly SecretStoreView[];
  /** The vault the form sets a credential in: an owner's connection may be shared with it for some paths only. */
  vault: string;
  keyName?: string;
  askKey?: boolean;
  current?: ReferenceView;
  cancel?: string;
}) {
  const cur = props.current;
  return (
    <PostForm action={props.action} id={props.id} label={props.label}>
      <input type="hidden" name="source" value="reference" />
      {props.askKey ? (
        <FormField
          label="Key name"
          name="key"
          id="f-ref-key"
          value={props.keyName}
          required
          pattern={KEY_PATTERN}
          maxlength={128}
          autocomplete="off"
          placeholder="e.g. DATABASE_PASSWORD"
          hint={`${KEY_HINT} Using an existing name replaces it.`}
        />
      ) : null}
      <div class="form-grid ref-grid">
        <div class="field">
          <label for="f-ref_connection">Connection</label>
          <select id="f-ref_connection" name="ref_connection">
            {props.connections.map((s) => (
              <option value={s.name} selected={cur?.connection === s.name}>
                {connectionChoice(s, props.vault)}
              </option>
            ))}
          </select>
        </div>
        <FormField
          label="Path"
          name="ref_path"
          value={cur?.path}
          maxlength={1024}
          autocomplete="off"
          placeholder="e.g. app/db"
          hint="Where the secret lives in the store: a KV path, a secret's name or ARN."
        />
        <FormField
          label="Field (optional)"
          name="ref_field"
          value={cur?.field ?? undefined}
          maxlength={256}
          autocomplete="off"
          placeholder="e.g. password"
          hint="One field of a structured secret (a KV key, a JSON key); empty for the whole value."
        />
        <FormField
          label="Version (optional)"
          name="version"
          value={cur?.version ?? undefined}
          maxlength={128}
          autocomplete="off"
          hint="Pins one version where the store keeps them; empty reads the latest."
        />
      </div>
      <FormField
        label="Or the whole reference"
        name="ref_text"
        maxlength={1024}
        autocomplete="off"
        placeholder="connection:path#field"
        hint="Instead of the connection, path and field above: <connection>:<path>#<field>."
      />
      <div class="actions">
        <Button variant="primary">{props.submit}</Button>
        {props.cancel ? <LinkButton href={props.cancel}>Cancel</LinkButton> : null}
      </div>
    </PostForm>
  );
}

/** A connection as the picker offers it: its name, its store, and the paths the vault may read when the share names some. */
function connectionChoice(s: SecretStoreView, vault: string): string {
  const paths = s.vault === null ? s.share_paths?.[vault] : null;
  return `${s.name} (${kindSpec(s.kind)?.short ?? s.kind}${paths ? `; paths ${paths.join(", ")}` : ""})`;
}

/** What a vault without any connection says where the reference form would be. */
function NoConnections(props: { vault: string; manage: boolean }) {
  return (
    <p class="muted" id="no-connections">
      This vault may use no secret store connection yet. The instance owner shares theirs with vaults
      {props.manage ? (
        <>
          , and you can add one for this vault under <a href={`${vaultStoresBase(props.vault)}#add`}>Settings › Secret stores</a>.
        </>
      ) : (
        "; an admin of this vault can add one for it."
      )}
    </p>
  );
}

/** The reference as the form gives it: its parts (connection, path, field) or one text, and a version; read by CredentialInput. */
function referenceOf(form: Record<string, string>): { ref: string; version?: string } {
  const text = (form.ref_text ?? "").trim();
  const path = (form.ref_path ?? "").trim();
  const field = (form.ref_field ?? "").trim();
  const version = (form.version ?? "").trim();
  if (text && (path || field)) throw new InvalidRequest("give the reference either as its connection, path and field, or as one text, not both", "ref");
  const ref = text || (path || field ? `${(form.ref_connection ?? "").trim()}:${path}${field ? `#${field}` : ""}` : "");
  if (!ref) throw new InvalidRequest("give the secret's path in the store, or the whole reference as <connection>:<path>#<field>", "ref");
  return { ref, ...(version ? { version } : {}) };
}

/** How a reference's first read went, for the flash after saving it. */
function savedWords(key: string, ref: ReferenceView | undefined, replacing: boolean): { kind: "success" | "error"; text: string } {
  const done = replacing ? `${key} now reads` : `Credential ${key} saved: it reads`;
  if (!ref) return { kind: "success", text: `${done} from its store.` };
  if (ref.last_error) return { kind: "error", text: `${done} ${ref.text}, but the first read failed: ${ref.last_error}` };
  if (!ref.last_refresh) return { kind: "success", text: `${done} ${ref.text}; the store has not answered yet.` };
  return { kind: "success", text: `${done} ${ref.text}${ref.version_seen ? ` (version ${ref.version_seen})` : ""}.` };
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

/** Where a credential's value lives: stored here, or read from a store (the reference, its last read, the version seen, the last error). */
function Source(props: { r: CredentialItem }) {
  const ref = props.r.reference;
  if (!ref) return <span class="muted">stored value</span>;
  return (
    <span class="source-ref">
      <Name>{ref.text}</Name>
      <br />
      <span class="small">
        last refresh <Time iso={ref.last_refresh} /> · version seen {ref.version_seen ? <Name>{ref.version_seen}</Name> : <span class="muted">none</span>}
      </span>
      {ref.last_error ? (
        <>
          <br />
          <span class="small read-error">last error: {ref.last_error}</span>
        </>
      ) : null}
    </span>
  );
}

function CredentialsTable(props: { vault: string; rows: CredentialItem[]; canWrite: boolean; empty: any }) {
  const columns = [
    { label: "Key", cell: (r: CredentialItem) => <Name>{r.key}</Name> },
    { label: "Value", cell: (r: CredentialItem) => <Source r={r} /> },
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
    reference: r.reference,
    usedBy: usersOf(services, r.key, c.get("kit").connect),
  }));
  const connections = canWrite ? await usableConnections(c, open) : [];
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
      {canWrite ? (
        <Section
          title="Set a credential by reference"
          id="by-reference"
          description="The value stays in your secret store: the broker reads it through a connection and again every refresh interval, so a rotation there reaches requests by itself."
        >
          {connections.length ? (
            <ReferenceForm
              action={credentialPath(open.vault.name)}
              id="set-reference"
              label="Set a credential by reference"
              submit="Save reference"
              connections={connections}
              vault={open.vault.name}
              keyName={asked}
              askKey
            />
          ) : (
            <NoConnections vault={open.vault.name} manage={mayInVault(open.principal, open.role, "manage")} />
          )}
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

/** Where a credential by reference reads its value, and how its last read went: names, times and words, never a value. */
function ReferenceFacts(props: { vault: string; r: ReferenceView }) {
  const r = props.r;
  return (
    <dl class="overview" id="reference-facts">
      <dt>Reference</dt>
      <dd>
        <Name>{r.text}</Name>
      </dd>
      <dt>Connection</dt>
      <dd>
        <a href={`${vaultStoresBase(props.vault)}/${encodeURIComponent(r.connection)}`}>
          <Name>{r.connection}</Name>
        </a>
      </dd>
      <dt>Path</dt>
      <dd>
        <Name>{r.path}</Name>
      </dd>
      <dt>Field</dt>
      <dd>{r.field ? <Name>{r.field}</Name> : <span class="muted">the whole value</span>}</dd>
      <dt>Version</dt>
      <dd>{r.version ? <Name>{r.version}</Name> : <span class="muted">the latest</span>}</dd>
      <dt>Last refresh</dt>
      <dd>
        <ReadStatus last_refresh={r.last_refresh} last_error={null} />
      </dd>
      <dt>Version seen</dt>
      <dd>{r.version_seen ? <Name>{r.version_seen}</Name> : <span class="muted">none</span>}</dd>
      <dt>Last error</dt>
      <dd>{r.last_error ? <span class="read-error">{r.last_error}</span> : <span class="muted">none</span>}</dd>
    </dl>
  );
}

async function renderManage(c: ConsoleContext) {
  const open = await openConsoleVault(c, "write_secrets");
  const item = await requireKey(c, open, c.req.param("key") ?? "");
  const vault = open.vault.name;
  const connections = await usableConnections(c, open);
  const replaceValue = (
    <PostForm action={credentialPath(vault, item.key)} id="replace-credential" label={`Replace ${item.key}`}>
      <ValueField label="New value" />
      <div class="actions">
        <Button variant="primary">{item.reference ? "Store this value instead" : "Replace value"}</Button>
        <LinkButton href={credentialPath(vault)}>Cancel</LinkButton>
      </div>
    </PostForm>
  );
  const referenceForm = connections.length ? (
    <ReferenceForm
      action={credentialPath(vault, item.key)}
      id="replace-reference"
      label={`Read ${item.key} from a secret store`}
      submit={item.reference ? "Save reference" : "Read it from the store instead"}
      connections={connections}
      vault={vault}
      current={item.reference}
      cancel={credentialPath(vault)}
    />
  ) : (
    <NoConnections vault={vault} manage={mayInVault(open.principal, open.role, "manage")} />
  );
  const body = item.reference ? (
    <>
      <Section
        title="Where its value lives"
        id="reference"
        description="The broker reads it through the connection every refresh interval. Reveal it in the store itself."
      >
        <ReferenceFacts vault={vault} r={item.reference} />
      </Section>
      <Section
        title="Point it elsewhere"
        id="change-reference"
        description="Another path, field, version or connection; the broker reads it once before saying how it went."
      >
        {referenceForm}
      </Section>
      <Section title="Store a value instead" description="The key stops reading from the store and holds this value.">
        {replaceValue}
      </Section>
    </>
  ) : (
    <>
      <Section title="Replace the value" description="The new value takes effect for every service at once.">
        {replaceValue}
      </Section>
      <Section
        title="Read it from a secret store instead"
        id="change-reference"
        description="The stored value is forgotten; the broker reads the store instead."
      >
        {referenceForm}
      </Section>
      <Section title="Reveal the value" description="Shows the stored value once, after you type your password again.">
        <LinkButton href={credentialPath(vault, item.key, "reveal")}>Reveal {item.key}…</LinkButton>
      </Section>
    </>
  );
  const lead = (
    <>
      Updated <Time iso={item.updated_at} /> · used by <UsedBy hosts={item.usedBy} />
    </>
  );
  return renderPage(
    c,
    { title: `Credential ${item.key}`, nav: "vaults", vault: vaultOf(open), lead },
    <>
      {body}
      <Section
        title="Delete"
        tone="danger"
        description={item.usedBy.length ? "Services that use this key stop getting a credential until you set it again." : "No service uses this key."}
      >
        <ConfirmForm action={credentialPath(vault, item.key, "delete")} phrase={item.key} button="Delete credential" />
      </Section>
    </>,
  );
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
  if (item.reference) {
    const body = (
      <Section title="Its value lives in a secret store" id="reveal-reference">
        <p>
          <Name>{item.key}</Name> reads its value from <Name>{item.reference.text}</Name>. The broker does not show it: reveal it in the store itself.
        </p>
        <div class="actions">
          <LinkButton href={credentialPath(open.vault.name, item.key)}>Back</LinkButton>
        </div>
      </Section>
    );
    return renderPage(c, { title: `Reveal ${item.key}`, nav: "vaults", vault: vaultOf(open) }, body);
  }
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

  const save = async (c: ConsoleContext, key: string, replacing: boolean) => {
    const list = vaultPath(c.req.param("vault") ?? "", "credentials");
    const failure = replacing ? credentialPath(c.req.param("vault") ?? "", key) : list;
    const form = formOf(c);
    if (form.source === "reference") {
      // The reference is read by CredentialInput as a body's `ref` and `version` are; the domain checks the vault may use its connection.
      try {
        const open = await openConsoleVault(c, "write_secrets");
        const name = parseWith(KeyName, key, "key");
        const saved = await setCredential(c.get("kit").d, open, name, parseWith(CredentialInput, referenceOf(form)));
        const words = savedWords(saved.key, saved.reference, replacing);
        return redirectWithFlash(c, replacing ? credentialPath(open.vault.name, saved.key) : list, words.kind, words.text);
      } catch (err) {
        if (!(err instanceof BrokerError)) throw err;
        return redirectWithFlash(
          c,
          `${failure}#${replacing ? "change-reference" : "by-reference"}`,
          "error",
          describeError(err).replace(/^Ref: (.)/, (_, first: string) => first.toUpperCase()),
        );
      }
    }
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "write_secrets");
        const name = parseWith(KeyName, key, "key");
        return setCredential(c.get("kit").d, open, name, parseWith(CredentialInput, { value: form.value }));
      },
      success: (r) => (replacing ? `The value of ${r.key} was replaced.` : `Credential ${r.key} saved.`),
      redirect: list,
      failure,
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
