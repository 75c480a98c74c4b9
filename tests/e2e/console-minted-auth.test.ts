// The auth types the broker mints or signs itself, in the console and on the approval page, in real
// Chromium: a signed-in admin adds an OAuth 2.0 refresh-token service and an AWS SigV4 service through
// the form (confirming that existing keys go to the token endpoint's host), sees a refused field as an
// error with the form kept as typed, reads them in the list and as "used by" on the Credentials page,
// edits one (the form round-trips every field), and approves an agent's GitHub App proposal whose slot
// says it is the app's private key. No credential value reaches any page, API answer or log line.
// Screenshots (UPDATE_SCREENSHOTS=1, desktop and phone) go to docs/screenshots/.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { browserTestFor, openRecordingBrowser, signInOnPage, startBlankBroker, submit, type BlankBroker } from "./browser.ts";

const SHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? join(import.meta.dir, "..", "..", "docs", "screenshots") : mkdtempSync(join(tmpdir(), "broker-shots-"));
const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const VAULT = "crm-sync";
const browserTest = browserTestFor("console minted auth");
const SECRETS: Record<string, string> = {
  CRM_CLIENT_ID: `SENTINEL-client-id-${crypto.randomUUID()}`,
  CRM_CLIENT_SECRET: `SENTINEL-client-secret-${crypto.randomUUID()}`,
  CRM_REFRESH_TOKEN: `SENTINEL-refresh-${crypto.randomUUID()}`,
  AWS_ACCESS_KEY_ID: `AKIASENTINEL${crypto.randomUUID().slice(0, 8).toUpperCase()}`,
  AWS_SECRET_ACCESS_KEY: `SENTINEL-aws-secret-${crypto.randomUUID()}`,
};
const PEM = `-----BEGIN RSA PRIVATE KEY-----SENTINELpem${crypto.randomUUID().replaceAll("-", "")}-----END RSA PRIVATE KEY-----`;
const ALL_VALUES = [...Object.values(SECRETS), PEM];

let broker: BlankBroker;
let userToken: string;
const apiSeen: string[] = [];

beforeAll(async () => {
  broker = await startBlankBroker();
  mkdirSync(SHOTS, { recursive: true });
  const reg = await broker.api("POST", "/v1/auth/register", OWNER);
  expect(reg.status).toBe(201);
  userToken = reg.body.token;
  expect((await broker.api("POST", "/v1/vaults", { name: VAULT }, userToken)).status).toBe(201);
  for (const [key, value] of Object.entries(SECRETS)) {
    expect((await broker.api("PUT", `/v1/vaults/${VAULT}/credentials/${key}`, { value }, userToken)).status).toBe(200);
  }
});
afterAll(async () => {
  await broker?.stop();
});

async function shoot(page: Page, name: string) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: join(SHOTS, `${name}-phone.png`), fullPage: true });
  await page.setViewportSize({ width: 1200, height: 800 });
}

/** The key fields: a choice of the stored keys (or a new one) rather than text. */
const KEY_FIELDS = new Set(["client_id", "client_secret", "refresh_token", "access_key_id", "secret_access_key", "session_token", "private_key"]);

/** Opens the type's add form (Add a service, Custom service, the type), then fills host and each field by its name (ids are f-<name>). */
async function fillService(page: Page, base: string, host: string, type: string, fields: Record<string, string>) {
  await page.goto(`${base}/services/new`);
  await submit(page, "#custom-service");
  await submit(page, `#type-${type}`);
  await page.fill("#f-host", host);
  for (const [name, value] of Object.entries(fields)) {
    if (name === "client_auth" || KEY_FIELDS.has(name)) await page.selectOption(`#f-${name}`, value);
    else await page.fill(`#f-${name}`, value);
  }
}

