// Minted OAuth 2.0 credentials against a REAL authorization server: `oidc-provider` over HTTPS on
// loopback (tests/helpers/oauth-provider.ts: client credentials, rotated refresh tokens, introspection,
// revocation) and a resource server that checks every bearer token by introspection
// (tests/helpers/resource-server.ts). The broker runs in-process with both ingress paths.
// Covered: the first request mints (client_secret_basic with reserved characters, client_secret_post,
// scopes and audience), /proxy and the tunnel share the token, 100 concurrent requests on a cold cache
// make one token request, an upstream 401 refreshes once and replays the request (a small body too),
// expiry then refresh, rotation stored in the vault (the old refresh token dead at the provider),
// refusal (502 credential_refresh_failed, audited, not asked again until a credential changes), and no
// secret, refresh token or minted token anywhere the agent, the log or the audit trail can see.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startOAuthProvider, type OAuthTestClient, type TestOAuthProvider } from "../helpers/oauth-provider.ts";
import { startResourceServer, type TestResourceServer } from "../helpers/resource-server.ts";
import { dumpResponse, expectEnvelope, startBroker, type Broker } from "./proxy-fixture.ts";

const NAMES = ["cc.test", "ccpost.test", "cold.test", "rt.test", "rtpost.test", "bad.test"];
const CLIENTS: OAuthTestClient[] = [
  // Reserved characters: client_secret_basic form-urlencodes id and secret before base64 (RFC 6749 §2.3.1).
  {
    id: "cc basic:client",
    secret: "cc+secret/with:reserved=chars&sentinel-1",
    authMethod: "client_secret_basic",
    grant: "client_credentials",
    accessTokenTtl: 600,
  },
  { id: "cc-post", secret: "cc-post-secret-sentinel-2", authMethod: "client_secret_post", grant: "client_credentials", accessTokenTtl: 600 },
  { id: "cc-cold", secret: "cc-cold-secret-sentinel-3", authMethod: "client_secret_basic", grant: "client_credentials", accessTokenTtl: 600 },
  { id: "rt-basic", secret: "rt-basic-secret-sentinel-4", authMethod: "client_secret_basic", grant: "refresh_token", accessTokenTtl: 3 },
  { id: "rt-post", secret: "rt-post-secret-sentinel-5", authMethod: "client_secret_post", grant: "refresh_token", accessTokenTtl: 600 },
];
const client = (id: string) => CLIENTS.find((c) => c.id === id)!;

let as: TestOAuthProvider;
let rs: TestResourceServer;
let broker: Broker;
let brokerCa: string;
/** Everything the agent received (status line, headers, body), for the leak checks. */
const agentSaw: string[] = [];
/** Refresh tokens a human put in the vault. */
const humanRefreshTokens: string[] = [];

beforeAll(async () => {
  rs = await startResourceServer({ names: { dns: NAMES, ips: ["127.0.0.1"] }, as: () => as });
  as = await startOAuthProvider({ pki: rs.upstream.pki, clients: CLIENTS });
  broker = await startBroker({ caPem: rs.upstream.pki.caPem, tunnel: true });
  for (const n of NAMES) broker.dns.set(n, ["127.0.0.1"]);
  brokerCa = await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text();
});
afterAll(async () => {
  await broker?.stop();
  await as?.stop();
  await rs?.close();
});

const at = (name: string) => `${name}:${rs.port}`;
/** The broker's token requests for one client (the test's own code exchanges excluded). */
const brokerCalls = (clientId: string) => as.tokenRequests.filter((t) => t.userAgent.startsWith("broker") && t.clientId === clientId);
const hitsOn = (from: number) => rs.hits.slice(from);

async function viaProxy(host: string, path: string, init?: RequestInit): Promise<{ status: number; json: any; res: Response }> {
  const res = await broker.proxy(at(host), path, init);
  const text = await dumpResponse(res.clone());
  agentSaw.push(text);
  return { status: res.status, json: await res.json().catch(() => undefined), res };
}

