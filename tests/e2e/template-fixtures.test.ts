// Every catalogue template, end to end: what exactly its upstream receives. One broker, one local HTTPS
// upstream standing in for every template's host (BROKER_RESOLVE maps each name to 127.0.0.1, the
// certificate names them all), and per template a service with the template's auth and all its
// operations' rules, its credential, and one request on a path its read operation allows. The injected
// credential is then checked byte for byte: `authorization: Bearer <value>`, `Basic base64(user:value)`,
// the template's own header and prefix, `?key=<value>`, `/bot<value>/getMe`; an AWS SigV4 signature is
// recomputed here from what arrived; the GitHub App's installation token is minted through the GitHub
// fake (tests/helpers/github-fake.ts) and the request carries exactly the token it issued. The broker's
// own session token never reaches an upstream, and no credential value is in any response, log line or
// audit record.
//
// The service host carries the stand-in's port (api.github.com:<port>), so services are added with the
// template's auth and rules as a person's custom service would state them (a template-named body takes
// only hosts the template serves, on 443). Settings a template leaves to the person (`fill`: Twilio's
// Account SID, an Atlassian email) keep the template's example, as the bytes show.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, createHmac, generateKeyPairSync, randomBytes } from "node:crypto";
import { startFakeGitHub, type FakeGitHub } from "../helpers/github-fake.ts";
import { startUpstream, type Received, type TestUpstream } from "../helpers/upstream.ts";
import { operationsOf, rulesFor, servesHost, templateById, templateKeyFields, TEMPLATES, type Template } from "../../src/templates/index.ts";
import { dumpResponse, startBroker, type Broker } from "./proxy-fixture.ts";

/** A concrete name for templates whose first host is a wildcard or an example the person replaces. */
const CONCRETE: Record<string, string> = {
  jira: "acme.atlassian.net",
  confluence: "acme-wiki.atlassian.net", // a second site: one vault holds one service per host
  shopify: "shop.myshopify.com",
  supabase: "abcdefghijklmnopqrst.supabase.co",
};
const nameOf = (t: Template) => CONCRETE[t.id] ?? t.hosts[0]!;

const STATIC = TEMPLATES.filter((t) => t.auth.type !== "github_app");
const APP = templateById("github-app")!;
const APP_IDS = { appId: "314159", installationId: "2718281" };
const APP_KEYS = generateKeyPairSync("rsa", { modulusLength: 2048 });
const APP_PEM = APP_KEYS.privateKey.export({ type: "pkcs8", format: "pem" }).toString();

let upstream: TestUpstream;
let gh: FakeGitHub;
let broker: Broker;
/** credential key → the value stored for it (AWS and Atlassian templates share keys). */
const values = new Map<string, string>();
/** Every text a broker response produced, for the leak check. */
const outputs: string[] = [];

/** A value per key: letters and digits (AWS-shaped for AWS keys), so each form it travels in is itself. */
function valueFor(key: string): string {
  if (key === "AWS_ACCESS_KEY_ID") return `AKIA${randomBytes(8).toString("hex").toUpperCase()}`;
  if (key === "AWS_SECRET_ACCESS_KEY") return randomBytes(30).toString("base64url");
  return `${key.toLowerCase()}_${randomBytes(12).toString("hex")}`;
}

/** The request each template is probed with: its read operation's first rule, wildcards filled in. */
function probeOf(t: Template): { method: string; path: string } {
  const rule = t.operations.read.rules[0]!;
  const method = rule.methods.includes("GET") ? "GET" : rule.methods[0]!;
  const path = rule.paths[0]!.replace(/\/\*\*$/, "/probe").replace(/\/\*(?=\/|$)/g, "/x");
  return { method, path: path === "/" ? "/probe" : path };
}

