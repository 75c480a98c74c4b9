/** @jsxImportSource hono/jsx */
// A custom service (no template): its form for one auth type, to add (GET …/services/new?custom=1&type=)
// or to edit, the posted form read back as typed, the API body built from the chosen type's fields only,
// and saving it through the API's own schemas (ServiceInput, ServiceUpdateInput). The same POST routes
// and field names as ever: `auth_type`, `credential_key`, `header_name`, … Nothing here is secret.

import type { Child } from "hono/jsx";
import { parseWith, ServiceInput, ServiceUpdateInput } from "../../contract/index.ts";
import type { OpenVault } from "../../identity/index.ts";
import { parseHostPattern } from "../../policy/index.ts";
import type { ServiceView } from "../../workflows/index.ts";
import { Button, LinkButton, Name, PostForm, Section } from "../ui/index.ts";
import { formatRulesText, parseRulesText } from "../ui/index.ts";
import { keepOthersAllowed } from "../../policy/index.ts";
import { formOf, openConsoleVault, renderPage, type ConsoleContext } from "./context.tsx";
import { authChoiceOf, EMPTY_SERVICE, ServiceFields, type ServiceFormValues } from "./vault-service-form.tsx";
import { readKeyChoice } from "./vault-service-keys.tsx";
import { isMintedChoice, mintedAuthBody, mintedValuesOf, readMintedValues } from "./vault-service-minted.tsx";
import { editServicePath, keysOf, newServicePath, servicePath, vaultOf } from "./vault-service-paths.ts";
import { renderTypeChoice } from "./vault-service-picker.tsx";
import { saveService, type RefusedStatus } from "./vault-service-save.tsx";

/** The form as posted, kept as text so a refused form can be shown again as typed (nothing here is secret). */
function readValues(form: Record<string, string>, host?: string): ServiceFormValues {
  return {
    ...readMintedValues(form),
    host: host ?? (form.host ?? "").trim(),
    auth_type: form.auth_type ?? "bearer",
    credential_key: readKeyChoice(form, "credential_key"),
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
function toBody(v: ServiceFormValues, hadRules: boolean): Record<string, unknown> {
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
  // Approval lines alone on a service that allowed everything hold those requests and keep the rest allowed.
  const typed = v.rules === undefined ? undefined : parseRulesText(v.rules);
  const rules = v.rules === undefined ? undefined : typed ? keepOthersAllowed(typed, hadRules) : null;
  return { host: v.host, description: v.description, auth, enabled: v.enabled, rules };
}

/** A stored service as form text, for its edit form (in another type: the fields both types share). */
function valuesOf(s: ServiceView, type: string): ServiceFormValues {
  return {
    ...mintedValuesOf(s.auth),
    host: s.host,
    auth_type: type,
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

/** GET …/services/new?custom=1&type=<type>: the chosen type's fields only (no type yet, or an unknown one: the choice). */
export async function renderCustomNew(c: ConsoleContext, values?: ServiceFormValues, status: 200 | RefusedStatus = 200) {
  const type = values?.auth_type ?? c.req.query("type") ?? "";
  if (!authChoiceOf(type)) return renderTypeChoice(c);
  const open = await openConsoleVault(c, "write_secrets");
  const vault = open.vault.name;
  const body = (
    <Section title="The service" id="add-service">
      <PostForm action={servicePath(vault)} id="add-service-form" label="Add a service">
        <ServiceFields values={values ?? { ...EMPTY_SERVICE, auth_type: type }} keys={await keysOf(c, open)} change={newServicePath(vault, { custom: "1" })} />
        <div class="actions">
          <Button variant="primary">Add service</Button>
          <LinkButton href={servicePath(vault)}>Cancel</LinkButton>
        </div>
      </PostForm>
    </Section>
  );
  const lead = (
    <>
      Any host, set up by hand. <a href={newServicePath(vault)}>Start from a template instead</a>
    </>
  );
  return renderPage(c, { title: "Add a custom service", nav: "vaults", vault: vaultOf(open), status, lead }, body);
}

/** The edit form of a custom service, in its own type or the one `?type=` names; `after` follows it (Remove). */
export async function renderCustomEdit(
  c: ConsoleContext,
  open: OpenVault,
  current: ServiceView,
  after: Child,
  values?: ServiceFormValues,
  status: 200 | RefusedStatus = 200,
) {
  const asked = c.req.query("type");
  const type = values?.auth_type ?? (asked && authChoiceOf(asked) ? asked : current.auth.type);
  const vault = open.vault.name;
  const changing = type !== current.auth.type;
  const body = (
    <>
      <Section title="Edit the service">
        {current.template ? (
          <p class="warning" id="leaves-template">
            Saving this form makes the service a custom one: it no longer follows the {current.template.name} template.
          </p>
        ) : null}
        {changing ? (
          <p class="note" id="changing-type">
            Changing how the credential is sent. Nothing changes until you save.
          </p>
        ) : null}
        <PostForm action={servicePath(vault, current.host)} id="edit-service-form" label={`Edit ${current.host}`}>
          {/* Whether the service allowed everything when the form was shown: approval lines alone then keep the rest allowed. */}
          <input type="hidden" name="had_rules" value={current.rules ? "1" : "0"} />
          <ServiceFields
            values={values ?? valuesOf(current, type)}
            keys={await keysOf(c, open)}
            change={editServicePath(vault, current.host, "choose")}
            fixedHost
          />
          <div class="actions">
            <Button variant="primary">Save changes</Button>
            <LinkButton href={servicePath(vault)}>Cancel</LinkButton>
          </div>
        </PostForm>
      </Section>
      {after}
    </>
  );
  return renderPage(c, { title: "Edit service", nav: "vaults", vault: vaultOf(open), status, lead: <Name>{current.host}</Name> }, body);
}

/**
 * Saves a custom service's form: POST …/services (add) or …/services/:host (edit). `rerender` shows
 * the edit form again on a refusal (the add form is this module's own).
 */
export function saveCustom(c: ConsoleContext, host: string | undefined, rerenderEdit: (values: ServiceFormValues, status: RefusedStatus) => Promise<Response>) {
  const values = readValues(formOf(c), host);
  return saveService(c, {
    editing: host,
    read: () => {
      // The API's own schemas read the form, so a service saved here is checked exactly as one posted as JSON.
      const { host: typedHost, ...fields } = toBody(values, host !== undefined && formOf(c).had_rules !== "0");
      return host
        ? { ...parseWith(ServiceUpdateInput, fields), host: parseHostPattern(host, { allowIp: true }).text }
        : parseWith(ServiceInput, { host: typedHost, ...fields });
    },
    back: (vault) => (host ? editServicePath(vault, host, values.auth_type) : newServicePath(vault, { custom: "1", type: values.auth_type })),
    rerender: (status) => (host ? rerenderEdit(values, status) : renderCustomNew(c, values, status)),
  });
}
