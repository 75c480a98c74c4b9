// Minted credentials through the egress core, against a scripted token endpoint on loopback: the
// OAuth client-credentials and refresh grants (caching, one refresh for concurrent requests, refresh
// and retry after an upstream 401, rotation, refusal marked until a credential changes), GitHub App
// tokens (JWT verified with jose) and the SigV4 Authorization shape. The real authorization server
// and the independent SigV4 verification are in minted-oauth, minted-github-app and aws-sigv4.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { importSPKI, jwtVerify } from "jose";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { dumpResponse, expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

let upstream: TestUpstream;
let broker: Broker;
let hp: string;
const tokenRequests: Record<string, string>[] = [];
const issued: string[] = [];
let tokenStatus = 200;
let lifetime = 3600;
let rotate = false;
let reject401 = new Set<string>();
const app = generateKeyPairSync("rsa", { modulusLength: 2048 });
const appPem = app.privateKey.export({ type: "pkcs1", format: "pem" }).toString();

async function route(req: IncomingMessage, res: ServerResponse, body: Buffer) {
  const json = (status: number, v: unknown) => {
    res.statusCode = status;
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify(v));
  };
  if (req.url === "/token") {
    const form = Object.fromEntries(new URLSearchParams(body.toString()));
    tokenRequests.push({ ...form, authorization: req.headers.authorization ?? "" });
    if (tokenStatus !== 200) return json(tokenStatus, { error: "invalid_grant", error_description: `echo ${form.refresh_token ?? ""}` });
    const token = `at-${crypto.randomUUID()}`;
    issued.push(token);
    return json(200, { access_token: token, token_type: "Bearer", expires_in: lifetime, ...(rotate && { refresh_token: `rt-${crypto.randomUUID()}` }) });
  }
  if (req.url === "/app/installations/77/access_tokens") {
    const jwt = (req.headers.authorization ?? "").replace(/^Bearer /, "");
    try {
      const key = await importSPKI(app.publicKey.export({ type: "spki", format: "pem" }).toString(), "RS256");
      const { payload } = await jwtVerify(jwt, key, { issuer: "4242" });
      if (payload.exp! - payload.iat! > 600) return json(401, { message: "too long" });
    } catch {
      return json(401, { message: `bad jwt ${jwt}` });
    }
    tokenRequests.push({ github: "1" });
    const token = `ghs_${crypto.randomUUID().replaceAll("-", "")}`;
    issued.push(token);
    return json(201, { token, expires_at: new Date(Date.now() + 3600_000).toISOString() });
  }
  const auth = req.headers.authorization ?? "";
  if (reject401.has(auth)) return json(401, { message: `rejected ${auth}` });
  json(200, {
    url: req.url,
    authorization: auth,
    amzDate: req.headers["x-amz-date"] ?? null,
    sha: req.headers["x-amz-content-sha256"] ?? null,
    token: req.headers["x-amz-security-token"] ?? null,
  });
}

