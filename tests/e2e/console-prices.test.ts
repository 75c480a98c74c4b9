// The LLM price table on the owner's Settings page, in Chromium (issue 38): where it came from and when its prices
// were taken, its models, a table the owner types in (every instance prices by it, the budgets' currency follows it),
// a refused table said in words, and the way back to the shipped one. Screenshots at 1280 and 390 px wide:
// /tmp/prices-shots/ (docs/screenshots/ with UPDATE_SCREENSHOTS=1).

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { SHIPPED_PRICES } from "../../src/policy/index.ts";
import { browserTestFor, openRecordingBrowser, signInOnPage, startBlankBroker, submit, type BlankBroker } from "./browser.ts";

const SHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? join(import.meta.dir, "..", "..", "docs", "screenshots") : "/tmp/prices-shots";
const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const browserTest = browserTestFor("console prices");

let broker: BlankBroker;
let owner = "";

beforeAll(async () => {
  broker = await startBlankBroker();
  mkdirSync(SHOTS, { recursive: true });
  owner = (await broker.api("POST", "/v1/auth/register", OWNER)).body.token;
});

afterAll(async () => {
  await broker?.stop();
});

async function shots(page: Page, name: string): Promise<void> {
  for (const [width, file] of [
    [1280, `${name}.png`],
    [390, `${name}-phone.png`],
  ] as const) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
    await page.locator("#llm-prices").screenshot({ path: join(SHOTS, file) });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

describe("the LLM price table in Chromium", () => {
  browserTest("the shipped table, one the owner types in, a refused one, and back", async () => {
    const browser = await openRecordingBrowser();
    const { page } = browser;
    await page.setViewportSize({ width: 1280, height: 800 });
    try {
      await page.goto(`${broker.apiUrl}/`);
      await signInOnPage(page, OWNER);
      await page.goto(`${broker.apiUrl}/settings#llm-prices`);
      expect(await page.textContent("#llm-prices-facts")).toContain("the table shipped with the broker");
      expect(await page.textContent("#llm-prices-facts")).toContain(SHIPPED_PRICES.written);
      expect(await page.textContent("#llm-price-models summary")).toContain(`The ${Object.keys(SHIPPED_PRICES.models).length} models it prices`);
      await shots(page, "settings-llm-prices");
      await page.click("#llm-price-models summary");
      expect(await page.locator("#llm-price-table tbody tr").count()).toBe(Object.keys(SHIPPED_PRICES.models).length);

      const table = {
        currency: "EUR",
        written: "2026-11-20",
        models: { "gpt-4o-mini": { input: 0.14, output: 0.55 }, "claude-haiku-4-5": { input: 0.9, output: 4.6 } },
      };
      await page.fill("#llm-prices-json", JSON.stringify(table, null, 2));
      await submit(page, "#llm-prices-form button[type=submit]");
      expect(await page.textContent("#flash")).toContain("Saved: calls are priced by your table of 2 models (EUR, prices taken 2026-11-20).");
      expect(await page.textContent("#llm-prices-facts")).toContain("set on this page");
      expect((await broker.api("GET", "/v1/owner/llm-prices", undefined, owner)).body).toMatchObject({ source: "console", currency: "EUR" });
      await shots(page, "settings-llm-prices-set");

      await page.fill("#llm-prices-json", '{"currency": "euro", "written": "2026-11-20", "models": {}}');
      await submit(page, "#llm-prices-form button[type=submit]");
      expect(await page.textContent("#flash")).toContain("three-letter code");
      expect((await broker.api("GET", "/v1/owner/llm-prices", undefined, owner)).body.currency).toBe("EUR");

      await submit(page, "#llm-prices-reset button[type=submit]");
      expect(await page.textContent("#flash")).toContain("priced by the shipped table again");
      expect((await broker.api("GET", "/v1/owner/llm-prices", undefined, owner)).body.source).toBe("shipped");
    } finally {
      await browser.close();
    }
  });
});
