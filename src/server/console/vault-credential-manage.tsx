/** @jsxImportSource hono/jsx */
// `/vaults/:vault/credentials/:key`, one credential for those who may write: a stored value to replace,
// reveal (after the password is typed again, vault-credential-reveal.tsx) or read from a secret store
// instead; a credential by reference with where it reads from and how its last read went, to point
// elsewhere or to store a value instead; and deletion. Names, references and times only: never a value.

import { mayInVault } from "../../identity/index.ts";
import type { ReferenceView } from "../../workflows/index.ts";
import { Button, ConfirmForm, LinkButton, Name, PostForm, Section, Time } from "../ui/index.ts";
import { openConsoleVault, renderPage, type ConsoleContext } from "./context.tsx";
import { ReadStatus, vaultStoresBase } from "./secret-store-pages.tsx";
import { NoConnections, ReferenceForm, ValueField } from "./vault-credential-forms.tsx";
import { UsedBy } from "./vault-credential-list.tsx";
import { credentialPath, requireKey, usableConnections, vaultOf } from "./vault-credential-paths.ts";

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

export async function renderManage(c: ConsoleContext) {
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
