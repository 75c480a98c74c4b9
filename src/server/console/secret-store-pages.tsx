/** @jsxImportSource hono/jsx */
// What the secret store pages show (secret-stores.tsx routes them): the connections as a table, the
// add form (a kind, then its fields, a sign-in method, then its fields), and one connection with every
// reference that reads through it, its settings and sign-in forms, sharing and removal. Only names,
// addresses, times and the stores' errors in words are shown: a connection's secrets and the values it
// reads never reach a page.

import type { Child } from "hono/jsx";
import type { ConnectionReference, ReferenceView, SecretStoreView } from "../../workflows/index.ts";
import { Badge, Button, ConfirmForm, EmptyState, FormField, LinkButton, Name, PostForm, Section, Table, Time } from "../ui/index.ts";
import { plural } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import {
  AuthFields,
  AuthSummary,
  KINDS,
  kindSpec,
  methodSpec,
  methodsFor,
  SettingsFields,
  TimingFields,
  whereOf,
  type KindSpec,
  type MethodSpec,
  type TypedForm,
} from "./secret-store-fields.tsx";

/** Where the pages live and what the viewer may do there: the owner's pages, or one vault's. */
export interface StoreScope {
  /** The list page (`/settings/secret-stores` or `/vaults/<v>/settings/secret-stores`). */
  readonly base: string;
  /** The vault of a vault's pages. */
  readonly vault?: string;
  /** May add a connection here (the owner; a vault's human admin for the vault's own). */
  readonly mayAdd: boolean;
  /** May change, check or remove `c` here. */
  readonly mayManage: (c: SecretStoreView) => boolean;
  /** The instance owner: shares the owner's connections with vaults. */
  readonly owner: boolean;
  /** The token files a JWT or Kubernetes sign-in may read (BROKER_SECRET_STORE_TOKEN_FILES). */
  readonly tokenFiles: readonly string[];
}

export const OWNER_BASE = "/settings/secret-stores";
export const vaultStoresBase = (vault: string) => `${vaultPath(vault, "settings")}/secret-stores`;

export function connectionPath(scope: StoreScope, name: string, action?: "settings" | "check" | "share" | "unshare" | "delete"): string {
  return `${scope.base}/${encodeURIComponent(name)}${action ? `/${action}` : ""}`;
}

/** Seconds as a person reads them: "5 minutes", "90 seconds", "1 hour". */
export function duration(seconds: number): string {
  if (seconds % 3600 === 0 && seconds > 0) return plural(seconds / 3600, "hour");
  if (seconds % 60 === 0 && seconds > 0) return plural(seconds / 60, "minute");
  return plural(seconds, "second");
}

function Timing(props: { c: SecretStoreView }) {
  return (
    <>
      every {duration(props.c.refresh_seconds)}
      <span class="small muted"> · grace {props.c.grace_seconds === 0 ? "none (fails closed)" : duration(props.c.grace_seconds)}</span>
    </>
  );
}

function Owner(props: { c: SecretStoreView; scope: StoreScope }) {
  const { c } = props;
  if (c.vault !== null)
    return (
      <>
        <Name>{c.vault}</Name> <span class="small muted">(its own)</span>
      </>
    );
  if (props.scope.vault !== undefined) return <span>shared by the owner</span>;
  if (c.shared_with.length === 0) return <span class="muted">no vault yet</span>;
  return (
    <>
      {c.shared_with.map((v, i) => (
        <>
          {i > 0 ? " " : ""}
          <Name>{v}</Name>
        </>
      ))}
    </>
  );
}

/** How the last reads went, in words: an error first, else when the store last answered. */
export function ReadStatus(props: { last_refresh: string | null; last_error: string | null; references?: number }) {
  if (props.last_error)
    return (
      <span class="read-error">
        <Badge tone="danger">error</Badge> {props.last_error}
      </span>
    );
  if (props.references === 0) return <span class="muted">nothing reads through it yet</span>;
  if (!props.last_refresh) return <span class="muted">not read yet</span>;
  return (
    <>
      <Badge tone="success">ok</Badge> read <Time iso={props.last_refresh} />
    </>
  );
}

