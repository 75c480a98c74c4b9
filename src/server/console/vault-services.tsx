/** @jsxImportSource hono/jsx */
// `/vaults/:vault/services`: the hosts a vault serves and how each gets its credential. Adding,
// editing, enabling, disabling and removing go through the API's own calls (addService,
// updateService, removeService), so the permission rule and the host rules (no public-suffix
// wildcards) are decided in one place. Before a service sends an existing credential to a host it
// does not go to today, the person confirms the same warning the approval page shows. Each
// service's rules are listed in words and edited as text, one rule per line (rules-text.ts).

import { Hono } from "hono";
import { BrokerError, NotFound } from "../../errors.ts";
import {
  addService,
  listCredentials,
  listServices,
  newHostUses,
  removeService,
  updateService,
  type ServiceSpec,
  type ServiceView,
} from "../../workflows/index.ts";
import { parseWith, ServiceInput, ServiceUpdateInput } from "../../contract/index.ts";
import { parseHostPattern } from "../../policy/index.ts";
import { authCell, AUTH_TYPE_LABELS, describeRulesInWords } from "../../words/index.ts";
import { mayInVault, type OpenVault } from "../../identity/index.ts";
import { Badge, Button, ConfirmForm, EmptyState, LinkButton, Name, PostForm, Section, Table, Time } from "../ui/index.ts";
import type { MintedState } from "../../egress/index.ts";
import {
  describeError,
  formOf,
  openConsoleVault,
  renderPage,
  requireConfirmation,
  requireSignedIn,
  runAction,
  type ConsoleContext,
  type ConsoleEnv,
} from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { formatRulesText, parseRulesText } from "../ui/index.ts";
import { ServiceFields, type ServiceFormValues } from "./vault-service-form.tsx";
import { isMintedChoice, mintedAuthBody, mintedValuesOf, readMintedValues } from "./vault-service-minted.tsx";
import { labelAuthField } from "./vault-service-summary.tsx";

function servicePath(vault: string, host?: string, action?: "edit" | "enable" | "disable" | "remove"): string {
  return `${vaultPath(vault, "services")}${host ? `/${encodeURIComponent(host)}` : ""}${action ? `/${action}` : ""}`;
}

function vaultOf(open: OpenVault) {
  return { name: open.vault.name, role: open.role, section: "services" as const };
}

/** The keys a service's auth uses, then in words where they go (words/'s authCell); names set as code. */
function AuthSummary(props: { s: ServiceView }) {
  const { keys, detail } = authCell(props.s.auth);
  const words = detail.map((part) => (typeof part === "string" ? part : <Name>{part.name}</Name>));
  if (keys.length === 0) return <span class="muted">{words}</span>;
  return (
    <>
      {keys.map((k, i) => (
        <>
          {i ? " " : ""}
          <Name>{k}</Name>
        </>
      ))}
      {words.length ? <span class="muted small"> {words}</span> : null}
    </>
  );
}

/** A minted credential refused by its provider is the one thing here a person must act on. */
function MintedStatus(props: { state: MintedState | undefined }) {
  const st = props.state;
  if (!st) return null;
  if (st.kind === "refused") {
    return (
      <div class="small">
        <Badge tone="danger">refresh refused</Badge>{" "}
        <span class="muted">{st.reason}. Agents get an error until the service or one of its credentials changes.</span>
      </div>
    );
  }
  return (
    <div class="muted small">
      token until <Time iso={new Date(st.expiresAt).toISOString()} />
    </div>
  );
}