async function viaTunnel(host: string, path: string): Promise<{ status: number; json: any }> {
  const res = await fetch(`https://${at(host)}${path}`, {
    proxy: `http://${broker.sessionToken}:${broker.vault}@${broker.proxyAddress}`,
    tls: { ca: brokerCa },
  } as RequestInit);
  const text = await dumpResponse(res.clone());
  agentSaw.push(text);
  return { status: res.status, json: await res.json().catch(() => undefined) };
}

async function vaultValue(key: string): Promise<string> {
  const r = await broker.api("GET", `/v1/vaults/${broker.vault}/credentials/${key}`, undefined, broker.userToken);
  if (r.status !== 200) throw new Error(`reveal ${key}: ${r.status}`);
  return r.body.value;
}

async function addOAuthService(host: string, prefix: string, c: OAuthTestClient, extra: Record<string, unknown> = {}): Promise<void> {
  await broker.setCredential(`${prefix}_ID`, c.id);
  await broker.setCredential(`${prefix}_SECRET`, c.secret);
  const auth: Record<string, unknown> = {
    type: c.grant === "client_credentials" ? "oauth2_client_credentials" : "oauth2_refresh",
    token_url: as.tokenUrl,
    client_id: `${prefix}_ID`,
    client_secret: `${prefix}_SECRET`,
    client_auth: c.authMethod === "client_secret_post" ? "post" : "basic",
    ...extra,
  };
  await broker.addService(at(host), auth);
}

