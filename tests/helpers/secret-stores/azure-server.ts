// A stand-in for Azure Key Vault and its Microsoft identity platform token endpoint, on 127.0.0.1 over HTTPS
// (a throwaway CA), written from the published references:
// - Token: POST /{tenant}/oauth2/v2.0/token, application/x-www-form-urlencoded, grant_type=client_credentials,
//   client_id, client_secret, scope=https://vault.azure.net/.default. Success: {token_type: "Bearer",
//   expires_in, ext_expires_in, access_token}. Refusals in Entra's shape: {error, error_description:
//   "AADSTSnnn: ...", error_codes: [nnn], timestamp, trace_id, correlation_id}.
// - Get Secret: GET /secrets/{name}/{version}?api-version=7.4 with Authorization: Bearer; SecretBundle
//   {value, id: "<vault>/secrets/<name>/<version>", attributes, tags, contentType}. Errors {error: {code,
//   message, innererror?}}: 401 Unauthorized with the Bearer challenge (authorization, resource), 403 Forbidden
//   (disabled secret: innererror SecretDisabled; no permission: AccessDenied), 404 SecretNotFound,
//   400 BadParameter for a missing or unknown api-version.
// The AADSTS codes and Key Vault messages are the documented ones as far as known; the messages deliberately
// include text a client must not repeat (error_description, the vault's message).

import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { createTestPki, type TestPki } from "../pki.ts";

export const KEYVAULT_SCOPE = "https://vault.azure.net/.default";
const API_VERSIONS = new Set(["7.0", "7.1", "7.2", "7.3", "7.4", "7.5", "2016-10-01"]);

export interface AzureSecretVersion {
  readonly version: string;
  value: string;
  enabled: boolean;
  readonly created: number;
}

export interface AzureCounters {
  /** Every POST/GET that reached the token endpoint. */
  tokenRequests: number;
  tokensIssued: number;
  tokenRefusals: number;
  /** Get Secret requests that reached the vault (any answer). */
  secretRequests: number;
  /** Get Secret answers with 200. */
  secretReads: number;
  /** Get Secret answers with 401. */
  unauthorized: number;
}

export interface TokenRefusal {
  readonly status: number;
  readonly error: string;
  readonly code: number;
}

export interface AzureServer {
  readonly port: number;
  readonly pki: TestPki;
  /** https://127.0.0.1:<port>: both the vault URL and the authority. */
  readonly url: string;
  readonly tenant: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly counters: AzureCounters;
  /** What each refused token request was told, in order. */
  readonly refusals: TokenRefusal[];
  /** Every request that reached the server: method, path with query, content type, body (as text). */
  readonly requests: { method: string; url: string; contentType: string; authorization: string; body: string }[];
  /** Every access token issued, in order. */
  readonly issued: string[];
  /** expires_in for new tokens (seconds). */
  tokenLifetimeS: number;
  /** Stop switch: every connection is dropped without an answer while true. */
  stopped: boolean;
  /** When set, the vault answers every Get Secret with this status (a 5xx outage). */
  failWith: number | undefined;
  /** The vault answers 401 to every token, even one just issued (an app whose tokens the vault never accepts). */
  refuseTokens: boolean;
  /** Overrides the 401 challenge's parameters (another tenant or resource). */
  challenge: { authorization?: string; resource?: string };
  /** Secret names this client may not read (403 Forbidden, AccessDenied). */
  readonly noPermission: Set<string>;
  /** Adds a new version (the latest) and returns its id. */
  setSecret(name: string, value: string): string;
  /** Disables a version (default: the latest). */
  disable(name: string, version?: string): void;
  /** Every token issued so far stops working (as after a credential reset or key rollover). */
  revokeTokens(): void;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export async function startAzureServer(
  opts: { tenant?: string; clientId?: string; clientSecret?: string; tokenLifetimeS?: number } = {},
): Promise<AzureServer> {
  const pki = await createTestPki();
  const tenant = opts.tenant ?? "72f988bf-86f1-41af-91ab-2d7cd011db47";
  const clientId = opts.clientId ?? "a0b1c2d3-0000-4000-8000-00000000c11e";
  const clientSecret = opts.clientSecret ?? `Qx8~${crypto.randomUUID()}.s3cr3t`;
  const secrets = new Map<string, { name: string; versions: AzureSecretVersion[] }>();
  const valid = new Set<string>();
  let url = "";

  const state: AzureServer = {
    port: 0,
    pki,
    url,
    tenant,
    clientId,
    clientSecret,
    counters: { tokenRequests: 0, tokensIssued: 0, tokenRefusals: 0, secretRequests: 0, secretReads: 0, unauthorized: 0 },
    refusals: [],
    requests: [],
    issued: [],
    tokenLifetimeS: opts.tokenLifetimeS ?? 3599,
    stopped: false,
    failWith: undefined,
    refuseTokens: false,
    challenge: {},
    noPermission: new Set(),
    setSecret(name, value) {
      const key = name.toLowerCase();
      const entry = secrets.get(key) ?? { name, versions: [] };
      secrets.set(key, entry);
      const version = crypto.randomUUID().replaceAll("-", "");
      entry.versions.push({ version, value, enabled: true, created: Math.floor(Date.now() / 1000) });
      return version;
    },
    disable(name, version) {
      const entry = secrets.get(name.toLowerCase());
      const v = version ? entry?.versions.find((x) => x.version === version) : entry?.versions.at(-1);
      if (!v) throw new Error(`no such secret version ${name}/${version}`);
      v.enabled = false;
    },
    revokeTokens() {
      valid.clear();
    },
    close: async () => {},
    [Symbol.asyncDispose]: async () => {},
  };

  function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": String(Buffer.byteLength(text)), ...headers });
    res.end(text);
  }

