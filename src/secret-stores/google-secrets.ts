// Google Secret Manager (issue 36): reads one secret version through the documented REST API
// (GET /v1/projects/<project>/secrets/<id>/versions/<version|latest>:access) with an OAuth access token
// bought by the service account's JWT bearer grant (RFC 7523 as Google documents it for server to server
// applications: an RS256 JWT signed with the key file's private_key, kid = private_key_id, iss =
// client_email, aud = token_uri, scope = cloud-platform, lifetime one hour). Every exchange goes through
// storeHttp, so the broker's upstream TLS client and network guard apply to the token endpoint as well.
//
// Nothing the store or the token endpoint writes in an error is repeated: messages name the secret and
// a fixed code at most. The private key is imported once into a non-extractable CryptoKey.

import { importPKCS8, SignJWT } from "jose";
import { Secret } from "../secret.ts";
import { jsonObject, storeHttp, type StoreAnswer, type StoreHttpDeps } from "./store-http.ts";
import { SecretStoreError, type SecretAddress, type SecretRead, type SecretStoreClient } from "./types.ts";

export const GOOGLE_SECRETS_ENDPOINT = "https://secretmanager.googleapis.com";
export const GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token";
export const GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform";
export const JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/** Google accepts assertions that live at most one hour. */
export const ASSERTION_LIFETIME_S = 3600;
/** An access token is renewed this long before it expires (or at half its life, if that is shorter). */
export const TOKEN_RENEW_EARLY_MS = 60_000;
/** How many recently sent tokens and assertions sentValues() keeps while they are still valid. */
const SENT_KEPT = 8;

export interface GoogleSecretsConnection {
  /** The project id (or number) that holds the secrets. */
  readonly project: string;
  /** SECRET: the service account's JSON key file, as text. */
  readonly serviceAccountKey: Secret;
  /** Default https://secretmanager.googleapis.com. */
  readonly endpoint?: string;
  /** Overrides the key file's token_uri (itself defaulting to https://oauth2.googleapis.com/token). */
  readonly tokenUri?: string;
}

export interface GoogleSecretsOptions {
  /** Milliseconds since the epoch (tests move it). */
  readonly now?: () => number;
}

interface ServiceAccount {
  readonly clientEmail: string;
  readonly keyId: string;
  readonly tokenUri: string;
  readonly key: CryptoKey;
}

interface AccessToken {
  readonly value: Secret;
  readonly renewAt: number;
}

interface Sent {
  readonly value: Secret;
  readonly until: number;
}

const SECRET_ID = /^[A-Za-z0-9_-]{1,255}$/;
const VERSION_ID = /^(latest|[1-9][0-9]{0,18}|[A-Za-z][A-Za-z0-9_-]{0,62})$/;
const PROJECT_ID = /^[a-z0-9][a-z0-9:.-]{0,62}$/;
/** OAuth error codes (RFC 6749 5.2) that may be named in a message; any other text is the server's own. */
const OAUTH_ERRORS = new Set(["invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type", "invalid_scope"]);
/** google.rpc.Code names that may be named in a message. */
const RPC_STATUSES = new Set([
  "INVALID_ARGUMENT",
  "FAILED_PRECONDITION",
  "OUT_OF_RANGE",
  "UNAUTHENTICATED",
  "PERMISSION_DENIED",
  "NOT_FOUND",
  "ABORTED",
  "ALREADY_EXISTS",
  "RESOURCE_EXHAUSTED",
  "CANCELLED",
  "DATA_LOSS",
  "UNKNOWN",
  "INTERNAL",
  "NOT_IMPLEMENTED",
  "UNAVAILABLE",
  "DEADLINE_EXCEEDED",
]);