/** An agent of the vault (role proxy), invited by the owner and redeemed: its calls, answers kept. */
async function newAgent(name: string) {
  const inv = await broker.api("POST", `/v1/vaults/${VAULT}/agent-invites`, { name, role: "proxy" }, userToken);
  expect(inv.status).toBe(201);
  const red = await broker.api("POST", new URL(inv.body.invite_url).pathname);
  expect(red.status).toBe(201);
  return async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${broker.apiUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${red.body.token}`, "x-vault": VAULT, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    apiSeen.push(text);
    return { status: res.status, body: JSON.parse(text) };
  };
}

describe("minted auth types in the console and on the approval page", () => {
  browserTest(
    "add an OAuth refresh and an AWS SigV4 service, edit one, approve a GitHub App proposal",
    async () => {
      const browser = await openRecordingBrowser({ origin: broker.apiUrl });
      const { page, pages } = browser;
      const base = `${broker.apiUrl}/vaults/${VAULT}`;
      try {
        await page.goto(`${broker.apiUrl}/`);
        await signInOnPage(page, OWNER);

        // A refused field: the domain's message as the error flash, the form as typed.
        await fillService(page, base, "api.crm.example", "oauth2_refresh", {
          token_url: "http://auth.crm.example/oauth/token",
          client_id: "CRM_CLIENT_ID",
          client_secret: "CRM_CLIENT_SECRET",
          refresh_token: "CRM_REFRESH_TOKEN",
        });
        await submit(page, "#add-service-form button[type=submit]");
        expect(await page.textContent("#flash")).toBe("Token URL must be an https:// URL (a token endpoint is never reached over plain HTTP).");
        expect(await page.inputValue("#f-token_url")).toBe("http://auth.crm.example/oauth/token");
        expect(await page.inputValue("#f-refresh_token")).toBe("CRM_REFRESH_TOKEN");
        expect(await page.inputValue('input[name="auth_type"]')).toBe("oauth2_refresh");
        expect(await page.$("#f-access_key_id")).toBeNull(); // only the chosen type's fields

        // Fixed: the stored client keys go to the token endpoint's host, which the person confirms.
        await page.fill("#f-token_url", "https://auth.crm.example/oauth/token");
        await page.fill("#f-description", "CRM contacts, on behalf of the sales team");
        await submit(page, "#add-service-form button[type=submit]");
        const warning = (await page.textContent("main")) ?? "";
        for (const key of ["CRM_CLIENT_ID", "CRM_CLIENT_SECRET", "CRM_REFRESH_TOKEN"])
          expect(warning).toContain(`sends your existing credential ${key} to a new host, auth.crm.example`);
        await submit(page, "#confirm-service");
        expect(await page.textContent("#flash")).toContain("Service api.crm.example added");

        // A key that is no key name: refused, named by its label.
        await fillService(page, base, "s3.eu-west-1.amazonaws.com", "aws_sigv4", {
          access_key_id: "*new",
          secret_access_key: "AWS_SECRET_ACCESS_KEY",
          region: "eu-west-1",
          service: "s3",
        });
        await page.fill("#f-access_key_id_new", "aws access key");
        await submit(page, "#add-service-form button[type=submit]");
        expect(await page.textContent("#flash")).toBe("Access key ID must be a credential key name (A-Z, 0-9, _; starting with a letter).");
        expect(await page.inputValue("#f-access_key_id_new")).toBe("aws access key");
        expect(await page.inputValue("#f-region")).toBe("eu-west-1");
        await page.selectOption("#f-access_key_id", "AWS_ACCESS_KEY_ID");
        await page.fill("#f-description", "Nightly exports bucket");
        await submit(page, "#add-service-form button[type=submit]");
        expect(await page.textContent("main")).toContain("sends your existing credential AWS_ACCESS_KEY_ID to a new host, s3.eu-west-1.amazonaws.com");
        expect(await page.textContent("main")).not.toContain("AWS_SECRET_ACCESS_KEY to a new host"); // it only signs
        await submit(page, "#confirm-service");
        expect(await page.textContent("#flash")).toContain("Service s3.eu-west-1.amazonaws.com added");

        // The list: each type by name, its keys and where the token comes from.
        const crm = (await page.locator("#services tbody tr", { hasText: "api.crm.example" }).textContent()) ?? "";
        expect(crm).toContain("OAuth refresh");
        expect(crm).toContain("CRM_REFRESH_TOKEN");
        expect(crm).toContain("token refreshed at auth.crm.example/oauth/token");
        const s3 = (await page.locator("#services tbody tr", { hasText: "s3.eu-west-1" }).textContent()) ?? "";
        expect(s3).toContain("AWS SigV4");
        expect(s3).toContain("signs for s3 in eu-west-1");

        // The API holds exactly what the form sent.
        const listed = await broker.api("GET", `/v1/vaults/${VAULT}/services`, undefined, userToken);
        apiSeen.push(JSON.stringify(listed.body));
        const byHost = Object.fromEntries((listed.body.services as { host: string; auth: unknown }[]).map((s) => [s.host, s.auth]));
        expect(byHost["api.crm.example"]).toEqual({
          type: "oauth2_refresh",
          token_url: "https://auth.crm.example/oauth/token",
          client_id: "CRM_CLIENT_ID",
          client_secret: "CRM_CLIENT_SECRET",
          refresh_token: "CRM_REFRESH_TOKEN",
        });
        expect(byHost["s3.eu-west-1.amazonaws.com"]).toEqual({
          type: "aws_sigv4",
          access_key_id: "AWS_ACCESS_KEY_ID",
          secret_access_key: "AWS_SECRET_ACCESS_KEY",
          region: "eu-west-1",
          service: "s3",
        });

        // Edit: every field comes back; the client now authenticates in the request body.
        await page.click('a[aria-label="Edit api.crm.example"]');
        expect(await page.inputValue('input[name="auth_type"]')).toBe("oauth2_refresh");
        expect(await page.inputValue("#f-token_url")).toBe("https://auth.crm.example/oauth/token");
        expect(await page.inputValue("#f-client_id")).toBe("CRM_CLIENT_ID");
        expect(await page.inputValue("#f-client_secret")).toBe("CRM_CLIENT_SECRET");
        expect(await page.inputValue("#f-refresh_token")).toBe("CRM_REFRESH_TOKEN");
        expect(await page.inputValue("#f-client_auth")).toBe("basic");
        await page.selectOption("#f-client_auth", "post");
        await shoot(page, "service-minted-edit");
        await submit(page, "#edit-service-form button[type=submit]");
        expect(await page.textContent("#flash")).toContain("Service api.crm.example updated");
        const edited = await broker.api("GET", `/v1/vaults/${VAULT}/services`, undefined, userToken);
        expect(edited.body.services.find((s: { host: string }) => s.host === "api.crm.example").auth).toEqual({
          type: "oauth2_refresh",
          token_url: "https://auth.crm.example/oauth/token",
          client_id: "CRM_CLIENT_ID",
          client_secret: "CRM_CLIENT_SECRET",
          refresh_token: "CRM_REFRESH_TOKEN",
          client_auth: "post",
        });
        await page.click('a[aria-label="Edit api.crm.example"]');
        expect(await page.inputValue("#f-client_auth")).toBe("post");

        // Credentials: every key a service names counts as used by it.
        await page.goto(`${base}/credentials`);
        for (const key of ["CRM_CLIENT_ID", "CRM_CLIENT_SECRET", "CRM_REFRESH_TOKEN"]) {
          expect(await page.locator("#credentials tbody tr", { hasText: key }).textContent()).toContain("api.crm.example");
        }
        expect(await page.locator("#credentials tbody tr", { hasText: "AWS_SECRET_ACCESS_KEY" }).textContent()).toContain("s3.eu-west-1.amazonaws.com");

        // An agent proposes a GitHub App service with a slot for its private key.
        const agent = await newAgent("release-bot");
        const filed = await agent("POST", "/v1/proposals", {
          services: [
            {
              host: "api.github.com",
              description: "Releases of acme/widgets",
              auth: { type: "github_app", app_id: "123456", installation_id: "45678901", private_key: "GH_APP_PRIVATE_KEY" },
              rules: [{ methods: ["GET", "POST"], paths: ["/repos/acme/widgets/releases/**"] }],
            },
          ],
          credentials: [
            {
              key: "GH_APP_PRIVATE_KEY",
              description: "The private key of the acme-release GitHub App",
              obtain: "https://github.com/organizations/acme-widgets/settings/apps/acme-release-bot#private-key-generation-and-rotation",
            },
          ],
          message: "I publish releases; a GitHub App installation token is narrower than a personal token.",
        });
        expect(filed.status).toBe(201);
        const { id, approval_url: approvalUrl } = filed.body as { id: number; approval_url: string };

        await page.goto(approvalUrl);
        expect(await page.textContent("#service-0")).toContain("GitHub App 123456 installation 45678901 token, minted with GH_APP_PRIVATE_KEY");
        expect(await page.textContent("#uses_GH_APP_PRIVATE_KEY")).toBe("Used as the GitHub App private key for api.github.com.");
        expect(await page.textContent("body")).toContain("BEGIN and END lines included");
        await shoot(page, "approval-github-app");

        // The console's proposals list says the same.
        await page.goto(`${base}/proposals`);
        const card = (await page.textContent(`#proposal-${id}`)) ?? "";
        expect(card).toContain("GitHub App 123456 installation 45678901 token");
        expect(card).toContain("Used as the GitHub App private key for api.github.com.");

        await page.goto(approvalUrl);
        await page.fill("#value_GH_APP_PRIVATE_KEY", PEM);
        await Promise.all([page.waitForURL(/decided=1/), page.getByRole("button", { name: "Approve" }).click()]);
        expect(await page.textContent("#status")).toBe("applied");
        expect((await agent("GET", `/v1/proposals/${id}`)).body.status).toBe("applied");
        const discover = await agent("GET", "/discover");
        expect(discover.body.services.find((s: { host: string }) => s.host === "api.github.com").auth.type).toBe("github_app");

        // A token endpoint the network guard refuses (a private address): the agent gets the 502, and
        // the list tells the person who must act what went wrong.
        const erp = {
          type: "oauth2_client_credentials",
          token_url: "https://10.255.0.1/oauth/token",
          client_id: "CRM_CLIENT_ID",
          client_secret: "CRM_CLIENT_SECRET",
        };
        expect(
          (await broker.api("POST", `/v1/vaults/${VAULT}/services`, { host: "erp.example.com", description: "Orders", auth: erp }, userToken)).status,
        ).toBe(201);
        const refused = await agent("GET", "/proxy/erp.example.com/v1/orders");
        expect(refused.status).toBe(502);
        expect(refused.body.error).toBe("credential_refresh_failed");

        // All three in the list, the approved GitHub App among them, and the refused one.
        await page.goto(`${base}/services`);
        const erpRow = (await page.locator("#services tbody tr", { hasText: "erp.example.com" }).textContent()) ?? "";
        expect(erpRow).toContain("refresh refused");
        expect(erpRow).toContain("the token endpoint 10.255.0.1 is blocked by the network guard");
        const gh = (await page.locator("#services tbody tr", { hasText: "api.github.com" }).textContent()) ?? "";
        expect(gh).toContain("GitHub App");
        expect(gh).toContain("GH_APP_PRIVATE_KEY");
        expect(gh).toContain("app 123456, installation 45678901");
        await shoot(page, "services-minted");

        await browser.flushed();
        for (const value of ALL_VALUES) {
          expect(pages.filter((p) => p.html.includes(value)).map((p) => `${p.method} ${p.url}`)).toEqual([]);
          expect(apiSeen.filter((t) => t.includes(value))).toEqual([]);
          expect(broker.logLines.filter((l) => l.includes(value))).toEqual([]);
        }
      } finally {
        await browser.close();
      }
    },
    90_000,
  );
});
