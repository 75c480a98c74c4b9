// Auth types whose credential the broker makes or signs itself (issue 18): OAuth 2.0 access tokens
// from client credentials or a refresh token, AWS Signature V4, GitHub App installation tokens. The
// service names which vault credentials hold the long-lived secrets (key names, never values) and a few
// plain settings; minting/ and the egress core (egress/sigv4.ts) do the minting and signing. Field names follow
// the API's snake_case, as stored in services.auth_config.

import { fitsAuthField, type AuthType, type MintedAuthType } from "../store/index.ts";

export const MINTED_AUTH_TYPES: readonly MintedAuthType[] = ["oauth2_client_credentials", "oauth2_refresh", "aws_sigv4", "github_app"];

export function isMintedAuthType(type: AuthType): type is MintedAuthType {
  return (MINTED_AUTH_TYPES as readonly string[]).includes(type);
}

/** The minted types' fields. Those marked KEY name a vault credential; the others are plain settings. */
export interface MintedAuthFields {
  /** OAuth: the token endpoint (https). */
  token_url?: string;
  /** OAuth: KEY. */
  client_id?: string;
  /** OAuth: KEY. */
  client_secret?: string;
  /** oauth2_refresh: KEY; replaced in the vault when the provider rotates it. */
  refresh_token?: string;
  /** OAuth: how the client authenticates at the token endpoint (default "basic", RFC 6749 §2.3.1). */
  client_auth?: "basic" | "post";
  /** oauth2_client_credentials: scopes asked for. */
  scopes?: string[];
  /** oauth2_client_credentials: the audience parameter some providers require (Auth0, Okta). */
  audience?: string;
  /** aws_sigv4: KEY. */
  access_key_id?: string;
  /** aws_sigv4: KEY; never sent, only signs. */
  secret_access_key?: string;
  /** aws_sigv4: KEY, for temporary credentials (sent as X-Amz-Security-Token). */
  session_token?: string;
  /** aws_sigv4: e.g. "us-east-1"; absent: read from the request's host (s3.eu-west-1.amazonaws.com). */
  region?: string;
  /** aws_sigv4: e.g. "s3"; absent: read from the request's host. */
  service?: string;
  /** github_app: the app id (or client id) the app JWT is issued by. */
  app_id?: string;
  /** github_app: the installation whose token is minted. */
  installation_id?: string;
  /** github_app: KEY, the app's PEM private key. */
  private_key?: string;
  /** github_app: the REST API root (default https://api.github.com; GitHub Enterprise Server: https://host/api/v3). */
  api_url?: string;
}

/** Which fields of each minted type name credentials, required and optional (the contract reads the rest). */
const SHAPES: Record<MintedAuthType, { keys: (keyof MintedAuthFields)[]; optionalKeys: (keyof MintedAuthFields)[] }> = {
  oauth2_client_credentials: { keys: ["client_id", "client_secret"], optionalKeys: [] },
  oauth2_refresh: { keys: ["client_id", "client_secret", "refresh_token"], optionalKeys: [] },
  aws_sigv4: { keys: ["access_key_id", "secret_access_key"], optionalKeys: ["session_token"] },
  github_app: { keys: ["private_key"], optionalKeys: [] },
};

/** The credential keys a minted auth uses as [field, key name], in a stable order (required first). */
export function mintedAuthKeyFields(type: MintedAuthType, fields: MintedAuthFields): [string, string][] {
  const shape = SHAPES[type];
  return [...shape.keys, ...shape.optionalKeys].flatMap((k) => (typeof fields[k] === "string" ? [[k, fields[k] as string] as [string, string]] : []));
}

/** The JSON kept in services.auth_config; only the minted fields, in a stable order. */
export function mintedAuthConfig(fields: MintedAuthFields): string {
  return JSON.stringify(fields);
}

/** The fields a stored config may hold: the minted types' own (a static type's field never belongs there). */
const MINTED_FIELDS: ReadonlySet<string> = new Set<keyof MintedAuthFields>([
  "token_url",
  "client_id",
  "client_secret",
  "refresh_token",
  "client_auth",
  "scopes",
  "audience",
  "access_key_id",
  "secret_access_key",
  "session_token",
  "region",
  "service",
  "app_id",
  "installation_id",
  "private_key",
  "api_url",
]);

/**
 * The stored fields back, checked: a row that no longer parses, or holds a field of the wrong type or
 * one no minted type has, yields none, and the service fails closed at egress (its keys are missing).
 */
export function parseMintedAuthConfig(text: string | null): MintedAuthFields {
  if (!text) return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return {};
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) return {};
  const fields = Object.entries(v);
  const fits = fields.every(([k, value]) => MINTED_FIELDS.has(k) && fitsAuthField(k, value));
  return fits ? (Object.fromEntries(fields) as MintedAuthFields) : {};
}