function ServicesTable(props: { vault: string; rows: ServiceView[]; canWrite: boolean; empty: any; minted?: (host: string) => MintedState | undefined }) {
  const columns = [
    { label: "Host", cell: (s: ServiceView) => <Name>{s.host}</Name> },
    {
      label: "Auth and credential",
      cell: (s: ServiceView) => (
        <>
          <Badge>{AUTH_TYPE_LABELS[s.auth.type] ?? s.auth.type}</Badge> <AuthSummary s={s} />
        </>
      ),
    },
    {
      label: "Allowed requests",
      cell: (s: ServiceView) => (s.rules ? describeRulesInWords(s.rules) : <span class="muted">{describeRulesInWords(undefined)}</span>),
    },
    { label: "Description", cell: (s: ServiceView) => (s.description ? s.description : <span class="muted">none</span>) },
    {
      label: "Status",
      cell: (s: ServiceView) => (
        <>
          <Badge tone={s.enabled ? "success" : "danger"}>{s.enabled ? "enabled" : "disabled"}</Badge>
          <MintedStatus state={props.minted?.(s.host)} />
        </>
      ),
    },
  ];
  if (props.canWrite) {
    columns.push({
      label: "",
      class: "actions-cell",
      cell: (s: ServiceView) => (
        <span class="row-actions">
          <a href={servicePath(props.vault, s.host, "edit")} class="btn btn-secondary btn-small" aria-label={`Edit ${s.host}`}>
            Edit
          </a>{" "}
          <PostForm action={servicePath(props.vault, s.host, s.enabled ? "disable" : "enable")} class="inline-form">
            <Button small variant={s.enabled ? "secondary" : "primary"}>
              {s.enabled ? "Disable" : "Enable"}
            </Button>
          </PostForm>
        </span>
      ),
    } as (typeof columns)[number]);
  }
  return <Table id="services" rows={props.rows} columns={columns} empty={props.empty} />;
}

/** The form as posted, kept as text so a refused form can be shown again as typed (nothing here is secret). */
function readValues(form: Record<string, string>, host?: string): ServiceFormValues {
  return {
    ...readMintedValues(form),
    host: host ?? (form.host ?? "").trim(),
    auth_type: form.auth_type ?? "bearer",
    credential_key: (form.credential_key ?? "").trim(),
    username: form.username ?? "",
    header_name: (form.header_name ?? "").trim(),
    header_prefix: form.header_prefix ?? "",
    query_param: (form.query_param ?? "").trim(),
    path_template: (form.path_template ?? "").trim(),
    description: form.description ?? "",
    enabled: form.enabled === "on" || form.enabled === "true",
    rules: form.rules, // absent (a form without the box) keeps the current rules
  };
}

/** The API body addService/updateService read: only the fields the chosen auth type uses. */
function toBody(v: ServiceFormValues): Record<string, unknown> {
  const auth: Record<string, unknown> = isMintedChoice(v.auth_type) ? mintedAuthBody(v.auth_type, v) : { type: v.auth_type };
  if (v.auth_type !== "passthrough" && !isMintedChoice(v.auth_type)) auth.token = v.credential_key;
  if (v.auth_type === "basic" && v.username !== "") auth.username = v.username;
  if (v.auth_type === "header") {
    auth.header = v.header_name;
    if (v.header_prefix !== "") auth.prefix = v.header_prefix;
  }
  if (v.auth_type === "query") auth.param = v.query_param;
  if (v.auth_type === "path") auth.template = v.path_template;
  // An empty box is null: on an edit it removes the rules (every method and path allowed again).
  const rules = v.rules === undefined ? undefined : (parseRulesText(v.rules) ?? null);
  return { host: v.host, description: v.description, auth, enabled: v.enabled, rules };
}

interface FormState {
  readonly values?: ServiceFormValues;
}

async function keysOf(c: ConsoleContext, open: OpenVault): Promise<string[]> {
  return (await listCredentials(c.get("kit").d, open, false)).map((r) => r.key);
}

type MintedStateOf = (vaultId: number, host: string) => MintedState | undefined;