describe("client credentials", () => {
  test("the first request mints with client_secret_basic (scopes, audience); /proxy and the tunnel share the token", async () => {
    const c = client("cc basic:client");
    await addOAuthService("cc.test", "CC", c, { scopes: ["read", "write"], audience: "https://api.example/" });
    const from = rs.hits.length;
    const first = await viaProxy("cc.test", "/things?x=1");
    expect(first.status).toBe(200);
    // The client id is a vault credential too: its echo is redacted like the rest.
    expect(first.json).toEqual({ ok: true, path: "/things", client: "[redacted]", scope: "read write" });
    expect(rs.hits.at(-1)!.clientId).toBe(c.id);
    const calls = brokerCalls(c.id);
    expect(calls.length).toBe(1);
    const enc = (s: string) => new URLSearchParams({ s }).toString().slice(2);
    expect(calls[0]!.authorization).toBe(`Basic ${Buffer.from(`${enc(c.id)}:${enc(c.secret)}`).toString("base64")}`);
    expect(calls[0]!.form).toEqual({ grant_type: "client_credentials", scope: "read write", audience: "https://api.example/" });
    expect(calls[0]!.status).toBe(200);
    const tunneled = await viaTunnel("cc.test", "/tunneled");
    expect(tunneled.status).toBe(200);
    expect(tunneled.json).toMatchObject({ ok: true, path: "/tunneled" });
    expect(brokerCalls(c.id).length).toBe(1); // one token for both ingress paths
    const seen = hitsOn(from);
    expect(seen.map((h) => h.status)).toEqual([200, 200]);
    expect(seen[0]!.token).toBe(seen[1]!.token);
    expect(as.issued).toContain(seen[0]!.token);
  });

  test("client_secret_post: id and secret in the form, no Authorization header", async () => {
    const c = client("cc-post");
    await addOAuthService("ccpost.test", "CCPOST", c);
    const out = await viaTunnel("ccpost.test", "/p");
    expect(out.status).toBe(200);
    expect(rs.hits.at(-1)!.clientId).toBe("cc-post");
    const calls = brokerCalls(c.id);
    expect(calls.length).toBe(1);
    expect(calls[0]!.authorization).toBe("");
    expect(calls[0]!.form).toEqual({ grant_type: "client_credentials", client_id: c.id, client_secret: c.secret });
  });

  test("100 concurrent requests on a cold cache make exactly one token request", async () => {
    const c = client("cc-cold");
    await addOAuthService("cold.test", "COLD", c);
    const from = rs.hits.length;
    const outs = await Promise.all(Array.from({ length: 100 }, (_, i) => viaProxy("cold.test", `/c/${i}`)));
    expect(outs.map((o) => o.status)).toEqual(Array(100).fill(200));
    expect(brokerCalls(c.id).length).toBe(1);
    expect(new Set(hitsOn(from).map((h) => h.token)).size).toBe(1);
  });

  test("an upstream 401 for a still-valid token: one extra token request, the agent gets the retried 200", async () => {
    const c = client("cc basic:client");
    const before = brokerCalls(c.id).length;
    const from = rs.hits.length;
    const stale = rs.hits.filter((h) => h.clientId === c.id).at(-1)!.token;
    expect((await as.introspect(stale)).active).toBe(true);
    rs.rejectOnce(stale);
    const out = await viaProxy("cc.test", "/after-401");
    expect(out.status).toBe(200);
    expect(out.json).toMatchObject({ ok: true, path: "/after-401" });
    expect(brokerCalls(c.id).length).toBe(before + 1);
    const seen = hitsOn(from);
    expect(seen.map((h) => [h.path, h.status])).toEqual([
      ["/after-401", 401],
      ["/after-401", 200],
    ]);
    expect(seen[0]!.token).toBe(stale);
    expect(seen[1]!.token).not.toBe(stale);

    // A small body is replayed with the fresh token.
    const fresh = seen[1]!.token;
    rs.rejectOnce(fresh);
    const n = rs.upstream.received.length;
    const posted = await viaProxy("cc.test", "/post-401", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ hello: "again" }),
    });
    expect(posted.status).toBe(200);
    const bodies = rs.upstream.received.slice(n).map((r) => [r.method, r.body.toString()]);
    expect(bodies).toEqual([
      ["POST", '{"hello":"again"}'],
      ["POST", '{"hello":"again"}'],
    ]);
    expect(brokerCalls(c.id).length).toBe(before + 2);
  });

  test("an echo of the minted token in the upstream's body and headers is redacted", async () => {
    const out = await viaProxy("cc.test", "/echo");
    expect(out.status).toBe(200);
    const token = rs.hits.at(-1)!.token;
    expect(out.json.authorization).not.toContain(token);
    expect(out.json.authorization).toContain("[redacted]");
    expect(out.res.headers.get("x-echo-authorization")).toBe("Bearer [redacted]");
    const tunneled = await viaTunnel("cc.test", "/echo");
    expect(tunneled.status).toBe(200);
    expect(JSON.stringify(tunneled.json)).not.toContain(token);
  });

  test("a refused client secret: 502 credential_refresh_failed, audited, not retried until the secret changes", async () => {
    const c = client("cc-post");
    await broker.setCredential("BAD_ID", c.id);
    await broker.setCredential("BAD_SECRET", "a-wrong-secret-sentinel-6");
    await broker.addService(at("bad.test"), {
      type: "oauth2_client_credentials",
      token_url: as.tokenUrl,
      client_id: "BAD_ID",
      client_secret: "BAD_SECRET",
      client_auth: "post",
    });
    const from = rs.hits.length;
    const refused = await viaProxy("bad.test", "/refused");
    expect(refused.status).toBe(502);
    expect(refused.json?.error).toBe("credential_refresh_failed");
    expect(brokerCalls(c.id).at(-1)).toMatchObject({ status: 401, error: "invalid_client" });
    const calls = brokerCalls(c.id).length;
    const again = await broker.proxy(at("bad.test"), "/refused-again");
    agentSaw.push(await dumpResponse(again.clone()));
    await expectEnvelope(again, 502, "credential_refresh_failed");
    expect(brokerCalls(c.id).length).toBe(calls); // marked: the provider is not asked again
    expect(hitsOn(from)).toEqual([]); // nothing reached the resource server
    await Bun.sleep(400); // the audit queue flushes every 250 ms
    const audit = (await broker.auditLogs()).filter((r: any) => r.path === "/refused" || r.path === "/refused-again");
    expect(audit.map((r: any) => [r.status, r.error])).toEqual([
      [502, "credential_refresh_failed"],
      [502, "credential_refresh_failed"],
    ]);
    await broker.setCredential("BAD_SECRET", c.secret);
    const fixed = await viaProxy("bad.test", "/fixed");
    expect(fixed.status).toBe(200);
    expect(brokerCalls(c.id).length).toBe(calls + 1);
  });
});

