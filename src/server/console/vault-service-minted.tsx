/** @jsxImportSource hono/jsx */
// The service form's fields for the auth types whose credential the broker mints or signs itself
// (OAuth 2.0 client credentials and refresh token, AWS Signature V4, GitHub App): the chosen type's
// fieldset only, the form text read back, the API auth object built from it, and a service's fields
// for its edit form. Key fields name vault credentials; no field here ever holds a credential's value.

import type { MintedAuthType } from "../../store/index.ts";
import type { ServiceAuth } from "../../workflows/index.ts";
import { KeyChoice, readKeyChoice } from "./vault-service-keys.tsx";

/** The form's fields for the minted types, named as the API names them; all kept as typed text. */
export interface MintedFormValues {
  token_url: string;
  client_id: string;
  client_secret: string;
  refresh_token: string;
  client_auth: string;
  scopes: string;
  audience: string;
  access_key_id: string;
  secret_access_key: string;
  session_token: string;
  region: string;
  service: string;
  app_id: string;
  installation_id: string;
  private_key: string;
  api_url: string;
}

export type MintedFormField = keyof MintedFormValues;

export const EMPTY_MINTED: MintedFormValues = {
  token_url: "",
  client_id: "",
  client_secret: "",
  refresh_token: "",
  client_auth: "basic",
  scopes: "",
  audience: "",
  access_key_id: "",
  secret_access_key: "",
  session_token: "",
  region: "",
  service: "",
  app_id: "",
  installation_id: "",
  private_key: "",
  api_url: "",
};

const FIELDS = Object.keys(EMPTY_MINTED) as MintedFormField[];

/** Which form fields each minted type reads (every other field is ignored for that type). */
const FIELDS_OF: Record<MintedAuthType, MintedFormField[]> = {
  oauth2_client_credentials: ["token_url", "client_id", "client_secret", "client_auth", "scopes", "audience"],
  oauth2_refresh: ["token_url", "client_id", "client_secret", "refresh_token", "client_auth"],
  aws_sigv4: ["access_key_id", "secret_access_key", "session_token", "region", "service"],
  github_app: ["app_id", "installation_id", "private_key", "api_url"],
};

export const MINTED_CHOICES = [
  {
    type: "oauth2_client_credentials",
    label: "OAuth 2.0 client credentials",
    help: "The broker gets an access token with a client ID and secret and sends it as Authorization: Bearer <token>",
  },
  {
    type: "oauth2_refresh",
    label: "OAuth 2.0 refresh token",
    help: "The broker refreshes an access token with a stored refresh token, and keeps the refresh token current when the provider rotates it",
  },
  { type: "aws_sigv4", label: "AWS Signature V4", help: "The broker signs each request with a stored access key; the secret key never leaves the broker" },
  {
    type: "github_app",
    label: "GitHub App",
    help: "The broker mints an installation token with the app's private key and sends it as Authorization: Bearer <token>",
  },
] as const;

export function isMintedChoice(type: string): type is MintedAuthType {
  return type in FIELDS_OF;
}

/** The minted fields that name a credential key (a KeyChoice each). */
const KEY_FIELDS = new Set<MintedFormField>([
  "client_id",
  "client_secret",
  "refresh_token",
  "access_key_id",
  "secret_access_key",
  "session_token",
  "private_key",
]);

/** The posted form's minted fields, trimmed (a select left alone reads as its default; a key choice as the key it names). */
export function readMintedValues(form: Record<string, string>): MintedFormValues {
  const out = { ...EMPTY_MINTED };
  for (const f of FIELDS) out[f] = KEY_FIELDS.has(f) ? readKeyChoice(form, f) : (form[f]?.trim() ?? out[f]);
  return out;
}

/** The API auth object for a minted type: only that type's fields, empty ones left out (so the API names a missing one). */
export function mintedAuthBody(type: MintedAuthType, v: MintedFormValues): Record<string, unknown> {
  const auth: Record<string, unknown> = { type };
  for (const f of FIELDS_OF[type]) {
    if (v[f] === "") continue;
    if (f === "client_auth") {
      if (v.client_auth !== "basic") auth.client_auth = v.client_auth; // basic is the default; stored absent
    } else if (f === "scopes") {
      auth.scopes = v.scopes.split(/[\s,]+/).filter(Boolean);
    } else auth[f] = v[f];
  }
  return auth;
}

/** A stored service's minted fields as form text, for its edit form. */
export function mintedValuesOf(a: ServiceAuth): MintedFormValues {
  const out = { ...EMPTY_MINTED };
  for (const f of FIELDS) {
    const value = a[f];
    if (Array.isArray(value)) out[f] = value.join(" ");
    else if (typeof value === "string") out[f] = value;
  }
  return out;
}

interface FieldProps {
  readonly name: MintedFormField;
  readonly label: string;
  readonly placeholder?: string;
  readonly hint: string;
  readonly maxlength?: number;
  readonly optional?: boolean;
  /** Spans the whole row (a URL). */
  readonly wide?: boolean;
}

function TextInput(props: FieldProps & { value: string }) {
  const id = `f-${props.name}`;
  return (
    <div class={props.wide ? "field field-wide" : "field"}>
      <label for={id}>{props.label}</label>
      <input
        type="text"
        id={id}
        name={props.name}
        value={props.value}
        maxlength={props.maxlength ?? 256}
        autocomplete="off"
        spellcheck={false}
        placeholder={props.placeholder}
        aria-describedby={`${id}-hint`}
      />
      <p class="hint" id={`${id}-hint`}>
        {props.hint}
      </p>
    </div>
  );
}

