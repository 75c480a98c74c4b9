// Credentials that live in a secret store, end to end through the console in real Chromium against the
// compiled binary: the owner adds a HashiCorp Vault connection on the Secret stores page (pointing at the
// Vault stand-in over HTTPS, its CA pasted into the connection's CA field) and shares it with a vault; an
// agent files a proposal for a local HTTPS upstream with a credential slot; the owner approves it on the
// approval page answering the slot with a reference; the agent's request through /proxy then reaches the
// upstream with the value read from the store. The value and the store's token appear in no page, no
// response the agent saw, no log line and no audit record. Screenshots of the new pages at 1280 and 390
// px go to $SHOTS_DIR (default /tmp/shots).

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { builtBinary, cleanEnv, type ServerProcess, startBinaryServer, tempDir } from "../helpers/binary.ts";
import { startVaultServer, type TestVaultServer } from "../helpers/secret-stores/vault-server.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { browserTestFor, openBrowser, recordPages, signInOnPage, submit } from "./browser.ts";
import { callApi } from "./proxy-fixture.ts";

const browserTest = browserTestFor("console secret stores");
const SHOTS = process.env.SHOTS_DIR ?? "/tmp/shots";
const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const VAULT = "team";
const CONNECTION = "prod-vault";
const KEY = "UPSTREAM_TOKEN";
const VALUE = `SENTINEL-store-value-${crypto.randomUUID()}`;
const STORE_TOKEN = `hvs.SENTINEL${crypto.randomUUID().replaceAll("-", "")}`;

let store: TestVaultServer;
let upstream: TestUpstream;
let server: ServerProcess;
let owner = "";

beforeAll(async () => {
  const bin = builtBinary();
  store = await startVaultServer();
  store.addToken(STORE_TOKEN, { allow: ["secret/data/app/"] });
  store.put("app/upstream", { token: VALUE, note: "not this one" });
  upstream = await startUpstream();
  const dir = tempDir("broker-secret-store-e2e-");
  writeFileSync(join(dir, "upstream-ca.pem"), upstream.pki.caPem);
  server = await startBinaryServer(
    bin,
    cleanEnv({
      BROKER_DATA_DIR: join(dir, "data"),
      BROKER_UPSTREAM_CA_FILE: join(dir, "upstream-ca.pem"), // the upstream's CA; the store's goes in the connection's own CA field
      BROKER_ALLOW_PRIVATE_RANGES: "true", // both listen on 127.0.0.1
      BROKER_RATELIMIT_PROFILE: "off",
    }),
    dir,
  );
  mkdirSync(SHOTS, { recursive: true });
  const reg = await callApi(server.url, "POST", "/v1/auth/register", OWNER);
  expect(reg.status).toBe(201);
  owner = reg.body.token;
  expect((await callApi(server.url, "POST", "/v1/vaults", { name: VAULT }, owner)).status).toBe(201);
}, 300_000);

afterAll(async () => {
  await server?.stop();
  await upstream?.close();
  await store?.close();
});

/** The page at 1280 px, then at 390 px (a phone), full length; back to 1280 after. */
async function shots(page: Page, name: string): Promise<void> {
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.screenshot({ path: join(SHOTS, `${name}-1280.png`), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: join(SHOTS, `${name}-390.png`), fullPage: true });
  // Nothing wider than the phone's screen: a table, a long address or a code block that does not wrap shows here.
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
  expect({ page: name, width: overflow }).toEqual({ page: name, width: 390 });
  await page.setViewportSize({ width: 1280, height: 900 });
}