describe("refresh token", () => {
  let rt0 = "";

  test("the first request refreshes with the human's token; the rotated one is stored and the old one is dead at the provider", async () => {
    const c = client("rt-basic");
    rt0 = await as.obtainRefreshToken(c.id);
    humanRefreshTokens.push(rt0);
    await broker.setCredential("RT_TOKEN", rt0);
    await addOAuthService("rt.test", "RT", c, { refresh_token: "RT_TOKEN" });
    const out = await viaProxy("rt.test", "/r1");
    expect(out.status).toBe(200);
    expect(out.json).toMatchObject({ ok: true, path: "/r1" });
    expect(rs.hits.at(-1)!.clientId).toBe(c.id);
    const calls = brokerCalls(c.id);
    expect(calls.length).toBe(1);
    expect(calls[0]!.form).toEqual({ grant_type: "refresh_token", refresh_token: rt0 });
    expect(calls[0]!.authorization).toBe(`Basic ${Buffer.from(`${c.id}:${c.secret}`).toString("base64")}`);
    const rt1 = await vaultValue("RT_TOKEN");
    expect(rt1).not.toBe(rt0);
    expect(as.issued).toContain(rt1);
    expect((await as.introspect(rt0, "refresh_token")).active).toBe(false);
    expect((await as.introspect(rt1, "refresh_token")).active).toBe(true);
  });

  test("past the access token's lifetime the broker refreshes before sending, rotates again, and requests keep succeeding", async () => {
    const c = client("rt-basic");
    const rt1 = await vaultValue("RT_TOKEN");
    const expired = rs.hits.filter((h) => h.clientId === c.id).at(-1)!.token;
    await Bun.sleep(3300); // the provider's access tokens for this client live 3 s
    expect((await as.introspect(expired)).active).toBe(false);
    const from = rs.hits.length;
    const out = await viaTunnel("rt.test", "/r2");
    expect(out.status).toBe(200);
    const calls = brokerCalls(c.id);
    expect(calls.length).toBe(2);
    expect(calls[1]!.form.refresh_token).toBe(rt1);
    expect(hitsOn(from).map((h) => h.status)).toEqual([200]); // refreshed before sending: no 401 first
    expect(hitsOn(from)[0]!.token).not.toBe(expired);
    const rt2 = await vaultValue("RT_TOKEN");
    expect(rt2).not.toBe(rt1);
    expect((await as.introspect(rt1, "refresh_token")).active).toBe(false);
    const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => viaProxy("rt.test", `/burst/${i}`)));
    expect(burst.map((o) => o.status)).toEqual(Array(10).fill(200));
    expect(brokerCalls(c.id).length).toBe(2); // within the lifetime: the cached token
  });

  test("the provider revokes the grant (the old refresh token replayed): 502 credential_refresh_failed, audited, not asked again until a human sets a new refresh token", async () => {
    const c = client("rt-basic");
    const replay = await as.refreshDirectly(c.id, rt0); // refresh token reuse: oidc-provider revokes the whole grant
    expect(replay).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    const before = brokerCalls(c.id).length;
    const refused = await viaProxy("rt.test", "/r4");
    expect(refused.status).toBe(502);
    expect(refused.json).toMatchObject({ error: "credential_refresh_failed" });
    expect(refused.res.headers.get("x-broker-error")).toBe("credential_refresh_failed");
    expect(brokerCalls(c.id).length).toBe(before + 1);
    expect(brokerCalls(c.id).at(-1)).toMatchObject({ status: 400, error: "invalid_grant" });
    const again = await viaProxy("rt.test", "/r5");
    expect(again.status).toBe(502);
    expect(again.json?.error).toBe("credential_refresh_failed");
    expect(brokerCalls(c.id).length).toBe(before + 1); // marked: not asked again
    await Bun.sleep(400);
    const audit = (await broker.auditLogs()).filter((r: any) => r.path === "/r4" || r.path === "/r5");
    expect(audit.map((r: any) => [r.path, r.status, r.error]).sort()).toEqual([
      ["/r4", 502, "credential_refresh_failed"],
      ["/r5", 502, "credential_refresh_failed"],
    ]);
    expect(broker.logLines.some((l) => l.includes("credential_refresh_failed"))).toBe(true);

    const fresh = await as.obtainRefreshToken(c.id);
    humanRefreshTokens.push(fresh);
    await broker.setCredential("RT_TOKEN", fresh);
    const fixed = await viaProxy("rt.test", "/r6");
    expect(fixed.status).toBe(200);
    expect(brokerCalls(c.id).length).toBe(before + 2);
    expect(brokerCalls(c.id).at(-1)!.form.refresh_token).toBe(fresh);
    expect(await vaultValue("RT_TOKEN")).not.toBe(fresh); // rotated again
  });

  test("client_secret_post for the refresh grant; a transient token-endpoint failure is 502 and retried on the next request", async () => {
    const c = client("rt-post");
    const rt = await as.obtainRefreshToken(c.id);
    humanRefreshTokens.push(rt);
    await broker.setCredential("RTPOST_TOKEN", rt);
    await addOAuthService("rtpost.test", "RTPOST", c, { refresh_token: "RTPOST_TOKEN" });
    const out = await viaTunnel("rtpost.test", "/p1");
    expect(out.status).toBe(200);
    expect(brokerCalls(c.id)[0]).toMatchObject({
      authorization: "",
      form: { grant_type: "refresh_token", refresh_token: rt, client_id: c.id, client_secret: c.secret },
    });

    as.failNext(503); // the provider has an outage for one request
    rs.rejectOnce(rs.hits.at(-1)!.token);
    const failed = await viaProxy("rtpost.test", "/p2");
    expect(failed.status).toBe(502);
    expect(failed.json?.error).toBe("credential_refresh_failed");
    expect(brokerCalls(c.id).at(-1)).toMatchObject({ status: 503 });
    const n = brokerCalls(c.id).length;
    const retried = await viaProxy("rtpost.test", "/p3");
    expect(retried.status).toBe(200);
    expect(brokerCalls(c.id).length).toBe(n + 1); // not marked: asked again at once
  });
});

