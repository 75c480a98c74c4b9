/** @jsxImportSource hono/jsx */
// A service from a catalogue template: its form (GET …/services/new?template=<id>, and the edit form of
// a template-made service): the host, the template's operations as checkboxes, a key choice per key
// field, the settings that are the person's own (an account email, an app ID), where to get the
// credential; saving it through the API's own schemas as {template, operations, keys, settings, host}.
// The "Connect with <Name>" link shows only where the server has that provider configured.

import type { Child } from "hono/jsx";
import { parseWith, ServiceInput, ServiceUpdateInput } from "../../contract/index.ts";
import { NotFound } from "../../errors.ts";
import type { OpenVault } from "../../identity/index.ts";
import { operationsOf, rulesFor, templateById, templateKeyFields, templateSettings, type OperationName, type Template } from "../../templates/index.ts";
import type { ServiceAuth, ServicePatch, ServiceView } from "../../workflows/index.ts";
import { Button, FormField, LinkButton, Name, PostForm, Section } from "../ui/index.ts";
import { formOf, openConsoleVault, renderPage, type ConsoleContext } from "./context.tsx";
import { KeyChoice, readKeyChoice } from "./vault-service-keys.tsx";
import { connectServicePath, editServicePath, keysOf, newServicePath, servicePath, vaultOf } from "./vault-service-paths.ts";
import type { ConnectConfigured } from "./vault-service-picker.tsx";
import { saveService, type RefusedStatus } from "./vault-service-save.tsx";
import { FIELD_LABELS } from "./vault-service-summary.tsx";

type Form = Record<string, string>;

/** The auth settings a template leaves to the person (its `fill`, the host aside): their own, never a key. */
function settingFields(t: Template): string[] {
  return templateSettings(t).map(([field]) => field);
}

/** Whether the person names the host: a wildcard, several hosts, or a host the template holds only as an example. */
function hostIsTyped(t: Template): boolean {
  return t.hosts.length > 1 || t.hosts[0]!.includes("*") || t.fill?.host !== undefined;
}

/** A catalogue phrase ("your Atlassian account email") as a sentence's start. */
function capitalised(text: string | undefined): string | undefined {
  return text && `${text[0]!.toUpperCase()}${text.slice(1)}.`;
}

function authField(auth: ServiceAuth | undefined, field: string): string {
  const v = (auth as Record<string, unknown> | undefined)?.[field];
  return typeof v === "string" ? v : "";
}

/** What the form shows: as posted, else the service being edited, else the template's defaults. */
function formValues(t: Template, posted: Form | undefined, current: ServiceView | undefined): Form {
  if (posted) return posted;
  const out: Form = { description: current?.description ?? "", enabled: current?.enabled === false ? "" : "on" };
  const chosen = current?.template?.operations ?? ["read"];
  for (const op of operationsOf(t)) out[`op_${op}`] = chosen.includes(op) ? "on" : "";
  for (const [field] of templateKeyFields(t)) out[`key_${field}`] = authField(current?.auth, field);
  for (const f of settingFields(t)) out[`fill_${f}`] = authField(current?.auth, f);
  out.host = current?.host ?? (hostIsTyped(t) && (t.hosts[0]!.includes("*") || t.fill?.host) ? "" : t.hosts[0]!);
  return out;
}

function HostPart(props: { t: Template; v: Form; fixed?: string }) {
  const { t } = props;
  if (props.fixed || !hostIsTyped(t)) {
    return (
      <p class="field" id="template-host">
        <strong>Host</strong> <Name>{props.fixed ?? t.hosts[0]}</Name>
      </p>
    );
  }
  const example = t.hosts[0]!.replace("*", "acme");
  const serves = `${t.name} serves ${t.hosts.join(", ")}.`;
  return (
    <FormField
      label="Host"
      name="host"
      value={props.v.host}
      required
      maxlength={300}
      autocomplete="off"
      placeholder={`e.g. ${example}`}
      hint={t.fill?.host ? `${capitalised(t.fill.host)} ${serves}` : serves}
    />
  );
}

