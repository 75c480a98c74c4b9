// Services of a vault: which hosts it serves and how the credential is injected (bearer, basic,
// a named header with optional prefix, a query parameter, a path template, or passthrough with no
// credential). A service decides where a stored value is sent, so every change is a secret write:
// human admins and members only.

import { Conflict, InvalidRequest, NotFound } from "../errors.ts";
import type { AuthType, ServiceRow } from "../store/index.ts";
import type { Domain } from "../identity/index.ts";
import { CREDENTIAL_KEY_PATTERN } from "../crypto/index.ts";
import { parseHostPattern } from "../policy/index.ts";
import { requireInVault, type OpenVault } from "../identity/index.ts";
import { parseRules, type Rules } from "../policy/index.ts";
import { readPathTemplate, readQueryParam } from "../policy/index.ts";
import {
  isMintedAuthType,
  mintedAuthConfig,
  mintedAuthKeyFields,
  MINTED_AUTH_TYPES,
  parseMintedAuthConfig,
  readMintedAuth,
  type MintedAuthFields,
} from "../policy/index.ts";

export interface ServiceAuth extends MintedAuthFields {
  type: AuthType;
  token?: string;
  header?: string;
  prefix?: string;
  username?: string;
  /** 'query': the parameter name, e.g. "key" for ?key=<value>. */
  param?: string;
  /** 'path': e.g. "/bot{value}", placed before the agent's path. */
  template?: string;
}

export interface ServiceView {
  host: string;
  description: string;
  auth: ServiceAuth;
  enabled: boolean;
  /** Allowed methods and paths; absent: everything on the host. */
  rules?: Rules;
}

const AUTH_TYPES: readonly AuthType[] = ["bearer", "basic", "header", "query", "path", "passthrough", ...MINTED_AUTH_TYPES];
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

export function readAuth(v: unknown, field = "auth"): ServiceAuth {
  const a = (v ?? {}) as Record<string, unknown>;
  if (!AUTH_TYPES.includes(a.type as AuthType)) throw new InvalidRequest(`${field}.type must be one of ${AUTH_TYPES.join(", ")}`, `${field}.type`);
  const type = a.type as AuthType;
  if (type === "passthrough") return { type };
  if (isMintedAuthType(type)) return { type, ...readMintedAuth(type, a, field, readKey) };
  const token = readKey(a.token, `${field}.token`);
  if (type === "bearer") return { type, token };
  if (type === "query") return { type, token, param: readQueryParam(a.param, `${field}.param`) };
  if (type === "path") return { type, token, template: readPathTemplate(a.template, `${field}.template`) };
  if (type === "basic") {
    if (a.username === undefined || a.username === null) return { type, token };
    if (typeof a.username !== "string" || a.username.length > 256 || /[:\r\n]/.test(a.username)) {
      throw new InvalidRequest(`${field}.username must be text without ':' or line breaks`, `${field}.username`);
    }
    return { type, token, username: a.username };
  }
  if (typeof a.header !== "string" || !HEADER_NAME.test(a.header) || RESERVED_HEADERS.has(a.header.toLowerCase())) {
    throw new InvalidRequest(`${field}.header must be a header name the broker does not reserve`, `${field}.header`);
  }
  const auth: ServiceAuth = { type, token, header: a.header.toLowerCase() };
  if (a.prefix !== undefined && a.prefix !== null && a.prefix !== "") {
    // A header value's visible characters only: the prefix is sent as header bytes, and it is shown to
    // the person approving, where a bidi or invisible character could reorder what they read.
    if (typeof a.prefix !== "string" || a.prefix.length > 64 || !/^[\x20-\x7e\t]+$/.test(a.prefix))
      throw new InvalidRequest(`${field}.prefix must be short text of printable ASCII characters (what a header value may hold)`, `${field}.prefix`);
    auth.prefix = a.prefix;
  }
  return auth;
}

export function readKey(v: unknown, field: string): string {
  if (typeof v !== "string" || v.length > 128 || !CREDENTIAL_KEY_PATTERN.test(v)) {
    throw new InvalidRequest(`${field} must be a credential key name (A-Z, 0-9, _; starting with a letter)`, field);
  }
  return v;
}

function readDescription(v: unknown): string {
  if (v === undefined || v === null) return "";
  if (typeof v !== "string" || v.length > 500) throw new InvalidRequest("description must be text of at most 500 characters", "description");
  return v;
}

/** Every credential key a service's auth uses (none for passthrough). */
export function authKeys(auth: ServiceAuth): string[] {
  return authKeyFields(auth).map(([, key]) => key);
}

/** The same as [field, key] pairs, for error messages that name the field. */
export function authKeyFields(auth: ServiceAuth): [string, string][] {
  if (isMintedAuthType(auth.type)) return mintedAuthKeyFields(auth.type, auth);
  return auth.token ? [["token", auth.token]] : [];
}

