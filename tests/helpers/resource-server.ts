// An OAuth 2.0 resource server on loopback (HTTPS, test PKI) for the minted-credential tests: every
// request must carry `Authorization: Bearer <token>`, and the token is checked by asking the
// authorization server (RFC 7662 introspection, no cache) on each request. It records what it saw
// and how it answered, can refuse a still-valid token with 401 on demand, and on /echo reflects the
// Authorization header in its body and in a response header (the broker must redact both).

import type { TestOAuthProvider } from "./oauth-provider.ts";
import { startUpstream, type TestUpstream } from "./upstream.ts";

export interface ResourceHit {
  path: string;
  /** The bearer token presented (compare, never print). */
  token: string;
  status: number;
  /** The introspection's client_id for an accepted token. */
  clientId: string | undefined;
}

export interface TestResourceServer {
  readonly port: number;
  readonly upstream: TestUpstream;
  readonly hits: ResourceHit[];
  /** Answer 401 to the next request bearing `token`, active or not (one time per call). */
  rejectOnce(token: string): void;
  close(): Promise<void>;
}

export async function startResourceServer(opts: { names: { dns: string[]; ips: string[] }; as: () => TestOAuthProvider }): Promise<TestResourceServer> {
  const hits: ResourceHit[] = [];
  const rejects: string[] = [];
  const upstream = await startUpstream(
    (req, res) => {
      const auth = req.headers.authorization ?? "";
      const token = /^Bearer (.+)$/.exec(auth)?.[1] ?? "";
      const path = (req.url ?? "").split("?")[0] ?? "";
      const answer = (status: number, body: unknown, clientId?: string) => {
        hits.push({ path, token, status, clientId });
        res.statusCode = status;
        res.setHeader("content-type", "application/json");
        if (status === 401) res.setHeader("www-authenticate", 'Bearer error="invalid_token"');
        if (path === "/echo") res.setHeader("x-echo-authorization", auth);
        res.end(JSON.stringify(body));
      };
      void (async () => {
        const forced = rejects.indexOf(token);
        if (forced >= 0) {
          rejects.splice(forced, 1);
          return answer(401, { error: "invalid_token", seen: auth });
        }
        const info = token ? await opts.as().introspect(token, "access_token") : { active: false };
        if (info.active !== true) return answer(401, { error: "invalid_token", seen: auth });
        const clientId = String(info.client_id);
        if (path === "/echo") return answer(200, { authorization: auth, client: clientId }, clientId);
        answer(200, { ok: true, path, client: clientId, scope: info.scope ?? null }, clientId);
      })().catch((err) => answer(500, { error: String(err) }));
    },
    { names: opts.names },
  );
  return {
    port: upstream.port,
    upstream,
    hits,
    rejectOnce(token) {
      rejects.push(token);
    },
    close: () => upstream.close(),
  };
}