  function refuse(res: ServerResponse, status: number, error: string, code: number, text: string): void {
    state.counters.tokenRefusals++;
    state.refusals.push({ status, error, code });
    const traceId = crypto.randomUUID();
    const correlationId = crypto.randomUUID();
    const timestamp = new Date()
      .toISOString()
      .replace("T", " ")
      .replace(/\.\d+Z$/, "Z");
    send(res, status, {
      error,
      error_description: `AADSTS${code}: ${text} Trace ID: ${traceId} Correlation ID: ${correlationId} Timestamp: ${timestamp}`,
      error_codes: [code],
      timestamp,
      trace_id: traceId,
      correlation_id: correlationId,
      error_uri: `${url}/error?code=${code}`,
    });
  }

  function token(req: IncomingMessage, res: ServerResponse, body: Buffer, pathTenant: string): void {
    state.counters.tokenRequests++;
    if (pathTenant !== tenant) return refuse(res, 400, "invalid_request", 90002, `Tenant '${pathTenant}' not found.`);
    if (req.method !== "POST") return refuse(res, 400, "invalid_request", 900561, "The endpoint only accepts POST requests.");
    const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    // Entra reads the body only as a form: anything else (JSON included) reads as a body without parameters.
    const form = type === "application/x-www-form-urlencoded" ? new URLSearchParams(body.toString("utf8")) : new URLSearchParams();
    for (const p of ["grant_type", "client_id", "scope"]) {
      if (!form.get(p)) return refuse(res, 400, "invalid_request", 900144, `The request body must contain the following parameter: '${p}'.`);
    }
    for (const p of new Set(form.keys())) {
      if (form.getAll(p).length > 1) return refuse(res, 400, "invalid_request", 90014, `The request body contains a duplicate parameter '${p}'.`);
    }
    if (form.get("grant_type") !== "client_credentials") {
      return refuse(res, 400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.");
    }
    if (form.get("client_id") !== clientId) {
      return refuse(res, 400, "unauthorized_client", 700016, `Application with identifier '${form.get("client_id")}' was not found in the directory.`);
    }
    const scope = form.get("scope")!;
    if (scope !== KEYVAULT_SCOPE) {
      return refuse(
        res,
        400,
        "invalid_scope",
        1002012,
        `The provided value for scope ${scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).`,
      );
    }
    const secret = form.get("client_secret");
    if (!secret) {
      return refuse(
        res,
        401,
        "invalid_client",
        7000216,
        "'client_assertion', 'client_secret' or 'request' is required for the 'client_credentials' grant type.",
      );
    }
    if (secret !== clientSecret) {
      return refuse(
        res,
        401,
        "invalid_client",
        7000215,
        `Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '${clientId}'.`,
      );
    }
    const access = `eyJ0eXAiOiJKV1Qi.${Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString("base64url")}.sig`;
    valid.add(access);
    state.issued.push(access);
    state.counters.tokensIssued++;
    send(res, 200, { token_type: "Bearer", expires_in: state.tokenLifetimeS, ext_expires_in: state.tokenLifetimeS, access_token: access });
  }

  function vaultError(res: ServerResponse, status: number, code: string, message: string, inner?: string, headers?: Record<string, string>): void {
    send(res, status, { error: { code, message, ...(inner ? { innererror: { code: inner } } : {}) } }, headers);
  }

  function getSecret(req: IncomingMessage, res: ServerResponse, u: URL, name: string, version: string): void {
    state.counters.secretRequests++;
    if (req.method !== "GET") return vaultError(res, 405, "BadParameter", `The HTTP method '${req.method}' is not supported.`);
    const apiVersion = u.searchParams.get("api-version");
    if (!apiVersion) return vaultError(res, 400, "BadParameter", "The request URI is missing the required api-version parameter.");
    if (!API_VERSIONS.has(apiVersion)) return vaultError(res, 400, "BadParameter", `The specified version (${apiVersion}) is not recognized.`);
    const auth = req.headers.authorization ?? "";
    const bearer = /^Bearer (\S+)$/.exec(auth)?.[1];
    if (!bearer || !valid.has(bearer) || state.refuseTokens) {
      state.counters.unauthorized++;
      const authorization = state.challenge.authorization ?? `${url}/${tenant}`;
      const resource = state.challenge.resource ?? "https://vault.azure.net";
      return vaultError(
        res,
        401,
        "Unauthorized",
        bearer ? `AKV10032: Invalid issuer. Token ${bearer.slice(0, 12)} is not valid.` : "AKV10000: Request is missing a Bearer or PoP token.",
        undefined,
        { "www-authenticate": `Bearer authorization="${authorization}", resource="${resource}"` },
      );
    }
    if (state.failWith !== undefined) return vaultError(res, state.failWith, "ServiceUnavailable", "The service is temporarily unavailable.");
    const entry = secrets.get(name.toLowerCase());
    const v = entry && (version ? entry.versions.find((x) => x.version === version) : entry.versions.at(-1));
    if (!entry || !v) {
      const what = version ? `${name}/${version}` : name;
      return vaultError(
        res,
        404,
        "SecretNotFound",
        `A secret with (name/id) ${what} was not found in this key vault. If you recently deleted this secret you may be able to recover it using the correct recovery command. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125182`,
      );
    }
    if (state.noPermission.has(entry.name)) {
      return vaultError(
        res,
        403,
        "Forbidden",
        `The user, group or application 'appid=${clientId}' does not have secrets get permission on key vault 'test-vault;location=westeurope'.`,
        "AccessDenied",
      );
    }
    if (!v.enabled) return vaultError(res, 403, "Forbidden", "Operation get is not allowed on a disabled secret.", "SecretDisabled");
    state.counters.secretReads++;
    send(res, 200, {
      value: v.value,
      id: `${url}/secrets/${entry.name}/${v.version}`,
      attributes: { enabled: true, created: v.created, updated: v.created, recoveryLevel: "Recoverable+Purgeable", recoverableDays: 90 },
      tags: {},
    });
  }

  const server = createServer({ cert: pki.certPem, key: pki.keyPem }, (req, res) => {
    if (state.stopped) {
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (state.stopped) {
        req.socket.destroy();
        return;
      }
      const body = Buffer.concat(chunks);
      state.requests.push({
        method: req.method ?? "",
        url: req.url ?? "",
        contentType: req.headers["content-type"] ?? "",
        authorization: req.headers.authorization ?? "",
        body: body.toString("utf8"),
      });
      const u = new URL(req.url ?? "/", url);
      const tokenPath = /^\/([^/]+)\/oauth2\/v2\.0\/token$/.exec(u.pathname);
      if (tokenPath) return token(req, res, body, decodeURIComponent(tokenPath[1]!));
      const secretPath = /^\/secrets\/([^/]+)\/?([^/]*)$/.exec(u.pathname);
      if (secretPath) return getSecret(req, res, u, decodeURIComponent(secretPath[1]!), decodeURIComponent(secretPath[2]!));
      vaultError(res, 404, "NotFound", "The requested resource was not found.");
    });
  });
  server.on("connection", (socket) => {
    if (state.stopped) socket.destroy();
  });
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  url = `https://127.0.0.1:${port}`;
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections?.();
    });
  Object.assign(state, { port, url, close, [Symbol.asyncDispose]: close });
  return state;
}
