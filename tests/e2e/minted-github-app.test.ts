// GitHub App installation tokens minted by the broker, against a fake GitHub API on loopback
// (tests/helpers/github-fake.ts) that verifies the app JWT with jose against the app's PUBLIC key
// (RS256, iss = app id, iat/exp window) and accepts on its API only the installation tokens it issued.
// Covered: PKCS#1 and PKCS#8 keys, one token request for many API requests (both ingress paths),
// refresh once expires_at has passed (before sending, no 401 first), a wrong key refused
// (502 credential_refresh_failed, audited, not retried until the key changes), the app suspended, an outage retried,
// echo redaction of the installation token, and no private key, JWT or installation token anywhere
// the agent, the log or the audit trail can see.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { startFakeGitHub, type FakeGitHub } from "../helpers/github-fake.ts";
import { dumpResponse, startBroker, type Broker } from "./proxy-fixture.ts";

const API = "api.gh.test";
const NAMES = [API, "gh1.test", "gh8.test", "ghshort.test", "ghwrong.test", "ghsuspended.test", "ghflaky.test"];
const pkcs1App = { appId: "101", installationId: "2001", keys: generateKeyPairSync("rsa", { modulusLength: 2048 }) };
const pkcs8App = { appId: "102", installationId: "2002", keys: generateKeyPairSync("rsa", { modulusLength: 3072 }) };
const strangerKeys = generateKeyPairSync("rsa", { modulusLength: 2048 });
const PKCS1_PEM = pkcs1App.keys.privateKey.export({ type: "pkcs1", format: "pem" }).toString();
const PKCS8_PEM = pkcs8App.keys.privateKey.export({ type: "pkcs8", format: "pem" }).toString();
const STRANGER_PEM = strangerKeys.privateKey.export({ type: "pkcs8", format: "pem" }).toString();

let gh: FakeGitHub;
let broker: Broker;
let brokerCa: string;
const agentSaw: string[] = [];

beforeAll(async () => {
  gh = await startFakeGitHub({
    apps: [pkcs1App, pkcs8App].map((a) => ({ appId: a.appId, installationId: a.installationId, publicKey: a.keys.publicKey })),
    names: { dns: NAMES, ips: ["127.0.0.1"] },
  });
  broker = await startBroker({ caPem: gh.upstream.pki.caPem, tunnel: true });
  for (const n of NAMES) broker.dns.set(n, ["127.0.0.1"]);
  brokerCa = await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text();
  await broker.setCredential("GH_PKCS1", PKCS1_PEM);
  await broker.setCredential("GH_PKCS8", PKCS8_PEM);
});
afterAll(async () => {
  await broker?.stop();
  await gh?.close();
});

const at = (name: string) => `${name}:${gh.port}`;
const apiUrl = () => `https://${at(API)}`;
const tokenRequestsFor = (installationId: string) => gh.tokenRequests.filter((t) => t.installationId === installationId);

async function viaProxy(host: string, path: string): Promise<{ status: number; json: any; res: Response }> {
  const res = await broker.proxy(at(host), path);
  agentSaw.push(await dumpResponse(res.clone()));
  return { status: res.status, json: await res.json().catch(() => undefined), res };
}

async function viaTunnel(host: string, path: string): Promise<{ status: number; json: any }> {
  const res = await fetch(`https://${at(host)}${path}`, {
    proxy: `http://${broker.sessionToken}:${broker.vault}@${broker.proxyAddress}`,
    tls: { ca: brokerCa },
  } as RequestInit);
  agentSaw.push(await dumpResponse(res.clone()));
  return { status: res.status, json: await res.json().catch(() => undefined) };
}

async function addApp(host: string, app: { appId: string; installationId: string }, keyName: string): Promise<void> {
  await broker.addService(at(host), { type: "github_app", app_id: app.appId, installation_id: app.installationId, private_key: keyName, api_url: apiUrl() });
}

