// Azure Key Vault (issue 36): reads a secret with the REST API's Get Secret (api-version 7.4) through the
// broker's own upstream TLS client and network guard (store-http.ts), no SDK. Auth is the Microsoft identity
// platform's client-credentials grant (v2.0 token endpoint, scope https://vault.azure.net/.default); the
// access token is kept until shortly before it expires, and fetched again once when the vault answers 401.
//
// Key Vault's 401 carries a challenge (WWW-Authenticate: Bearer authorization="<authority>/<tenant>",
// resource="https://vault.azure.net"). This client already knows its scope and tenant, so it uses the
// challenge only as the Azure SDKs do when verifying it: a challenge naming another resource or scope, or
// another tenant, is refused (denied) instead of fetching a token for it; otherwise the token is renewed
// once and the read retried.
//
// Error messages name the vault host, the secret name and our own words; the only text taken from an
// answer is an error code from a fixed set. Values, the client secret and tokens never appear.

import { Secret } from "../secret.ts";
import type { HeaderList } from "../http/index.ts";
import { jsonObject, storeHttp, type StoreAnswer, type StoreHttpDeps } from "./store-http.ts";
import { SecretStoreError, type SecretAddress, type SecretRead, type SecretStoreClient } from "./types.ts";

export const AZURE_DEFAULT_AUTHORITY = "https://login.microsoftonline.com";
export const AZURE_KEYVAULT_RESOURCE = "https://vault.azure.net";
export const AZURE_KEYVAULT_SCOPE = `${AZURE_KEYVAULT_RESOURCE}/.default`;
export const AZURE_KEYVAULT_API_VERSION = "7.4";

export interface AzureKeyVaultConnection {
  /** https://<name>.vault.azure.net (no path). */
  readonly vaultUrl: string;
  /** Directory (tenant) id or domain. */
  readonly tenant: string;
  /** Application (client) id. */
  readonly clientId: string;
  /** SECRET: the application's client secret. */
  readonly clientSecret: Secret;
  /** Default https://login.microsoftonline.com (sovereign clouds have their own). */
  readonly authority?: string;
}

export interface AzureKeyVaultOptions {
  /** Milliseconds since the epoch; tests move it to expire tokens. */
  readonly now?: () => number;
}

/** Renew this long before expires_in runs out (or at half the lifetime for short-lived tokens). */
const RENEW_BEFORE_MS = 5 * 60_000;
/** Secret names: 1-127 letters, digits and dashes. Versions: letters and digits (32 hex in practice). */
const NAME = /^[0-9A-Za-z-]{1,127}$/;
const VERSION = /^[0-9A-Za-z]{1,64}$/;
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Error codes that may be repeated in a message; anything else the server says is left out. */
const TOKEN_ERRORS = new Set([
  "invalid_request",
  "invalid_client",
  "invalid_grant",
  "invalid_scope",
  "unauthorized_client",
  "unsupported_grant_type",
  "invalid_resource",
  "temporarily_unavailable",
]);
const VAULT_ERRORS = new Set([
  "Forbidden",
  "SecretDisabled",
  "ForbiddenByPolicy",
  "ForbiddenByRbac",
  "AccessDenied",
  "Unauthorized",
  "BadParameter",
  "SecretNotFound",
  "NotFound",
  "Throttled",
]);

interface Token {
  readonly value: Secret;
  readonly renewAt: number;
}

