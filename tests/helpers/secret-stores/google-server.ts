// A stand-in for Google Secret Manager and Google's OAuth token endpoint, written from the published
// references: "Using OAuth 2.0 for Server to Server Applications" (the JWT bearer grant: an RS256 JWT whose
// iss is the service account's email, scope the requested scopes, aud the token endpoint, iat/exp at most
// an hour apart) and the REST reference of projects.secrets.versions.access (GET
// /v1/projects/*/secrets/*/versions/*:access → {name, payload: {data, dataCrc32c}}, "latest" the most
// recently created version, a disabled or destroyed version FAILED_PRECONDITION, errors as
// {error: {code, message, status}}).
//
// The token endpoint verifies every assertion with jose against the service account's public key (and
// its kid): a wrong signature, audience, issuer, scope, algorithm or lifetime is refused with Google's
// OAuth error shape ({error, error_description}). Error messages carry `canary` so tests can prove the
// client never repeats a server's text.

import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { decodeProtectedHeader, jwtVerify, type CryptoKey as JoseKey, type KeyObject } from "jose";
import { crc32c } from "../../../src/secret-stores/google-secrets.ts";
import { createTestPki, type TestPki } from "../pki.ts";

export const GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";

export interface GoogleServerOptions {
  /** The project id the secrets live in (answers name the project number, as Google's do). */
  readonly project: string;
  readonly projectNumber?: string;
  /** The service account the token endpoint knows: its email, key id and public key. */
  readonly clientEmail: string;
  readonly keyId: string;
  readonly publicKey: JoseKey | KeyObject;
  /** Host names the certificate (and so the token URI) carries besides 127.0.0.1. */
  readonly dns?: string[];
  /** The host name used in tokenUri (default 127.0.0.1); it must be in `dns`. */
  readonly tokenHost?: string;
  /** Lifetime of issued access tokens, seconds (Google: 3600). */
  readonly tokenLifetimeS?: number;
  /** The server's clock in ms (shared with the client's in tests that move time). */
  readonly now?: () => number;
}

interface Version {
  readonly data: Uint8Array;
  state: "ENABLED" | "DISABLED" | "DESTROYED";
}

export interface GoogleCounters {
  /** Token requests received, answered with a token, refused. */
  tokenRequests: number;
  tokensIssued: number;
  tokenRefusals: number;
  /** versions:access requests received, answered with a payload, refused as unauthenticated. */
  accessRequests: number;
  accessed: number;
  unauthenticated: number;
}

export interface GoogleServer {
  readonly port: number;
  readonly pki: TestPki;
  /** https://127.0.0.1:<port> — the Secret Manager endpoint. */
  readonly endpoint: string;
  /** The token endpoint's URL, what a key file's token_uri and the JWT's aud hold. */
  readonly tokenUri: string;
  readonly counters: GoogleCounters;
  /** Why each refused assertion was refused (the server's own words, for tests). */
  readonly refusals: string[];
  /** Every assertion and Authorization header value received. */
  readonly assertions: string[];
  readonly bearers: string[];
  /** Tokens issued, in order. */
  readonly issued: string[];
  /** Text placed in every error message the server writes. */
  readonly canary: string;
  /** Adds a version (creating the secret); returns its number. */
  addVersion(secret: string, data: string | Uint8Array): number;
  setState(secret: string, version: number, state: Version["state"]): void;
  /** The service account loses (or regains) secretmanager.versions.access on the secret. */
  deny(secret: string, denied?: boolean): void;
  /** Every issued token stops being accepted (as after a revocation): the next access is a 401. */
  revokeTokens(): void;
  /** While on, every bearer is refused with 401 (a service account whose tokens are never accepted). */
  refuseBearers(on: boolean): void;
  /** Stop switch: while stopped every connection is cut without an answer. */
  stop(): void;
  start(): void;
  /** The next `n` access requests are answered 503 UNAVAILABLE. */
  failNext(n: number): void;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export async function startGoogleServer(opts: GoogleServerOptions): Promise<GoogleServer> {
  const now = opts.now ?? Date.now;
  const projectNumber = opts.projectNumber ?? "123456789012";
  const lifetime = opts.tokenLifetimeS ?? 3600;
  const pki = await createTestPki({ dns: ["localhost", ...(opts.dns ?? [])], ips: ["127.0.0.1"] });
  const canary = `canary-${randomBytes(6).toString("hex")}`;
  const secrets = new Map<string, Version[]>();
  const denied = new Set<string>();
  const tokens = new Map<string, number>(); // token → expiry (server clock, ms)
  const counters: GoogleCounters = { tokenRequests: 0, tokensIssued: 0, tokenRefusals: 0, accessRequests: 0, accessed: 0, unauthenticated: 0 };
  const refusals: string[] = [];
  const assertions: string[] = [];
  const bearers: string[] = [];
  const issued: string[] = [];
  const sockets = new Set<Socket>();
  let stopped = false;
  let refusing = false;
  let failing = 0;
  let port = 0;
  const tokenPath = "/token";

  const json = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json; charset=UTF-8", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  const oauthError = (res: ServerResponse, status: number, error: string, description: string, why: string) => {
    counters.tokenRefusals++;
    refusals.push(why);
    json(res, status, { error, error_description: `${description} ${canary}` });
  };
  const rpcError = (res: ServerResponse, code: number, status: string, message: string) =>
    json(res, code, { error: { code, message: `${message} ${canary}`, status } });