async function renderList(c: ConsoleContext, state: FormState = {}, status: 200 | 400 | 403 | 404 | 409 = 200, mintedState?: MintedStateOf) {
  const { d } = c.get("kit");
  const open = await openConsoleVault(c, "read");
  const canWrite = mayInVault(open.principal, open.role, "write_secrets");
  const rows = await listServices(d, open);
  const keys = await keysOf(c, open);
  const empty = (
    <EmptyState title="No services yet">
      {canWrite ? (
        <p>A service names a host agents may reach through the broker and the credential it receives. Add one below; agents can also propose one.</p>
      ) : (
        <p>A member or admin of this vault adds services. Agents can ask for one by filing a proposal.</p>
      )}
    </EmptyState>
  );
  const body = (
    <>
      <Section
        title="Services"
        description="Requests to a host with no service here are tunnelled or refused, as the vault's settings say, and never get a credential."
      >
        <ServicesTable vault={open.vault.name} rows={rows} canWrite={canWrite} empty={empty} minted={(host) => mintedState?.(open.vault.id, host)} />
      </Section>
      {canWrite ? (
        <Section title="Add a service" id="add-service">
          <PostForm action={servicePath(open.vault.name)} id="add-service-form" label="Add a service">
            <ServiceFields values={state.values} keys={keys} />
            <div class="actions">
              <Button variant="primary">Add service</Button>
            </div>
          </PostForm>
        </Section>
      ) : null}
    </>
  );
  return renderPage(
    c,
    {
      title: "Services",
      nav: "vaults",
      vault: vaultOf(open),
      status,
      lead: "The hosts agents may reach through the broker, and which credential each one gets.",
    },
    body,
  );
}

async function findService(c: ConsoleContext, open: OpenVault, host: string): Promise<ServiceView> {
  const s = (await listServices(c.get("kit").d, open)).find((x) => x.host === host);
  if (!s) throw new NotFound("this vault has no service for that host"); // the host came from the URL: never quoted back
  return s;
}

function valuesOf(s: ServiceView): ServiceFormValues {
  return {
    ...mintedValuesOf(s.auth),
    host: s.host,
    auth_type: s.auth.type,
    credential_key: s.auth.token ?? "",
    username: s.auth.username ?? "",
    header_name: s.auth.header ?? "",
    header_prefix: s.auth.prefix ?? "",
    query_param: s.auth.param ?? "",
    path_template: s.auth.template ?? "",
    description: s.description,
    enabled: s.enabled,
    rules: formatRulesText(s.rules),
  };
}

async function renderEdit(c: ConsoleContext, state: FormState = {}, status: 200 | 400 | 404 | 409 = 200) {
  const open = await openConsoleVault(c, "write_secrets");
  const host = c.req.param("host") ?? "";
  const current = await findService(c, open, host);
  const vault = open.vault.name;
  const body = (
    <>
      <Section title="Edit the service">
        <PostForm action={servicePath(vault, current.host)} id="edit-service-form" label={`Edit ${current.host}`}>
          <ServiceFields values={state.values ?? valuesOf(current)} keys={await keysOf(c, open)} fixedHost />
          <div class="actions">
            <Button variant="primary">Save changes</Button>
            <LinkButton href={servicePath(vault)}>Cancel</LinkButton>
          </div>
        </PostForm>
      </Section>
      <Section title="Remove" tone="danger" description="Agents lose access to this host through the broker. The credential itself stays in the vault.">
        <ConfirmForm action={servicePath(vault, current.host, "remove")} phrase={current.host} button="Remove service" />
      </Section>
    </>
  );
  return renderPage(c, { title: "Edit service", nav: "vaults", vault: vaultOf(open), status, lead: <Name>{current.host}</Name> }, body);
}