function Operations(props: { t: Template; v: Form }) {
  return (
    <fieldset class="choices" id="operations">
      <legend>What agents may do</legend>
      {operationsOf(props.t).map((op) => (
        <label class="choice" for={`op-${op}`}>
          <input type="checkbox" name={`op_${op}`} id={`op-${op}`} checked={props.v[`op_${op}`] === "on"} />
          <span>
            <strong>{op}</strong> <span class="muted small">{props.t.operations[op]!.summary}</span>
          </span>
        </label>
      ))}
      <p class="hint">Anything else on the host is refused. Requests marked “waits for a person” are held until someone allows them.</p>
    </fieldset>
  );
}

function ObtainLine(props: { t: Template; connectHref?: string }) {
  const { t } = props;
  return (
    <div class="obtain" id="obtain">
      {props.connectHref ? (
        <p>
          <LinkButton href={props.connectHref} variant="primary">
            Connect with {t.name}
          </LinkButton>{" "}
          <span class="muted small">or use a credential you create yourself:</span>
        </p>
      ) : null}
      <p>
        Get the credential at{" "}
        <a href={t.obtain} rel="noopener noreferrer" id="obtain-link">
          {t.obtain.replace(/^https:\/\//, "")}
        </a>
        .{" "}
        <a href={t.docs} rel="noopener noreferrer" class="muted small">
          How {t.name} takes it
        </a>
      </p>
    </div>
  );
}

interface TemplateFormProps {
  readonly vault: string;
  readonly t: Template;
  readonly keys: readonly string[];
  readonly v: Form;
  readonly current?: ServiceView;
  readonly connect: boolean;
}

function TemplateForm(p: TemplateFormProps) {
  const { t, v, vault, current } = p;
  const keyFields = templateKeyFields(t);
  return (
    <PostForm
      action={servicePath(vault, current?.host)}
      id={current ? "edit-service-form" : "add-service-form"}
      label={current ? `Edit ${current.host}` : `Add ${t.name}`}
    >
      <input type="hidden" name="template" value={t.id} />
      <ObtainLine t={t} connectHref={p.connect && t.connect && !current ? connectServicePath(vault, t.id) : undefined} />
      <HostPart t={t} v={v} fixed={current?.host} />
      <Operations t={t} v={v} />
      <div class="form-grid">
        {keyFields.map(([field, suggested]) => (
          <KeyChoice
            name={`key_${field}`}
            label={field === "token" ? "Credential key" : `${FIELD_LABELS[field] ?? field} (credential key)`}
            value={v[`key_${field}`] ?? ""}
            keys={p.keys}
            suggested={suggested}
            placeholder={`e.g. ${suggested}`}
            hint={keyFields.length === 1 ? `The stored credential ${t.name} receives.` : undefined}
          />
        ))}
        {settingFields(t).map((f) => (
          <FormField
            label={FIELD_LABELS[f] ?? f}
            name={`fill_${f}`}
            value={v[`fill_${f}`]}
            required
            maxlength={256}
            autocomplete="off"
            hint={capitalised(t.fill?.[f as keyof typeof t.fill])}
          />
        ))}
      </div>
      <FormField label="Description (optional)" name="description" value={v.description} maxlength={500} autocomplete="off" />
      {current ? (
        <div class="field">
          <label class="choice" for="f-enabled">
            <input type="checkbox" name="enabled" id="f-enabled" checked={v.enabled === "on"} />
            <span>Enabled: agents may use it now</span>
          </label>
        </div>
      ) : null}
      <div class="actions">
        <Button variant="primary">{current ? "Save changes" : "Add service"}</Button>
        <LinkButton href={current ? servicePath(vault) : newServicePath(vault)}>{current ? "Cancel" : "Back to the catalogue"}</LinkButton>
      </div>
    </PostForm>
  );
}

/** The template a request names, or a 404 that does not quote the id. */
export function requireTemplate(id: string | undefined): Template {
  const t = id ? templateById(id) : undefined;
  if (!t) throw new NotFound("the catalogue has no template by that id");
  return t;
}

/** GET …/services/new?template=<id>: the template's form. */
export async function renderTemplateNew(c: ConsoleContext, t: Template, connect: ConnectConfigured, posted?: Form, status: 200 | RefusedStatus = 200) {
  const open = await openConsoleVault(c, "write_secrets");
  const vault = open.vault.name;
  const body = (
    <Section title="Access" id="template-form" description="The broker adds the credential to each request; agents never see it.">
      <TemplateForm
        vault={vault}
        t={t}
        keys={await keysOf(c, open)}
        v={formValues(t, posted, undefined)}
        connect={t.connect !== undefined && connect(c, t.id)}
      />
    </Section>
  );
  return renderPage(
    c,
    { title: `Add ${t.name}`, nav: "vaults", vault: vaultOf(open), status, lead: "Choose what agents may do and which stored key they use." },
    body,
  );
}

/** The edit form of a template-made service; `after` follows it (the catalogue's update, Remove). */
export async function renderTemplateEdit(
  c: ConsoleContext,
  open: OpenVault,
  t: Template,
  current: ServiceView,
  after: Child,
  posted?: Form,
  status: 200 | RefusedStatus = 200,
) {
  const vault = open.vault.name;
  const body = (
    <>
      <Section title={current.template?.said ?? t.name} id="template-form">
        <TemplateForm vault={vault} t={t} keys={await keysOf(c, open)} v={formValues(t, posted, current)} current={current} connect={false} />
        <p class="small" id="edit-as-custom">
          Need other rules or auth? <a href={editServicePath(vault, current.host, current.auth.type)}>Edit it as a custom service</a> (it then no longer follows
          the template).
        </p>
      </Section>
      {after}
    </>
  );
  return renderPage(c, { title: "Edit service", nav: "vaults", vault: vaultOf(open), status, lead: <Name>{current.host}</Name> }, body);
}

/** The template fields of the API body, as the form chose them (a setting left empty is left out: the API names it). */
function templateBody(t: Template, form: Form) {
  const settings = settingFields(t).flatMap((f) => ((form[`fill_${f}`] ?? "").trim() ? [[f, (form[`fill_${f}`] ?? "").trim()]] : []));
  return {
    template: t.id,
    operations: operationsOf(t).filter((op) => form[`op_${op}`] === "on"),
    keys: Object.fromEntries(templateKeyFields(t).map(([field]) => [field, readKeyChoice(form, `key_${field}`)])),
    ...(settings.length && { settings: Object.fromEntries(settings) }),
    description: form.description ?? "",
  };
}

/** Saves a template form: POST …/services with `template` (add), or …/services/:host (edit). */
export function saveTemplate(
  c: ConsoleContext,
  t: Template,
  current: ServiceView | undefined,
  rerender: (form: Form, status: RefusedStatus) => Promise<Response>,
) {
  const form = formOf(c);
  return saveService(c, {
    editing: current?.host,
    read: () => {
      if (current) return { ...parseWith(ServiceUpdateInput, { ...templateBody(t, form), enabled: form.enabled === "on" }), host: current.host };
      const host = (form.host ?? "").trim();
      return parseWith(ServiceInput, { ...templateBody(t, form), ...(hostIsTyped(t) && host !== "" && { host }) });
    },
    back: (vault) => (current ? servicePath(vault, current.host, "edit") : newServicePath(vault, { template: t.id })),
    rerender: (status) => rerender(form, status),
  });
}

/**
 * The change that applies this release's catalogue to a template-made service: the same template and
 * operations, with the rules the catalogue gives them today. Only the rules (and the operations recorded)
 * change, never the auth: a key, a setting, or a connected account's oauth2_refresh stays as it is.
 */
export function cataloguePatch(t: Template, s: ServiceView): Pick<ServicePatch, "rules" | "from"> {
  const operations = operationsOf(t).filter((op: OperationName) => s.template?.operations.includes(op));
  return { rules: rulesFor(t, operations), from: { template: t.id, operations } };
}
