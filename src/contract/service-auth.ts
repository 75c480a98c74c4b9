// A service's auth as a request states it: the type decides which fields apply (docs/api.md,
// Services). Static types read the fields they use and ignore the other auth field names (a client
// may send a form's every field); the minted types refuse a field they do not take, naming the ones
// they do. A name that is no auth field at all is refused for every type: a misspelt security setting
// must never be dropped silently.

import { z } from "zod";
import { MINTED_AUTH_TYPES, readPathTemplate, readQueryParam } from "../policy/index.ts";
import { parsedBy, says } from "../schema-input.ts";
import type { AuthType, ProposedAuth } from "../store/index.ts";
import { HttpsEndpoint, KeyName, omittedWhenEmpty, plainText } from "./fields.ts";

export const AUTH_TYPES: readonly AuthType[] = ["bearer", "basic", "header", "query", "path", "passthrough", ...MINTED_AUTH_TYPES];

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
/** Headers the broker owns or that frame the message: never a credential slot. */
const RESERVED_HEADERS = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
  "proxy-authorization",
  "proxy-authenticate",
  "proxy-connection",
  "x-vault",
  "cookie",
  "set-cookie",
]);
const HEADER = "{field} must be a header name the broker does not reserve";
const PREFIX = "{field} must be short text of printable ASCII characters (what a header value may hold)";
const USERNAME = "{field} must be text without ':' or line breaks";
const SCOPES = "{field} must be a list of at most 50 scope names (no spaces or quotes)";
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/; // RFC 6749 §3.3
const AWS_NAME = /^[a-z0-9-]{1,64}$/;
const QUERY_PARAM = "{field} must be a query parameter name of letters, digits, _ . ~ or - (at most 64)";
const TEMPLATE = "{field} must be text of at most 128 characters, such as /bot{value}";
const APP_ID = '{field} must be the app\'s id (e.g. "123456") or client id';

const HeaderName = z
  .string(says(HEADER))
  .regex(HEADER_NAME, says(HEADER))
  .refine((h) => !RESERVED_HEADERS.has(h.toLowerCase()), says(HEADER))
  .transform((h) => h.toLowerCase());
// A header value's visible characters only: the prefix is sent as header bytes, and it is shown to the
// person approving, where a bidi or invisible character could reorder what they read.
const Prefix = z
  .string(says(PREFIX))
  .max(64, says(PREFIX))
  .regex(/^[\x20-\x7e\t]+$/, says(PREFIX));
const Username = z
  .string(says(USERNAME))
  .max(256, says(USERNAME))
  .refine((u) => !/[:\r\n]/.test(u), says(USERNAME));
const ClientAuth = z.enum(["basic", "post"], says('{field} must be "basic" or "post"'));
const Scopes = z
  .array(z.unknown(), says(SCOPES))
  .max(50, says(SCOPES))
  .refine((s): s is string[] => s.every((scope) => typeof scope === "string" && SCOPE_TOKEN.test(scope)), says(SCOPES))
  .transform((s) => (s.length ? s : undefined));
const awsName = (example: string) => {
  const message = `{field} must be lower-case letters, digits and '-' (e.g. ${example})`;
  return z.string(says(message)).regex(AWS_NAME, says(message));
};
const AppId = z
  .union([z.string(), z.number()], says(APP_ID))
  .transform(String)
  .refine((id) => /^[A-Za-z0-9.]{1,64}$/.test(id), says(APP_ID));
const InstallationId = z
  .unknown()
  .transform((v) => String(v ?? ""))
  .refine((id) => /^\d{1,20}$/.test(id), says("{field} must be the installation's numeric id"));

/** Every auth field name any type takes, as the OpenAPI document lists them. */
const FIELD_NOTES = {
  token: "credential key whose value is sent",
  username: "basic: the user name sent with the credential as password",
  header: "header: the header's name",
  prefix: "header: text before the value, e.g. 'Token '",
  param: "query: the parameter's name",
  template: "path: e.g. /bot{value}, placed before the agent's path",
  token_url: "oauth2_*: the token endpoint (https)",
  client_id: "oauth2_*: credential key",
  client_secret: "oauth2_*: credential key",
  refresh_token: "oauth2_refresh: credential key",
  scopes: "oauth2_client_credentials: scope names",
  audience: "oauth2_client_credentials: the audience parameter",
  client_auth: 'oauth2_*: "basic" (default) or "post"',
  access_key_id: "aws_sigv4: credential key",
  secret_access_key: "aws_sigv4: credential key",
  session_token: "aws_sigv4: credential key, for temporary credentials",
  region: "aws_sigv4: e.g. us-east-1 (default: read from the host)",
  service: "aws_sigv4: e.g. s3 (default: read from the host)",
  app_id: "github_app: the app's id or client id",
  installation_id: "github_app: the installation's numeric id",
  private_key: "github_app: credential key of the app's PEM private key",
  api_url: "github_app: the REST API root (default https://api.github.com)",
} as const;
type AuthField = keyof typeof FIELD_NOTES;

