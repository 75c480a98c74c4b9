/** @jsxImportSource hono/jsx */
// The fields of the add/edit service form: host, how the credential is sent (every auth type),
// which credential, the username or header name the type needs, description, enabled. Works
// without JavaScript: every field is always there, each hint says which auth type uses it, and the
// server reads only the fields of the chosen type. The types the broker mints or signs itself have
// their own fieldsets (vault-service-minted.tsx). The rules box takes one rule per line
// (rules-text.ts); empty allows every method and path. No field holds a secret value.

import { RulesBox } from "../ui/index.ts";
import { FormField, Name } from "../ui/index.ts";
import { EMPTY_MINTED, KeyNameInput, MINTED_CHOICES, MintedFields, type MintedFormValues } from "./vault-service-minted.tsx";

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

const EMPTY: ServiceFormValues = {
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

const AUTH_TYPES = [
  { type: "bearer", label: "Bearer token", help: "Authorization: Bearer <value>" },
  { type: "basic", label: "Basic auth", help: "Authorization: Basic, with the value as the password and an optional username" },
  { type: "header", label: "Custom header", help: "The value in a header you name, after an optional prefix (e.g. X-Api-Key)" },
  { type: "query", label: "Query parameter", help: "The value in a query parameter you name, e.g. ?key=<value>; any the agent sends is replaced" },
  { type: "path", label: "In the path", help: "The value in a path template before the agent's path, e.g. /bot{value}: /getMe goes as /bot<value>/getMe" },
  { type: "passthrough", label: "Passthrough", help: "No credential: the host is allowed and requests pass as the agent sent them" },
] as const;

function Choice(props: { type: string; label: string; help: string; value: string }) {
  return (
    <label class="choice" for={`auth-${props.type}`}>
      <input type="radio" name="auth_type" id={`auth-${props.type}`} value={props.type} checked={props.value === props.type} required />
      <span>
        <strong>{props.label}</strong> <span class="muted small">{props.help}</span>
      </span>
    </label>
  );
}

function AuthTypeChoice(props: { value: string }) {
  return (
    <fieldset class="choices">
      <legend>How the credential is sent</legend>
      {AUTH_TYPES.map((a) => (
        <Choice {...a} value={props.value} />
      ))}
      <p class="hint" id="minted-types">
        Or the broker makes or signs the credential itself from stored keys (fill in the details further down):
      </p>
      {MINTED_CHOICES.map((a) => (
        <Choice {...a} value={props.value} />
      ))}
    </fieldset>
  );
}

function KeyField(props: { value: string; keys: string[] }) {
  return (
    <div class="field">
      <label for="f-credential_key">Credential key</label>
      <KeyNameInput name="credential_key" value={props.value} placeholder="e.g. STRIPE_API_KEY" />
      <datalist id="credential-keys">
        {props.keys.map((k) => (
          <option value={k} />
        ))}
      </datalist>
      <p class="hint" id="f-credential_key-hint">
        Which stored credential this host receives (for the first five types above; the others name their keys in their details).{" "}
        {props.keys.length ? (
          <>
            Stored now:{" "}
            {props.keys.map((k, i) => (
              <>
                {i ? ", " : ""}
                <Name>{k}</Name>
              </>
            ))}
            .
          </>
        ) : (
          "No credential is stored yet: set it on the Credentials tab."
        )}
      </p>
    </div>
  );
}

export function ServiceFields(props: { values?: ServiceFormValues; keys: string[]; fixedHost?: boolean }) {
  const v = props.values ?? EMPTY;
  return (
    <>
      {props.fixedHost ? (
        <p class="field">
          <strong>Host</strong> <Name>{v.host}</Name> <span class="muted small">(to serve another host, add a new service)</span>
        </p>
      ) : (
        <FormField
          label="Host"
          name="host"
          value={v.host}
          required
          maxlength={300}
          autocomplete="off"
          placeholder="e.g. api.stripe.com"
          hint="A host name, optionally with :port (port 443 otherwise). *.example.com matches one extra label; wildcards over a public suffix such as *.com are refused."
        />
      )}
      <AuthTypeChoice value={v.auth_type} />
      <KeyField value={v.credential_key} keys={props.keys} />
      <fieldset>
        <legend>Details for Basic auth and Custom header</legend>
        <div class="form-inline">
          <FormField
            label="Username (optional)"
            name="username"
            value={v.username}
            maxlength={256}
            autocomplete="off"
            hint="Basic auth only. Empty for none."
          />
          <FormField
            label="Header name"
            name="header_name"
            value={v.header_name}
            maxlength={64}
            autocomplete="off"
            placeholder="e.g. X-Api-Key"
            hint="Custom header only."
          />
          <FormField
            label="Header prefix (optional)"
            name="header_prefix"
            value={v.header_prefix}
            maxlength={64}
            autocomplete="off"
            placeholder="e.g. Token"
            hint="Custom header only; spaces count."
          />
        </div>
      </fieldset>
      <fieldset>
        <legend>Details for a credential in the URL</legend>
        <div class="form-inline">
          <FormField
            label="Query parameter"
            name="query_param"
            value={v.query_param}
            maxlength={64}
            autocomplete="off"
            placeholder="e.g. key"
            hint="Query parameter only."
          />
          <FormField
            label="Path template"
            name="path_template"
            value={v.path_template}
            maxlength={128}
            autocomplete="off"
            placeholder="e.g. /bot{value}"
            hint="In the path only: holds {value} once."
          />
        </div>
      </fieldset>
      <MintedFields values={v} />
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
