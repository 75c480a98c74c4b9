// Auth types whose credential the broker makes or signs itself (issue 18): OAuth 2.0 access tokens
// from client credentials or a refresh token, AWS Signature V4, GitHub App installation tokens. The
// service names which vault credentials hold the long-lived secrets (key names, never values) and a few
// plain settings; minting/ and the egress core (egress/sigv4.ts) do the minting and signing. Field names follow
// the API's snake_case, as stored in services.auth_config.

import { InvalidRequest } from "../errors.ts";
import type { AuthType, MintedAuthType } from "../store/index.ts";

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

/** Which fields each minted type takes: required and optional, and which of them name credentials. */
const SHAPES: Record<MintedAuthType, { keys: (keyof MintedAuthFields)[]; optionalKeys: (keyof MintedAuthFields)[]; text: (keyof MintedAuthFields)[] }> = {
  oauth2_client_credentials: { keys: ["client_id", "client_secret"], optionalKeys: [], text: ["token_url", "client_auth", "scopes", "audience"] },
  oauth2_refresh: { keys: ["client_id", "client_secret", "refresh_token"], optionalKeys: [], text: ["token_url", "client_auth"] },
  aws_sigv4: { keys: ["access_key_id", "secret_access_key"], optionalKeys: ["session_token"], text: ["region", "service"] },
  github_app: { keys: ["private_key"], optionalKeys: [], text: ["app_id", "installation_id", "api_url"] },
};

/** The credential keys a minted auth uses as [field, key name], in a stable order (required first). */
export function mintedAuthKeyFields(type: MintedAuthType, fields: MintedAuthFields): [string, string][] {
  const shape = SHAPES[type];
  return [...shape.keys, ...shape.optionalKeys].flatMap((k) => (typeof fields[k] === "string" ? [[k, fields[k] as string] as [string, string]] : []));
}

const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/; // RFC 6749 §3.3
const AWS_NAME = /^[a-z0-9-]{1,64}$/;

/**
 * Reads a minted type's fields from an API body (`a` is the whole auth object). `readKey` checks a
 * credential key name. Unknown fields are refused: for a security setting a silently dropped field is
 * the worst answer.
 */
export function readMintedAuth(
  type: MintedAuthType,
  a: Record<string, unknown>,
  field: string,
  readKey: (v: unknown, field: string) => string,
): MintedAuthFields {
  const shape = SHAPES[type];
  const known = new Set<string>(["type", ...shape.keys, ...shape.optionalKeys, ...shape.text]);
  for (const name of Object.keys(a)) {
    if (!known.has(name))
      throw new InvalidRequest(`${field}.${name} is not a field of ${type} (fields: ${[...known].filter((k) => k !== "type").join(", ")})`, `${field}.${name}`);
  }
  const out: MintedAuthFields = {};
  for (const k of shape.keys) out[k] = readKey(a[k], `${field}.${k}`) as never;
  for (const k of shape.optionalKeys) if (a[k] !== undefined && a[k] !== null && a[k] !== "") out[k] = readKey(a[k], `${field}.${k}`) as never;
  const present = (k: string) => a[k] !== undefined && a[k] !== null && a[k] !== "";
  if (type === "oauth2_client_credentials" || type === "oauth2_refresh") {
    out.token_url = readHttpsUrl(a.token_url, `${field}.token_url`);
    if (present("client_auth")) {
      if (a.client_auth !== "basic" && a.client_auth !== "post")
        throw new InvalidRequest(`${field}.client_auth must be "basic" or "post"`, `${field}.client_auth`);
      out.client_auth = a.client_auth;
    }
  }
  if (type === "oauth2_client_credentials") {
    if (present("scopes")) {
      if (!Array.isArray(a.scopes) || a.scopes.length > 50 || !a.scopes.every((s) => typeof s === "string" && SCOPE_TOKEN.test(s))) {
        throw new InvalidRequest(`${field}.scopes must be a list of at most 50 scope names (no spaces or quotes)`, `${field}.scopes`);
      }
      if (a.scopes.length) out.scopes = [...(a.scopes as string[])];
    }
    if (present("audience")) out.audience = readText(a.audience, `${field}.audience`, 512);
  }
  if (type === "aws_sigv4") {
    for (const k of ["region", "service"] as const) {
      if (!present(k)) continue;
      if (typeof a[k] !== "string" || !AWS_NAME.test(a[k] as string))
        throw new InvalidRequest(`${field}.${k} must be lower-case letters, digits and '-' (e.g. ${k === "region" ? "us-east-1" : "s3"})`, `${field}.${k}`);
      out[k] = a[k] as string;
    }
  }
  if (type === "github_app") {
    if (typeof a.app_id !== "string" && typeof a.app_id !== "number")
      throw new InvalidRequest(`${field}.app_id must be the app's id (e.g. "123456") or client id`, `${field}.app_id`);
    out.app_id = String(a.app_id);
    if (!/^[A-Za-z0-9.]{1,64}$/.test(out.app_id))
      throw new InvalidRequest(`${field}.app_id must be the app's id (e.g. "123456") or client id`, `${field}.app_id`);
    out.installation_id = String(a.installation_id ?? "");
    if (!/^\d{1,20}$/.test(out.installation_id))
      throw new InvalidRequest(`${field}.installation_id must be the installation's numeric id`, `${field}.installation_id`);
    if (present("api_url")) out.api_url = readHttpsUrl(a.api_url, `${field}.api_url`).replace(/\/+$/, "");
  }
  return out;
}

function readText(v: unknown, field: string, max: number): string {
  if (typeof v !== "string" || v.length > max || /[\0-\x1f\x7f]/.test(v))
    throw new InvalidRequest(`${field} must be text of at most ${max} characters without control characters`, field);
  return v;
}

function readHttpsUrl(v: unknown, field: string): string {
  const text = readText(v, field, 2048);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidRequest(`${field} must be an https:// URL`, field);
  }
  if (url.protocol !== "https:") throw new InvalidRequest(`${field} must be an https:// URL (a token endpoint is never reached over plain HTTP)`, field);
  if (url.username || url.password) throw new InvalidRequest(`${field} must not carry user:password@; name the client's credentials as keys instead`, field);
  if (url.hash) throw new InvalidRequest(`${field} must not have a #fragment`, field);
  return url.href;
}

/** The JSON kept in services.auth_config; only the minted fields, in a stable order. */
export function mintedAuthConfig(fields: MintedAuthFields): string {
  return JSON.stringify(fields);
}

/** The stored fields back; a row that no longer parses yields none (and fails closed at egress). */
export function parseMintedAuthConfig(text: string | null): MintedAuthFields {
  if (!text) return {};
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === "object" && !Array.isArray(v) ? (v as MintedAuthFields) : {};
  } catch {
    return {};
  }
}