beforeAll(async () => {
  const names = [...new Set(STATIC.map(nameOf))];
  upstream = await startUpstream(
    (_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ ok: true }));
    },
    { names: { dns: names, ips: [] } },
  );
  gh = await startFakeGitHub({
    apps: [{ ...APP_IDS, publicKey: APP_KEYS.publicKey }],
    names: { dns: ["api.github.com"], ips: [] },
  });
  const resolve = [...names.map((n) => `${n}:${upstream.port}:127.0.0.1`), `api.github.com:${gh.port}:127.0.0.1`].join(",");
  broker = await startBroker({ caPem: upstream.pki.caPem + gh.upstream.pki.caPem, env: { BROKER_RESOLVE: resolve } });

  for (const t of STATIC) {
    for (const [, key] of templateKeyFields(t)) {
      if (values.has(key)) continue;
      values.set(key, valueFor(key));
      await broker.setCredential(key, values.get(key)!);
    }
    await broker.addService(`${nameOf(t)}:${upstream.port}`, t.auth as unknown as Record<string, unknown>, { rules: rulesFor(t, operationsOf(t)) });
  }
  await broker.setCredential("GITHUB_APP_PRIVATE_KEY", APP_PEM);
  // The person's own settings in place of the template's examples (fill), and the fake's API root.
  await broker.addService(
    `api.github.com:${gh.port}`,
    { ...APP.auth, app_id: APP_IDS.appId, installation_id: APP_IDS.installationId, api_url: `https://api.github.com:${gh.port}` },
    { rules: rulesFor(APP, operationsOf(APP)) },
  );
});

afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
  await gh?.close();
});

/** Sends the template's probe through /proxy; the answer must be the stand-in's. */
async function probe(host: string, port: number, p: { method: string; path: string }): Promise<void> {
  const res = await broker.proxy(`${host}:${port}`, p.path, { method: p.method });
  const text = await dumpResponse(res);
  outputs.push(text);
  expect(`${res.status} ${p.method} ${p.path}`).toBe(`200 ${p.method} ${p.path}`);
}

/** The one request the stand-in received for `host` (by its Host header). */
function receivedFor(host: string): Received {
  const mine = upstream.received.filter((r) => headerValues(r, "host").includes(`${host}:${upstream.port}`));
  expect(mine.length).toBe(1);
  return mine[0]!;
}

const headerValues = (r: Received, name: string) => r.rawHeaders.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);
const b64 = (s: string) => Buffer.from(s).toString("base64");