function ClientAuthSelect(props: { value: string }) {
  return (
    <div class="field">
      <label for="f-client_auth">Client authentication</label>
      <select id="f-client_auth" name="client_auth" aria-describedby="f-client_auth-hint">
        <option value="basic" selected={props.value !== "post"}>
          HTTP Basic header (default)
        </option>
        <option value="post" selected={props.value === "post"}>
          In the request body
        </option>
      </select>
      <p class="hint" id="f-client_auth-hint">
        How the client ID and secret reach the token endpoint.
      </p>
    </div>
  );
}

/** Each minted type's fields, in form order: a key field (a KeyChoice), a setting, or the client authentication select. */
/** The OAuth types' shared fields: the token endpoint, and the client's id, secret and how it authenticates. */
const TOKEN_URL_FIELD = {
  name: "token_url",
  label: "Token URL",
  wide: true,
  maxlength: 2048,
  placeholder: "e.g. https://auth.example.com/oauth/token",
  hint: "The provider's token endpoint (https).",
} as const;
const OAUTH_CLIENT_FIELDS = [
  { name: "client_id", label: "Client ID (credential key)", isKey: true, placeholder: "e.g. EXAMPLE_CLIENT_ID", hint: "The stored client ID." },
  { name: "client_secret", label: "Client secret (credential key)", isKey: true, placeholder: "e.g. EXAMPLE_CLIENT_SECRET", hint: "The stored client secret." },
  { name: "client_auth", label: "Client authentication", hint: "" },
] as const;

const LAYOUT: Record<MintedAuthType, { legend: string; fields: (FieldProps & { isKey?: boolean })[] }> = {
  oauth2_client_credentials: {
    legend: "Token endpoint and client",
    fields: [
      TOKEN_URL_FIELD,
      ...OAUTH_CLIENT_FIELDS,
      { name: "scopes", label: "Scopes (optional)", maxlength: 2048, placeholder: "e.g. read:orders write:orders", hint: "Separated by spaces or commas." },
      { name: "audience", label: "Audience (optional)", maxlength: 512, hint: "Some providers (Auth0, Okta) require it." },
    ],
  },
  oauth2_refresh: {
    legend: "Token endpoint, refresh token and client",
    fields: [
      TOKEN_URL_FIELD,
      {
        name: "refresh_token",
        label: "Refresh token (credential key)",
        isKey: true,
        placeholder: "e.g. EXAMPLE_REFRESH_TOKEN",
        hint: "Replaced in the vault when the provider rotates it.",
      },
      ...OAUTH_CLIENT_FIELDS,
    ],
  },
  aws_sigv4: {
    legend: "Signing keys",
    fields: [
      {
        name: "access_key_id",
        label: "Access key ID (credential key)",
        isKey: true,
        placeholder: "e.g. AWS_ACCESS_KEY_ID",
        hint: "Sent in each request's signature.",
      },
      {
        name: "secret_access_key",
        label: "Secret access key (credential key)",
        isKey: true,
        placeholder: "e.g. AWS_SECRET_ACCESS_KEY",
        hint: "Only signs; never sent.",
      },
      {
        name: "session_token",
        label: "Session token (optional credential key)",
        isKey: true,
        optional: true,
        placeholder: "e.g. AWS_SESSION_TOKEN",
        hint: "For temporary credentials only.",
      },
      {
        name: "region",
        label: "Region (optional)",
        maxlength: 64,
        placeholder: "e.g. us-east-1",
        hint: "Empty: read from the host, as in s3.eu-west-1.amazonaws.com.",
      },
      { name: "service", label: "Service (optional)", maxlength: 64, placeholder: "e.g. s3", hint: "Empty: read from the host." },
    ],
  },
  github_app: {
    legend: "The app and its installation",
    fields: [
      { name: "app_id", label: "App ID", maxlength: 64, placeholder: "e.g. 123456", hint: "The app's ID or client ID, from its settings page." },
      {
        name: "installation_id",
        label: "Installation ID",
        maxlength: 20,
        placeholder: "e.g. 45678901",
        hint: "The number at the end of the installation's settings URL.",
      },
      {
        name: "private_key",
        label: "Private key (credential key)",
        isKey: true,
        placeholder: "e.g. GITHUB_APP_PRIVATE_KEY",
        hint: "The app's PEM private key; it never leaves the broker.",
      },
      {
        name: "api_url",
        label: "API URL (optional)",
        wide: true,
        maxlength: 2048,
        placeholder: "https://api.github.com",
        hint: "GitHub Enterprise Server: https://<host>/api/v3.",
      },
    ],
  },
};

/** The chosen minted type's fieldset (only its fields: the page was asked for this type). */
export function MintedFields(props: { type: MintedAuthType; values: MintedFormValues; keys: readonly string[] }) {
  const { legend, fields } = LAYOUT[props.type];
  const v = props.values;
  return (
    <fieldset id={`details-${props.type}`}>
      <legend>{legend}</legend>
      <div class="form-grid">
        {fields.map((f) =>
          f.name === "client_auth" ? (
            <ClientAuthSelect value={v.client_auth} />
          ) : f.isKey ? (
            <KeyChoice name={f.name} label={f.label} value={v[f.name]} keys={props.keys} placeholder={f.placeholder} hint={f.hint} optional={f.optional} />
          ) : (
            <TextInput {...f} value={v[f.name]} />
          ),
        )}
      </div>
    </fieldset>
  );
}
