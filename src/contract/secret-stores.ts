// Secret store connections and credentials by reference (issue 36): the bodies that create and change a
// connection, the reference a credential (or a proposal's slot) may hold instead of a value, and the views.
// A connection's secret fields are wrapped in Secret as soon as they are read and come back sealed,
// never in a view; everything else is shown as given.

import { z } from "zod";
import { parseReference, type SecretReference } from "../policy/index.ts";
export type { CredentialSource } from "../policy/index.ts";
import { parseWith, says } from "../schema-input.ts";
import { Secret } from "../secret.ts";
import type { SecretStoreKind, SecretStoreSettings } from "../store/index.ts";
import { plainText, urlCheckedBy } from "./fields.ts";
import { VaultName } from "./people-fields.ts";

const Time = z.string().describe("ISO 8601");

/** A credential's reference, as a person writes it: `<connection>:<path>#<field>`, with a version beside it. */
export const ReferenceInput = z
  .strictObject({
    ref: z.string(says("{field} must be text: <connection>:<path>#<field>")).describe("<connection>:<path>#<field>"),
    version: z.string(says("{field} must be text")).optional().describe("a version the store keeps (absent: the latest)"),
  })
  .transform((r, ctx): SecretReference => {
    const parsed = parseReference(r.ref, r.version);
    if ("problem" in parsed) {
      ctx.addIssue({ code: "custom", message: parsed.problem, path: ["ref"], input: r.ref });
      return z.NEVER;
    }
    return parsed;
  });

const SecretText = (what: string, max = 16_384) =>
  z
    .string(says(`{field} must be ${what}`))
    .min(1, says(`{field} must be ${what}`))
    .max(max, says(`{field} must be at most ${max} characters`))
    .transform((v) => new Secret(v));
const Setting = (max = 512) => plainText(max).min(1, says("{field} must not be empty"));
const MountName = z
  .string(says("{field} must be a mount path"))
  .regex(/^[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)*$/, says("{field} must be a mount path (letters, digits, _ . - and /)"));

const HttpsBase = (what: string) =>
  plainText(2048).transform(
    urlCheckedBy(`{field} must be an https:// URL (${what})`, (url) => {
      if (url.protocol !== "https:") return `{field} must be an https:// URL (${what}); a store is never read over plain HTTP`;
      if (url.username || url.password || url.hash || url.search)
        return "{field} must be a bare https://host[:port] address, without user:password@, ?query or #fragment";
      return null;
    }),
  );
const Address = HttpsBase("the store's address").transform((href) => href.replace(/\/+$/, ""));

const PEM_CERTS = /^(?:\s*-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----\s*)+$/;
const CaPem = z
  .string(says("{field} must be PEM text"))
  .max(65_536, says("{field} must be at most 64 KiB"))
  .regex(PEM_CERTS, says("{field} must be one or more PEM certificates (-----BEGIN CERTIFICATE-----)"));

const REGION = /^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$/;
const GCP_PROJECT = /^[a-z][a-z0-9-]{4,28}[a-z0-9]$|^\d{1,20}$/;
const AZURE_TENANT = /^[A-Za-z0-9.-]{1,253}$/;

/** What a secret's JSON key file must hold to sign a grant; the rest of it (private_key_id aside) is not kept apart. */
const ServiceAccountKey = SecretText("a service-account key file's JSON text", 65_536).transform((key, ctx) => {
  let parsed: Record<string, unknown> | undefined;
  try {
    parsed = JSON.parse(key.reveal()); // reveal: read for its public fields; the text stays sealed
  } catch {}
  const email = parsed?.client_email;
  if (!parsed || typeof email !== "string" || typeof parsed.private_key !== "string" || !parsed.private_key.includes("PRIVATE KEY")) {
    ctx.addIssue({ code: "custom", message: "{field} must be a service-account key file (JSON with client_email and private_key)", input: "[redacted]" });
    return z.NEVER;
  }
  return { key, clientEmail: email };
});

/** A connection's settings as read: the stored (non-secret) half and the sealed half. */
export interface SecretStoreBody {
  readonly settings: SecretStoreSettings;
  /** SECRET: the auth's secret fields by name; undefined: the auth is unchanged (a PATCH without auth). */
  readonly secrets: Readonly<Record<string, Secret>> | undefined;
}

const opt = <T extends z.ZodType>(s: T) => s.optional();