export function createGoogleSecretsClient(deps: StoreHttpDeps, conn: GoogleSecretsConnection, opts: GoogleSecretsOptions = {}): SecretStoreClient {
  const now = opts.now ?? Date.now;
  const endpoint = (conn.endpoint ?? GOOGLE_SECRETS_ENDPOINT).replace(/\/+$/, "");
  const where = `google secret manager (project ${conn.project})`;
  let account: Promise<ServiceAccount> | undefined;
  let token: AccessToken | undefined;
  let pending: Promise<AccessToken> | undefined;
  const sent: Sent[] = [];

  function noteSent(value: Secret, until: number) {
    sent.push({ value, until });
    if (sent.length > SENT_KEPT) sent.splice(0, sent.length - SENT_KEPT);
  }

  function serviceAccount(): Promise<ServiceAccount> {
    if (!account) {
      const loading = loadServiceAccount(conn, where);
      account = loading;
      // A key that failed to load is tried again on the next read, not remembered as a failure.
      loading.catch(() => {
        if (account === loading) account = undefined;
      });
    }
    return account;
  }

  async function fetchToken(): Promise<AccessToken> {
    const sa = await serviceAccount();
    const iat = Math.floor(now() / 1000);
    const exp = iat + ASSERTION_LIFETIME_S;
    const assertion = await new SignJWT({ scope: GOOGLE_SCOPE })
      .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: sa.keyId })
      .setIssuer(sa.clientEmail)
      .setAudience(sa.tokenUri)
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .sign(sa.key);
    // Noted before it goes: a token endpoint that refuses it may still keep it, and it buys tokens until exp.
    noteSent(new Secret(assertion), exp * 1000);
    const body = new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString();
    const answer = await storeHttp(deps, {
      method: "POST",
      url: sa.tokenUri,
      headers: [
        ["Content-Type", "application/x-www-form-urlencoded"],
        ["Accept", "application/json"],
      ],
      body: new TextEncoder().encode(body),
    });
    const host = new URL(sa.tokenUri).host;
    if (answer.status !== 200) throw tokenRefusal(answer, host, where);
    const json = jsonObject(answer);
    const accessToken = json?.access_token;
    if (typeof accessToken !== "string" || accessToken === "" || /[\s,]/.test(accessToken)) {
      throw new SecretStoreError(`${where}: the token endpoint ${host} answered without an access token`, "invalid", answer.status);
    }
    if (typeof json?.token_type === "string" && json.token_type.toLowerCase() !== "bearer") {
      throw new SecretStoreError(`${where}: the token endpoint ${host} answered with a token that is not a bearer token`, "invalid", answer.status);
    }
    const issuedAt = now();
    const expiresIn = typeof json?.expires_in === "number" && json.expires_in > 0 ? json.expires_in : ASSERTION_LIFETIME_S;
    const lifetimeMs = expiresIn * 1000;
    const value = new Secret(accessToken);
    noteSent(value, issuedAt + lifetimeMs);
    return { value, renewAt: issuedAt + lifetimeMs - Math.min(TOKEN_RENEW_EARLY_MS, lifetimeMs / 2) };
  }

  /** The cached token while it is fresh; otherwise one token request, shared by every caller waiting for it. */
  function currentToken(): Promise<AccessToken> {
    if (token && now() < token.renewAt) return Promise.resolve(token);
    pending ??= fetchToken()
      .then((t) => {
        token = t;
        return t;
      })
      .finally(() => {
        pending = undefined;
      });
    return pending;
  }

  async function access(name: string, bearer: AccessToken): Promise<StoreAnswer> {
    return storeHttp(deps, {
      method: "GET",
      url: `${endpoint}/v1/${name}:access`,
      headers: [
        ["Authorization", `Bearer ${bearer.value.reveal()}`],
        ["Accept", "application/json"],
      ],
    });
  }

  return {
    async read(address: SecretAddress): Promise<SecretRead> {
      const version = address.version ?? "latest";
      const label = `${where}: secret ${address.path} version ${version}`;
      if (!PROJECT_ID.test(conn.project)) throw new SecretStoreError(`${where}: the project id is not a Google project id`, "invalid");
      if (!SECRET_ID.test(address.path)) throw new SecretStoreError(`${label}: a secret id is 1 to 255 letters, digits, - or _`, "invalid");
      if (!VERSION_ID.test(version)) throw new SecretStoreError(`${label}: a version is a number, "latest" or an alias`, "invalid");
      const name = `projects/${conn.project}/secrets/${address.path}/versions/${version}`;

      let bearer = await currentToken();
      let answer = await access(name, bearer);
      if (answer.status === 401) {
        // The token was revoked or expired early: buy one new token (unless another read already did) and retry once.
        if (token === bearer) token = undefined;
        bearer = await currentToken();
        answer = await access(name, bearer);
      }
      if (answer.status !== 200) throw accessRefusal(answer, label);

      const json = jsonObject(answer);
      const payload = json?.payload as Record<string, unknown> | undefined;
      const data = payload && typeof payload === "object" ? payload.data : undefined;
      const returned = typeof json?.name === "string" ? /\/versions\/([1-9][0-9]*)$/.exec(json.name)?.[1] : undefined;
      if (typeof data !== "string" || !returned) throw new SecretStoreError(`${label}: the answer is not an AccessSecretVersionResponse`, "invalid", 200);
      const bytes = base64Bytes(data);
      if (!bytes) throw new SecretStoreError(`${label}: the payload is not base64`, "invalid", 200);
      const crc = payload?.dataCrc32c;
      if (crc !== undefined && String(crc) !== String(crc32c(bytes))) {
        bytes.fill(0);
        throw new SecretStoreError(`${label}: the payload does not match its CRC32C checksum`, "invalid", 200);
      }
      let text: string;
      try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      } catch {
        throw new SecretStoreError(`${label}: the payload is not UTF-8 text`, "invalid", 200);
      } finally {
        bytes.fill(0);
      }
      if (address.field === undefined) return { value: new Secret(text), version: returned };
      return { value: fieldOf(text, address.field, label), version: returned };
    },

    sentValues(): readonly Secret[] {
      const t = now();
      return sent.filter((s) => s.until > t).map((s) => s.value);
    },
  };
}

