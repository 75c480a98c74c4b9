/** @jsxImportSource hono/jsx */
// The fields of a custom service's add/edit form, for ONE auth type (the page was asked for it; a
// "Change" link goes back to the choice of type): host, the type's own fields, the credential key as a
// choice of stored keys or a new one, description, rules, enabled. The types the broker mints or signs
// itself have their fieldsets in vault-service-minted.tsx. The rules box takes one rule per line
// (rules-text.ts); empty allows every method and path. No field holds a secret value.

import { FormField, Name, RulesBox } from "../ui/index.ts";
import { KeyChoice } from "./vault-service-keys.tsx";
import { EMPTY_MINTED, isMintedChoice, MINTED_CHOICES, MintedFields, type MintedFormValues } from "./vault-service-minted.tsx";

export interface ServiceFormValues extends MintedFormValues {
  host: string;
  auth_type: string;
  credential_key: string;
  username: string;
  header_name: string;
  header_prefix: string;
  query_param: string;
  path_template: string;
  description: string;
  enabled: boolean;
  /** The rules box as text, one rule per line (absent: empty, no rules). */
  rules?: string;
}

export const EMPTY_SERVICE: ServiceFormValues = {
  ...EMPTY_MINTED,
  host: "",
  auth_type: "bearer",
  credential_key: "",
  username: "",
  header_name: "",
  header_prefix: "",
  query_param: "",
  path_template: "",
  description: "",
  enabled: true,
};

const STATIC_CHOICES = [
  { type: "bearer", label: "Bearer token", help: "Authorization: Bearer <value>" },
  { type: "basic", label: "Basic auth", help: "Authorization: Basic, with the value as the password and an optional username" },
  { type: "header", label: "Custom header", help: "The value in a header you name, after an optional prefix (e.g. X-Api-Key)" },
  { type: "query", label: "Query parameter", help: "The value in a query parameter you name, e.g. ?key=<value>; any the agent sends is replaced" },
  { type: "path", label: "In the path", help: "The value in a path template before the agent's path, e.g. /bot{value}: /getMe goes as /bot<value>/getMe" },
  { type: "passthrough", label: "Passthrough", help: "No credential: the host is allowed and requests pass as the agent sent them" },
] as const;

/** Every auth type a person may choose, in the order the choice page lists them: sent as stored, then made by the broker. */
export const AUTH_CHOICES: readonly { type: string; label: string; help: string; minted?: true }[] = [
  ...STATIC_CHOICES,
  ...MINTED_CHOICES.map((c) => ({ ...c, minted: true as const })),
];

export function authChoiceOf(type: string) {
  return AUTH_CHOICES.find((c) => c.type === type);
}

/** The chosen type in words, with the link back to the choice of type. */
function TypeLine(props: { type: string; change: string }) {
  const choice = authChoiceOf(props.type);
  return (
    <div class="field type-line">
      <p>
        <span class="muted">How the credential is sent:</span> <strong id="auth-type-label">{choice?.label ?? props.type}</strong>{" "}
        <a href={props.change} id="change-type">
          Change type
        </a>
      </p>
      <p class="hint">{choice?.help}</p>
    </div>
  );
}

/** The fields a static type reads besides its key (none for bearer and passthrough). */
function StaticDetails(props: { v: ServiceFormValues }) {
  const v = props.v;
  switch (v.auth_type) {
    case "basic":
      return (
        <FormField
          label="Username (optional)"
          name="username"
          value={v.username}
          maxlength={256}
          autocomplete="off"
          hint="Sent with the value as the password. Empty for none."
        />
      );
    case "header":
      return (
        <div class="form-grid">
          <FormField label="Header name" name="header_name" value={v.header_name} required maxlength={64} autocomplete="off" placeholder="e.g. X-Api-Key" />
          <FormField
            label="Header prefix (optional)"
            name="header_prefix"
            value={v.header_prefix}
            maxlength={64}
            autocomplete="off"
            placeholder="e.g. Token"
            hint="Sent before the value; spaces count."
          />
        </div>
      );
    case "query":
      return <FormField label="Query parameter" name="query_param" value={v.query_param} required maxlength={64} autocomplete="off" placeholder="e.g. key" />;
    case "path":
      return (
        <FormField
          label="Path template"
          name="path_template"
          value={v.path_template}
          required
          maxlength={128}
          autocomplete="off"
          placeholder="e.g. /bot{value}"
          hint="Holds {value} once."
        />
      );
    default:
      return null;
  }
}

function HostField(props: { host: string; fixed?: boolean }) {
  if (props.fixed) {
    return (
      <p class="field">
        <strong>Host</strong> <Name>{props.host}</Name> <span class="muted small">(to serve another host, add a new service)</span>
      </p>
    );
  }
  return (
    <FormField
      label="Host"
      name="host"
      value={props.host}
      required
      maxlength={300}
      autocomplete="off"
      placeholder="e.g. api.stripe.com"
      hint="A host name, optionally with :port (port 443 otherwise). *.example.com matches one extra label; wildcards over a public suffix such as *.com are refused."
    />
  );
}

/** A custom service's fields for the type in `values.auth_type`; `change` is the address of the choice of type. */
export function ServiceFields(props: { values: ServiceFormValues; keys: readonly string[]; change: string; fixedHost?: boolean }) {
  const v = props.values;
  const type = v.auth_type;
  return (
    <>
      <input type="hidden" name="auth_type" value={type} />
      <TypeLine type={type} change={props.change} />
      <HostField host={v.host} fixed={props.fixedHost} />
      {isMintedChoice(type) ? (
        <MintedFields type={type} values={v} keys={props.keys} />
      ) : type === "passthrough" ? null : (
        <>
          <KeyChoice
            name="credential_key"
            label="Credential key"
            value={v.credential_key}
            keys={props.keys}
            placeholder="e.g. STRIPE_API_KEY"
            hint="The stored credential this host receives."
          />
          <StaticDetails v={v} />
        </>
      )}
      <FormField
        label="Description (optional)"
        name="description"
        value={v.description}
        maxlength={500}
        autocomplete="off"
        hint="What this service is for, for the people who read this list."
      />
      <RulesBox id="f-rules" name="rules" value={v.rules ?? ""} label="Allowed requests (optional)" intro="Limit what agents may do on this host." />
      <div class="field">
        <label class="choice" for="f-enabled">
          <input type="checkbox" name="enabled" id="f-enabled" checked={v.enabled} />
          <span>Enabled: agents may use it now</span>
        </label>
      </div>
    </>
  );
}
