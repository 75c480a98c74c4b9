// HashiCorp Vault / OpenBao KV version 2 (one HTTP API), read through the broker's own upstream TLS client and
// network guard (storeHttp), never an SDK: the documented endpoints are few and plain JSON.
//
//   read:   GET  /v1/<mount>/data/<path>[?version=N]   X-Vault-Token [, X-Vault-Namespace]
//           → { data: { data: { <key>: <value>, … }, metadata: { version: N, … } } }
//   login:  POST /v1/auth/<approle mount>/login        { role_id, secret_id }
//           POST /v1/auth/<jwt|kubernetes mount>/login { role, jwt }   (the token file re-read on each login)
//           → { auth: { client_token, lease_duration, … } }
//
// A login token is kept until shortly before its lease ends; a 403 on a read with a login-based auth logs in
// again once and retries (unless that read's token came from a login it just made: a policy refusal then
// costs one login, not two). Errors name the store's host and the path, never a value and never the text of
// Vault's `errors` array (it can echo what was sent).

import { readFileSync } from "node:fs";
import type { HeaderList } from "../http/index.ts";
import { Secret } from "../secret.ts";
import { jsonObject, storeHttp, type StoreAnswer, type StoreHttpDeps } from "./store-http.ts";
import { SecretStoreError, type SecretAddress, type SecretRead, type SecretStoreClient } from "./types.ts";

export type VaultAuth =
  /** A token given by the operator, sent as is (never renewed: its lease is the operator's business). */
  | { readonly kind: "token"; readonly token: Secret }
  /** AppRole: role id and secret id exchanged for a token at /v1/auth/<mount>/login (mount default "approle"). */
  | { readonly kind: "approle"; readonly roleId: Secret; readonly secretId: Secret; readonly mount?: string }
  /**
   * JWT or Kubernetes login: the JWT in `tokenFile` (re-read on each login, since the platform rotates it)
   * is exchanged for a token at /v1/auth/<mount>/login with `role` (mount default "jwt"; "kubernetes" for
   * the Kubernetes auth method, which takes the same body).
   */
  | { readonly kind: "jwt"; readonly role: string; readonly tokenFile: string; readonly mount?: string };

export interface VaultKvConnection {
  /** https://host[:port], the Vault or OpenBao API address (no path). */
  readonly address: string;
  /** Vault Enterprise / OpenBao namespace, sent as X-Vault-Namespace on every request. */
  readonly namespace?: string;
  /** The KV v2 mount (default "secret"). */
  readonly mount?: string;
  readonly auth: VaultAuth;
}

export interface VaultKvOptions {
  readonly now?: () => number;
  /** Reads the JWT auth's token file (default: the file system, utf-8). */
  readonly readFile?: (path: string) => string;
}

/** A login token is replaced this long before its lease ends (at most a fifth of the lease). */
export const VAULT_TOKEN_MARGIN_MS = 30_000;

interface Token {
  readonly value: Secret;
  /** Epoch ms after which it is not used any more; Infinity for a token without a lease. */
  readonly refreshAt: number;
}