  async function token(req: IncomingMessage, res: ServerResponse, body: Buffer) {
    counters.tokenRequests++;
    if (req.method !== "POST") return oauthError(res, 405, "invalid_request", "Method not allowed.", "method");
    if (!(req.headers["content-type"] ?? "").toLowerCase().startsWith("application/x-www-form-urlencoded")) {
      return oauthError(res, 400, "invalid_request", "Unsupported content type.", "content-type");
    }
    const form = new URLSearchParams(body.toString("utf8"));
    if (form.get("grant_type") !== JWT_BEARER) return oauthError(res, 400, "unsupported_grant_type", "Invalid grant_type.", "grant_type");
    const assertion = form.get("assertion") ?? "";
    assertions.push(assertion);
    let header;
    try {
      header = decodeProtectedHeader(assertion);
    } catch {
      return oauthError(res, 400, "invalid_grant", "Invalid JWT.", "not a JWT");
    }
    if (header.alg !== "RS256") return oauthError(res, 400, "invalid_grant", "Invalid JWT Signature.", `alg ${String(header.alg)}`);
    if (header.kid !== opts.keyId) return oauthError(res, 400, "invalid_grant", "Invalid JWT Signature.", "kid");
    let claims;
    try {
      ({ payload: claims } = await jwtVerify(assertion, opts.publicKey, {
        algorithms: ["RS256"],
        issuer: opts.clientEmail,
        audience: `https://${opts.tokenHost ?? "127.0.0.1"}:${port}${tokenPath}`,
        requiredClaims: ["iss", "aud", "iat", "exp", "scope"],
        currentDate: new Date(now()),
      }));
    } catch (err) {
      const code = (err as { code?: string }).code ?? "unknown";
      return oauthError(res, 400, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.", code);
    }
    const iat = claims.iat!;
    const exp = claims.exp!;
    const t = Math.floor(now() / 1000);
    if (exp - iat > 3600 || exp <= iat || iat > t + 300)
      return oauthError(res, 400, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes).", "lifetime");
    const scopes = typeof claims.scope === "string" ? claims.scope.split(" ") : [];
    if (!scopes.includes(GOOGLE_SCOPE)) return oauthError(res, 400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.", "scope");
    const value = `ya29.${randomBytes(24).toString("base64url")}`;
    tokens.set(value, now() + lifetime * 1000);
    issued.push(value);
    counters.tokensIssued++;
    json(res, 200, { access_token: value, expires_in: lifetime, token_type: "Bearer" });
  }

  function access(req: IncomingMessage, res: ServerResponse, path: string) {
    counters.accessRequests++;
    if (req.method !== "GET") return rpcError(res, 405, "INVALID_ARGUMENT", "Method not allowed.");
    const auth = req.headers.authorization ?? "";
    bearers.push(auth);
    const m = /^Bearer (\S+)$/.exec(auth);
    const expiry = m ? tokens.get(m[1]!) : undefined;
    if (refusing || expiry === undefined || expiry <= now()) {
      counters.unauthenticated++;
      res.setHeader("www-authenticate", 'Bearer realm="https://accounts.google.com/", error="invalid_token"');
      return rpcError(res, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token.");
    }
    if (failing > 0) {
      failing--;
      return rpcError(res, 503, "UNAVAILABLE", "The service is currently unavailable.");
    }
    const p = /^\/v1\/projects\/([^/]+)\/secrets\/([^/]+)\/versions\/([^/:]+):access$/.exec(path);
    if (!p) return rpcError(res, 404, "NOT_FOUND", "Not found.");
    const [, project, secretId, versionId] = p as unknown as [string, string, string, string];
    const resource = `projects/${projectNumber}/secrets/${secretId}`;
    if (project !== opts.project && project !== projectNumber) {
      return rpcError(
        res,
        403,
        "PERMISSION_DENIED",
        `Permission 'secretmanager.versions.access' denied for resource '${resource}/versions/${versionId}' (or it may not exist).`,
      );
    }
    if (denied.has(secretId)) {
      return rpcError(
        res,
        403,
        "PERMISSION_DENIED",
        `Permission 'secretmanager.versions.access' denied for resource '${resource}/versions/${versionId}' (or it may not exist).`,
      );
    }
    const versions = secrets.get(secretId);
    if (!versions || versions.length === 0) return rpcError(res, 404, "NOT_FOUND", `Secret [${resource}] not found or has no versions.`);
    const n = versionId === "latest" ? versions.length : /^[1-9][0-9]*$/.test(versionId) ? Number(versionId) : Number.NaN;
    if (!Number.isFinite(n)) return rpcError(res, 400, "INVALID_ARGUMENT", `Invalid resource field value in the request.`);
    const v = versions[n - 1];
    if (!v) return rpcError(res, 404, "NOT_FOUND", `Secret Version [${resource}/versions/${versionId}] not found.`);
    if (v.state !== "ENABLED") return rpcError(res, 400, "FAILED_PRECONDITION", `Secret Version [${resource}/versions/${n}] is in ${v.state} state.`);
    counters.accessed++;
    json(res, 200, { name: `${resource}/versions/${n}`, payload: { data: Buffer.from(v.data).toString("base64"), dataCrc32c: String(crc32c(v.data)) } });
  }

  const server = createServer({ cert: pki.certPem, key: pki.keyPem }, (req, res) => {
    if (stopped) return req.socket.destroy();
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (stopped) return req.socket.destroy();
      const path = new URL(req.url ?? "/", "https://x").pathname;
      if (path === tokenPath) {
        token(req, res, Buffer.concat(chunks)).catch(() => rpcError(res, 500, "INTERNAL", "Internal error."));
        return;
      }
      access(req, res, path);
    });
  });
  server.on("secureConnection", (s: Socket) => {
    if (stopped) return s.destroy();
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
  const close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });

  return {
    port,
    pki,
    endpoint: `https://127.0.0.1:${port}`,
    tokenUri: `https://${opts.tokenHost ?? "127.0.0.1"}:${port}${tokenPath}`,
    counters,
    refusals,
    assertions,
    bearers,
    issued,
    canary,
    addVersion(secret, data) {
      const list = secrets.get(secret) ?? [];
      list.push({ data: typeof data === "string" ? new TextEncoder().encode(data) : data, state: "ENABLED" });
      secrets.set(secret, list);
      return list.length;
    },
    setState(secret, version, state) {
      const v = secrets.get(secret)?.[version - 1];
      if (!v) throw new Error(`no version ${version} of ${secret}`);
      v.state = state;
    },
    deny(secret, on = true) {
      if (on) denied.add(secret);
      else denied.delete(secret);
    },
    revokeTokens() {
      tokens.clear();
    },
    refuseBearers(on) {
      refusing = on;
    },
    stop() {
      stopped = true;
      for (const s of sockets) s.destroy();
    },
    start() {
      stopped = false;
    },
    failNext(n) {
      failing = n;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
