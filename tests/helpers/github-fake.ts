// A fake GitHub API on loopback (HTTPS, test PKI) for GitHub App tests. Like api.github.com it
// serves both the installation-token endpoint and the API: POST
// /app/installations/<id>/access_tokens verifies the app JWT with jose (RS256, iss = the app id,
// iat/exp window as GitHub enforces it) against the app's PUBLIC key and answers 201
// {token, expires_at}; every other path needs `Authorization: Bearer <an unexpired installation
// token it issued>` and otherwise answers 401. /echo reflects the Authorization header in its body
// and in a response header. Records token requests (with the JWT and its claims) and API hits.

import type { KeyObject } from "node:crypto";
import { randomBytes } from "node:crypto";
import { jwtVerify, type JWTPayload } from "jose";
import { startUpstream, type TestUpstream } from "./upstream.ts";

export interface GitHubTokenRequest {
  installationId: string;
  /** The app JWT as received (compare, never print). */
  jwt: string;
  claims: JWTPayload | undefined;
  accept: string;
  status: number;
  /** Why a JWT was refused. */
  problem: string | undefined;
}

export interface GitHubApiHit {
  path: string;
  token: string;
  status: number;
}

export interface FakeGitHub {
  readonly port: number;
  readonly upstream: TestUpstream;
  readonly tokenRequests: GitHubTokenRequest[];
  readonly hits: GitHubApiHit[];
  /** Installation tokens handed out. */
  readonly issued: string[];
  /** Seconds an installation token lives (GitHub: 3600). */
  tokenLifetimeS: number;
  /** When set, token requests are refused with this status (an app suspended, an installation removed). */
  refuseTokens: number | undefined;
  close(): Promise<void>;
}

export interface FakeGitHubApp {
  appId: string;
  installationId: string;
  publicKey: KeyObject;
}

export async function startFakeGitHub(opts: { apps: FakeGitHubApp[]; names: { dns: string[]; ips: string[] } }): Promise<FakeGitHub> {
  const tokens = new Map<string, number>(); // installation token -> expiry (ms)
  const fake: { -readonly [K in keyof FakeGitHub]: FakeGitHub[K] } = {
    port: 0,
    upstream: undefined as unknown as TestUpstream,
    tokenRequests: [],
    hits: [],
    issued: [],
    tokenLifetimeS: 3600,
    refuseTokens: undefined,
    close: () => fake.upstream.close(),
  };

  async function checkJwt(jwt: string, app: FakeGitHubApp): Promise<{ claims?: JWTPayload; problem?: string }> {
    try {
      const { payload, protectedHeader } = await jwtVerify(jwt, app.publicKey, { algorithms: ["RS256"], issuer: app.appId, clockTolerance: 0 });
      const now = Math.floor(Date.now() / 1000);
      if (protectedHeader.alg !== "RS256") return { claims: payload, problem: "alg" };
      if (typeof payload.iat !== "number" || payload.iat > now + 1) return { claims: payload, problem: "iat in the future" };
      if (typeof payload.exp !== "number" || payload.exp > now + 600) return { claims: payload, problem: "exp more than 10 minutes ahead" };
      if (payload.exp - payload.iat > 660) return { claims: payload, problem: "lifetime too long" };
      return { claims: payload };
    } catch (err) {
      return { problem: `jwt: ${err instanceof Error ? err.name : "invalid"}` };
    }
  }

  const json = (res: import("node:http").ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}) => {
    res.statusCode = status;
    res.setHeader("content-type", "application/json; charset=utf-8");
    for (const [k, v] of Object.entries(extra)) res.setHeader(k, v);
    res.end(JSON.stringify(body));
  };

  fake.upstream = await startUpstream(
    (req, res) => {
      const path = (req.url ?? "").split("?")[0] ?? "";
      const auth = req.headers.authorization ?? "";
      const bearer = /^Bearer (.+)$/.exec(auth)?.[1] ?? "";
      const m = /^\/app\/installations\/([^/]+)\/access_tokens$/.exec(path);
      if (m && req.method === "POST") {
        const app = opts.apps.find((a) => a.installationId === m[1]);
        void (app ? checkJwt(bearer, app) : Promise.resolve({ claims: undefined, problem: "no such installation" })).then(({ claims, problem }) => {
          const status = fake.refuseTokens ?? (!app ? 404 : problem ? 401 : 201);
          fake.tokenRequests.push({ installationId: m[1]!, jwt: bearer, claims, accept: req.headers.accept ?? "", status, problem });
          if (status !== 201)
            return json(res, status, {
              message: problem ? `A JSON web token could not be decoded (${bearer})` : "Bad credentials",
              documentation_url: "https://docs.github.com/rest",
            });
          const token = `ghs_${randomBytes(18).toString("base64url")}`;
          const expires = Math.floor(Date.now() / 1000) + fake.tokenLifetimeS;
          tokens.set(token, expires * 1000);
          fake.issued.push(token);
          json(res, 201, {
            token,
            expires_at: new Date(expires * 1000).toISOString().replace(/\.\d{3}Z$/, "Z"),
            permissions: { contents: "read" },
            repository_selection: "all",
          });
        });
        return;
      }
      const expiry = tokens.get(bearer);
      const ok = expiry !== undefined && expiry > Date.now();
      fake.hits.push({ path, token: bearer, status: ok ? 200 : 401 });
      if (!ok) return json(res, 401, { message: "Bad credentials", seen: auth });
      if (path === "/echo") return json(res, 200, { authorization: auth }, { "x-echo-authorization": auth });
      json(res, 200, { path, ok: true });
    },
    { names: opts.names },
  );
  fake.port = fake.upstream.port;
  return fake;
}