/** Shows the new-host warning with the form's values carried in hidden fields; the person confirms or goes back. */
function renderWarning(c: ConsoleContext, open: OpenVault, values: ServiceFormValues, uses: { key: string; host: string }[], action: string, back: string) {
  const hidden = { ...values, enabled: values.enabled ? "on" : "", confirm_new_host: "yes" };
  const body = (
    <Section title="Check before you continue">
      {uses.map((u) => (
        <p class="warning" role="alert">
          This service sends your existing credential <Name>{u.key}</Name> to a new host, <Name>{u.host}</Name>. Whoever runs that host receives the value.
          Continue only if you trust it with this credential.
        </p>
      ))}
      <PostForm action={action} id="confirm-new-host" label="Confirm the new host">
        {Object.entries(hidden)
          .filter(([, value]) => value !== undefined)
          .map(([name, value]) => (
            <input type="hidden" name={name} value={String(value)} />
          ))}
        <div class="actions">
          <Button variant="primary" id="confirm-service">
            Yes, send {uses.map((u) => u.key).join(", ")} to {values.host}
          </Button>
          <LinkButton href={back}>Go back</LinkButton>
        </div>
      </PostForm>
    </Section>
  );
  return renderPage(c, { title: "Send an existing credential to a new host?", nav: "vaults", vault: vaultOf(open) }, body);
}

/** Add or edit: validate as the domain does, ask about a new host once, then write through the domain. */
async function saveService(c: ConsoleContext, host: string | undefined, mintedState?: MintedStateOf) {
  const { d } = c.get("kit");
  const values = readValues(formOf(c), host);
  const rerender = (status: 400 | 403 | 404 | 409) =>
    host ? renderEdit(c, { values }, status === 403 ? 400 : status) : renderList(c, { values }, status, mintedState);
  try {
    const open = await openConsoleVault(c, "write_secrets");
    // The API's own schemas read the form, so a service saved here is checked exactly as one posted as JSON.
    const { host: typedHost, ...fields } = toBody(values);
    const spec = host
      ? { ...parseWith(ServiceUpdateInput, fields), host: parseHostPattern(host, { allowIp: true }).text }
      : parseWith(ServiceInput, { host: typedHost, ...fields });
    const target = spec.host;
    const auth = spec.auth ?? (await listServices(d, open)).find((s) => s.host === target)?.auth;
    const uses = auth ? await newHostUses(d, open.vault.id, [{ host: target, auth }]) : [];
    if (uses.length && formOf(c).confirm_new_host !== "yes") {
      const action = servicePath(open.vault.name, host);
      return renderWarning(c, open, values, uses, action, host ? servicePath(open.vault.name, host, "edit") : servicePath(open.vault.name));
    }
    const saved = host ? await updateService(d, open, host, spec) : await addService(d, open, spec as ServiceSpec);
    const verb = host ? "updated" : "added";
    c.get("kit").flash.write(c, { kind: "success", text: `Service ${saved.host} ${verb}${saved.enabled ? "" : " (disabled)"}.` });
    return c.redirect(servicePath(open.vault.name), 303);
  } catch (err) {
    if (!(err instanceof BrokerError)) throw err;
    // Shown now, as a flash on the same form, so what was typed (nothing secret) stays in the fields.
    c.set("flash", { kind: "error", text: labelAuthField(describeError(err), (err as { field?: string }).field) });
    const status = err.status === 404 ? 404 : err.status === 409 ? 409 : err.status === 403 ? 403 : 400;
    return rerender(status);
  }
}

export function vaultServiceRoutes(mintedState?: MintedStateOf) {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/services", requireSignedIn);
  r.use("/vaults/:vault/services/*", requireSignedIn);

  r.get("/vaults/:vault/services", (c) => renderList(c, {}, 200, mintedState));
  r.post("/vaults/:vault/services", (c) => saveService(c, undefined, mintedState));
  r.get("/vaults/:vault/services/:host/edit", (c) => renderEdit(c));
  r.post("/vaults/:vault/services/:host", (c) => saveService(c, c.req.param("host")));

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
        redirect: vaultPath(c.req.param("vault") ?? "", "services"),
      });
    });
  }

  r.post("/vaults/:vault/services/:host/remove", (c) => {
    const host = c.req.param("host");
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "write_secrets");
        requireConfirmation(c, host);
        await removeService(c.get("kit").d, open, host);
      },
      success: `Service ${host} removed.`,
      redirect: vaultPath(c.req.param("vault") ?? "", "services"),
      failure: servicePath(c.req.param("vault") ?? "", host, "edit"),
    });
  });

  return r;
}
