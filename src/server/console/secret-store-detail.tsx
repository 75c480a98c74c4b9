/** @jsxImportSource hono/jsx */
// One secret store connection's page: its facts, every reference that reads through it, sharing with
// vaults (the owner's connections, on the owner's page), and for those who manage it the change form
// (settings, a sign-in method and its fields, timing) and removal. Only names, addresses, times and
// the stores' errors in words are shown: its secrets and the values it reads never reach a page.

import type { ConnectionReference, ReferenceView, SecretStoreView } from "../../workflows/index.ts";
import { Button, ConfirmForm, FormField, Name, PostForm, Section, Table, Time } from "../ui/index.ts";
import { plural } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { MethodPicker } from "./secret-store-add.tsx";
import { AuthFields, SettingsFields, TimingFields } from "./secret-store-fields.tsx";
import type { TypedForm } from "./secret-store-form.ts";
import { kindSpec, methodSpec, methodsFor } from "./secret-store-kinds.ts";
import { connectionPath, Owner, ReadStatus, Timing, type StoreScope } from "./secret-store-pages.tsx";
import { AuthSummary } from "./secret-store-summary.tsx";

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
