// A HashiCorp Vault / OpenBao stand-in on 127.0.0.1 over HTTPS, written from Vault's published HTTP API
// reference (KV secrets engine v2, AppRole, JWT/OIDC and Kubernetes auth methods, namespaces):
//
//   GET  /v1/<mount>/data/<path>[?version=N]   X-Vault-Token, X-Vault-Namespace
//        200 { request_id, lease_id, renewable, lease_duration, data: { data, metadata }, wrap_info, warnings, auth }
//        404 { errors: [] } (no such secret or version; a deleted version: data null with its metadata)
//        403 { errors: ["permission denied"] } (unknown or expired token, or a path outside its policy)
//   POST /v1/auth/<approle mount>/login          { role_id, secret_id }   → 200 { auth: { client_token, lease_duration, … } }
//   POST /v1/auth/<jwt|kubernetes mount>/login   { role, jwt }            → the same; the JWT's signature is checked
//        with jose against the role's key, and its audience and subject against the role's bounds; refused: 400.
//
// Its error texts deliberately echo what was sent (as a worst case), so tests can prove a client never repeats them.
// `stop()` makes it unreachable (listener closed, live connections cut), `start()` brings it back on the same port.

import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportSPKI, generateKeyPair, jwtVerify, SignJWT, type CryptoKey as JoseKey } from "jose";
import { createTestPki, type TestPki } from "../pki.ts";

export interface VaultRequestSeen {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

interface KvVersion {
  data: Record<string, unknown> | null;
  created_time: string;
  deletion_time: string;
  destroyed: boolean;
}

interface TokenEntry {
  namespace: string;
  /** path prefixes (after /v1/) the token may read, or "*" */
  allow: string[];
  /** epoch ms, or Infinity */
  expiresAt: number;
  ttlSeconds: number;
}

export interface TokenGrant {
  readonly namespace?: string;
  readonly allow?: string[];
  /** 0: no expiry (like a root token) */
  readonly ttlSeconds?: number;
}

export interface TestVaultServer {
  readonly port: number;
  readonly address: string;
  readonly pki: TestPki;
  /** The CA certificate as a file, for curl --cacert. */
  readonly caFile: string;
  /** Every request as it arrived. */
  readonly requests: VaultRequestSeen[];
  readonly counts: { logins: number; reads: number };
  /** Writes a new version of a KV v2 secret; returns its version number. */
  put(path: string, data: Record<string, unknown>, where?: { namespace?: string; mount?: string }): number;
  deleteVersion(path: string, version: number, where?: { namespace?: string; mount?: string }): void;
  addToken(token: string, grant?: TokenGrant): void;
  revoke(token: string): void;
  addAppRole(roleId: string, secretId: string, grant?: TokenGrant & { mount?: string }): void;
  /** A JWT or Kubernetes role at `mount`; JWTs must be signed by `signJwt`'s key. */
  addJwtRole(mount: string, role: string, bounds: { audience: string; subject: string } & TokenGrant): void;
  /** A JWT signed with the server's trusted test key. */
  signJwt(claims: { sub: string; aud: string; expiresInSeconds?: number }): Promise<string>;
  /** The public key JWT roles trust, PEM (as jwt_validation_pubkeys would hold it). */
  readonly jwtPublicKeyPem: string;
  /** Answers the next requests with these instead (status and raw body). */
  answerNext(...answers: { status: number; body: string }[]): void;
  /** The client tokens issued by logins, in order. */
  readonly issued: string[];
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startVaultServer(opts: { now?: () => number } = {}): Promise<TestVaultServer> {
  const now = opts.now ?? Date.now;
  const pki = await createTestPki();
  const caFile = join(mkdtempSync(join(tmpdir(), "vault-ca-")), "ca.pem");
  writeFileSync(caFile, pki.caPem);
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const jwtPublicKeyPem = await exportSPKI(publicKey as JoseKey);

  const kv = new Map<string, KvVersion[]>(); // "ns|mount|path" → versions (index = version - 1)
  const tokens = new Map<string, TokenEntry>();
  const appRoles = new Map<string, { secretId: string; mount: string; grant: TokenGrant }>();
  const jwtRoles = new Map<string, { audience: string; subject: string; grant: TokenGrant }>(); // "ns|mount|role"
  const requests: VaultRequestSeen[] = [];
  const counts = { logins: 0, reads: 0 };
  const canned: { status: number; body: string }[] = [];
  const issued: string[] = [];
  const sockets = new Set<Socket>();

  const keyOf = (ns: string | undefined, mount: string | undefined, path: string) => `${normNs(ns)}|${mount ?? "secret"}|${path}`;

  function issue(grant: TokenGrant, defaultAllow: string[]): { client_token: string; lease_duration: number } {
    const token = `hvs.${crypto.randomUUID().replaceAll("-", "")}`;
    const ttl = grant.ttlSeconds ?? 3600;
    tokens.set(token, {
      namespace: normNs(grant.namespace),
      allow: grant.allow ?? defaultAllow,
      expiresAt: ttl === 0 ? Number.POSITIVE_INFINITY : now() + ttl * 1000,
      ttlSeconds: ttl,
    });
    issued.push(token);
    return { client_token: token, lease_duration: ttl };
  }

  function send(res: ServerResponse, status: number, body: unknown) {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "cache-control": "no-store" });
    res.end(text);
  }