export function ConnectionsTable(props: { scope: StoreScope; rows: readonly SecretStoreView[]; empty: Child }) {
  const { scope } = props;
  return (
    <Table
      id="secret-stores"
      rows={props.rows}
      empty={props.empty}
      columns={[
        {
          label: "Connection",
          cell: (c) => (
            <>
              <a href={connectionPath(scope, c.name)} class="strong-link" id={`store-${c.name}`}>
                <Name>{c.name}</Name>
              </a>
              <br />
              <span class="small muted">{kindSpec(c.kind)?.label ?? c.kind}</span>
            </>
          ),
        },
        {
          label: "Where",
          cell: (c) => (
            <>
              <span class="where">{whereOf(c.kind, c.settings)}</span>
              <br />
              <span class="small muted">
                <AuthSummary kind={c.kind} auth={c.auth} />
              </span>
            </>
          ),
        },
        { label: scope.vault === undefined ? "Vaults" : "Belongs to", cell: (c) => <Owner c={c} scope={scope} /> },
        { label: "Refresh", cell: (c) => <Timing c={c} /> },
        { label: "References", class: "num", cell: (c) => String(c.status.references) },
        { label: "Last read", cell: (c) => <ReadStatus {...c.status} /> },
      ]}
    />
  );
}

const addPath = (scope: StoreScope, query: Record<string, string>) => `${scope.base}?${new URLSearchParams(query).toString()}#add`;

/** The first step of adding: which store. */
function KindPicker(props: { scope: StoreScope }) {
  const owners = props.scope.vault === undefined;
  return (
    <ul class="pick-list" id="kind-picker">
      {KINDS.map((k) => (
        <li>
          <a class="pick" href={addPath(props.scope, { kind: k.kind })} id={`kind-${k.kind}`}>
            <span class="pick-name">{k.label}</span>
            <span class="pick-hosts pick-help">{k.help}</span>
            <span class="pick-auth">
              Sign in by{" "}
              {methodsFor(k, owners)
                .map((m) => m.label.toLowerCase())
                .join(", ")}
            </span>
          </a>
        </li>
      ))}
    </ul>
  );
}

/** The sign-in methods of a kind as links (a GET: the page shows that method's fields); the chosen one marked. */
function MethodPicker(props: { methods: readonly MethodSpec[]; chosen: MethodSpec; href: (method: string) => string; id: string }) {
  if (props.methods.length === 1) return null;
  return (
    <nav class="method-picker" aria-label="Sign-in method" id={props.id}>
      <span class="muted small">Sign in with:</span>
      <ul>
        {props.methods.map((m) => (
          <li>
            <a href={props.href(m.method)} id={`${props.id}-${m.method}`} aria-current={m.method === props.chosen.method ? "true" : undefined}>
              {m.label}
            </a>
          </li>
        ))}
      </ul>
    </nav>
  );
}

export interface AddChoice {
  readonly kind: KindSpec;
  readonly method: MethodSpec;
  readonly typed?: TypedForm;
}

export function AddSection(props: { scope: StoreScope; choice?: AddChoice }) {
  const { scope, choice } = props;
  const description =
    scope.vault === undefined
      ? "A named connection to a store your team already uses. Share it with the vaults whose credentials may read from it."
      : `A connection that only ${scope.vault} uses; its human admins manage it.`;
  if (!choice)
    return (
      <Section title="Add a connection" id="add" description={description}>
        <KindPicker scope={scope} />
      </Section>
    );
  const { kind, method, typed } = choice;
  return (
    <Section title={`Add a ${kind.label} connection`} id="add" description={description}>
      <p class="type-line">
        <span class="muted">Store:</span> <strong id="kind-label">{kind.label}</strong>{" "}
        <a href={`${scope.base}#add`} id="change-kind">
          Change
        </a>
      </p>
      <MethodPicker
        methods={methodsFor(kind, scope.vault === undefined)}
        chosen={method}
        href={(m) => addPath(scope, { kind: kind.kind, method: m })}
        id="add-method"
      />
      <PostForm action={`${scope.base}?${new URLSearchParams({ kind: kind.kind, method: method.method }).toString()}`} id="add-store" label="Add a connection">
        <FormField
          label="Name"
          name="name"
          value={typed?.values.name}
          required
          pattern="[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?"
          maxlength={63}
          autocomplete="off"
          placeholder="e.g. prod-vault"
          hint="Lower-case letters, digits and hyphens. References start with it: name:path#field."
          error={typed?.invalid === "name" ? typed.error : undefined}
        />
        <SettingsFields kind={kind} typed={typed} />
        <fieldset>
          <legend>Sign-in: {method.label}</legend>
          <AuthFields method={method} typed={typed} tokenFiles={scope.tokenFiles} />
        </fieldset>
        <TimingFields typed={typed} />
        <div class="actions">
          <Button variant="primary" id="add-store-submit">
            Add connection
          </Button>
          <LinkButton href={scope.base}>Cancel</LinkButton>
        </div>
      </PostForm>
    </Section>
  );
}

function ReferenceCells(props: { r: ReferenceView }) {
  return <Name>{props.r.text}</Name>;
}

