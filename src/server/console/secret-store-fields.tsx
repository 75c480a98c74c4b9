/** @jsxImportSource hono/jsx */
// The fields of a secret store connection's forms, by kind and sign-in method, and how a posted form
// becomes the body the API takes (POST and PATCH /v1/secret-stores): the console reads it with the same
// schemas (SecretStoreCreateInput, SecretStorePatchInput, then readKindFields) and hands the domain the
// same result. Secret fields (tokens, secret ids, keys, client secrets) are password inputs: never
// prefilled, never shown again, never put in a flash or a URL.

import type { SecretStoreKind } from "../../store/index.ts";
import { FormField, Name } from "../ui/index.ts";

export interface FieldSpec {
  /** The body's field name (an auth field's name inside `auth`). */
  readonly name: string;
  readonly label: string;
  readonly required?: boolean;
  /** A write-only secret: a password input, sealed by the broker. */
  readonly secret?: boolean;
  readonly multiline?: boolean;
  readonly placeholder?: string;
  readonly hint?: string;
}

export interface MethodSpec {
  readonly method: string;
  readonly label: string;
  readonly help: string;
  readonly fields: readonly FieldSpec[];
  /** Signs in as the broker itself (a platform token file, its own cloud identity): the owner's connections only. */
  readonly asBroker?: true;
}

export interface KindSpec {
  readonly kind: SecretStoreKind;
  readonly label: string;
  /** A word for a narrow place (a connection picker's option). */
  readonly short: string;
  readonly help: string;
  readonly settings: readonly FieldSpec[];
  readonly methods: readonly MethodSpec[];
}

const VAULT_MOUNT_HINT = "Where the auth method is enabled; empty for its default path.";
const TOKEN_FILE_HINT = "Read again at every login. Only a file the operator listed in BROKER_SECRET_STORE_TOKEN_FILES.";

export const KINDS: readonly KindSpec[] = [
  {
    kind: "vault",
    short: "Vault",
    label: "HashiCorp Vault / OpenBao",
    help: "A KV version 2 secrets engine",
    settings: [
      { name: "address", label: "Address", required: true, placeholder: "https://vault.example.com:8200", hint: "https:// and the host, with its port." },
      { name: "namespace", label: "Namespace (optional)", placeholder: "e.g. team-a", hint: "Vault Enterprise and OpenBao namespaces; empty for none." },
      { name: "mount", label: "KV v2 mount (optional)", placeholder: "secret", hint: "Where the KV v2 engine is mounted; empty for secret." },
      {
        name: "ca_pem",
        label: "Extra CA certificates (optional)",
        multiline: true,
        placeholder: "-----BEGIN CERTIFICATE-----",
        hint: "PEM roots trusted for this address only, when its certificate is not from a public CA.",
      },
    ],
    methods: [
      {
        method: "token",
        label: "Token",
        help: "A Vault token with read access to the paths",
        fields: [{ name: "token", label: "Token", secret: true, required: true }],
      },
      {
        method: "approle",
        label: "AppRole",
        help: "A role id and a secret id; the broker logs in and renews",
        fields: [
          { name: "role_id", label: "Role id", secret: true, required: true },
          { name: "secret_id", label: "Secret id", secret: true, required: true },
          { name: "mount", label: "AppRole mount (optional)", placeholder: "approle", hint: VAULT_MOUNT_HINT },
        ],
      },
      {
        method: "jwt",
        asBroker: true,
        label: "JWT",
        help: "A JWT read from a file at every login (a workload identity token)",
        fields: [
          { name: "role", label: "Role", required: true },
          { name: "token_file", label: "Token file", required: true, placeholder: "/var/run/secrets/tokens/vault-token", hint: TOKEN_FILE_HINT },
          { name: "mount", label: "JWT mount (optional)", placeholder: "jwt", hint: VAULT_MOUNT_HINT },
        ],
      },
      {
        method: "kubernetes",
        asBroker: true,
        label: "Kubernetes",
        help: "The pod's service account token, read at every login",
        fields: [
          { name: "role", label: "Role", required: true },
          {
            name: "token_file",
            label: "Token file",
            required: true,
            placeholder: "/var/run/secrets/kubernetes.io/serviceaccount/token",
            hint: TOKEN_FILE_HINT,
          },
          { name: "mount", label: "Kubernetes mount (optional)", placeholder: "kubernetes", hint: VAULT_MOUNT_HINT },
        ],
      },
    ],
  },
  {
    kind: "aws",
    short: "AWS",
    label: "AWS Secrets Manager",
    help: "Secrets of one region",
    settings: [
      { name: "region", label: "Region", required: true, placeholder: "eu-west-1" },
      { name: "endpoint", label: "Endpoint (optional)", placeholder: "https://secretsmanager.eu-west-1.amazonaws.com", hint: "Empty for the region's own." },
      {
        name: "sts_endpoint",
        label: "STS endpoint (optional)",
        placeholder: "https://sts.eu-west-1.amazonaws.com",
        hint: "For web identity; empty for the region's own.",
      },
    ],
    methods: [
      {
        method: "keys",
        label: "Access key",
        help: "An access key id and secret access key",
        fields: [
          { name: "access_key_id", label: "Access key id", secret: true, required: true },
          { name: "secret_access_key", label: "Secret access key", secret: true, required: true },
          { name: "session_token", label: "Session token (optional)", secret: true },
        ],
      },
      {
        method: "environment",
        asBroker: true,
        label: "The broker's environment",
        help: "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a web identity token file with AWS_ROLE_ARN",
        fields: [],
      },
    ],
  },
  {
    kind: "google",
    short: "Google",
    label: "Google Secret Manager",
    help: "Secrets of one project",
    settings: [
      { name: "project", label: "Project", required: true, placeholder: "my-project-123456", hint: "The project id or number." },
      { name: "endpoint", label: "Endpoint (optional)", placeholder: "https://secretmanager.googleapis.com", hint: "Empty for Google's own." },
    ],
    methods: [
      {
        method: "service_account_key",
        label: "Service-account key",
        help: "A service account's JSON key file",
        fields: [{ name: "key", label: "Key file (JSON)", secret: true, required: true, hint: "Paste the whole JSON file's text." }],
      },
    ],
  },
  {
    kind: "azure",
    short: "Azure",
    label: "Azure Key Vault",
    help: "Secrets of one key vault",
    settings: [
      { name: "vault_url", label: "Vault URL", required: true, placeholder: "https://my-vault.vault.azure.net" },
      {
        name: "authority",
        label: "Authority (optional)",
        placeholder: "https://login.microsoftonline.com",
        hint: "Another Microsoft Entra authority; empty for the public cloud.",
      },
    ],
    methods: [
      {
        method: "client_credentials",
        label: "Client credentials",
        help: "An app registration's tenant, client id and client secret",
        fields: [
          { name: "tenant", label: "Tenant", required: true, placeholder: "contoso.onmicrosoft.com or its id" },
          { name: "client_id", label: "Client id", required: true },
          { name: "client_secret", label: "Client secret", secret: true, required: true },
        ],
      },
    ],
  },
];