/** An agent of the vault (proxy role): its token, and every response it saw. */
async function newAgent() {
  const invite = await callApi(server.url, "POST", `/v1/vaults/${VAULT}/agent-invites`, { name: "report-bot", role: "proxy" }, owner);
  expect(invite.status).toBe(201);
  const redeemed = await fetch(`${server.url}${new URL(invite.body.invite_url).pathname}`, { method: "POST" });
  expect(redeemed.status).toBe(201);
  const token = ((await redeemed.json()) as { token: string }).token;
  const seen: string[] = [];
  async function call(method: string, path: string, body?: unknown) {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, "x-vault": VAULT };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${server.url}${path}`, { method, headers, redirect: "manual", body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    const lines = [`${res.status}`];
    res.headers.forEach((v, k) => lines.push(`${k}: ${v}`));
    seen.push(`${lines.join("\n")}\n\n${text}`);
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {}
    return { status: res.status, body: json, text };
  }
  return { token, seen, call };
}

describe("a credential by reference, from the Secret stores page to an injected request", () => {
  browserTest(
    "the owner connects a Vault, shares it, approves a proposal with a reference; the upstream gets the store's value",
    async () => {
      const browser = await openBrowser({ viewport: { width: 1280, height: 900 } });
      const { page } = browser;
      const recorder = recordPages(page, { origin: server.url });
      const host = `127.0.0.1:${upstream.port}`;
      let agent: Awaited<ReturnType<typeof newAgent>> | undefined;
      try {
        await page.goto(`${server.url}/`);
        await signInOnPage(page, OWNER);

        // The owner's Secret stores page, linked from the navigation beside Settings.
        await submit(page, 'nav.site-nav a[href="/settings/secret-stores"]');
        expect(await page.textContent("h1")).toBe("Secret stores");
        expect(await page.textContent("#connections")).toContain("No connections yet");
        await shots(page, "secret-stores-empty");

        // A kind, then its fields; the store's token goes into a password field.
        await submit(page, "#kind-vault");
        expect(await page.getAttribute("#f-auth_token", "type")).toBe("password");
        await page.fill("#f-name", CONNECTION);
        await page.fill("#f-address", store.address);
        await page.fill("#f-auth_token", STORE_TOKEN);
        await page.fill("#f-refresh_seconds", "30");
        await page.fill("#f-grace_seconds", "60");
        // Without the CA the store's certificate is refused at the first read; here the form is refused first: the address is not https.
        await page.fill("#f-address", store.address.replace("https:", "http:"));
        await submit(page, "#add-store-submit");
        expect(await page.textContent("#flash")).toContain("Address must be an https:// URL");
        expect(await page.inputValue("#f-name")).toBe(CONNECTION); // kept as typed
        expect(await page.inputValue("#f-auth_token")).toBe(""); // the secret is typed again, never sent back
        await page.fill("#f-address", store.address);
        await page.fill("#f-ca_pem", store.pki.caPem);
        await page.fill("#f-auth_token", STORE_TOKEN);
        await shots(page, "secret-store-add");
        await submit(page, "#add-store-submit");
        expect(await page.textContent("#flash")).toContain(`Connection ${CONNECTION} added.`);
        expect(await page.textContent("#store-facts")).toContain(store.address);

        // Shared with the vault, from the connection's page.
        await page.selectOption("#f-share-vault", VAULT);
        await submit(page, "#share-submit");
        expect(await page.textContent("#flash")).toContain(`Shared: credentials of ${VAULT} may now read through ${CONNECTION}.`);

        // An agent asks for the upstream and a credential slot, through the API.
        agent = await newAgent();
        const filed = await agent.call("POST", "/v1/proposals", {
          services: [{ action: "set", host, description: "Local reports API", auth: { type: "bearer", token: KEY } }],
          credentials: [{ action: "set", key: KEY, description: "The reports API token (it lives in our Vault)" }],
          message: "I need the reports API.",
        });
        expect(filed.status).toBe(201);
        const approvalUrl = `${server.url}${new URL(filed.body.approval_url).pathname}${new URL(filed.body.approval_url).search}`;

        // The console's proposals page offers the reference too.
        await page.goto(`${server.url}/vaults/${VAULT}/proposals`);
        expect(await page.locator(`input[name=ref_${KEY}]`).count()).toBe(1);
        await shots(page, "proposals-reference");

        // The approval page: answered with a reference (both a value and a reference is refused first).
        await page.goto(approvalUrl);
        expect(await page.locator("#status").textContent()).toBe("pending");
        await page.fill(`input[name=value_${KEY}]`, "typed-by-mistake");
        await page.fill(`input[name=ref_${KEY}]`, `${CONNECTION}:app/upstream#token`);
        await submit(page, "button.allow");
        expect(await page.textContent("#notice")).toContain("a value or a reference, not both");
        expect(await page.inputValue(`input[name=value_${KEY}]`)).toBe("");
        await page.fill(`input[name=ref_${KEY}]`, `${CONNECTION}:app/upstream#token`);
        await shots(page, "approve-reference");
        await submit(page, "button.allow");
        expect(await page.textContent("#notice")).toStartWith("Approved");
        expect(await page.locator("#status").textContent()).toBe("applied");

        // The agent's request reaches the upstream with the value read from the store.
        const before = upstream.received.length;
        const res = await agent.call("GET", `/proxy/${host}/reports?week=12`);
        expect(res.status).toBe(200);
        expect(upstream.received.length).toBe(before + 1);
        const got = upstream.received.at(-1)!;
        expect(got.url).toBe("/reports?week=12");
        expect(got.rawHeaders.filter(([k]) => k.toLowerCase() === "authorization")).toEqual([["authorization", `Bearer ${VALUE}`]]);
        expect(res.text).not.toContain(VALUE); // the echo upstream repeated it: the broker redacts it

        // The Credentials page shows where it reads from and how the last read went; no Reveal.
        await page.goto(`${server.url}/vaults/${VAULT}/credentials`);
        const row = await page.textContent("#credentials");
        expect(row).toContain(`${CONNECTION}:app/upstream#token`);
        expect(row).toMatch(/last refresh \d{4}-\d\d-\d\d/);
        expect(row).toMatch(/version seen\s*1/);
        await shots(page, "credentials-reference");
        await page.click(`a[aria-label="Manage ${KEY}"]`);
        await page.waitForSelector("#reference-facts");
        expect(await page.locator(`a[href$="/reveal"]`).count()).toBe(0); // no Reveal: the value lives in the store
        await shots(page, "credential-reference-manage");

        // The connection's page lists the reference; Check now reads it again.
        await page.goto(`${server.url}/settings/secret-stores/${CONNECTION}`);
        expect(await page.textContent("#references")).toContain(KEY);
        await submit(page, "#check-now");
        expect(await page.textContent("#flash")).toContain(`Checked ${CONNECTION}: the reference reads fine.`);
        await shots(page, "secret-store-detail");
        await page.goto(`${server.url}/settings/secret-stores`);
        await shots(page, "secret-stores-list");
        await page.goto(`${server.url}/vaults/${VAULT}/settings`);
        await shots(page, "vault-settings-stores");

        // Removing the connection is refused while the credential reads through it.
        await page.goto(`${server.url}/settings/secret-stores/${CONNECTION}`);
        await page.fill("#f-confirm", CONNECTION);
        await submit(page, "#remove button[type=submit]");
        expect(await page.textContent("#flash")).toContain(`Credentials still refer to ${CONNECTION}: ${VAULT}/${KEY}`);
      } finally {
        await recorder.flushed();
        await browser.close();
      }

      // The value and the store's token: in no page, no answer the agent saw, no log line, no audit record.
      const audit = await callApi(server.url, "GET", `/v1/vaults/${VAULT}/logs?limit=100`, undefined, owner);
      expect(audit.status).toBe(200);
      const proxied = audit.body.logs.find((l: { path: string }) => l.path === "/reports");
      expect(proxied?.credential_refs).toEqual([`${CONNECTION}:app/upstream#token`]);
      const connection = await callApi(server.url, "GET", `/v1/secret-stores/${CONNECTION}`, undefined, owner);
      expect(connection.body.references).toHaveLength(1);
      const places: [string, string][] = [
        ...recorder.pages.map((p): [string, string] => [`${p.method} ${p.url}`, p.html]),
        ...(agent?.seen ?? []).map((s, i): [string, string] => [`agent answer ${i}`, s]),
        ["server log", server.logs()],
        ["audit log", JSON.stringify(audit.body)],
        ["connection", JSON.stringify(connection.body)],
      ];
      expect(recorder.pages.length).toBeGreaterThan(10);
      for (const [where, text] of places) {
        for (const needle of [VALUE, STORE_TOKEN, Buffer.from(VALUE).toString("base64")])
          expect({ where, leaked: text.includes(needle) }).toEqual({ where, leaked: false });
      }
      // The broker did read through the connection, with the token it was given.
      expect(store.requests.some((r) => r.url === "/v1/secret/data/app/upstream" && r.headers["x-vault-token"] === STORE_TOKEN)).toBe(true);
    },
    180_000,
  );
});