describe("GitHub App installation tokens", () => {
  test("PKCS#1 key: the app JWT verifies, one installation token serves many requests on both ingress paths", async () => {
    await addApp("gh1.test", pkcs1App, "GH_PKCS1");
    const from = gh.hits.length;
    const first = await viaProxy("gh1.test", "/repos/o/r");
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ path: "/repos/o/r", ok: true });
    const reqs = tokenRequestsFor(pkcs1App.installationId);
    expect(reqs.length).toBe(1);
    const t = reqs[0]!;
    expect(t.status).toBe(201);
    expect(t.problem).toBeUndefined();
    expect(t.accept).toBe("application/vnd.github+json");
    const now = Math.floor(Date.now() / 1000);
    expect(t.claims!.iss).toBe(pkcs1App.appId);
    expect(t.claims!.iat!).toBeGreaterThanOrEqual(now - 75);
    expect(t.claims!.iat!).toBeLessThanOrEqual(now - 45); // back-dated a minute for clock drift
    expect(t.claims!.exp!).toBeGreaterThan(now);
    expect(t.claims!.exp!).toBeLessThanOrEqual(now + 600);
    const many = await Promise.all(Array.from({ length: 30 }, (_, i) => viaProxy("gh1.test", `/repos/o/r/issues/${i}`)));
    expect(many.map((o) => o.status)).toEqual(Array(30).fill(200));
    const tunneled = await viaTunnel("gh1.test", "/user/repos");
    expect(tunneled).toEqual({ status: 200, json: { path: "/user/repos", ok: true } });
    expect(tokenRequestsFor(pkcs1App.installationId).length).toBe(1);
    const hits = gh.hits.slice(from);
    expect(hits.length).toBe(32);
    expect(new Set(hits.map((h) => h.token))).toEqual(new Set([gh.issued.at(-1)!]));
    expect(hits.every((h) => h.status === 200)).toBe(true);
  });

  test("PKCS#8 key (3072-bit)", async () => {
    await addApp("gh8.test", pkcs8App, "GH_PKCS8");
    const out = await viaTunnel("gh8.test", "/installation/repositories");
    expect(out.status).toBe(200);
    const reqs = tokenRequestsFor(pkcs8App.installationId);
    expect(reqs.map((r) => [r.status, r.problem, r.claims?.iss])).toEqual([[201, undefined, pkcs8App.appId]]);
    expect(gh.hits.at(-1)).toEqual({ path: "/installation/repositories", token: gh.issued.at(-1)!, status: 200 });
  });

  test("an echo of the installation token in the body and a header is redacted", async () => {
    const out = await viaProxy("gh1.test", "/echo");
    expect(out.status).toBe(200);
    expect(out.json).toEqual({ authorization: "Bearer [redacted]" });
    expect(out.res.headers.get("x-echo-authorization")).toBe("Bearer [redacted]");
  });

  test("once expires_at has passed, a new installation token is minted before the request is sent", async () => {
    gh.tokenLifetimeS = 3;
    try {
      await broker.setCredential("GH_SHORT", PKCS8_PEM);
      await addApp("ghshort.test", pkcs8App, "GH_SHORT");
      const before = tokenRequestsFor(pkcs8App.installationId).length;
      expect((await viaProxy("ghshort.test", "/a")).status).toBe(200);
      const firstToken = gh.hits.at(-1)!.token;
      expect(tokenRequestsFor(pkcs8App.installationId).length).toBe(before + 1);
      expect((await viaProxy("ghshort.test", "/b")).status).toBe(200); // still cached
      expect(tokenRequestsFor(pkcs8App.installationId).length).toBe(before + 1);
      await Bun.sleep(3200); // expires_at (whole seconds, at most 3 s ahead) has passed
      const from = gh.hits.length;
      expect((await viaProxy("ghshort.test", "/c")).status).toBe(200);
      expect(tokenRequestsFor(pkcs8App.installationId).length).toBe(before + 2);
      const hits = gh.hits.slice(from);
      expect(hits.map((h) => h.status)).toEqual([200]); // no 401 first: refreshed before sending
      expect(hits[0]!.token).not.toBe(firstToken);
    } finally {
      gh.tokenLifetimeS = 3600;
    }
  });

  test("a key that is not the app's: 502 credential_refresh_failed, audited, not retried until a human sets the right key", async () => {
    await broker.setCredential("GH_WRONG", STRANGER_PEM);
    await addApp("ghwrong.test", pkcs1App, "GH_WRONG");
    const before = tokenRequestsFor(pkcs1App.installationId).length;
    const refused = await viaProxy("ghwrong.test", "/w1");
    expect(refused.status).toBe(502);
    expect(refused.json?.error).toBe("credential_refresh_failed");
    expect(refused.res.headers.get("x-broker-error")).toBe("credential_refresh_failed");
    expect(
      tokenRequestsFor(pkcs1App.installationId)
        .slice(before)
        .map((r) => [r.status, r.problem]),
    ).toEqual([[401, "jwt: JWSSignatureVerificationFailed"]]);
    const again = await viaProxy("ghwrong.test", "/w2");
    expect(again.status).toBe(502);
    expect(again.json?.error).toBe("credential_refresh_failed");
    expect(tokenRequestsFor(pkcs1App.installationId).length).toBe(before + 1); // marked: GitHub is not asked again
    await Bun.sleep(400);
    const audit = (await broker.auditLogs()).filter((r: any) => r.path === "/w1" || r.path === "/w2");
    expect(audit.map((r: any) => [r.path, r.status, r.error]).sort()).toEqual([
      ["/w1", 502, "credential_refresh_failed"],
      ["/w2", 502, "credential_refresh_failed"],
    ]);
    await broker.setCredential("GH_WRONG", PKCS1_PEM);
    const fixed = await viaProxy("ghwrong.test", "/w3");
    expect(fixed.status).toBe(200);
    expect(tokenRequestsFor(pkcs1App.installationId).length).toBe(before + 2);
  });

  test("GitHub refusing the token request (app suspended: 401) is 502 credential_refresh_failed", async () => {
    await broker.setCredential("GH_SUSPENDED", PKCS1_PEM);
    await addApp("ghsuspended.test", pkcs1App, "GH_SUSPENDED");
    gh.refuseTokens = 401;
    try {
      const before = gh.tokenRequests.length;
      const refused = await viaProxy("ghsuspended.test", "/s1");
      expect(refused.status).toBe(502);
      expect(refused.json?.error).toBe("credential_refresh_failed");
      expect(gh.tokenRequests.length).toBe(before + 1);
      expect((await viaProxy("ghsuspended.test", "/s2")).status).toBe(502);
      expect(gh.tokenRequests.length).toBe(before + 1);
    } finally {
      gh.refuseTokens = undefined;
    }
  });

  test("a GitHub outage (503) is 502 credential_refresh_failed and retried on the next request", async () => {
    await broker.setCredential("GH_FLAKY", PKCS8_PEM);
    await addApp("ghflaky.test", pkcs8App, "GH_FLAKY");
    gh.refuseTokens = 503;
    const before = gh.tokenRequests.length;
    try {
      const failed = await viaProxy("ghflaky.test", "/f1");
      expect(failed.status).toBe(502);
      expect(failed.json?.error).toBe("credential_refresh_failed");
    } finally {
      gh.refuseTokens = undefined;
    }
    expect((await viaProxy("ghflaky.test", "/f2")).status).toBe(200);
    expect(gh.tokenRequests.slice(before).map((t) => t.status)).toEqual([503, 201]);
  });
});

