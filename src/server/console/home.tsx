/** @jsxImportSource hono/jsx */
// `/`: the sign-in page for a visitor, the list of vaults for a signed-in person (with what waits for
// a decision in each, counted in one grouped query by pendingInVaults) and the create-vault form
// (createVault, as POST /v1/vaults). A vault's own page is vault-overview.tsx.

import { Hono } from "hono";
import { parseWith, VaultInput } from "../../contract/index.ts";
import { createVault, listVaults, type VaultRole } from "../../identity/index.ts";
import { pendingInVaults, type PendingSummary } from "../../workflows/index.ts";
import { Badge, Button, EmptyState, FormField, Name, PostForm, Section, Table, Time, toneOf } from "../ui/index.ts";
import { formOf, renderPage, requireSignedIn, runAction, signedIn, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { renderSignIn, signInMode } from "./sign-in.tsx";

interface VaultItem {
  name: string;
  role: VaultRole;
  created_at: string;
  pending?: PendingSummary;
}

/** What waits for a decision in one vault, each part a link to its tab; "nothing" when nothing does. */
function Waiting(props: { v: VaultItem }) {
  const p = props.v.pending;
  const links = [
    p?.pending_proposals ? (
      <a href={vaultPath(props.v.name, "proposals")} class="pending-link">
        <span class="count">{p.pending_proposals}</span> {p.pending_proposals === 1 ? "proposal" : "proposals"}
      </a>
    ) : null,
    p?.held_requests ? (
      <a href={vaultPath(props.v.name, "requests")} class="pending-link">
        <span class="count">{p.held_requests}</span> {p.held_requests === 1 ? "held request" : "held requests"}
      </a>
    ) : null,
  ].filter((x) => x !== null);
  if (links.length === 0) return <span class="muted">nothing</span>;
  return <span class="pending-links">{links}</span>;
}

const ROLE_MEANING: Record<VaultRole, string> = {
  admin: "manages everything",
  member: "sets and reads credentials",
  proxy: "uses services only",
};

function CreateVaultForm() {
  return (
    <PostForm action="/vaults" id="create-vault" label="Create a vault" class="form-inline">
      <FormField
        label="Vault name"
        name="name"
        required
        pattern="[a-z0-9][a-z0-9\-]{0,62}"
        maxlength={63}
        autocomplete="off"
        placeholder="e.g. payments-bot"
        hint="Lower-case letters, digits and dashes. Agents name the vault they use, so pick something they can say."
      />
      <div class="actions">
        <Button variant="primary">Create vault</Button>
      </div>
    </PostForm>
  );
}

async function renderVaultList(c: ConsoleContext) {
  const user = signedIn(c);
  const d = c.get("kit").d;
  const listed = await listVaults(d, user);
  const pending = await pendingInVaults(d, user, listed);
  const vaults: VaultItem[] = listed.map((v) => ({ ...v, pending: pending.get(v.name) }));
  const empty = (
    <EmptyState title="No vaults yet">
      <p>
        A vault holds the credentials and services one agent (or one team of agents) may use. Create your first one below, then add a credential and the service
        it belongs to.
      </p>
    </EmptyState>
  );
  const body = (
    <>
      <Section title="Your vaults">
        <Table
          id="vaults"
          rows={vaults}
          empty={empty}
          columns={[
            {
              label: "Vault",
              cell: (v) => (
                <a href={vaultPath(v.name)} class="strong-link">
                  <Name>{v.name}</Name>
                </a>
              ),
            },
            {
              label: "Your role",
              cell: (v) => (
                <>
                  <Badge tone={toneOf(v.role)}>{v.role}</Badge> <span class="muted small">{ROLE_MEANING[v.role]}</span>
                </>
              ),
            },
            { label: "Pending", cell: (v) => <Waiting v={v} /> },
            { label: "Created", cell: (v) => <Time iso={v.created_at} /> },
          ]}
        />
      </Section>
      <Section title="Create a vault" description="You become the vault's admin. You can invite people and agents afterwards.">
        <CreateVaultForm />
      </Section>
    </>
  );
  return renderPage(c, { title: "Vaults", nav: "vaults", lead: "The vaults you can use, and your role in each." }, body);
}

export function homeRoutes() {
  const r = new Hono<ConsoleEnv>();

  r.get("/", async (c) => (c.get("user") ? renderVaultList(c) : renderSignIn(c, await signInMode(c))));

  r.post("/vaults", requireSignedIn, (c) => {
    const name = (formOf(c).name ?? "").trim();
    return runAction(c, {
      run: async () => createVault(c.get("kit").d, signedIn(c), parseWith(VaultInput, { name })),
      success: (v) => `Vault ${v.name} created. You are its admin.`,
      redirect: (v) => vaultPath(v.name),
      failure: "/",
    });
  });

  return r;
}
