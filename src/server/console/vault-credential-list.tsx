/** @jsxImportSource hono/jsx */
// `/vaults/:vault/credentials`, the list: every key with where its value lives (stored here, or read
// from a secret store by reference with how its last read went), the services that send it and when
// it changed, for every role; and, for those who may write, the forms that set a credential by value
// or by reference. Names, references and times only: never a value.

import { mayInVault } from "../../identity/index.ts";
import { listCredentials, listEveryService } from "../../workflows/index.ts";
import { EmptyState, Name, Section, Table, Time } from "../ui/index.ts";
import { openConsoleVault, renderPage, type ConsoleContext } from "./context.tsx";
import { KEY_PATTERN, NoConnections, ReferenceForm, SetCredentialForm } from "./vault-credential-forms.tsx";
import { credentialPath, usableConnections, usersOf, vaultOf, type CredentialItem } from "./vault-credential-paths.ts";

export function UsedBy(props: { hosts: string[] }) {
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

export async function renderList(c: ConsoleContext) {
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