export function kindSpec(kind: string | undefined): KindSpec | undefined {
  return KINDS.find((k) => k.kind === kind);
}

export function methodSpec(kind: KindSpec | undefined, method: string | undefined): MethodSpec | undefined {
  return kind?.methods.find((m) => m.method === method);
}

/** The sign-in methods a connection may use: a vault's own never signs in as the broker itself. */
export function methodsFor(kind: KindSpec, ownersConnection: boolean): readonly MethodSpec[] {
  return ownersConnection ? kind.methods : kind.methods.filter((m) => !m.asBroker);
}

/** An auth field's name in the form: apart from the settings (a Vault connection has a `mount` of each). */
export const authInput = (name: string) => `auth_${name}`;

const COMMON_LABELS: Record<string, string> = {
  name: "Name",
  refresh_seconds: "Refresh every (seconds)",
  grace_seconds: "Grace (seconds)",
  kind: "Kind",
  auth: "Sign-in",
};

/** The label of a body field the API named (`address`, `auth.token`), for a person reading the error. */
export function fieldLabel(kind: KindSpec | undefined, field: string | undefined): string | undefined {
  if (!field) return undefined;
  if (COMMON_LABELS[field]) return COMMON_LABELS[field];
  const [, authName] = /^auth\.(\w+)$/.exec(field) ?? [];
  if (authName)
    return kind?.methods
      .flatMap((m) => m.fields)
      .find((f) => f.name === authName)
      ?.label.replace(/ \(optional\)$/, "");
  return kind?.settings.find((f) => f.name === field)?.label.replace(/ \(optional\)$/, "");
}

/** The form input an API field name belongs to (`auth.token` → `auth_token`), to mark it invalid. */
export function inputOf(field: string | undefined): string | undefined {
  if (!field) return undefined;
  const [, authName] = /^auth\.(\w+)$/.exec(field) ?? [];
  return authName ? authInput(authName) : field === "auth" ? undefined : field;
}

/** The API's message with the field named by its label ("auth.token must be …" → "Token must be …"). */
export function labelled(kind: KindSpec | undefined, text: string, field: string | undefined): string {
  const label = fieldLabel(kind, field);
  if (!label || !field) return text;
  for (const prefix of [`${field} `, `${field}: `]) {
    if (text.toLowerCase().startsWith(prefix.toLowerCase())) return `${label}${prefix.endsWith(": ") ? ": " : " "}${text.slice(prefix.length)}`;
  }
  return text;
}