export function createAzureKeyVaultClient(deps: StoreHttpDeps, conn: AzureKeyVaultConnection, opts: AzureKeyVaultOptions = {}): SecretStoreClient {
  const now = opts.now ?? Date.now;
  const vault = httpsBase(conn.vaultUrl, "vault URL");
  const authority = httpsBase(conn.authority ?? AZURE_DEFAULT_AUTHORITY, "authority");
  if (!/^[0-9A-Za-z.-]{1,256}$/.test(conn.tenant)) throw new SecretStoreError(`${vault.host}: the tenant is not a tenant id or domain`, "invalid");
  if (conn.clientId === "") throw new SecretStoreError(`${vault.host}: the client id is empty`, "invalid");
  const tokenUrl = `${authority.origin}${authority.path}/${encodeURIComponent(conn.tenant)}/oauth2/v2.0/token`;
  const vaultHost = vault.host;

  let token: Token | undefined;
  let pending: Promise<Token> | undefined;
  /** Tokens handed out so far, newest last (a replaced one may still be echoed by something that saw it). */
  const sentTokens: Secret[] = [];

  async function login(): Promise<Token> {
    const form = new URLSearchParams({
      grant_type: "client_credentials",
      client_id: conn.clientId,
      // reveal(): the client secret goes in the token request's form, its only destination.
      client_secret: conn.clientSecret.reveal(),
      scope: AZURE_KEYVAULT_SCOPE,
    });
    const body = new TextEncoder().encode(form.toString());
    const started = now();
    const answer = await storeHttp(deps, {
      method: "POST",
      url: tokenUrl,
      headers: [
        ["Content-Type", "application/x-www-form-urlencoded"],
        ["Accept", "application/json"],
      ],
      body,
    });
    body.fill(0);
    const json = jsonObject(answer);
    if (answer.status !== 200) {
      const code = typeof json?.error === "string" && TOKEN_ERRORS.has(json.error) ? `, ${json.error}` : "";
      const what = `${authority.host} refused the client-credentials login for the vault ${vaultHost} (HTTP ${answer.status}${code})`;
      throw new SecretStoreError(what, answer.status >= 500 || answer.status === 429 ? "unreachable" : "denied", answer.status);
    }
    const access = json?.access_token;
    if (typeof access !== "string" || access === "" || (typeof json?.token_type === "string" && json.token_type.toLowerCase() !== "bearer")) {
      throw new SecretStoreError(`${authority.host} answered the login for the vault ${vaultHost} without a bearer access token`, "invalid", 200);
    }
    const lifetimeS = Number(json?.expires_in);
    const lifetimeMs = Number.isFinite(lifetimeS) && lifetimeS > 0 ? lifetimeS * 1000 : 0;
    const value = new Secret(access);
    sentTokens.push(value);
    if (sentTokens.length > 2) sentTokens.shift();
    return { value, renewAt: started + Math.max(0, lifetimeMs - Math.min(RENEW_BEFORE_MS, lifetimeMs / 2)) };
  }

  /** The cached token while it is fresh; one login at a time otherwise. */
  async function currentToken(): Promise<Token> {
    if (token && now() < token.renewAt) return token;
    if (!pending) {
      pending = login().finally(() => {
        pending = undefined;
      });
    }
    const t = await pending;
    token = t;
    return t;
  }

  async function getSecret(url: string, t: Token): Promise<StoreAnswer> {
    const headers: HeaderList = [
      // reveal(): the access token goes in Authorization to the vault, its only destination.
      ["Authorization", `Bearer ${t.value.reveal()}`],
      ["Accept", "application/json"],
    ];
    return storeHttp(deps, { method: "GET", url, headers });
  }

  async function read(address: SecretAddress): Promise<SecretRead> {
    const name = address.path;
    if (!NAME.test(name)) throw new SecretStoreError(`${vaultHost}: a Key Vault secret name has 1-127 letters, digits and dashes`, "invalid");
    if (address.version !== undefined && !VERSION.test(address.version)) {
      throw new SecretStoreError(`${vaultHost}: secret ${name}: a Key Vault version has letters and digits only`, "invalid");
    }
    const where = `${vaultHost}: secret ${name}${address.version ? ` version ${address.version}` : ""}`;
    const url = `${vault.origin}${vault.path}/secrets/${name}/${address.version ?? ""}?api-version=${AZURE_KEYVAULT_API_VERSION}`;

    let t = await currentToken();
    let answer = await getSecret(url, t);
    if (answer.status === 401) {
      checkChallenge(answer, where);
      if (token === t) token = undefined; // this token is no longer good: one fresh login, one retry
      t = await currentToken();
      answer = await getSecret(url, t);
      if (answer.status === 401) {
        throw new SecretStoreError(`${where}: the vault refused a freshly issued token (HTTP 401${vaultCode(answer)})`, "denied", 401);
      }
    }
    if (answer.status === 404) throw new SecretStoreError(`${where} not found (HTTP 404${vaultCode(answer)})`, "not_found", 404);
    if (answer.status === 403) throw new SecretStoreError(`${where}: access denied (HTTP 403${vaultCode(answer)})`, "denied", 403);
    if (answer.status === 429 || answer.status >= 500) {
      throw new SecretStoreError(`${where}: the vault is unavailable (HTTP ${answer.status})`, "unreachable", answer.status);
    }
    if (answer.status !== 200)
      throw new SecretStoreError(`${where}: the vault refused the request (HTTP ${answer.status}${vaultCode(answer)})`, "invalid", answer.status);

    const json = jsonObject(answer);
    const value = json?.value;
    if (typeof value !== "string") throw new SecretStoreError(`${where}: the answer has no secret value`, "invalid", 200);
    const version = versionOf(json?.id, name);
    if (version === undefined) throw new SecretStoreError(`${where}: the answer's id does not name a version of this secret`, "invalid", 200);
    if (address.version !== undefined && version !== address.version) {
      throw new SecretStoreError(`${where}: the vault answered with another version`, "invalid", 200);
    }
    if (address.field === undefined) return { value: new Secret(value), version };
    return { value: fieldOf(value, address.field, where), version };
  }

  /** A challenge naming another resource, scope or tenant is not ours to answer. */
  function checkChallenge(answer: StoreAnswer, where: string): void {
    const header = answer.headers.find(([k]) => k.toLowerCase() === "www-authenticate")?.[1];
    if (header === undefined) return;
    const params = bearerChallenge(header);
    if (params === undefined) return;
    const resource = params.resource ?? params.scope?.replace(/\/\.default$/, "");
    if (resource !== undefined && resource.replace(/\/+$/, "") !== AZURE_KEYVAULT_RESOURCE) {
      throw new SecretStoreError(`${where}: the vault asked for a token for another resource than Key Vault; not sent`, "denied", 401);
    }
    const auth = params.authorization ?? params.authorization_uri;
    if (auth !== undefined) {
      let tenant: string | undefined;
      try {
        tenant = new URL(auth).pathname.split("/").filter(Boolean)[0];
      } catch {
        tenant = undefined;
      }
      // Only two tenant ids can be compared: a domain name and the id it stands for look different.
      if (tenant !== undefined && GUID.test(tenant) && GUID.test(conn.tenant) && tenant.toLowerCase() !== conn.tenant.toLowerCase()) {
        throw new SecretStoreError(`${where}: the vault belongs to another tenant than the connection's`, "denied", 401);
      }
    }
  }

  return {
    read,
    sentValues: () => [conn.clientSecret, ...sentTokens],
  };
}

