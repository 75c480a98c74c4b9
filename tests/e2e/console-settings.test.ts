// The console's Logs, Vault settings and Instance settings in real Chromium against a real broker
// and a local HTTPS upstream: the owner changes a rate limit, an agent's proxied request shows in
// the log by name (and a later one arrives through the live tail without a reload), unmatched
// hosts switch to deny. Screenshots: docs/screenshots/logs.png, vault-settings.png, instance-settings.png.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { browserTestFor, openRecordingBrowser, signInOnPage, startBlankBroker, type BlankBroker } from "./browser.ts";

// Screenshots land in docs/ only when asked for (UPDATE_SCREENSHOTS=1), so a test run leaves the tree clean.
/** The same page at phone width (390 px), then back to the desktop viewport. */
async function phoneShot(page: Page, name: string): Promise<void> {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });
}

const SHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? join(import.meta.dir, "..", "..", "docs", "screenshots") : join(tmpdir(), `broker-shots-${process.pid}`);
const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const SECRET = `SENTINEL-console-settings-${crypto.randomUUID()}`;
const browserTest = browserTestFor("console settings");

let broker: BlankBroker;
let upstream: TestUpstream;
let owner = "";
let agentSession = "";

beforeAll(async () => {
  upstream = await startUpstream();
  broker = await startBlankBroker({ BROKER_RATELIMIT_PROFILE: "default" }, { upstreamCaPem: upstream.pki.caPem });
  mkdirSync(SHOTS, { recursive: true });
  owner = (await broker.api("POST", "/v1/auth/register", OWNER)).body.token;
  expect((await broker.api("POST", "/v1/vaults", { name: "payments-bot" }, owner)).status).toBe(201);
  expect((await broker.api("PUT", "/v1/vaults/payments-bot/credentials/API_KEY", { value: SECRET }, owner)).status).toBe(200);
  const svc = await broker.api(
    "POST",
    "/v1/vaults/payments-bot/services",
    { host: `127.0.0.1:${upstream.port}`, description: "local API", auth: { type: "bearer", token: "API_KEY" } },
    owner,
  );
  expect(svc.status).toBe(201);
  const invite = await broker.api("POST", "/v1/vaults/payments-bot/agent-invites", { name: "deploy-bot", role: "proxy" }, owner);
  expect(invite.status).toBe(201);
  const redeemed = await fetch(invite.body.invite_url.replace(/^https?:\/\/[^/]+/, broker.apiUrl), { method: "POST" });
  const agentToken = ((await redeemed.json()) as { token: string }).token;
  const scoped = await fetch(`${broker.apiUrl}/v1/sessions`, {
    method: "POST",
    headers: { authorization: `Bearer ${agentToken}`, "x-vault": "payments-bot", "content-type": "application/json" },
    body: JSON.stringify({ vault: "payments-bot" }),
  });
  agentSession = ((await scoped.json()) as { token: string }).token;
});

afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

async function proxied(path: string): Promise<number> {
  const res = await fetch(`${broker.apiUrl}/proxy/127.0.0.1:${upstream.port}${path}`, { headers: { authorization: `Bearer ${agentSession}` } });
  await res.arrayBuffer();
  return res.status;
}

describe("console settings and logs in Chromium", () => {
  browserTest(
    "change a rate limit, read the log line of a proxied request (and a live one), deny unmatched hosts",
    async () => {
      const browser = await openRecordingBrowser();
      const { page, pages } = browser;
      try {
        await page.goto(`${broker.apiUrl}/`);
        await signInOnPage(page, OWNER);
        expect(await page.textContent("h1")).toBe("Vaults");

        // Instance settings: the PROXY tier's rate from 50 to 75 per second.
        await page.click('nav[aria-label="Main"] >> text=Settings');
        expect(await page.textContent("h1")).toBe("Instance settings");
        expect(await page.inputValue("#f-proxy-rps")).toBe("50");
        await page.fill("#f-proxy-rps", "75");
        await Promise.all([page.waitForURL(/\/settings$/), page.click("#rate-limits button[type=submit]")]);
        expect(await page.textContent("#flash")).toContain("Saved: rate limits");
        expect(await page.inputValue("#f-proxy-rps")).toBe("75");
        expect((await broker.api("GET", "/v1/owner/settings", undefined, owner)).body.rate_limits.proxy.rps).toBe(75);
        expect(await page.textContent("#ca-facts")).toMatch(/([0-9A-F]{2}:){31}[0-9A-F]{2}/);
        await page.screenshot({ path: join(SHOTS, "instance-settings.png"), fullPage: true });
        await phoneShot(page, "instance-settings-phone");

        // The agent's request through the broker, then its log line by name.
        expect(await proxied("/orders?page=2")).toBe(200);
        await Bun.sleep(600); // audit records are written in batches off the request path
        await page.goto(`${broker.apiUrl}/vaults/payments-bot`);
        await page.click('nav[aria-label="Vault sections"] >> text=Logs');
        expect(await page.textContent("h1")).toBe("Logs");
        const row = await page.textContent("#logs tbody");
        expect(row).toContain("deploy-bot");
        expect(row).toContain(`GET 127.0.0.1:${upstream.port}/orders`);
        expect(row).not.toContain("page=2");
        expect(row).not.toMatch(/agent:\d/);
        expect(row).toContain("API_KEY");

        // Live tail: a new request appears at the top without a reload.
        expect(await proxied("/refunds")).toBe(200);
        await page.waitForFunction(() => (document.querySelector("#logs tbody tr")?.textContent ?? "").includes("/refunds"), undefined, { timeout: 10_000 });
        expect(await page.textContent("#live-status")).toContain("Live:");
        expect(await page.locator("#logs tbody tr").count()).toBe(2);
        await page.screenshot({ path: join(SHOTS, "logs.png"), fullPage: true });

        // Vault settings: refuse hosts that match no service.
        await page.click('nav[aria-label="Vault sections"] >> text=Settings');
        expect(await page.textContent("h1")).toBe("Vault settings");
        await page.check("#unmatched-deny");
        await Promise.all([page.waitForURL(/\/settings$/), page.click("#unmatched-hosts button[type=submit]")]);
        expect(await page.textContent("#flash")).toContain("now refused");
        expect((await broker.api("GET", "/v1/vaults/payments-bot", undefined, owner)).body.unmatched_hosts).toBe("deny");
        await page.screenshot({ path: join(SHOTS, "vault-settings.png"), fullPage: true });
        await phoneShot(page, "vault-settings-phone");

        // Notifications: a webhook added through the form shows its signing secret once, then the list.
        await page.fill("#add-webhook input[name=url]", "https://hooks.example.com/services/T000/B000/receiver-example");
        await page.check("#f-slack");
        await Promise.all([page.waitForURL(/\/settings\/webhooks$/), page.click("#add-webhook-submit")]);
        await page.waitForSelector("#webhook-secret");
        await page.screenshot({ path: join(SHOTS, "webhook-added.png"), fullPage: true });
        await phoneShot(page, "webhook-added-phone");
        await Promise.all([page.waitForURL(/\/settings(#notifications)?$/), page.click("#webhook-added a.btn")]);
        await page.waitForSelector("#webhooks tbody tr");
        await page.screenshot({ path: join(SHOTS, "vault-settings-webhooks.png"), fullPage: true });
        await phoneShot(page, "vault-settings-webhooks-phone");

        for (const { html } of pages) expect(html.includes(SECRET)).toBe(false);
        for (const line of broker.logLines) expect(line.includes(SECRET)).toBe(false);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
