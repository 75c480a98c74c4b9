// The secret store kinds the console offers and, for each, its settings and its sign-in methods with
// their fields, named as the API names them (POST and PATCH /v1/secret-stores): the one description
// the add and change forms, the pages' summaries and the form reading all follow. Data and lookups
// only: which field is a secret is said here, and nothing here holds a value.

import type { SecretStoreKind } from "../../store/index.ts";

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

/** A setting's or sign-in field's value when it is a string, else undefined. */
export const stringOf = (v: unknown) => (typeof v === "string" ? v : undefined);