async function loadServiceAccount(conn: GoogleSecretsConnection, where: string): Promise<ServiceAccount> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(conn.serviceAccountKey.reveal());
  } catch {
    // JSON.parse's message quotes the text around the error: never repeated.
    throw new SecretStoreError(`${where}: the service account key is not JSON`, "invalid");
  }
  const k = (parsed && typeof parsed === "object" ? parsed : {}) as Record<string, unknown>;
  if (k.type !== undefined && k.type !== "service_account") throw new SecretStoreError(`${where}: the key file is not a service account key`, "invalid");
  for (const field of ["client_email", "private_key", "private_key_id"] as const) {
    if (typeof k[field] !== "string" || k[field] === "") throw new SecretStoreError(`${where}: the service account key has no ${field}`, "invalid");
  }
  const tokenUri = conn.tokenUri ?? (typeof k.token_uri === "string" && k.token_uri !== "" ? k.token_uri : GOOGLE_TOKEN_URI);
  let url: URL;
  try {
    url = new URL(tokenUri);
  } catch {
    throw new SecretStoreError(`${where}: the token_uri is not a URL`, "invalid");
  }
  if (url.protocol !== "https:" || url.username || url.password) throw new SecretStoreError(`${where}: the token_uri must be an https:// address`, "invalid");
  let key: CryptoKey;
  try {
    key = (await importPKCS8(k.private_key as string, "RS256")) as CryptoKey;
  } catch {
    throw new SecretStoreError(`${where}: the service account's private_key is not an RSA PKCS #8 key`, "invalid");
  }
  return { clientEmail: k.client_email as string, keyId: k.private_key_id as string, tokenUri, key };
}

function tokenRefusal(answer: StoreAnswer, host: string, where: string): SecretStoreError {
  if (answer.status >= 500 || answer.status === 429) {
    return new SecretStoreError(`${where}: the token endpoint ${host} is unavailable (HTTP ${answer.status})`, "unreachable", answer.status);
  }
  const code = jsonObject(answer)?.error;
  const named = typeof code === "string" && OAUTH_ERRORS.has(code) ? ` (${code})` : "";
  if (answer.status === 400 || answer.status === 401 || answer.status === 403) {
    return new SecretStoreError(`${where}: the token endpoint ${host} refused the service account's assertion${named}`, "denied", answer.status);
  }
  return new SecretStoreError(`${where}: the token endpoint ${host} answered HTTP ${answer.status}${named}`, "invalid", answer.status);
}

function accessRefusal(answer: StoreAnswer, label: string): SecretStoreError {
  const err = jsonObject(answer)?.error as Record<string, unknown> | undefined;
  const status = err && typeof err === "object" && typeof err.status === "string" && RPC_STATUSES.has(err.status) ? err.status : undefined;
  const code = status ? ` (${status})` : "";
  switch (true) {
    case answer.status === 404:
      return new SecretStoreError(`${label}: not found${code}`, "not_found", 404);
    case answer.status === 401:
      return new SecretStoreError(`${label}: the access token was refused twice${code}`, "denied", 401);
    case answer.status === 403:
      return new SecretStoreError(`${label}: access denied${code}`, "denied", 403);
    case answer.status === 400 && status === "FAILED_PRECONDITION":
      // A disabled or destroyed version: it exists, but no value can be read from it.
      return new SecretStoreError(`${label}: the version is disabled or destroyed${code}`, "not_found", 400);
    case answer.status === 429 || answer.status >= 500:
      return new SecretStoreError(`${label}: the store is unavailable (HTTP ${answer.status})${code}`, "unreachable", answer.status);
    default:
      return new SecretStoreError(`${label}: the store answered HTTP ${answer.status}${code}`, "invalid", answer.status);
  }
}

/** One field of a JSON object secret: a string as it is, any other JSON value as its JSON text. */
function fieldOf(text: string, field: string, label: string): Secret {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new SecretStoreError(`${label}: the value is not a JSON object, so it has no field ${field}`, "invalid");
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new SecretStoreError(`${label}: the value is not a JSON object, so it has no field ${field}`, "invalid");
  }
  if (!Object.hasOwn(parsed, field)) throw new SecretStoreError(`${label}: no field ${field}`, "not_found");
  const v = (parsed as Record<string, unknown>)[field];
  if (v === null || v === undefined) throw new SecretStoreError(`${label}: the field ${field} is null`, "not_found");
  return new Secret(typeof v === "string" ? v : JSON.stringify(v));
}

/** Strict standard base64 (Google's JSON mapping of bytes); undefined when it is not. */
function base64Bytes(data: string): Uint8Array | undefined {
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(data)) return undefined;
  return new Uint8Array(Buffer.from(data, "base64"));
}

let CRC32C_TABLE: Uint32Array | undefined;

/** CRC-32C (Castagnoli), the checksum Secret Manager reports as payload.dataCrc32c. */
export function crc32c(bytes: Uint8Array): number {
  if (!CRC32C_TABLE) {
    CRC32C_TABLE = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
      CRC32C_TABLE[n] = c >>> 0;
    }
  }
  let crc = 0xffffffff;
  for (const b of bytes) crc = CRC32C_TABLE[(crc ^ b) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