/** What a refused form shows again: the non-secret fields as typed, and which input the refusal names. */
export interface TypedForm {
  readonly values: Readonly<Record<string, string>>;
  readonly invalid?: string;
  readonly error?: string;
}

/** The form's non-secret fields as typed (secret ones are never kept: they are typed again). */
export function keepTyped(form: Record<string, string>, kind: KindSpec | undefined, method: MethodSpec | undefined): Record<string, string> {
  const secret = new Set((method?.fields ?? []).filter((f) => f.secret).map((f) => authInput(f.name)));
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(form)) if (name !== "csrf" && !secret.has(name) && !(kind && isSecretInput(kind, name))) kept[name] = value;
  return kept;
}

function isSecretInput(kind: KindSpec, name: string): boolean {
  return kind.methods.some((m) => m.fields.some((f) => f.secret && authInput(f.name) === name));
}

function Field(props: { spec: FieldSpec; input: string; value?: string; typed?: TypedForm; tokenFiles?: readonly string[]; keepSecret?: boolean }) {
  const { spec } = props;
  const error = props.typed?.invalid === props.input ? props.typed.error : undefined;
  if (spec.name === "token_file" && props.tokenFiles?.length) {
    const chosen = props.typed ? props.typed.values[props.input] : props.value;
    return (
      <div class={`field${error ? " field-invalid" : ""}`}>
        <label for={`f-${props.input}`}>{spec.label}</label>
        <select id={`f-${props.input}`} name={props.input} aria-describedby={`f-${props.input}-hint`}>
          {props.tokenFiles.map((f) => (
            <option value={f} selected={f === chosen}>
              {f}
            </option>
          ))}
        </select>
        <p class="hint" id={`f-${props.input}-hint`}>
          The token files the operator listed in BROKER_SECRET_STORE_TOKEN_FILES; read again at every login.
        </p>
        {error ? <p class="field-error">{error}</p> : null}
      </div>
    );
  }
  if (spec.secret)
    return (
      <FormField
        label={spec.label}
        name={props.input}
        type="password"
        autocomplete="new-password"
        required={spec.required && !props.keepSecret}
        maxlength={65_536}
        hint={
          props.keepSecret ? "Empty keeps the current one. Sealed by the broker and never shown." : (spec.hint ?? "Sealed by the broker and never shown again.")
        }
        error={error}
      />
    );
  return (
    <FormField
      label={spec.label}
      name={props.input}
      value={props.typed ? (props.typed.values[props.input] ?? "") : props.value}
      required={spec.required}
      multiline={spec.multiline}
      placeholder={spec.placeholder}
      autocomplete="off"
      hint={spec.hint}
      error={error}
    />
  );
}

/** The kind's own settings (address, region, project, vault URL and their options), prefilled from `current`. */
export function SettingsFields(props: { kind: KindSpec; current?: Record<string, unknown>; typed?: TypedForm }) {
  return (
    <div class="form-grid">
      {props.kind.settings.map((spec) => (
        <div class={spec.multiline ? "field-wide" : undefined}>
          <Field spec={spec} input={spec.name} value={stringOf(props.current?.[spec.name])} typed={props.typed} />
        </div>
      ))}
    </div>
  );
}

/** The sign-in method's fields; `current` prefills the non-secret ones (role, token file, mount, tenant, client id). */
export function AuthFields(props: {
  method: MethodSpec;
  current?: Record<string, unknown>;
  typed?: TypedForm;
  tokenFiles?: readonly string[];
  /** The current sign-in's secrets are kept when left empty (a change form of the same method). */
  keepSecrets?: boolean;
}) {
  if (props.method.fields.length === 0)
    return (
      <p class="note" id="auth-nothing">
        Nothing to type: {props.method.help}.
      </p>
    );
  return (
    <div class="form-grid">
      {props.method.fields.map((spec) => (
        <Field
          spec={spec}
          input={authInput(spec.name)}
          value={stringOf(props.current?.[spec.name])}
          typed={props.typed}
          tokenFiles={props.tokenFiles}
          keepSecret={props.keepSecrets}
        />
      ))}
    </div>
  );
}

/** How often values are read again and how long the last one serves while the store cannot be reached. */
export function TimingFields(props: { refresh?: number; grace?: number; typed?: TypedForm }) {
  const value = (name: string, n: number | undefined) => (props.typed ? (props.typed.values[name] ?? "") : n === undefined ? "" : String(n));
  const error = (name: string) => (props.typed?.invalid === name ? props.typed.error : undefined);
  return (
    <div class="form-grid">
      <FormField
        label="Refresh every (seconds)"
        name="refresh_seconds"
        type="number"
        value={value("refresh_seconds", props.refresh)}
        placeholder="300"
        hint="10 to 86400. Each value is read again this often; a rotation reaches requests within one interval."
        error={error("refresh_seconds")}
      />
      <FormField
        label="Grace (seconds)"
        name="grace_seconds"
        type="number"
        value={value("grace_seconds", props.grace)}
        placeholder="300"
        hint="0 to 86400. How long the last value keeps serving while the store cannot be reached; 0 fails at once."
        error={error("grace_seconds")}
      />
    </div>
  );
}