describe("each template's credential, as its upstream receives it", () => {
  test("every template has a fixture here, on a name its template serves or one it asks the person for", () => {
    expect(STATIC.length + 1).toBe(TEMPLATES.length);
    for (const t of STATIC) expect(servesHost(t, nameOf(t)) || t.fill?.host !== undefined).toBe(true);
  });

  for (const t of STATIC) {
    test(`${t.id}: ${t.auth.type}`, async () => {
      const host = nameOf(t);
      const p = probeOf(t);
      await probe(host, upstream.port, p);
      const r = receivedFor(host);
      const a = t.auth;
      const v = a.token ? values.get(a.token)! : "";
      const authorization = headerValues(r, "authorization");
      switch (a.type) {
        case "bearer":
          expect(authorization).toEqual([`Bearer ${v}`]);
          expect(r.url).toBe(p.path);
          break;
        case "basic":
          expect(authorization).toEqual([`Basic ${b64(`${a.username}:${v}`)}`]);
          expect(r.url).toBe(p.path);
          break;
        case "header":
          expect(headerValues(r, a.header!)).toEqual([`${a.prefix ?? ""}${v}`]);
          if (a.header !== "authorization") expect(authorization).toEqual([]);
          expect(r.url).toBe(p.path);
          break;
        case "query":
          expect(r.url).toBe(`${p.path}?${a.param}=${v}`);
          expect(authorization).toEqual([]);
          break;
        case "path":
          expect(r.url).toBe(`${a.template!.replace("{value}", v)}${p.path}`);
          expect(authorization).toEqual([]);
          break;
        case "aws_sigv4":
          expectSigV4(r, p, host, values.get(a.access_key_id!)!, values.get(a.secret_access_key!)!, a.service ?? host.split(".")[0]!);
          break;
        default:
          throw new Error(`no fixture for auth type ${a.type}`);
      }
      // The broker's session token authenticates the agent to the broker; it never goes upstream.
      for (const [, value] of r.rawHeaders) expect(value.includes(broker.sessionToken)).toBe(false);
    });
  }

  test("github-app: the request carries the installation token the GitHub fake minted for the app's JWT", async () => {
    const p = probeOf(APP);
    await probe("api.github.com", gh.port, p);
    expect(gh.tokenRequests.length).toBe(1);
    const minted = gh.tokenRequests[0]!;
    expect(minted.status).toBe(201);
    expect(minted.installationId).toBe(APP_IDS.installationId);
    expect(minted.claims?.iss).toBe(APP_IDS.appId);
    const hits = gh.hits.filter((h) => h.path === p.path);
    expect(hits.map((h) => h.status)).toEqual([200]);
    expect(gh.issued).toEqual([hits[0]!.token]);
    for (const [, value] of gh.upstream.received.at(-1)!.rawHeaders) expect(value.includes(broker.sessionToken)).toBe(false);
  });

  test("DNS was never asked: every name went to its BROKER_RESOLVE address", () => {
    expect(broker.lookups).toEqual([]);
  });

  test("no credential value, private key or minted token in any response, log line or audit record", async () => {
    await Bun.sleep(400); // audit flushes every 250 ms
    const audit = JSON.stringify(await broker.auditLogs());
    const secrets = [...values.values(), APP_PEM.split("\n")[1]!, ...gh.issued, ...gh.tokenRequests.map((t) => t.jwt)];
    for (const s of secrets) {
      for (const form of [s, b64(s)]) {
        for (const o of outputs) expect(o.includes(form)).toBe(false);
        for (const l of broker.logLines) expect(l.includes(form)).toBe(false);
        expect(audit.includes(form)).toBe(false);
      }
    }
  });
});

const hex = (b: Buffer | string) => (typeof b === "string" ? createHash("sha256").update(b).digest("hex") : b.toString("hex"));
const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data).digest();

/**
 * The Authorization header's structure, then its signature recomputed from the bytes that arrived
 * (SigV4: canonical request → string to sign → HMAC chain from the secret key), region and service
 * as the host names them (or as the template states the service).
 */
function expectSigV4(r: Received, p: { method: string; path: string }, host: string, keyId: string, secret: string, service: string): void {
  const [authorization] = headerValues(r, "authorization");
  const m =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([a-z0-9-]+)\/([a-z0-9-]+)\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/.exec(
      authorization ?? "",
    );
  expect(m).not.toBeNull();
  const [, id, date, region, signedService, signedHeaders, signature] = m!;
  expect(id).toBe(keyId);
  expect(region).toBe("us-east-1");
  expect(signedService).toBe(service);
  const [amzDate] = headerValues(r, "x-amz-date");
  expect(amzDate).toMatch(/^\d{8}T\d{6}Z$/);
  expect(amzDate!.slice(0, 8)).toBe(date!);
  const names = signedHeaders!.split(";");
  expect(names).toContain("host");
  expect(names).toContain("x-amz-date");
  expect(r.url).toBe(p.path);

  const payloadHash = headerValues(r, "x-amz-content-sha256")[0] ?? hex("");
  const canonicalHeaders = names.map((n) => `${n}:${headerValues(r, n).join(",").trim()}\n`).join("");
  const canonicalRequest = [r.method, p.path, "", canonicalHeaders, signedHeaders, payloadHash].join("\n");
  const scope = `${date}/${region}/${signedService}/aws4_request`;
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, hex(canonicalRequest)].join("\n");
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date!), region!), signedService!), "aws4_request");
  expect(hex(hmac(key, stringToSign))).toBe(signature!);
  expect(headerValues(r, "host")).toEqual([`${host}:${upstream.port}`]);
}