function httpsBase(raw: string, what: string): { origin: string; host: string; path: string } {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new SecretStoreError(`the Key Vault ${what} is not a URL`, "invalid");
  }
  if (u.protocol !== "https:") throw new SecretStoreError(`${u.host}: the Key Vault ${what} must be https://`, "invalid");
  if (u.username || u.password || u.search || u.hash)
    throw new SecretStoreError(`${u.host}: the Key Vault ${what} has no credentials, query or fragment`, "invalid");
  return { origin: u.origin, host: u.host, path: u.pathname.replace(/\/+$/, "") };
}

/** `https://<vault>/secrets/<name>/<version>` → version (the name compared case-insensitively, as Key Vault does). */
function versionOf(id: unknown, name: string): string | undefined {
  if (typeof id !== "string") return undefined;
  let parts: string[];
  try {
    parts = new URL(id).pathname.split("/").filter(Boolean);
  } catch {
    return undefined;
  }
  const [kind, n, version] = parts.slice(-3);
  if (kind !== "secrets" || n?.toLowerCase() !== name.toLowerCase() || version === undefined || !VERSION.test(version)) return undefined;
  return version;
}

function fieldOf(raw: string, field: string, where: string): Secret {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = undefined;
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new SecretStoreError(`${where}: the value is not a JSON object, so it has no field ${JSON.stringify(field)}`, "invalid");
  }
  const v = (parsed as Record<string, unknown>)[field];
  if (v === undefined || !Object.hasOwn(parsed, field)) throw new SecretStoreError(`${where}: no field ${JSON.stringify(field)}`, "not_found");
  if (typeof v === "string") return new Secret(v);
  if (typeof v === "number" || typeof v === "boolean") return new Secret(String(v));
  throw new SecretStoreError(`${where}: field ${JSON.stringify(field)} is not a string, number or boolean`, "invalid");
}

/** The error code of a Key Vault error answer ({"error":{"code","innererror":{"code"}}}), only from the fixed set. */
function vaultCode(a: StoreAnswer): string {
  const error = jsonObject(a)?.error as Record<string, unknown> | undefined;
  const codes: string[] = [];
  if (error && typeof error === "object") {
    if (typeof error.code === "string" && VAULT_ERRORS.has(error.code)) codes.push(error.code);
    const inner = error.innererror as Record<string, unknown> | undefined;
    if (inner && typeof inner === "object" && typeof inner.code === "string" && VAULT_ERRORS.has(inner.code)) codes.push(inner.code);
  }
  return codes.length ? `, ${codes.join("/")}` : "";
}

/** `Bearer k="v", k2=v2` → {k: v, k2: v2}; undefined when the scheme is not Bearer. */
export function bearerChallenge(header: string): Record<string, string> | undefined {
  const m = /^\s*Bearer\s+(.*)$/i.exec(header);
  if (!m) return undefined;
  const out: Record<string, string> = {};
  const re = /([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"([^"]*)"|([^\s,]*))/g;
  for (let p = re.exec(m[1]!); p !== null; p = re.exec(m[1]!)) out[p[1]!.toLowerCase()] = p[2] ?? p[3] ?? "";
  return out;
}
