/** @jsxImportSource hono/jsx */
// `/vaults/:vault/services`: the list of the hosts a vault serves, and the routes of adding (a template
// from the catalogue, or a custom service of one auth type), editing, enabling, disabling, removing and
// applying the catalogue's newer rules. Every write goes through the API's own calls (addService,
// updateService, removeService) and schemas, so the permission rule and the host rules are decided in
// one place. Pages work without JavaScript: each step is a link, a GET form or a POST form.

import { Hono } from "hono";
import type { Child } from "hono/jsx";
import { InvalidRequest } from "../../errors.ts";
import type { MintedState } from "../../egress/index.ts";
import { mayInVault, type OpenVault } from "../../identity/index.ts";
import { templateById } from "../../templates/index.ts";
import { listServices, removeService, updateService, type ServiceView } from "../../workflows/index.ts";
import { ConfirmForm, EmptyState, LinkButton, Section } from "../ui/index.ts";
import { PageAfterName } from "../../contract/index.ts";
import { readPageQuery } from "../kit/index.ts";
import { vaultPath } from "./layout.tsx";
import { CONSOLE_PAGE_SIZE, PageLinks } from "./page-links.tsx";
import { formOf, openConsoleVault, renderPage, requireConfirmation, requireSignedIn, runAction, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { renderCustomEdit, renderCustomNew, saveCustom } from "./vault-service-custom.tsx";
import type { ServiceFormValues } from "./vault-service-form.tsx";
import { ServicesTable } from "./vault-service-list.tsx";
import { findService, newServicePath, servicePath, vaultOf } from "./vault-service-paths.ts";
import { renderPicker, renderTypeChoice, type ConnectConfigured } from "./vault-service-picker.tsx";
import type { RefusedStatus } from "./vault-service-save.tsx";
import { RulesModeSection } from "./vault-policy-mode.tsx";
import { cataloguePatch, renderTemplateEdit, renderTemplateNew, requireTemplate, saveTemplate } from "./vault-service-template.tsx";

type MintedStateOf = (vaultId: number, host: string) => MintedState | undefined;

async function renderList(c: ConsoleContext, mintedState?: MintedStateOf) {
  const { d } = c.get("kit");
  const open = await openConsoleVault(c, "read");
  const canWrite = mayInVault(open.principal, open.role, "write_secrets");
  const { after } = readPageQuery(c, PageAfterName);
  const page = await listServices(d, open, { limit: CONSOLE_PAGE_SIZE, after });
  const rows = page.services;
  const add = canWrite ? (
    <LinkButton href={newServicePath(open.vault.name)} variant="primary">
      Add a service
    </LinkButton>
  ) : null;
  const empty = after ? (
    <p class="muted">No more services.</p>
  ) : (
    <EmptyState title="No services yet" action={add}>
      {canWrite ? (
        <p>
          A service names a host agents may reach through the broker and the credential it receives. Start from a template, or set one up yourself; agents can
          also propose one.
        </p>
      ) : (
        <p>A member or admin of this vault adds services. Agents can ask for one by filing a proposal.</p>
      )}
    </EmptyState>
  );
  const body = (
    <Section
      title="Services"
      description="Requests to a host with no service here are tunnelled or refused, as the vault's settings say, and never get a credential."
    >
      {(rows.length || after) && add ? (
        <div class="section-actions" id="add-service">
          {add}
        </div>
      ) : null}
      <ServicesTable
        vault={open.vault.name}
        vaultMode={open.vault.policyMode}
        rows={rows}
        canWrite={canWrite}
        empty={empty}
        minted={(host) => mintedState?.(open.vault.id, host)}
      />
      <PageLinks
        id="service-pages"
        label="Service pages"
        base={vaultPath(open.vault.name, "services")}
        param="after"
        next={page.next_cursor}
        later={after !== undefined}
      />
    </Section>
  );
  const lead = "The hosts agents may reach through the broker, and which credential each one gets.";
  return renderPage(c, { title: "Services", nav: "vaults", vault: vaultOf(open), lead }, body);
}

function RemoveSection(props: { vault: string; host: string }) {
  return (
    <Section title="Remove" tone="danger" description="Agents lose access to this host through the broker. The credential itself stays in the vault.">
      <ConfirmForm action={servicePath(props.vault, props.host, "remove")} phrase={props.host} button="Remove service" />
    </Section>
  );
}

interface EditState {
  readonly values?: ServiceFormValues;
  readonly form?: Record<string, string>;
  readonly status?: RefusedStatus;
}

/**
 * GET …/services/:host/edit: a template-made service gets its template's form; any other, or one
 * asked for in a type (`?type=`), its type's fields; `?type=choose` the choice of type.
 */
async function renderEdit(c: ConsoleContext, state: EditState = {}) {
  const open = await openConsoleVault(c, "write_secrets");
  const current = await findService(c, open, c.req.param("host") ?? "");
  const asked = c.req.query("type");
  if (asked === "choose" && !state.values && !state.form) return renderTypeChoice(c, current.host);
  const after: Child = (
    <>
      <RulesModeSection open={open} service={current} />
      <RemoveSection vault={open.vault.name} host={current.host} />
    </>
  );
  const t = current.template && templateById(current.template.id);
  if (t && (state.form || (!asked && !state.values))) return renderTemplateEdit(c, open, t, current, after, state.form, state.status);
  return renderCustomEdit(c, open, current, after, state.values, state.status);
}

/** POST …/services (add) or …/services/:host (edit): a template's form or a custom one, by its `template` field. */
async function save(c: ConsoleContext, host: string | undefined, connect: ConnectConfigured) {
  const templateId = formOf(c).template;
  if (templateId === undefined) return saveCustom(c, host, (values, status) => renderEdit(c, { values, status }));
  const t = requireTemplate(templateId);
  if (!host) return saveTemplate(c, t, undefined, (form, status) => renderTemplateNew(c, t, connect, form, status));
  const open: OpenVault = await openConsoleVault(c, "write_secrets");
  const current = await findService(c, open, host);
  return saveTemplate(c, t, current, (form, status) => renderEdit(c, { form, status }));
}

/**
 * POST …/services/:host/catalogue: the same template and operations, with this release's rules. The auth
 * is left as it is (no key goes anywhere new): a connected account stays one.
 */
async function applyCatalogue(c: ConsoleContext, host: string): Promise<ServiceView> {
  const { d } = c.get("kit");
  const open = await openConsoleVault(c, "write_secrets");
  const s = await findService(c, open, host);
  const t = s.template && templateById(s.template.id);
  if (!t) throw new InvalidRequest("this service follows no template of this release's catalogue");
  return updateService(d, open, host, cataloguePatch(t, s));
}

/**
 * The services pages. `connectConfigured` says for which templates the server can connect an account,
 * showing "Connect with <Name>" on their forms (pass vault-connect.tsx's canConnect); by default none.
 */
export function vaultServiceRoutes(mintedState?: MintedStateOf, connectConfigured: ConnectConfigured = () => false) {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/services", requireSignedIn);
  r.use("/vaults/:vault/services/*", requireSignedIn);

  r.get("/vaults/:vault/services", (c) => renderList(c, mintedState));
  r.get("/vaults/:vault/services/new", (c) => {
    const { template, custom } = c.req.query();
    if (template !== undefined) return renderTemplateNew(c, requireTemplate(template), connectConfigured);
    if (custom !== undefined) return renderCustomNew(c);
    return renderPicker(c, connectConfigured);
  });
  r.post("/vaults/:vault/services", (c) => save(c, undefined, connectConfigured));
  r.get("/vaults/:vault/services/:host/edit", (c) => renderEdit(c));
  r.post("/vaults/:vault/services/:host", (c) => save(c, c.req.param("host"), connectConfigured));

  for (const [action, enabled] of [
    ["enable", true],
    ["disable", false],
  ] as const) {
    r.post(`/vaults/:vault/services/:host/${action}`, (c) => {
      const host = c.req.param("host");
      return runAction(c, {
        run: async () => updateService(c.get("kit").d, await openConsoleVault(c, "write_secrets"), host, { enabled }),
        success: (s) =>
          enabled
            ? `Service ${s.host} enabled: agents can use it again.`
            : `Service ${s.host} disabled: agents' requests to it are refused until you enable it.`,
        redirect: servicePath(c.req.param("vault") ?? ""),
      });
    });
  }

  r.post("/vaults/:vault/services/:host/catalogue", (c) =>
    runAction(c, {
      run: () => applyCatalogue(c, c.req.param("host")),
      success: (s) => `Service ${s.host} updated: it now has this release's rules for ${s.template?.said ?? "its template"}.`,
      redirect: servicePath(c.req.param("vault") ?? ""),
    }),
  );

  r.post("/vaults/:vault/services/:host/remove", (c) => {
    const host = c.req.param("host");
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "write_secrets");
        requireConfirmation(c, host);
        await removeService(c.get("kit").d, open, host);
      },
      success: `Service ${host} removed.`,
      redirect: servicePath(c.req.param("vault") ?? ""),
      failure: servicePath(c.req.param("vault") ?? "", host, "edit"),
    });
  });

  return r;
}