export function createVaultKvClient(deps: StoreHttpDeps, conn: VaultKvConnection, opts: VaultKvOptions = {}): SecretStoreClient {
  const now = opts.now ?? Date.now;
  const readFile = opts.readFile ?? ((path: string) => readFileSync(path, "utf8"));
  const base = parseAddress(conn.address);
  const host = base.host;
  const kvMount = checkedMount(conn.mount ?? "secret", host);
  const auth = conn.auth;
  if (conn.namespace !== undefined && !/^[A-Za-z0-9_.\-/]{1,256}$/.test(conn.namespace)) {
    throw new SecretStoreError(`vault ${host}: the namespace is not a Vault namespace path`, "invalid");
  }
  const loginMount = auth.kind === "approle" ? checkedMount(auth.mount ?? "approle", host) : auth.kind === "jwt" ? checkedMount(auth.mount ?? "jwt", host) : "";

  let token: Token | undefined = auth.kind === "token" ? { value: auth.token, refreshAt: Number.POSITIVE_INFINITY } : undefined;
  let lastJwt: Secret | undefined;
  let pendingLogin: Promise<Token> | undefined;
  /** Logins made so far: a 403 on a token this very read logged in for is not worth another login. */
  let logins = 0;

  function headers(extra: HeaderList = []): HeaderList {
    const h: HeaderList = [["Accept", "application/json"], ...extra];
    if (conn.namespace) h.push(["X-Vault-Namespace", conn.namespace]);
    return h;
  }

  async function login(): Promise<Token> {
    logins++;
    let body: Record<string, string>;
    if (auth.kind === "approle") {
      body = { role_id: auth.roleId.reveal(), secret_id: auth.secretId.reveal() }; // reveal: the login body
    } else if (auth.kind === "jwt") {
      let jwt: string;
      try {
        jwt = readFile(auth.tokenFile).trim();
      } catch {
        throw new SecretStoreError(`vault ${host}: the token file ${auth.tokenFile} could not be read`, "invalid");
      }
      if (!jwt) throw new SecretStoreError(`vault ${host}: the token file ${auth.tokenFile} is empty`, "invalid");
      lastJwt = new Secret(jwt); // noted before it is sent: a refused login's JWT is a needle too
      body = { role: auth.role, jwt };
    } else {
      throw new SecretStoreError(`vault ${host}: a token connection does not log in`, "invalid");
    }
    const where = `login at auth/${loginMount}`;
    const answer = await storeHttp(deps, {
      method: "POST",
      url: `${base.origin}/v1/auth/${loginMount}/login`,
      headers: headers([["Content-Type", "application/json"]]),
      body: new TextEncoder().encode(JSON.stringify(body)),
    });
    if (answer.status !== 200) throw statusError(answer.status, host, where, true);
    const authPart = objectAt(jsonObject(answer), "auth");
    const clientToken = authPart?.client_token;
    const lease = authPart?.lease_duration;
    if (typeof clientToken !== "string" || clientToken === "" || typeof lease !== "number" || !(lease >= 0)) {
      throw new SecretStoreError(`vault ${host}: the ${where} answered without a client token and lease`, "invalid", answer.status);
    }
    const leaseMs = lease * 1000;
    const refreshAt = lease === 0 ? Number.POSITIVE_INFINITY : now() + leaseMs - Math.min(VAULT_TOKEN_MARGIN_MS, leaseMs / 5);
    return { value: new Secret(clientToken), refreshAt };
  }

  async function currentToken(): Promise<Token> {
    if (token && now() < token.refreshAt) return token;
    if (auth.kind === "token") return token!;
    pendingLogin ??= login().finally(() => {
      pendingLogin = undefined;
    });
    const t = await pendingLogin;
    token = t;
    return t;
  }

  async function readOnce(address: SecretAddress, t: Token): Promise<StoreAnswer> {
    const query = address.version === undefined ? "" : `?version=${address.version}`;
    return storeHttp(deps, {
      method: "GET",
      url: `${base.origin}/v1/${kvMount}/data/${encodePath(address.path)}${query}`,
      headers: headers([["X-Vault-Token", t.value.reveal()]]), // reveal: the token header Vault reads
    });
  }

  return {
    async read(address: SecretAddress): Promise<SecretRead> {
      const where = `${kvMount}/${address.path}`;
      if (!validPath(address.path)) throw new SecretStoreError(`vault ${host}: "${address.path}" is not a KV path`, "invalid");
      if (address.version !== undefined && !/^[1-9]\d{0,9}$/.test(address.version)) {
        throw new SecretStoreError(`vault ${host}: a KV v2 version is a positive whole number (${where})`, "invalid");
      }
      const loginsBefore = logins;
      let t = await currentToken();
      let answer = await readOnce(address, t);
      if (answer.status === 403 && auth.kind !== "token" && logins === loginsBefore) {
        if (token === t) token = undefined; // refused: this token is done, whatever its lease said
        t = await currentToken();
        answer = await readOnce(address, t); // a 403 again is the policy's answer: the fresh token is kept
      }
      if (answer.status !== 200) throw statusError(answer.status, host, where, false);
      const outer = objectAt(jsonObject(answer), "data");
      const data = objectAt(outer, "data");
      const version = objectAt(outer, "metadata")?.version;
      if (!data || typeof version !== "number" || !Number.isInteger(version)) {
        throw new SecretStoreError(`vault ${host}: the answer for ${where} is not a KV v2 secret`, "invalid", answer.status);
      }
      let raw: unknown;
      if (address.field !== undefined) {
        if (!Object.hasOwn(data, address.field)) {
          throw new SecretStoreError(`vault ${host}: ${where} has no field "${address.field}"`, "not_found", answer.status);
        }
        raw = data[address.field];
      } else {
        const keys = Object.keys(data);
        if (keys.length !== 1) {
          throw new SecretStoreError(`vault ${host}: ${where} holds ${keys.length} keys; name one as ${address.path}#<field>`, "invalid", answer.status);
        }
        raw = data[keys[0]!];
      }
      const value = raw === null || raw === undefined ? undefined : typeof raw === "string" ? raw : JSON.stringify(raw);
      if (value === undefined) {
        throw new SecretStoreError(`vault ${host}: the value at ${where}${address.field ? `#${address.field}` : ""} is null`, "invalid", answer.status);
      }
      return { value: new Secret(value), version: String(version) };
    },

    sentValues(): readonly Secret[] {
      const values: Secret[] = [];
      if (token) values.push(token.value);
      if (auth.kind === "token" && (!token || token.value !== auth.token)) values.push(auth.token);
      if (auth.kind === "approle") values.push(auth.secretId);
      if (lastJwt) values.push(lastJwt);
      return values;
    },
  };
}

function parseAddress(address: string): { origin: string; host: string } {
  let u: URL;
  try {
    u = new URL(address);
  } catch {
    throw new SecretStoreError("vault: the address is not a URL", "invalid");
  }
  if (u.protocol !== "https:") throw new SecretStoreError(`vault ${u.host}: only https:// addresses are used`, "invalid");
  if ((u.pathname !== "/" && u.pathname !== "") || u.search || u.hash || u.username || u.password) {
    throw new SecretStoreError(`vault ${u.host}: the address is https://host[:port] without a path, query or user`, "invalid");
  }
  return { origin: u.origin, host: u.host };
}

/** A mount or path: segments of visible characters, no empty, "." or ".." segment. */
function validPath(path: string): boolean {
  if (!path || path.startsWith("/") || path.endsWith("/")) return false;
  return path.split("/").every((s) => s !== "" && s !== "." && s !== ".." && !/[\u0000-\u001f\u007f?#%\\]/.test(s));
}

function checkedMount(mount: string, host: string): string {
  const m = mount.replace(/^\/+|\/+$/g, "");
  if (!validPath(m)) throw new SecretStoreError(`vault ${host}: "${mount}" is not a mount path`, "invalid");
  return encodePath(m);
}

function encodePath(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}

function objectAt(o: Record<string, unknown> | undefined, key: string): Record<string, unknown> | undefined {
  const v = o?.[key];
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** Vault's status codes in words of our own (its `errors` text is never repeated: it may echo the input). */
function statusError(status: number, host: string, where: string, isLogin: boolean): SecretStoreError {
  if (status === 404) return new SecretStoreError(`vault ${host}: ${where} was not found`, "not_found", status);
  if (status === 403 || status === 401 || (isLogin && status === 400)) {
    return new SecretStoreError(`vault ${host}: ${isLogin ? `the ${where} was refused` : `access to ${where} was denied`}`, "denied", status);
  }
  if (status >= 500 || status === 429) {
    return new SecretStoreError(`vault ${host}: ${where} failed with HTTP ${status} (unavailable or sealed)`, "unreachable", status);
  }
  return new SecretStoreError(`vault ${host}: ${where} was answered with HTTP ${status}`, "invalid", status);
}