export function ReferencesTable(props: { rows: readonly ConnectionReference[]; showVault: boolean }) {
  const columns = [
    ...(props.showVault
      ? [{ label: "Vault", cell: (r: ConnectionReference) => <a href={vaultPath(r.vault, "credentials")}>{<Name>{r.vault}</Name>}</a> }]
      : []),
    { label: "Key", cell: (r: ConnectionReference) => <Name>{r.key}</Name> },
    { label: "Reference", cell: (r: ConnectionReference) => <ReferenceCells r={r.reference} /> },
    { label: "Last refresh", cell: (r: ConnectionReference) => <Time iso={r.reference.last_refresh} /> },
    {
      label: "Version seen",
      cell: (r: ConnectionReference) => (r.reference.version_seen ? <Name>{r.reference.version_seen}</Name> : <span class="muted">none</span>),
    },
    {
      label: "Last error",
      cell: (r: ConnectionReference) => (r.reference.last_error ? <span class="read-error">{r.reference.last_error}</span> : <span class="muted">none</span>),
    },
  ];
  return (
    <Table
      id="references"
      rows={props.rows}
      columns={columns}
      empty={
        <p class="muted" id="references-empty">
          No credential reads through this connection yet. Set one on a vault's Credentials page, by reference: <code>connection:path#field</code>.
        </p>
      }
    />
  );
}

function Facts(props: { c: SecretStoreView; scope: StoreScope }) {
  const { c } = props;
  const kind = kindSpec(c.kind);
  return (
    <dl class="overview" id="store-facts">
      <dt>Store</dt>
      <dd>{kind?.label ?? c.kind}</dd>
      {(kind?.settings ?? [])
        .filter((f) => typeof c.settings[f.name] === "string" && !f.multiline)
        .map((f) => (
          <>
            <dt>{f.label.replace(/ \(optional\)$/, "")}</dt>
            <dd>
              <Name>{c.settings[f.name] as string}</Name>
            </dd>
          </>
        ))}
      {typeof c.settings.ca_pem === "string" ? (
        <>
          <dt>Extra CA</dt>
          <dd>PEM certificates given</dd>
        </>
      ) : null}
      <dt>Sign-in</dt>
      <dd>
        <AuthSummary kind={c.kind} auth={c.auth} /> <span class="small">(its secrets are sealed and never shown)</span>
      </dd>
      <dt>{c.vault === null ? "Shared with" : "Belongs to"}</dt>
      <dd>
        <Owner c={c} scope={{ ...props.scope, vault: undefined }} />
      </dd>
      <dt>Refresh</dt>
      <dd>
        <Timing c={c} />
      </dd>
      <dt>Last read</dt>
      <dd id="store-status">
        <ReadStatus {...c.status} /> <span class="small">({plural(c.status.references, "reference")})</span>
      </dd>
      <dt>Changed</dt>
      <dd>
        <Time iso={c.updated_at} />
      </dd>
    </dl>
  );
}

/** A share's path prefixes in words. */
function SharePaths(props: { paths: readonly string[] | null | undefined }) {
  if (!props.paths) return <span class="small muted">every path</span>;
  return (
    <span class="small">
      paths starting with{" "}
      {props.paths.map((p, i) => (
        <>
          {i > 0 ? ", " : ""}
          <code>{p}</code>
        </>
      ))}
    </span>
  );
}

function Sharing(props: { c: SecretStoreView; scope: StoreScope; vaults: readonly string[] }) {
  const { c, scope } = props;
  return (
    <Section
      title="Vaults that may use it"
      id="sharing"
      description="Admins and members of these vaults may point credentials at this connection, at every path or only at the paths you name. Stopping is refused while a credential of the vault still reads through it."
    >
      {c.shared_with.length === 0 ? (
        <p class="muted" id="shared-none">
          Not shared with any vault yet.
        </p>
      ) : (
        <ul class="plain-list shares" id="shares">
          {c.shared_with.map((v) => (
            <li class="share-row">
              <span>
                <Name>{v}</Name> <SharePaths paths={c.share_paths?.[v]} />
              </span>
              <PostForm action={connectionPath(scope, c.name, "unshare")} class="inline-form" label={`Stop sharing with ${v}`}>
                <input type="hidden" name="vault" value={v} />
                <Button small id={`unshare-${v}`}>
                  Stop sharing
                </Button>
              </PostForm>
            </li>
          ))}
        </ul>
      )}
      {props.vaults.length ? (
        <PostForm action={connectionPath(scope, c.name, "share")} id="share-form" label="Share with a vault">
          <div class="field">
            <label for="f-share-vault">Share with</label>
            <select id="f-share-vault" name="vault" required>
              {props.vaults.map((v) => (
                <option value={v}>{c.shared_with.includes(v) ? `${v} (shared: replace its paths)` : v}</option>
              ))}
            </select>
          </div>
          <FormField
            label="Only these paths (optional)"
            name="paths"
            id="f-share-paths"
            multiline
            autocomplete="off"
            placeholder={"app/\nteam-a/"}
            hint="One path prefix per line, as references write them. Empty: every path of the store."
          />
          <div class="actions">
            <Button variant="primary" id="share-submit">
              Share
            </Button>
          </div>
        </PostForm>
      ) : (
        <p class="muted small">There are no vaults yet.</p>
      )}
    </Section>
  );
}

