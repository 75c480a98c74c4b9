/** @jsxImportSource hono/jsx */
// `/`: the sign-in page for a visitor, the list of vaults for a signed-in person, and the
// create-vault form (createVault, as POST /v1/vaults), and `/vaults/:vault`, a vault's overview.

import { Hono } from "hono";
import { parseWith, VaultInput } from "../../contract/index.ts";
import { createVault, iso, listVaults, type VaultRole } from "../../identity/index.ts";
import { Badge, Button, EmptyState, FormField, Name, PostForm, Section, Table, Time, toneOf } from "../ui/index.ts";
import { formOf, openConsoleVault, renderPage, requireSignedIn, runAction, signedIn, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { vaultPath, type VaultSection } from "./layout.tsx";
import { renderSignIn, signInMode } from "./sign-in.tsx";

interface VaultItem {
  name: string;
  role: VaultRole;
  created_at: string;
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
  const vaults: VaultItem[] = await listVaults(c.get("kit").d, user);
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

const SECTION_HELP: readonly [VaultSection, string, string][] = [
  ["credentials", "Credentials", "The secret values agents use, by key name. Values are write-only here."],
  ["services", "Services", "The hosts agents may reach through the broker, and which credential each one gets."],
  ["proposals", "Proposals", "Requests from agents for a new host or credential, waiting for a person to decide."],
  ["agents", "Agents", "Invite agents, see their roles and sessions, and revoke them."],
  ["members", "Members", "The people who can use this vault, and their invites."],
  ["logs", "Logs", "Every request agents made through the broker."],
  ["settings", "Settings", "What happens to hosts that match no service, and deleting the vault."],
];

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

  r.get("/vaults/:vault", requireSignedIn, async (c) => {
    const open = await openConsoleVault(c, "read");
    const vault = { name: open.vault.name, role: open.role };
    const body = (
      <Section title="What each section does">
        <dl class="overview">
          {SECTION_HELP.map(([slug, label, help]) => (
            <>
              <dt>
                <a href={vaultPath(vault.name, slug)}>{label}</a>
              </dt>
              <dd>{help}</dd>
            </>
          ))}
        </dl>
      </Section>
    );
    return renderPage(
      c,
      {
        title: "Overview",
        nav: "vaults",
        vault,
        lead: (
          <>
            Created <Time iso={iso(open.vault.createdAt)} />.
          </>
        ),
      },
      body,
    );
  });

  return r;
}
