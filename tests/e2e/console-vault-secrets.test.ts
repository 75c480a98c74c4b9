// The console's credentials and services pages in a real browser: a signed-in admin sets
// credentials in the write-only field, adds a service of each auth type (confirming the new-host
// warning where a stored credential goes to a new host), disables one, and reveals a value after
// typing the password again. The value shows on that one page only. Screenshots credentials.png
// and services.png go to docs/screenshots/ with UPDATE_SCREENSHOTS=1.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { browserTestFor, openRecordingBrowser, signInOnPage, startBlankBroker, submit, type BlankBroker } from "./browser.ts";

const SHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? join(import.meta.dir, "..", "..", "docs", "screenshots") : mkdtempSync(join(tmpdir(), "broker-shots-"));
const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const browserTest = browserTestFor("console credentials and services");

let broker: BlankBroker;
beforeAll(async () => {
  broker = await startBlankBroker();
  mkdirSync(SHOTS, { recursive: true });
  const reg = await broker.api("POST", "/v1/auth/register", OWNER);
  expect(reg.status).toBe(201);
  expect((await broker.api("POST", "/v1/vaults", { name: "payments-bot" }, reg.body.token)).status).toBe(201);
});
afterAll(async () => {
  await broker?.stop();
});

interface ServiceInput {
  host: string;
  type: "bearer" | "basic" | "header" | "passthrough";
  key?: string;
  username?: string;
  header?: string;
  prefix?: string;
  description?: string;
}

/** Adds a custom service the way a person does: Add a service, Custom service, the type, then its fields. */
async function addService(page: Page, base: string, s: ServiceInput) {
  await page.goto(`${base}/services`);
  await submit(page, "text=Add a service");
  await submit(page, "#custom-service");
  await submit(page, `#type-${s.type}`);
  await page.fill("#f-host", s.host);
  if (s.key) await page.selectOption("#f-credential_key", s.key); // the stored keys, offered by name
  if (s.username) await page.fill("#f-username", s.username);
  if (s.header) await page.fill("#f-header_name", s.header);
  if (s.prefix) await page.fill("#f-header_prefix", s.prefix);
  if (s.description) await page.fill("#f-description", s.description);
  await submit(page, "#add-service-form button[type=submit]");
  if (await page.$("#confirm-service")) {
    expect(await page.textContent("main")).toContain(`sends your existing credential ${s.key} to a new host`);
    await submit(page, "#confirm-service");
  }
  expect(await page.textContent("#flash")).toContain(`Service ${s.host} added`);
}

describe("console credentials and services in Chromium", () => {
  browserTest(
    "set credentials, add a service of each type, reveal with the password",
    async () => {
      const browser = await openRecordingBrowser();
      const { page, pages } = browser;
      const sentinel = "sk_live_SENTINEL-console-example-4242"; // fixed, so the committed screenshot stays stable
      const base = `${broker.apiUrl}/vaults/payments-bot`;
      try {
        await page.goto(`${broker.apiUrl}/`);
        await signInOnPage(page, OWNER);

        await page.goto(`${base}/credentials`);
        expect(await page.textContent("main")).toContain("No credentials yet");
        for (const [key, value] of [
          ["STRIPE_API_KEY", sentinel],
          ["GITHUB_TOKEN", "ghp-not-a-real-token"],
          ["INTERNAL_API_KEY", "internal-not-real"],
        ]) {
          await page.fill("#f-key", key!);
          await page.fill("#f-value", value!);
          expect(await page.inputValue("#f-value")).toBe(value!);
          await submit(page, "#set-credential button[type=submit]");
          expect(await page.textContent("#flash")).toBe(`Credential ${key} saved.`);
          expect(await page.inputValue("#f-value")).toBe(""); // never prefilled
        }

        await addService(page, base, { host: "api.stripe.com", type: "bearer", key: "STRIPE_API_KEY", description: "Payments API" });
        await addService(page, base, {
          host: "api.github.com",
          type: "basic",
          key: "GITHUB_TOKEN",
          username: "deploy-bot",
          description: "Repositories, read-only",
        });
        await addService(page, base, { host: "internal.example.com:8443", type: "header", key: "INTERNAL_API_KEY", header: "X-Api-Key", prefix: "Token " });
        await addService(page, base, { host: "*.status.example.org", type: "passthrough", description: "Status pages, no credential" });
        await page.goto(`${base}/services`);
        await submit(page, `form[action="/vaults/payments-bot/services/${encodeURIComponent("*.status.example.org")}/disable"] button`);
        expect(await page.textContent("#flash")).toContain("disabled");

        // The domain refuses a public-suffix wildcard; its message is the error flash, the form keeps what was typed.
        await page.goto(`${base}/services/new?custom=1&type=passthrough`);
        await page.fill("#f-host", "*.co.uk");
        await submit(page, "#add-service-form button[type=submit]");
        expect(await page.textContent("#flash")).toMatch(/public suffix/i);
        expect(await page.inputValue("#f-host")).toBe("*.co.uk");
        await page.goto(`${base}/services`);
        await page.screenshot({ path: join(SHOTS, "services.png"), fullPage: true });
        await page.goto(`${base}/credentials`);
        await page.screenshot({ path: join(SHOTS, "credentials.png"), fullPage: true });

        // Reveal: the manage page, then the password, then the value once.
        await page.click('a[aria-label="Manage STRIPE_API_KEY"]');
        await page.click("text=Reveal STRIPE_API_KEY");
        await page.fill("#f-password", "wrong password here");
        await submit(page, "#reveal");
        expect(await page.textContent("#flash")).toContain("not right");
        await page.fill("#f-password", OWNER.password);
        await submit(page, "#reveal");
        expect((await page.textContent("#revealed-value"))?.trim()).toBe(sentinel);
        await page.screenshot({ path: join(SHOTS, "credential-reveal.png"), fullPage: true });
        await page.click("text=Done");
        expect(await page.textContent("main")).not.toContain(sentinel);

        const carrying = pages.filter((p) => p.html.includes(sentinel)).map((p) => `${p.method} ${new URL(p.url).pathname}`);
        expect(carrying).toEqual(["POST /vaults/payments-bot/credentials/STRIPE_API_KEY/reveal"]);
        for (const line of broker.logLines) expect(line.includes(sentinel)).toBe(false);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