describe("no leaks", () => {
  test("client secrets, refresh tokens (old and new) and minted access tokens appear nowhere the agent, the log or the audit trail can see", async () => {
    const rotated = as.tokenRequests.filter((t) => t.form.refresh_token).map((t) => t.form.refresh_token!);
    const basics = as.tokenRequests.map((t) => t.authorization.replace(/^Basic /, "")).filter(Boolean);
    const sentinels = [...new Set([...CLIENTS.map((c) => c.secret), "a-wrong-secret-sentinel-6", ...humanRefreshTokens, ...rotated, ...as.issued, ...basics])];
    expect(as.issued.length).toBeGreaterThan(10);
    expect(agentSaw.length).toBeGreaterThan(100);
    expect(broker.logLines.length).toBeGreaterThan(0);
    await Bun.sleep(400); // the audit queue flushes every 250 ms
    const audit = JSON.stringify(await broker.auditLogs());
    for (const s of sentinels) {
      for (const v of [s, Buffer.from(s).toString("base64"), encodeURIComponent(s)]) {
        expect(agentSaw.find((o) => o.includes(v))).toBeUndefined();
        expect(broker.logLines.find((l) => l.includes(v))).toBeUndefined();
        expect(audit.includes(v)).toBe(false);
      }
    }
  });
});