  function authAnswer(t: { client_token: string; lease_duration: number }, policies: string[], metadata: Record<string, string>) {
    return {
      request_id: crypto.randomUUID(),
      lease_id: "",
      renewable: false,
      lease_duration: 0,
      data: null,
      wrap_info: null,
      warnings: null,
      auth: {
        client_token: t.client_token,
        accessor: crypto.randomUUID(),
        policies,
        token_policies: policies,
        metadata,
        lease_duration: t.lease_duration,
        renewable: true,
        entity_id: crypto.randomUUID(),
        token_type: "service",
        orphan: true,
      },
    };
  }

  async function handle(req: IncomingMessage, res: ServerResponse, body: string) {
    const next = canned.shift();
    if (next) {
      res.writeHead(next.status, { "content-type": "application/json", "content-length": Buffer.byteLength(next.body) });
      return res.end(next.body);
    }
    const url = new URL(req.url ?? "/", "https://vault.invalid");
    const ns = normNs(header(req, "x-vault-namespace"));
    const m = /^\/v1\/(.+)$/.exec(url.pathname);
    if (!m) return send(res, 404, { errors: [] });
    const rest = m[1]!.split("/").map(decodeURIComponent).join("/");

    const login = /^auth\/(.+)\/login$/.exec(rest);
    if (login && req.method === "POST") {
      counts.logins++;
      const mount = login[1]!;
      let input: Record<string, unknown>;
      try {
        input = JSON.parse(body) as Record<string, unknown>;
      } catch {
        return send(res, 400, { errors: ["failed to parse JSON input"] });
      }
      if (typeof input.role_id === "string" || typeof input.secret_id === "string") {
        const role = appRoles.get(`${ns}|${String(input.role_id)}`);
        if (!role || role.mount !== mount || role.secretId !== input.secret_id) {
          return send(res, 400, { errors: [`invalid role or secret ID: ${String(input.role_id)} ${String(input.secret_id)}`] });
        }
        return send(res, 200, authAnswer(issue({ ...role.grant, namespace: ns }, ["secret/data/"]), ["default"], { role_name: "app" }));
      }
      if (typeof input.role === "string" && typeof input.jwt === "string") {
        const role = jwtRoles.get(`${ns}|${mount}|${input.role}`);
        if (!role) return send(res, 400, { errors: [`role "${input.role}" could not be found`] });
        try {
          await jwtVerify(input.jwt, publicKey, { audience: role.audience, subject: role.subject, currentDate: new Date(now()) });
        } catch {
          return send(res, 400, { errors: [`error validating token: ${input.jwt}`] });
        }
        return send(res, 200, authAnswer(issue({ ...role.grant, namespace: ns }, ["secret/data/"]), ["default"], { role: input.role }));
      }
      return send(res, 400, { errors: ["missing role"] });
    }

    if (req.method !== "GET") return send(res, 405, { errors: [] });
    counts.reads++;
    const token = header(req, "x-vault-token");
    const entry = token ? tokens.get(token) : undefined;
    if (!entry || entry.expiresAt <= now() || entry.namespace !== ns) {
      return send(res, 403, { errors: [`permission denied (token ${token ?? "missing"})`] });
    }
    if (!entry.allow.some((p) => p === "*" || rest.startsWith(p))) return send(res, 403, { errors: [`permission denied on ${rest} for ${token}`] });
    const data = /^(.+?)\/data\/(.+)$/.exec(rest);
    if (!data) return send(res, 404, { errors: [] });
    const versions = kv.get(keyOf(ns, data[1], data[2]!));
    if (!versions || versions.length === 0) return send(res, 404, { errors: [] });
    const wanted = url.searchParams.get("version");
    const n = wanted === null || wanted === "0" ? versions.length : Number(wanted);
    const v = Number.isInteger(n) && n >= 1 ? versions[n - 1] : undefined;
    if (!v) return send(res, 404, { errors: [] });
    const metadata = { created_time: v.created_time, custom_metadata: null, deletion_time: v.deletion_time, destroyed: v.destroyed, version: n };
    const answer = {
      request_id: crypto.randomUUID(),
      lease_id: "",
      renewable: false,
      lease_duration: 0,
      data: { data: v.data, metadata },
      wrap_info: null,
      warnings: null,
      auth: null,
    };
    return send(res, v.data === null ? 404 : 200, answer);
  }