describe("no leaks", () => {
  test("private keys, app JWTs and installation tokens appear nowhere the agent, the log or the audit trail can see", async () => {
    const keyBodies = [PKCS1_PEM, PKCS8_PEM, STRANGER_PEM].flatMap((pem) => {
      const lines = pem.split("\n").filter((l) => l && !l.startsWith("-----"));
      return [pem, lines.join(""), ...lines.slice(1, -1)]; // the whole PEM, its base64, every full line
    });
    const jwts = gh.tokenRequests.map((t) => t.jwt);
    const sentinels = [...keyBodies, ...jwts, ...jwts.map((j) => j.split(".")[2]!), ...gh.issued];
    expect(jwts.length).toBeGreaterThan(4);
    expect(gh.issued.length).toBeGreaterThan(3);
    expect(broker.logLines.some((l) => l.includes("credential_refresh_failed"))).toBe(true);
    await Bun.sleep(400); // the audit queue flushes every 250 ms
    const audit = JSON.stringify(await broker.auditLogs());
    for (const s of sentinels) {
      for (const v of [s, Buffer.from(s).toString("base64")]) {
        expect(agentSaw.find((o) => o.includes(v))).toBeUndefined();
        expect(broker.logLines.find((l) => l.includes(v))).toBeUndefined();
        expect(audit.includes(v)).toBe(false);
      }
    }
  });
});