export interface DetailProps {
  readonly scope: StoreScope;
  readonly c: SecretStoreView;
  readonly references: readonly ConnectionReference[];
  /** The vaults it may be shared with (the owner's page). */
  readonly vaults: readonly string[];
  /** The sign-in method chosen to replace the current one (?method=). */
  readonly method?: string;
  /** A refused change form, as typed. */
  readonly typed?: TypedForm;
}

export function ConnectionDetail(props: DetailProps) {
  const { scope, c } = props;
  const kind = kindSpec(c.kind)!;
  const manage = scope.mayManage(c);
  const methods = methodsFor(kind, c.vault === null);
  const currentMethod = typeof c.auth.method === "string" ? c.auth.method : undefined;
  const method = methods.find((m) => m.method === props.method) ?? methodSpec(kind, currentMethod) ?? methods[0]!;
  const methodHref = (m: string) => `${connectionPath(scope, c.name)}?method=${encodeURIComponent(m)}#settings`;
  const same = method.method === currentMethod;
  return (
    <>
      <Section title="Connection" id="connection">
        <Facts c={c} scope={scope} />
        {manage ? (
          <PostForm action={connectionPath(scope, c.name, "check")} id="check-form" label="Check now">
            <div class="actions">
              <Button variant="primary" id="check-now">
                Check now
              </Button>
              <span class="small muted">Reads every reference below through the connection again at once.</span>
            </div>
          </PostForm>
        ) : null}
      </Section>
      <Section
        title="References"
        id="references-section"
        description={
          scope.vault === undefined ? "Every credential that reads through this connection." : `The credentials of ${scope.vault} that read through it.`
        }
      >
        <ReferencesTable rows={props.references} showVault={scope.vault === undefined} />
      </Section>
      {scope.owner && scope.vault === undefined && c.vault === null ? <Sharing c={c} scope={scope} vaults={props.vaults} /> : null}
      {manage ? (
        <>
          <Section title="Change it" id="settings" description="Every value read through the connection is read again after a change.">
            <PostForm
              action={`${connectionPath(scope, c.name, "settings")}?method=${encodeURIComponent(method.method)}`}
              id="store-settings"
              label="Change the connection"
            >
              <SettingsFields kind={kind} current={c.settings} typed={props.typed} />
              <fieldset id="sign-in">
                <legend>Sign-in: {method.label}</legend>
                <p class="small">
                  Now: <AuthSummary kind={c.kind} auth={c.auth} />.{" "}
                  {same
                    ? "Leave its secrets empty to keep them; typing them replaces the sign-in whole."
                    : "Choosing another method replaces the sign-in whole: type all of it."}{" "}
                  Changing where the store is reached (its address, namespace, CA, endpoint or URL) needs the sign-in typed again.
                </p>
                <MethodPicker methods={methods} chosen={method} href={methodHref} id="sign-in-method" />
                <AuthFields method={method} current={same ? c.auth : undefined} typed={props.typed} tokenFiles={scope.tokenFiles} keepSecrets={same} />
              </fieldset>
              <TimingFields refresh={c.refresh_seconds} grace={c.grace_seconds} typed={props.typed} />
              <div class="actions">
                <Button variant="primary" id="store-settings-submit">
                  Save changes
                </Button>
              </div>
            </PostForm>
          </Section>
          <Section
            title="Remove"
            id="remove"
            tone="danger"
            description="Refused while a credential reads through it: point those credentials elsewhere or delete them first."
          >
            <ConfirmForm action={connectionPath(scope, c.name, "delete")} phrase={c.name} button="Remove connection" />
          </Section>
        </>
      ) : (
        <p class="muted" id="managed-elsewhere">
          {c.vault === null
            ? "The instance owner manages this connection and decides which vaults may use it."
            : "An admin of its vault manages this connection."}
        </p>
      )}
    </>
  );
}

export function EmptyConnections(props: { scope: StoreScope }) {
  return (
    <EmptyState title="No connections yet">
      {props.scope.vault === undefined ? (
        <p>Add one below. Credentials then read their values from the store by reference, and a rotation there reaches requests by itself.</p>
      ) : props.scope.mayAdd ? (
        <p>The instance owner has shared none with this vault. Add one that only this vault uses below.</p>
      ) : (
        <p>The instance owner has shared none with this vault, and it has none of its own. An admin of the vault can add one.</p>
      )}
    </EmptyState>
  );
}
