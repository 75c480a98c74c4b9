// Connecting an account (OAuth authorization code with PKCE) in real Chromium, against a REAL authorization
// server (`oidc-provider` over HTTPS on https://localhost, tests/helpers/connect-provider.ts) standing in for
// GitHub's authorize and token endpoints (BROKER_CONNECT_GITHUB_AUTHORIZE_URL / _TOKEN_URL), and a stand-in for
// api.github.com on 127.0.43.1:443 (BROKER_RESOLVE) that checks every bearer token by introspection.
// A person clicks "Connect with GitHub" on the console's template page, picks operations, signs in and
// authorizes on the provider's own page (a click started there: the return is a cross-site navigation, as from
// github.com), and lands on the broker's callback: the code was redeemed through the broker's upstream client (client_secret_basic, PKCE verifier),
// the refresh token was sealed and an oauth2_refresh service made from the GitHub template (the app's client
// id and secret stay in the broker's settings, never in the vault). An agent's
// request through /proxy then reaches the stand-in with an access token minted from the stored refresh token.
// Declining at the provider, and a callback this browser did not start, change nothing. No client secret,
// code, access or refresh token appears in any page, response header, log line or audit record.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { createServer, type Server } from "node:https";
import type { Page } from "playwright-core";
import { startConnectProvider, type TestConnectProvider } from "../helpers/connect-provider.ts";
import { createTestPki, type TestPki } from "../helpers/pki.ts";
import { browserTestFor, openBrowser, recordPages, signInOnPage, submit, type OpenBrowser, type PageRecorder, type SeenPage } from "./browser.ts";
import { dumpResponse, expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

const test = browserTestFor("connect an account");
const OWNER = { email: "owner@example.com", password: "correct horse battery" }; // proxy-fixture's owner
const API_HOST = "api.github.com";
/** Where BROKER_RESOLVE sends api.github.com:443: a loopback address of its own, so no other test's port 443 is in the way. */
const STAND_IN = "127.0.43.1";
const SCOPES = ["repo", "read:user", "workflow", "delete_repo"];

let pki: TestPki;
let as: TestConnectProvider;
let api: { server: Server; hits: { method: string; path: string; token: string; status: number }[] };
let broker: Broker;
/** Every HTML page Chromium got from the broker, every broker response's headers, everything an agent received. */
const pages: SeenPage[] = [];
const brokerHeaders: string[] = [];
const headersRead: Promise<unknown>[] = [];
const agentSaw: string[] = [];

beforeAll(async () => {
  pki = await createTestPki({ dns: ["localhost", API_HOST], ips: ["127.0.0.1", STAND_IN] });
  as = await startConnectProvider({ pki, scopes: SCOPES });
  api = await startApiStandIn();
  broker = await startBroker({
    caPem: pki.caPem,
    env: {
      BROKER_NETWORK_ALLOWLIST: `127.0.0.1,${STAND_IN}`,
      BROKER_RESOLVE: `${API_HOST}:443:${STAND_IN}`,
      BROKER_CONNECT_GITHUB_CLIENT_ID: as.clientId,
      BROKER_CONNECT_GITHUB_CLIENT_SECRET: as.clientSecret,
      BROKER_CONNECT_GITHUB_AUTHORIZE_URL: as.authorizeUrl,
      BROKER_CONNECT_GITHUB_TOKEN_URL: as.tokenUrl,
    },
  });
  broker.dns.set("localhost", ["127.0.0.1"]); // the token endpoint's host, through the guard like any upstream
  as.setRedirectUris([`${broker.apiUrl}/connect/callback`]);
});

afterAll(async () => {
  await broker?.stop();
  await as?.stop();
  await new Promise<void>((resolve) => (api?.server ? api.server.close(() => resolve()) : resolve()));
});

/** The HTTPS stand-in for api.github.com: accepts a bearer token only when the provider says it is active. */
async function startApiStandIn(): Promise<typeof api> {
  const hits: (typeof api)["hits"] = [];
  const server = createServer({ cert: pki.certPem, key: pki.keyPem }, (req, res) => {
    const auth = req.headers.authorization ?? "";
    const token = /^Bearer (.+)$/.exec(auth)?.[1] ?? "";
    const path = (req.url ?? "").split("?")[0] ?? "";
    void (async () => {
      const info = token ? await as.introspect(token) : { active: false };
      const status = info.active === true ? 200 : 401;
      hits.push({ method: req.method ?? "", path, token, status });
      res.statusCode = status;
      res.setHeader("content-type", "application/json");
      if (path === "/echo") res.setHeader("x-echo-authorization", auth);
      res.end(
        JSON.stringify(
          status === 200 ? { login: info.sub, scope: info.scope, ...(path === "/echo" && { authorization: auth }) } : { message: "Bad credentials" },
        ),
      );
    })().catch((err) => {
      res.statusCode = 500;
      res.end(String(err));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(
        err.code === "EACCES"
          ? new Error(`binding ${STAND_IN}:443 needs root or CAP_NET_BIND_SERVICE: the stand-in listens where BROKER_RESOLVE maps ${API_HOST}:443`)
          : err,
      ),
    );
    server.listen(443, STAND_IN, () => resolve());
  });
  return { server, hits };
}

/** Chromium trusting no test CA (the provider's certificate is accepted as a person would click through), recording the broker's pages and headers. */
async function openConsole(): Promise<OpenBrowser & PageRecorder> {
  const b = await openBrowser({ viewport: { width: 1200, height: 800 }, ignoreHTTPSErrors: true });
  b.page.on("response", (res) => {
    if (res.url().startsWith(broker.apiUrl)) headersRead.push(res.allHeaders().then((h) => brokerHeaders.push(JSON.stringify(h))));
  });
  return { ...b, ...recordPages(b.page, { origin: broker.apiUrl, into: pages }) };
}

async function signedInAt(page: Page, path: string): Promise<void> {
  await page.goto(`${broker.apiUrl}/`);
  await signInOnPage(page, OWNER);
  await page.goto(`${broker.apiUrl}${path}`);
}

/** An agent of the vault (role proxy), invited by the owner and redeemed; its calls go through /proxy with X-Vault. */
async function newAgent(name: string) {
  const inv = await broker.api("POST", `/v1/vaults/${broker.vault}/agent-invites`, { name, role: "proxy" }, broker.userToken);
  expect(inv.status).toBe(201);
  const red = await broker.api("POST", new URL(inv.body.invite_url).pathname);
  expect(red.status).toBe(201);
  const token: string = red.body.token;
  return async (method: string, path: string): Promise<{ status: number; json: any }> => {
    const res = await fetch(`${broker.apiUrl}/proxy/${API_HOST}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "x-vault": broker.vault },
      redirect: "manual",
    });
    agentSaw.push(await dumpResponse(res.clone()));
    return { status: res.status, json: await res.json().catch(() => undefined) };
  };
}

const connectPage = () => `/vaults/${broker.vault}/services/connect/github`;
const keysInVault = async () =>
  ((await broker.api("GET", `/v1/vaults/${broker.vault}/credentials`, undefined, broker.userToken)).body.credentials as { key: string }[]).map((c) => c.key);

describe("connect an account in Chromium", () => {
  test("declining at the provider changes nothing and says so", async () => {
    const b = await openConsole();
    try {
      await signedInAt(b.page, connectPage());
      await Promise.all([b.page.waitForURL(/\/interaction\//), b.page.click("#connect-button")]);
      await Promise.all([b.page.waitForURL(/\/connect\/callback\?/), b.page.click("#cancel")]);
      await b.page.waitForSelector("#connect-failed");
      expect(await b.page.textContent("#message")).toBe("You declined access at GitHub, so nothing was connected.");
      expect(await b.page.title()).toContain("Could not connect GitHub");
    } finally {
      await b.close();
    }
    expect(await keysInVault()).toEqual([]);
    expect((await broker.api("GET", `/v1/vaults/${broker.vault}/services`, undefined, broker.userToken)).body.services).toEqual([]);
    expect(broker.logLines.some((l) => l.includes("connect_rejected") && l.includes('"denied"'))).toBe(true);
  });

  test("sign in at the provider, land back: the service is made, the agent's requests carry minted tokens", async () => {
    const b = await openConsole();
    try {
      // From the console's template page: "Connect with GitHub" shows because the provider is set up.
      await signedInAt(b.page, `/vaults/${broker.vault}/services/new?template=github`);
      await submit(b.page, "a:has-text('Connect with GitHub')");
      expect(new URL(b.page.url()).pathname).toBe(connectPage());
      expect(await b.page.title()).toContain("Connect GitHub");
      expect(await b.page.isChecked("#f-op-read")).toBe(true);
      expect(await b.page.isChecked("#f-op-write")).toBe(false);
      await b.page.check("#f-op-write");
      await Promise.all([b.page.waitForURL(/\/interaction\//), b.page.click("#connect-button")]);
      expect(new URL(b.page.url()).origin).toBe(as.issuer);
      await b.page.fill("#login", as.login);
      await b.page.fill("#password", as.password);
      await Promise.all([b.page.waitForURL(/\/connect\/callback\?/), b.page.click("#authorize")]);
      await b.page.waitForSelector("#connected");
      const said = await b.page.textContent("#message");
      expect(said).toContain(API_HOST);
      expect(said).toContain("GITHUB_REFRESH_TOKEN");
      expect(said).toContain("read and write");
      // On to the console (a same-site navigation: the session cookie comes along again).
      await submit(b.page, "#open-services");
      expect(new URL(b.page.url()).pathname).toBe(`/vaults/${broker.vault}/services`);
      expect(await b.page.textContent("body")).toContain(API_HOST);
      await b.flushed();
    } finally {
      await b.close();
    }

    // The authorization request: plain OAuth with PKCE S256, the template's scopes for read and write.
    expect(as.scopesAsked.at(-1)).toBe("repo read:user workflow");
    // The code was redeemed by the broker itself: client_secret_basic (id and secret form-urlencoded first), the verifier, no secret in the form.
    const exchange = as.tokenRequests.filter((t) => t.grantType === "authorization_code");
    expect(exchange.length).toBe(1);
    const enc = (s: string) => new URLSearchParams({ s }).toString().slice(2);
    expect(exchange[0]).toMatchObject({ userAgent: "broker (credential broker)", status: 200, error: undefined });
    expect(exchange[0]!.authorization).toBe(`Basic ${Buffer.from(`${enc(as.clientId)}:${enc(as.clientSecret)}`).toString("base64")}`);
    expect(exchange[0]!.fields).toEqual(["code", "code_verifier", "grant_type", "redirect_uri"]);

    // The service: oauth2_refresh for the template's first host, from the template, with its operations' rules.
    const services = (await broker.api("GET", `/v1/vaults/${broker.vault}/services`, undefined, broker.userToken)).body.services;
    expect(services.length).toBe(1);
    expect(services[0]).toMatchObject({
      host: API_HOST,
      enabled: true,
      auth: {
        type: "oauth2_refresh",
        token_url: as.tokenUrl,
        client_id: "GITHUB_CLIENT_ID",
        client_secret: "GITHUB_CLIENT_SECRET",
        refresh_token: "GITHUB_REFRESH_TOKEN",
        client_auth: "basic",
      },
      template: { id: "github", operations: ["read", "write"] },
    });
    expect(services[0].template.catalogue_rules).toBeUndefined(); // exactly the catalogue's rules for read and write
    // Only the refresh token is a vault credential: the app's client id and secret stay the operator's (BROKER_CONNECT_GITHUB_*).
    expect(await keysInVault()).toEqual(["GITHUB_REFRESH_TOKEN"]);
    expect((await broker.api("GET", `/v1/vaults/${broker.vault}/credentials/GITHUB_CLIENT_SECRET`, undefined, broker.userToken)).status).toBe(404);
    // Sealed like every credential: no value in the clear in the store; the flow's state is gone (single use).
    expect(as.refreshTokens.length).toBe(1);
    const rows = await broker.server.store.db.all<{ ciphertext: Uint8Array }>("SELECT ciphertext FROM credentials");
    for (const r of rows) for (const v of [as.clientSecret, ...as.refreshTokens]) expect(Buffer.from(r.ciphertext).includes(v)).toBe(false);
    expect(await broker.server.store.db.all("SELECT state_hash FROM connect_states")).toEqual([]);

    // An agent's requests through /proxy carry an access token minted from the stored refresh token.
    const agent = await newAgent("connect-agent");
    const user = await agent("GET", "/user");
    expect(user).toEqual({ status: 200, json: { login: "octocat", scope: "repo read:user workflow" } });
    const minted = as.tokenRequests.filter((t) => t.grantType === "refresh_token");
    expect(minted.length).toBe(1);
    expect(minted[0]).toMatchObject({ userAgent: "broker (credential broker)", status: 200 });
    const sent = api.hits.at(-1)!;
    expect(sent).toMatchObject({ method: "GET", path: "/user", status: 200 });
    expect(as.issued).toContain(sent.token);
    expect((await agent("POST", "/repos/octo/hello/issues")).status).toBe(200); // write was chosen
    expect((await agent("DELETE", "/repos/octo/hello/git/refs/heads/x")).status).toBe(403); // destructive was not
    const echo = await agent("GET", "/echo");
    expect(echo.status).toBe(200);
    expect(echo.json.authorization).toBe("Bearer [redacted]");
    // The provider rotated the refresh token on its first use: the vault holds the new one.
    expect(as.refreshTokens.length).toBe(2);
    const stored = async () => (await broker.api("GET", `/v1/vaults/${broker.vault}/credentials/GITHUB_REFRESH_TOKEN`, undefined, broker.userToken)).body.value;
    for (let i = 0; i < 50 && (await stored()) !== as.refreshTokens[1]; i++) await Bun.sleep(20);
    expect((await stored()) === as.refreshTokens[1]).toBe(true);

    await expectNothingLeaked();
  });

  test("a callback this browser did not start is refused, and a used one cannot be replayed", async () => {
    const code = as.codes.at(-1)!;
    const res = await fetch(`${broker.apiUrl}/connect/callback?code=${encodeURIComponent(code)}&state=not-a-state`, { redirect: "manual" });
    const html = await res.text();
    expect(res.status).toBe(400);
    expect(html).toContain("was not started in this browser");
    expect(html).not.toContain(code);
    expect(as.tokenRequests.filter((t) => t.grantType === "authorization_code").length).toBe(1);
    // The same with a flow cookie naming the state: unknown to the broker (single use), nothing redeemed.
    const replay = await fetch(`${broker.apiUrl}/connect/callback?code=${encodeURIComponent(code)}&state=replayed`, {
      headers: { cookie: "broker_connect=replayed" },
      redirect: "manual",
    });
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain("not valid, or was already used");
    expect(as.tokenRequests.filter((t) => t.grantType === "authorization_code").length).toBe(1);
  });
});

/** No client secret, code, PKCE verifier, access or refresh token in any page, broker response header, agent answer, log line or audit record. */
async function expectNothingLeaked(): Promise<void> {
  const secrets = [as.clientSecret, ...as.codes, ...as.verifiers, ...as.issued];
  expect(as.codes.length).toBeGreaterThan(0);
  expect(as.verifiers.length).toBe(1);
  expect(as.issued.length).toBeGreaterThanOrEqual(4); // code → access + refresh; refresh → access + rotated refresh
  await Promise.allSettled(headersRead);
  expect(brokerHeaders.length).toBeGreaterThan(5);
  const outputs = [...pages.map((p) => p.html), ...brokerHeaders, ...agentSaw];
  expect(pages.length).toBeGreaterThan(3);
  for (const secret of secrets) await expectNoLeak(broker, secret, outputs);
}