const VaultAuthInput = z.discriminatedUnion(
  "method",
  [
    z.strictObject({ method: z.literal("token"), token: SecretText("the Vault token") }),
    z.strictObject({
      method: z.literal("approle"),
      role_id: SecretText("the AppRole role id"),
      secret_id: SecretText("the AppRole secret id"),
      mount: opt(MountName),
    }),
    z.strictObject({ method: z.enum(["jwt", "kubernetes"]), role: Setting(256), token_file: Setting(4096), mount: opt(MountName) }),
  ],
  says('{field} must be {"method": "token" | "approle" | "jwt" | "kubernetes", …}'),
);
const AwsAuthInput = z.discriminatedUnion(
  "method",
  [
    z.strictObject({
      method: z.literal("keys"),
      access_key_id: SecretText("an AWS access key id", 128),
      secret_access_key: SecretText("an AWS secret access key", 256),
      session_token: opt(SecretText("an AWS session token")),
    }),
    z.strictObject({ method: z.literal("environment") }),
  ],
  says('{field} must be {"method": "keys" | "environment", …}'),
);
const GoogleAuthInput = z.discriminatedUnion(
  "method",
  [z.strictObject({ method: z.literal("service_account_key"), key: ServiceAccountKey })],
  says('{field} must be {"method": "service_account_key", "key": <the key file\'s JSON text>}'),
);
const AzureAuthInput = z.discriminatedUnion(
  "method",
  [
    z.strictObject({
      method: z.literal("client_credentials"),
      tenant: z.string(says("{field} must be a tenant id or domain")).regex(AZURE_TENANT, says("{field} must be a tenant id or domain")),
      client_id: Setting(128),
      client_secret: SecretText("the client secret", 1024),
    }),
  ],
  says('{field} must be {"method": "client_credentials", "tenant", "client_id", "client_secret"}'),
);

/** Each kind's own fields, `auth` optional (a PATCH keeps the stored one); the body's other fields are read apart. */
const KIND_FIELDS = {
  vault: { address: Address, namespace: opt(Setting(256)), mount: opt(MountName), ca_pem: opt(CaPem), auth: opt(VaultAuthInput) },
  aws: {
    region: z.string(says("{field} must be an AWS region (eu-west-1)")).regex(REGION, says("{field} must be an AWS region (eu-west-1)")),
    endpoint: opt(HttpsBase("a Secrets Manager endpoint")),
    sts_endpoint: opt(HttpsBase("an STS endpoint")),
    auth: opt(AwsAuthInput),
  },
  google: {
    project: z.string(says("{field} must be a project id or number")).regex(GCP_PROJECT, says("{field} must be a project id or number")),
    endpoint: opt(HttpsBase("a Secret Manager endpoint")),
    auth: opt(GoogleAuthInput),
  },
  azure: {
    vault_url: HttpsBase("the key vault's URL, https://<name>.vault.azure.net").transform((href) => href.replace(/\/+$/, "")),
    authority: opt(HttpsBase("a Microsoft Entra authority")),
    auth: opt(AzureAuthInput),
  },
} as const;

const COMMON = {
  refresh_seconds: z
    .number(says("{field} must be a number of seconds"))
    .int(says("{field} must be a whole number of seconds"))
    .min(10, says("{field} must be 10 to 86400"))
    .max(86_400, says("{field} must be 10 to 86400"))
    .optional()
    .describe("how often each value is read again (default 300)"),
  grace_seconds: z
    .number(says("{field} must be a number of seconds"))
    .int(says("{field} must be a whole number of seconds"))
    .min(0, says("{field} must be 0 to 86400"))
    .max(86_400, says("{field} must be 0 to 86400"))
    .optional()
    .describe("how long the last value serves past its interval while the store is unreachable (default 300; 0 fails closed)"),
};

export const SECRET_STORE_KINDS = ["vault", "aws", "google", "azure"] as const satisfies readonly SecretStoreKind[];
export const DEFAULT_REFRESH_SECONDS = 300;
export const DEFAULT_GRACE_SECONDS = 300;

/** Splits a kind's parsed fields into the stored settings and the sealed secrets. */
function split(kind: SecretStoreKind, fields: Record<string, unknown>): SecretStoreBody {
  const { auth, ...rest } = fields as { auth?: Record<string, unknown> } & Record<string, unknown>;
  const settings = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined));
  if (!auth) return { settings: { kind, ...settings } as SecretStoreSettings, secrets: undefined };
  const shown: Record<string, unknown> = {};
  const secrets: Record<string, Secret> = {};
  for (const [name, v] of Object.entries(auth)) {
    if (v instanceof Secret) secrets[name] = v;
    else if (name === "key" && v && typeof v === "object") {
      const sa = v as { key: Secret; clientEmail: string };
      secrets.key = sa.key;
      shown.client_email = sa.clientEmail;
    } else if (v !== undefined) shown[name] = v;
  }
  return { settings: { kind, ...settings, auth: shown } as SecretStoreSettings, secrets };
}

/** A kind's fields read from `input` (the body minus the common fields); `needAuth`: creating, so `auth` is required. */
export function readKindFields(kind: SecretStoreKind, input: Record<string, unknown>, needAuth: boolean): SecretStoreBody {
  const schema = z.strictObject(KIND_FIELDS[kind] as z.ZodRawShape).superRefine((v, ctx) => {
    if (needAuth && v.auth === undefined)
      ctx.addIssue({ code: "custom", path: ["auth"], message: "{field} is required: how the broker signs in to the store", input: v });
  });
  return split(kind, parseWith(schema, input) as Record<string, unknown>);
}

/**
 * Every kind's field, named so the document lists them and a field no kind has is refused by name; which
 * ones a connection takes is its kind's (readKindFields, strict per kind).
 */