beforeAll(async () => {
  upstream = await startUpstream((req, res, body) => void route(req, res, body), { names: { dns: ["localhost", "gh.test", "aws.test"], ips: ["127.0.0.1"] } });
  broker = await startBroker({ caPem: upstream.pki.caPem });
  hp = `127.0.0.1:${upstream.port}`;
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

const reset = () => {
  tokenRequests.length = 0;
  tokenStatus = 200;
  lifetime = 3600;
  rotate = false;
  reject401 = new Set();
};
const call = async (path: string) => {
  const res = await broker.proxy(hp, path);
  return { status: res.status, text: await dumpResponse(res) };
};

describe("OAuth 2.0", () => {
  test("client credentials: one token for many requests, sent as Bearer, never shown to the agent", async () => {
    reset();
    await broker.setCredential("CC_ID", "client-one");
    await broker.setCredential("CC_SECRET", "cc-secret-sentinel-1");
    await broker.addService(hp, {
      type: "oauth2_client_credentials",
      token_url: `https://${hp}/token`,
      client_id: "CC_ID",
      client_secret: "CC_SECRET",
      scopes: ["read", "write"],
    });
    const outs = await Promise.all(Array.from({ length: 40 }, () => call("/api/x")));
    expect(outs.every((o) => o.status === 200)).toBe(true);
    expect(tokenRequests.length).toBe(1);
    expect(tokenRequests[0]).toMatchObject({
      grant_type: "client_credentials",
      scope: "read write",
      authorization: `Basic ${Buffer.from("client-one:cc-secret-sentinel-1").toString("base64")}`,
    });
    const token = issued.at(-1)!;
    expect(upstream.received.at(-1)!.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")?.[1]).toBe(`Bearer ${token}`);
    for (const o of outs) expect(o.text).not.toContain(token); // the echo is redacted
    await expectNoLeak(
      broker,
      token,
      outs.map((o) => o.text),
    );
    await expectNoLeak(
      broker,
      "cc-secret-sentinel-1",
      outs.map((o) => o.text),
    );
  });

  test("an upstream 401 refreshes once and retries; 50 concurrent 401s share one refresh", async () => {
    reset();
    const first = issued.at(-1)!;
    reject401.add(`Bearer ${first}`);
    const outs = await Promise.all(Array.from({ length: 50 }, () => call("/api/y")));
    expect(outs.map((o) => o.status)).toEqual(Array(50).fill(200));
    expect(tokenRequests.length).toBe(1);
    for (const o of outs) expect(o.text).not.toContain(first);
  });

  test("refresh token: rotation is stored, a refusal is 502 credential_refresh_failed and marked until a human sets a new one", async () => {
    reset();
    rotate = true;
    lifetime = 1; // refreshed on every request after a quarter second
    await broker.setCredential("RT_ID", "client-two");
    await broker.setCredential("RT_SECRET", "rt-secret-sentinel-2");
    await broker.setCredential("RT_TOKEN", "rt-original-sentinel-3");
    const host = `localhost:${upstream.port}`;
    broker.dns.set("localhost", ["127.0.0.1"]);
    await broker.addService(host, {
      type: "oauth2_refresh",
      token_url: `https://${hp}/token`,
      client_id: "RT_ID",
      client_secret: "RT_SECRET",
      refresh_token: "RT_TOKEN",
      client_auth: "post",
    });
    const a = await broker.proxy(host, "/r1");
    expect(a.status).toBe(200);
    expect(tokenRequests[0]).toMatchObject({
      grant_type: "refresh_token",
      refresh_token: "rt-original-sentinel-3",
      client_id: "client-two",
      client_secret: "rt-secret-sentinel-2",
      authorization: "",
    });
    await Bun.sleep(850); // past 1 s − a quarter of it
    const b = await broker.proxy(host, "/r2");
    expect(b.status).toBe(200);
    expect(tokenRequests.length).toBe(2);
    expect(tokenRequests[1]!.refresh_token).not.toBe("rt-original-sentinel-3"); // the rotated one was used
    tokenStatus = 400;
    await Bun.sleep(850);
    const refused = await broker.proxy(host, "/r3");
    const body = await dumpResponse(refused);
    expect(refused.status).toBe(502);
    expect(body).toContain('"error":"credential_refresh_failed"');
    const n = tokenRequests.length;
    expect((await broker.proxy(host, "/r4")).status).toBe(502);
    expect(tokenRequests.length).toBe(n); // marked: not asked again
    // The console's services list says so, for the person who has to act.
    const page = await fetch(`${broker.apiUrl}/vaults/${broker.vault}/services`, {
      headers: { cookie: `broker_session=${broker.userToken}`, accept: "text/html" },
    });
    const html = await page.text();
    expect(page.status).toBe(200);
    expect(html).toContain("refresh refused");
    expect(html).toContain("the token endpoint refused the refresh token (HTTP 400, invalid_grant). Agents get an error until");
    tokenStatus = 200;
    await broker.setCredential("RT_TOKEN", "rt-new-from-a-human-sentinel-4");
    expect((await broker.proxy(host, "/r5")).status).toBe(200);
    const after = await (
      await fetch(`${broker.apiUrl}/vaults/${broker.vault}/services`, { headers: { cookie: `broker_session=${broker.userToken}`, accept: "text/html" } })
    ).text();
    expect(after).not.toContain("refresh refused");
    expect(after).toContain("token until");
    expect(tokenRequests.at(-1)!.refresh_token).toBe("rt-new-from-a-human-sentinel-4");
    for (const s of ["rt-original-sentinel-3", "rt-secret-sentinel-2", "rt-new-from-a-human-sentinel-4"]) await expectNoLeak(broker, s, [body]);
  });
});

describe("GitHub App and SigV4", () => {
  test("github_app: the app JWT verifies, the installation token is sent as Bearer", async () => {
    reset();
    await broker.setCredential("GH_KEY", appPem);
    const host = `gh.test:${upstream.port}`;
    broker.dns.set("gh.test", ["127.0.0.1"]);
    await broker.addService(host, { type: "github_app", app_id: "4242", installation_id: "77", private_key: "GH_KEY", api_url: `https://${hp}` });
    const out = await broker.proxy(host, "/repos/x");
    const text = await dumpResponse(out);
    if (out.status !== 200) console.log(text);
    expect(out.status).toBe(200);
    expect(tokenRequests).toEqual([{ github: "1" }]);
    expect(upstream.received.at(-1)!.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")?.[1]).toBe(`Bearer ${issued.at(-1)}`);
    await expectNoLeak(broker, issued.at(-1)!, [text]);
  });

  test("aws_sigv4: the agent's signature is replaced by one made with the vault's keys", async () => {
    await broker.setCredential("AWS_ID", "AKIDSENTINEL12345");
    await broker.setCredential("AWS_SECRET", "aws-secret-sentinel-5");
    await broker.setCredential("AWS_SESSION", "aws-session-sentinel-6");
    const host = `aws.test:${upstream.port}`;
    broker.dns.set("aws.test", ["127.0.0.1"]);
    await broker.addService(host, {
      type: "aws_sigv4",
      access_key_id: "AWS_ID",
      secret_access_key: "AWS_SECRET",
      session_token: "AWS_SESSION",
      region: "eu-west-1",
      service: "s3",
    });
    const res = await broker.proxy(host, "/bucket/key?list-type=2&prefix=a b", {
      headers: { "x-amz-date": "20000101T000000Z", "x-amz-content-sha256": "0".repeat(64) },
    });
    const text = await dumpResponse(res);
    if (res.status !== 200) console.log(text);
    expect(res.status).toBe(200);
    const seen = upstream.received.at(-1)!;
    const auth = seen.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")![1];
    expect(auth).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDSENTINEL12345\/\d{8}\/eu-west-1\/s3\/aws4_request, SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*, Signature=[0-9a-f]{64}$/,
    );
    expect(seen.url).toBe("/bucket/key?list-type=2&prefix=a%20b");
    expect(seen.rawHeaders.filter(([k]) => k.toLowerCase() === "x-amz-date").length).toBe(1);
    expect(seen.rawHeaders.find(([k]) => k.toLowerCase() === "x-amz-content-sha256")![1]).toBe(
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    );
    for (const s of ["aws-secret-sentinel-5", "aws-session-sentinel-6", "AKIDSENTINEL12345"]) await expectNoLeak(broker, s, [text]);
  });
});