  const server: Server = createServer({ cert: pki.certPem, key: pki.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      requests.push({ method: req.method ?? "", url: req.url ?? "", headers: { ...req.headers }, body });
      handle(req, res, body).catch(() => send(res, 500, { errors: ["internal error"] }));
    });
  });
  server.on("secureConnection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });

  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => server.once("error", reject).listen(port, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)));
  const port = await listen(0);
  let listening = true;
  const stop = async () => {
    if (!listening) return;
    listening = false;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of sockets) s.destroy();
    server.closeAllConnections();
    await closed;
  };

  return {
    port,
    address: `https://127.0.0.1:${port}`,
    pki,
    caFile,
    requests,
    counts,
    issued,
    jwtPublicKeyPem,
    put(path, data, where = {}) {
      const key = keyOf(where.namespace, where.mount, path);
      const versions = kv.get(key) ?? [];
      versions.push({ data: structuredClone(data), created_time: new Date(now()).toISOString(), deletion_time: "", destroyed: false });
      kv.set(key, versions);
      return versions.length;
    },
    deleteVersion(path, version, where = {}) {
      const v = kv.get(keyOf(where.namespace, where.mount, path))?.[version - 1];
      if (v) {
        v.data = null;
        v.deletion_time = new Date(now()).toISOString();
      }
    },
    addToken(token, grant = {}) {
      const ttl = grant.ttlSeconds ?? 0;
      tokens.set(token, {
        namespace: normNs(grant.namespace),
        allow: grant.allow ?? ["*"],
        expiresAt: ttl === 0 ? Number.POSITIVE_INFINITY : now() + ttl * 1000,
        ttlSeconds: ttl,
      });
    },
    revoke(token) {
      tokens.delete(token);
    },
    addAppRole(roleId, secretId, grant = {}) {
      appRoles.set(`${normNs(grant.namespace)}|${roleId}`, { secretId, mount: grant.mount ?? "approle", grant });
    },
    addJwtRole(mount, role, bounds) {
      jwtRoles.set(`${normNs(bounds.namespace)}|${mount}|${role}`, { audience: bounds.audience, subject: bounds.subject, grant: bounds });
    },
    async signJwt(claims) {
      return new SignJWT({})
        .setProtectedHeader({ alg: "ES256", typ: "JWT" })
        .setSubject(claims.sub)
        .setAudience(claims.aud)
        .setIssuer("https://issuer.test")
        .setIssuedAt(Math.floor(now() / 1000))
        .setExpirationTime(Math.floor(now() / 1000) + (claims.expiresInSeconds ?? 600))
        .sign(privateKey);
    },
    answerNext(...answers) {
      canned.push(...answers);
    },
    stop,
    async start() {
      if (listening) return;
      await listen(port);
      listening = true;
    },
    close: stop,
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Vault treats "ns1", "ns1/" and "/ns1/" alike; the root namespace is "". */
function normNs(ns: string | undefined): string {
  return (ns ?? "").replace(/^\/+|\/+$/g, "");
}