const ANY_KIND_FIELDS = {
  address: z.unknown().optional().describe("vault: https://host[:port]"),
  namespace: z.unknown().optional().describe("vault: Enterprise/OpenBao namespace"),
  mount: z.unknown().optional().describe("vault: the KV v2 mount (default secret)"),
  ca_pem: z.unknown().optional().describe("vault: extra PEM roots for this address"),
  region: z.unknown().optional().describe("aws: the region"),
  endpoint: z.unknown().optional().describe("aws, google: another API endpoint"),
  sts_endpoint: z.unknown().optional().describe("aws: another STS endpoint (web identity)"),
  project: z.unknown().optional().describe("google: the project id or number"),
  vault_url: z.unknown().optional().describe("azure: https://<name>.vault.azure.net"),
  authority: z.unknown().optional().describe("azure: another Microsoft Entra authority"),
  auth: z.unknown().optional().describe('{"method", …}: the kind\'s sign-in (its secret fields are sealed, never shown)'),
};

export const SecretStoreCreateInput = z
  .strictObject({
    name: VaultName.describe("the connection's name (as vault names): what references start with"),
    kind: z.enum(SECRET_STORE_KINDS, says('{field} must be "vault", "aws", "google" or "azure"')),
    vault: VaultName.optional().describe("a vault's own connection (absent: the owner's, shared with vaults one by one)"),
    ...COMMON,
    ...ANY_KIND_FIELDS,
  })
  .transform((b) => {
    const { name, kind, vault, refresh_seconds, grace_seconds, ...given } = b;
    const fields = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
    return { name, kind, vault, refreshSeconds: refresh_seconds ?? DEFAULT_REFRESH_SECONDS, graceSeconds: grace_seconds ?? DEFAULT_GRACE_SECONDS, fields };
  });

export const SecretStorePatchInput = z
  .strictObject({
    ...COMMON,
    ...ANY_KIND_FIELDS,
    name: z.never(says("{field} cannot be changed: delete the connection and create another")).optional(),
    kind: z.never(says("{field} cannot be changed: delete the connection and create another")).optional(),
    vault: z.never(says("{field} cannot be changed: delete the connection and create another")).optional(),
  })
  .transform((b) => {
    const { refresh_seconds, grace_seconds, name: _n, kind: _k, vault: _v, ...given } = b;
    // Absent fields are left out (kept); a field given as null stays, to be removed.
    const fields = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined));
    return { refreshSeconds: refresh_seconds, graceSeconds: grace_seconds, fields };
  });

const PATH_PREFIX = "{field} must be a path prefix: 1 to 1024 printable characters without spaces";
/** PUT …/vaults/{vault}: an optional list of path prefixes the vault's references may read (absent: any path). */
export const SecretStoreShareInput = z
  .strictObject({
    paths: z
      .array(
        z
          .string(says(PATH_PREFIX))
          .min(1, says(PATH_PREFIX))
          .max(1024, says(PATH_PREFIX))
          .regex(/^[\x21-\x7e]+$/, says(PATH_PREFIX)),
        says("{field} must be a list of path prefixes"),
      )
      .min(1, says("{field} must name at least one prefix (leave it out to share every path)"))
      .max(50, says("{field} holds at most 50 prefixes"))
      .optional()
      .describe("references from the vault may read only paths starting with one of these, as the reference writes them (absent: any path)"),
  })
  .transform((b) => b.paths ?? null);

const ReferenceState = z.object({
  text: z.string(),
  connection: z.string(),
  path: z.string(),
  field: z.string().nullable(),
  version: z.string().nullable(),
  last_refresh: Time.nullable(),
  version_seen: z.string().nullable(),
  last_error: z.string().nullable(),
});
export const SecretStoreConnectionView = z.object({
  name: z.string(),
  kind: z.enum(SECRET_STORE_KINDS),
  vault: z.string().nullable(),
  shared_with: z.array(z.string()),
  share_paths: z.record(z.string(), z.array(z.string()).nullable()).describe("per vault shared with: the path prefixes its references may read (null: any)"),
  settings: z.record(z.string(), z.unknown()),
  auth: z.record(z.string(), z.unknown()),
  refresh_seconds: z.number(),
  grace_seconds: z.number(),
  created_at: Time,
  updated_at: Time,
  status: z.object({ references: z.number(), last_refresh: Time.nullable(), last_error: z.string().nullable() }),
  references: z.array(z.object({ vault: z.string(), key: z.string(), reference: ReferenceState })).optional(),
});
export const SecretStoreConnectionList = z.object({ connections: z.array(SecretStoreConnectionView) });
export const SecretStoreCheck = z.object({
  ok: z.boolean(),
  references: z.array(z.object({ vault: z.string(), key: z.string(), reference: ReferenceState })),
});
export { ReferenceState as CredentialReferenceView };

export type SecretStoreConnectionBody = z.output<typeof SecretStoreConnectionView>;
export type SecretStoreConnectionListBody = z.output<typeof SecretStoreConnectionList>;
export type SecretStoreCheckBody = z.output<typeof SecretStoreCheck>;
