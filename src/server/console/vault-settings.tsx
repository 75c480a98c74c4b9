/** @jsxImportSource hono/jsx */
// `/vaults/:vault/settings`: what the tunnel does with hosts no service matches (updateVault, as
// PATCH /v1/vaults/:vault) and deleting the vault behind a typed confirmation (deleteVault, as
// DELETE /v1/vaults/:vault; human admins only, decided by the domain); its Notifications section
// (proposal webhooks) lives in vault-webhooks.tsx, its "Budgets" section in vault-budgets.tsx, its "Secret
// stores" section in secret-stores.tsx, its "Report mode" section in vault-policy-mode.tsx.

import { Hono } from "hono";
import { parseWith, VaultUpdateInput } from "../../contract/index.ts";
import { deleteVault, describeVault, mayInVault, updateVault, type OpenVault } from "../../identity/index.ts";
import { Badge, Button, ConfirmForm, Name, PostForm, Section } from "../ui/index.ts";
import { formOf, openConsoleVault, renderPage, requireConfirmation, requireSignedIn, runAction, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { renderNotifications, vaultWebhookRoutes } from "./vault-webhooks.tsx";
import { renderVaultStores } from "./secret-stores.tsx";
import { draftOf, type BudgetDraft } from "./vault-budget-draft.ts";
import { renderBudgets, saveBudget, vaultBudgetRoutes } from "./vault-budgets.tsx";
import { policyModeRoutes, renderPolicyMode } from "./vault-policy-mode.tsx";

const CHOICES = [
  {
    value: "tunnel",
    label: "Let agents reach them directly",
    help: "A blind tunnel: the broker passes the encrypted connection through without reading it or adding any credential. The network guard and the audit log still apply.",
  },
  {
    value: "deny",
    label: "Refuse them",
    help: "The agent gets 403 forbidden with a hint to file a proposal, so every host it uses is one a person approved.",
  },
] as const;

function UnmatchedHostsForm(props: { action: string; current: string }) {
  return (
    <PostForm action={props.action} id="unmatched-hosts" label="Hosts that match no service">
      <fieldset>
        <legend>When an agent connects through HTTPS_PROXY to a host that matches no service</legend>
        {CHOICES.map((ch) => (
          <label class="choice" for={`unmatched-${ch.value}`}>
            <input
              type="radio"
              name="unmatched_hosts"
              id={`unmatched-${ch.value}`}
              value={ch.value}
              checked={props.current === ch.value}
              aria-describedby={`unmatched-${ch.value}-help`}
            />
            <span>
              <strong>{ch.label}</strong>
              <br />
              <span class="muted small" id={`unmatched-${ch.value}-help`}>
                {ch.help}
              </span>
            </span>
          </label>
        ))}
      </fieldset>
      <p class="hint">
        Requests to <code>/proxy/&lt;host&gt;</code> for a host without a service are always refused, whatever this says.
      </p>
      <div class="actions">
        <Button variant="primary">Save</Button>
      </div>
    </PostForm>
  );
}

/** The page; `refused` is a budget form the domain refused, shown again as typed (the flash says why). */
async function renderSettings(c: ConsoleContext, open: OpenVault, refused?: { draft: BudgetDraft; status: 400 | 403 | 404 }) {
  const view = describeVault(open);
  const name = open.vault.name;
  const manage = mayInVault(open.principal, open.role, "manage");
  const remove = mayInVault(open.principal, open.role, "delete_vault");
  const current = CHOICES.find((ch) => ch.value === view.unmatched_hosts) ?? CHOICES[0];
  const policyMode = await renderPolicyMode({ c, open });
  const budgets = await renderBudgets({ c, open, draft: refused?.draft });
  const notifications = await renderNotifications({ c, open });
  const stores = await renderVaultStores({ c, open });
  const body = (
    <>
      <Section
        title="Hosts that match no service"
        id="unmatched"
        description="Agents reach the vault's services through the broker, which adds the credential. This decides what happens to every other host."
      >
        {manage ? (
          <UnmatchedHostsForm action={`${vaultPath(name, "settings")}/unmatched-hosts`} current={current.value} />
        ) : (
          <>
            <p id="unmatched-current">
              <Badge tone={current.value === "deny" ? "warning" : "info"}>{current.value}</Badge> {current.label}. {current.help}
            </p>
            <p class="muted">Only an admin of the vault can change this.</p>
          </>
        )}
      </Section>
      {policyMode}
      {budgets}
      {notifications}
      {stores}
      <Section
        title="Delete this vault"
        id="delete"
        tone="danger"
        description="Deleting the vault removes its credentials, services, proposals, agent grants, members, invites and sessions. Agents using it stop working at once."
      >
        {remove ? (
          <ConfirmForm action={`${vaultPath(name, "settings")}/delete`} phrase={name} button="Delete this vault forever" />
        ) : (
          <p class="muted" id="delete-refused">
            Only a human admin of the vault can delete it.
          </p>
        )}
      </Section>
    </>
  );
  const vault = { name, role: open.role, section: "settings" as const };
  return renderPage(
    c,
    {
      title: "Vault settings",
      status: refused?.status,
      nav: "vaults",
      vault,
      lead: (
        <>
          Settings of <Name>{name}</Name>.
        </>
      ),
    },
    body,
  );
}

export function vaultSettingsRoutes() {
  const r = new Hono<ConsoleEnv>();
  r.route("/", vaultWebhookRoutes());
  r.route("/", vaultBudgetRoutes());
  r.route("/", policyModeRoutes());

  r.get("/vaults/:vault/settings", requireSignedIn, async (c) => renderSettings(c, await openConsoleVault(c, "read")));

  r.post("/vaults/:vault/settings/unmatched-hosts", requireSignedIn, (c) => {
    const back = vaultPath(c.req.param("vault"), "settings");
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "manage");
        return updateVault(c.get("kit").d, open, parseWith(VaultUpdateInput, { unmatched_hosts: formOf(c).unmatched_hosts ?? "" }));
      },
      success: (v) =>
        v.unmatched_hosts === "deny"
          ? "Saved: hosts that match no service are now refused."
          : "Saved: agents reach hosts that match no service directly, through a blind tunnel.",
      redirect: back,
    });
  });

  r.post("/vaults/:vault/settings/budgets", requireSignedIn, (c) => {
    const draft = draftOf(formOf(c));
    return saveBudget(c, {
      draft,
      redirect: `${vaultPath(c.req.param("vault"), "settings")}#budgets`,
      rerender: async (status) => renderSettings(c, await openConsoleVault(c, "read"), { draft, status }),
    });
  });

  r.post("/vaults/:vault/settings/delete", requireSignedIn, (c) => {
    const name = c.req.param("vault");
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "delete_vault");
        requireConfirmation(c, open.vault.name);
        await deleteVault(c.get("kit").d, open);
      },
      success: `Vault ${name} deleted, with its credentials, services and sessions.`,
      redirect: "/",
      failure: vaultPath(name, "settings"),
    });
  });

  return r;
}