const stringOf = (v: unknown) => (typeof v === "string" ? v : undefined);

/** A number typed in a form, or undefined when left empty; what is not a number is refused by the schema, naming the field. */
function numberOf(raw: string | undefined): number | undefined {
  const t = (raw ?? "").trim();
  return t === "" ? undefined : Number(t);
}

/** A secret as typed (never trimmed: it is the store's); other fields trimmed. Empty: undefined. */
function authBody(method: MethodSpec, form: Record<string, string>): Record<string, unknown> {
  const auth: Record<string, unknown> = { method: method.method };
  for (const f of method.fields) {
    const raw = form[authInput(f.name)] ?? "";
    const v = f.secret ? raw : raw.trim();
    if (v !== "" || f.required) auth[f.name] = v;
  }
  return auth;
}

/** The body of POST /v1/secret-stores as the add form gives it (`vault`: a vault's own connection). */
export function createBody(kind: KindSpec, method: MethodSpec, form: Record<string, string>, vault?: string): Record<string, unknown> {
  const body: Record<string, unknown> = { name: (form.name ?? "").trim(), kind: kind.kind };
  if (vault !== undefined) body.vault = vault;
  const refresh = numberOf(form.refresh_seconds);
  const grace = numberOf(form.grace_seconds);
  if (refresh !== undefined) body.refresh_seconds = refresh;
  if (grace !== undefined) body.grace_seconds = grace;
  for (const f of kind.settings) {
    const v = (form[f.name] ?? "").trim();
    if (v !== "" || f.required) body[f.name] = v;
  }
  body.auth = authBody(method, form);
  return body;
}

/**
 * The body of PATCH /v1/secret-stores/{name} from the change form: the settings (an emptied option is
 * removed, as null) and, when a sign-in is typed, the new auth replacing the old one whole. A sign-in is
 * typed when its method is another than the current one, when any of its secrets is filled in, or when it
 * has no secret at all (its fields are all shown, so sending them again changes nothing else).
 */
export function changeBody(kind: KindSpec, method: MethodSpec, currentMethod: string | undefined, form: Record<string, string>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const refresh = numberOf(form.refresh_seconds);
  const grace = numberOf(form.grace_seconds);
  if (refresh !== undefined) body.refresh_seconds = refresh;
  if (grace !== undefined) body.grace_seconds = grace;
  for (const f of kind.settings) {
    const v = (form[f.name] ?? "").trim();
    body[f.name] = v === "" && !f.required ? null : v;
  }
  const secrets = method.fields.filter((f) => f.secret);
  const typed = method.method !== currentMethod || secrets.length === 0 || secrets.some((f) => (form[authInput(f.name)] ?? "") !== "");
  if (typed) body.auth = authBody(method, form);
  return body;
}

/** Where a connection points, in a few words: the address, region, project or vault URL and their options. */
export function whereOf(kind: SecretStoreKind, settings: Record<string, unknown>): string {
  const s = (k: string) => stringOf(settings[k]);
  switch (kind) {
    case "vault":
      return [s("address"), s("namespace") && `namespace ${s("namespace")}`, s("mount") && `mount ${s("mount")}`].filter(Boolean).join(", ");
    case "aws":
      return [s("region"), s("endpoint")].filter(Boolean).join(", ");
    case "google":
      return [`project ${s("project") ?? ""}`, s("endpoint")].filter(Boolean).join(", ");
    case "azure":
      return s("vault_url") ?? "";
  }
}

/** The sign-in in words: the method and its non-secret fields (never a secret: the view holds none). */
export function AuthSummary(props: { kind: SecretStoreKind; auth: Record<string, unknown> }) {
  const method = methodSpec(kindSpec(props.kind), stringOf(props.auth.method));
  const shown = Object.entries(props.auth).filter(([k, v]) => k !== "method" && typeof v === "string");
  return (
    <>
      {method?.label ?? stringOf(props.auth.method) ?? "unknown"}
      {shown.map(([k, v]) => (
        <span class="small">
          {" "}
          · {labelOfAuth(props.kind, k)} <Name>{v as string}</Name>
        </span>
      ))}
    </>
  );
}

function labelOfAuth(kind: SecretStoreKind, name: string): string {
  if (name === "client_email") return "service account";
  const spec = kindSpec(kind)
    ?.methods.flatMap((m) => m.fields)
    .find((f) => f.name === name);
  return (spec?.label ?? name).replace(/ \(optional\)$/, "").toLowerCase();
}