export function viewService(r: ServiceRow): ServiceView {
  const auth: ServiceAuth = isMintedAuthType(r.authType) ? { type: r.authType, ...parseMintedAuthConfig(r.authConfig) } : { type: r.authType };
  if (r.authKey) auth.token = r.authKey;
  if (r.authHeader) auth.header = r.authHeader;
  if (r.authPrefix) auth.prefix = r.authPrefix;
  if (r.authUsername) auth.username = r.authUsername;
  if (r.authParam) auth.param = r.authParam;
  if (r.authTemplate) auth.template = r.authTemplate;
  const rules = storedRules(r);
  return { host: r.host, description: r.description, auth, enabled: r.enabled, ...(rules && { rules }) };
}

/** The rules kept with a service row; a row that no longer parses allows nothing rather than everything. */
export function storedRules(r: Pick<ServiceRow, "rules">): Rules | undefined {
  if (r.rules === null) return undefined;
  try {
    return parseRules(JSON.parse(r.rules)) ?? [];
  } catch {
    return [];
  }
}

export function toRow(vaultId: number, host: string, description: string, auth: ServiceAuth, enabled: boolean, rules?: Rules): Omit<ServiceRow, "updatedAt"> {
  return {
    rules: rules ? JSON.stringify(rules) : null,
    vaultId,
    host,
    description,
    authType: auth.type,
    authKey: auth.token ?? null,
    authHeader: auth.header ?? null,
    authPrefix: auth.prefix ?? null,
    authUsername: auth.username ?? null,
    authParam: auth.param ?? null,
    authTemplate: auth.template ?? null,
    authConfig: isMintedAuthType(auth.type) ? mintedAuthConfig(mintedFields(auth)) : null,
    enabled,
  };
}

function mintedFields(auth: ServiceAuth): MintedAuthFields {
  const { type: _type, token: _t, header: _h, prefix: _p, username: _u, param: _q, template: _tpl, ...fields } = auth;
  return fields;
}

export async function listServices(d: Domain, open: OpenVault): Promise<ServiceView[]> {
  return (await d.store.services.list(open.vault.id)).map(viewService);
}

export async function addService(d: Domain, open: OpenVault, input: unknown): Promise<ServiceView> {
  requireInVault(open, "write_secrets");
  const body = (input ?? {}) as Record<string, unknown>;
  const host = parseHostPattern(body.host, { allowIp: true }).text;
  const row = toRow(
    open.vault.id,
    host,
    readDescription(body.description),
    readAuth(body.auth),
    body.enabled === undefined ? true : readEnabled(body.enabled),
    parseRules(body.rules),
  );
  await d.store.transaction(async (tx) => {
    if (await tx.services.get(open.vault.id, host)) throw new Conflict(`a service for ${host} already exists; update it instead`);
    await tx.services.put(row, d.now());
  });
  d.onVaultChange?.(open.vault.id);
  return viewService({ ...row, updatedAt: d.now() });
}

export async function updateService(d: Domain, open: OpenVault, rawHost: string, input: unknown): Promise<ServiceView> {
  requireInVault(open, "write_secrets");
  const host = parseHostPattern(rawHost, { allowIp: true }).text;
  const body = (input ?? {}) as Record<string, unknown>;
  const updated = await d.store.transaction(async (tx) => {
    const current = await tx.services.get(open.vault.id, host);
    if (!current) throw new NotFound(`no service for ${host} in this vault`);
    const view = viewService(current);
    const row = toRow(
      open.vault.id,
      host,
      body.description === undefined ? view.description : readDescription(body.description),
      body.auth === undefined ? view.auth : readAuth(body.auth),
      body.enabled === undefined ? view.enabled : readEnabled(body.enabled),
      // Absent keeps the current rules; null removes them (everything allowed again).
      body.rules === undefined ? view.rules : parseRules(body.rules),
    );
    await tx.services.put(row, d.now());
    return row;
  });
  d.onVaultChange?.(open.vault.id);
  return viewService({ ...updated, updatedAt: d.now() });
}

export async function removeService(d: Domain, open: OpenVault, rawHost: string): Promise<void> {
  requireInVault(open, "write_secrets");
  // A wildcard over a public suffix stored before that rule existed must stay removable.
  const host = parseHostPattern(rawHost, { allowIp: true, acceptPublicSuffixWildcard: true }).text;
  if (!(await d.store.services.remove(open.vault.id, host))) throw new NotFound(`no service for ${host} in this vault`);
  d.onVaultChange?.(open.vault.id);
}

function readEnabled(v: unknown): boolean {
  if (typeof v !== "boolean") throw new InvalidRequest("enabled must be true or false", "enabled");
  return v;
}