/** A static type: its own fields, and every other auth field name accepted and ignored. */
function staticAuth<T extends AuthType, S extends z.ZodRawShape>(type: T, fields: S) {
  const ignored = Object.fromEntries(
    (Object.keys(FIELD_NOTES) as AuthField[]).filter((k) => !(k in fields)).map((k) => [k, z.unknown().optional().describe(`ignored for ${type}`)]),
  );
  // Typed as nothing: the ignored names are read and dropped, never part of what the type keeps.
  return z.strictObject({ type: z.literal(type), ...fields, ...(ignored as {}) });
}

/** A minted type: only its own fields; any other is refused naming the ones it takes. */
function mintedAuth<T extends AuthType, S extends z.ZodRawShape>(type: T, fields: S) {
  const names = Object.keys(fields).join(", ");
  return z.strictObject(
    { type: z.literal(type), ...fields },
    { error: (iss) => (iss.code === "unrecognized_keys" ? `{field} is not a field of ${type} (fields: ${names})` : undefined) },
  );
}

const OAuthCommon = { client_id: KeyName, client_secret: KeyName };
const AuthVariants = z.discriminatedUnion(
  "type",
  [
    staticAuth("bearer", { token: KeyName }),
    staticAuth("basic", { token: KeyName, username: Username.nullish() }),
    staticAuth("header", { token: KeyName, header: HeaderName, prefix: omittedWhenEmpty(Prefix) }),
    staticAuth("query", { token: KeyName, param: parsedBy(readQueryParam, z.string(says(QUERY_PARAM))) }),
    staticAuth("path", { token: KeyName, template: parsedBy(readPathTemplate, z.string(says(TEMPLATE))) }),
    staticAuth("passthrough", {}),
    mintedAuth("oauth2_client_credentials", {
      ...OAuthCommon,
      token_url: HttpsEndpoint,
      client_auth: omittedWhenEmpty(ClientAuth),
      scopes: omittedWhenEmpty(Scopes),
      audience: omittedWhenEmpty(plainText(512)),
    }),
    mintedAuth("oauth2_refresh", { ...OAuthCommon, refresh_token: KeyName, token_url: HttpsEndpoint, client_auth: omittedWhenEmpty(ClientAuth) }),
    mintedAuth("aws_sigv4", {
      access_key_id: KeyName,
      secret_access_key: KeyName,
      session_token: omittedWhenEmpty(KeyName),
      region: omittedWhenEmpty(awsName("us-east-1")),
      service: omittedWhenEmpty(awsName("s3")),
    }),
    mintedAuth("github_app", {
      private_key: KeyName,
      app_id: AppId,
      installation_id: InstallationId,
      api_url: omittedWhenEmpty(HttpsEndpoint.transform((u) => u.replace(/\/+$/, ""))),
    }),
  ],
  {
    // No auth object at all reads as one without a type: the answer says which types there are.
    error: (iss) => (iss.code === "invalid_union" ? `{field} must be one of ${AUTH_TYPES.join(", ")}` : `{field}.type must be one of ${AUTH_TYPES.join(", ")}`),
  },
);

/** The fields each static type keeps; the minted types keep all of theirs. */
const STATIC_FIELDS: Partial<Record<AuthType, readonly AuthField[]>> = {
  bearer: ["token"],
  basic: ["token", "username"],
  header: ["token", "header", "prefix"],
  query: ["token", "param"],
  path: ["token", "template"],
  passthrough: [],
};

/** How the credential is added to a request: key names only, never values. */
export const ServiceAuthInput = AuthVariants.transform((a): ProposedAuth => {
  const keep = STATIC_FIELDS[a.type];
  const out: Record<string, unknown> = { type: a.type };
  for (const [k, v] of Object.entries(a)) if (k !== "type" && v !== undefined && v !== null && (!keep || keep.includes(k as AuthField))) out[k] = v;
  return out as unknown as ProposedAuth;
}).describe("how the credential is added; key names only, never values");
