// Budgets in the console (issue 38) in real Chromium against a real broker: the owner adds a vault budget with the
// settings' form and sees it in the table, sees its use (written to the store as the proxy's counting would) with
// bars and states, resets it, is told why a form without a limit is refused, removes it behind the typed
// confirmation, and sees an agent's budget on the agent's page, where one more is set for it.
// Screenshots at 1280 and 390 px wide: /tmp/budget-shots/ (docs/screenshots/ with UPDATE_SCREENSHOTS=1).

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { periodStart } from "../../src/policy/index.ts";
import { NO_USAGE, type BudgetPeriod, type BudgetUsage } from "../../src/store/index.ts";
import { browserTestFor, openRecordingBrowser, signInOnPage, startBlankBroker, submit, type BlankBroker } from "./browser.ts";

const SHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? join(import.meta.dir, "..", "..", "docs", "screenshots") : "/tmp/budget-shots";
const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const VAULT = "payments-bot";
const browserTest = browserTestFor("console budgets");

let broker: BlankBroker;
let owner = "";

beforeAll(async () => {
  broker = await startBlankBroker();
  mkdirSync(SHOTS, { recursive: true });
  owner = (await broker.api("POST", "/v1/auth/register", OWNER)).body.token;
  expect((await broker.api("POST", "/v1/vaults", { name: VAULT }, owner)).status).toBe(201);
  const svc = await broker.api("POST", `/v1/vaults/${VAULT}/services`, { host: "api.openai.com", description: "OpenAI", auth: { type: "passthrough" } }, owner);
  expect(svc.status).toBe(201);
  for (const name of ["deploy-bot", "report-bot"]) {
    const invite = await broker.api("POST", `/v1/vaults/${VAULT}/agent-invites`, { name, role: "proxy" }, owner);
    expect(invite.status).toBe(201);
    const redeemed = await fetch(invite.body.invite_url.replace(/^https?:\/\/[^/]+/, broker.apiUrl), { method: "POST" });
    expect(redeemed.status).toBe(201);
  }
});

afterAll(async () => {
  await broker?.stop();
});

/** The page at 1280 px, then at 390 px (a phone), then back. */
async function shots(page: Page, name: string): Promise<void> {
  for (const [width, file] of [
    [1280, `${name}.png`],
    [390, `${name}-phone.png`],
  ] as const) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 800 });
    await page.screenshot({ path: join(SHOTS, file), fullPage: true });
    // Nothing wider than the window, and the budgets' table needs no sideways scrolling.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
    const wrap = await page.evaluate(() => {
      const w = document.querySelector("#budgets-table")?.parentElement;
      return w ? Math.max(0, w.scrollWidth - w.clientWidth) : 0;
    });
    expect(`${file}: ${wrap}`).toBe(`${file}: 0`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

/** Adds to the budget's use this period, as the proxy's counting does. */
async function use(name: string, period: BudgetPeriod, delta: Partial<BudgetUsage>): Promise<void> {
  const store = broker.server.store;
  const vault = (await store.vaults.byName(VAULT))!;
  const row = (await store.budgets.get(vault.id, name))!;
  await store.budgets.add(row.id, periodStart(period, Date.now()), { ...NO_USAGE, ...delta });
}

const row = (page: Page, name: string) => page.locator("#budgets-table tbody tr", { has: page.locator(`code.name:text-is("${name}")`) });

describe("console budgets in Chromium", () => {
  browserTest(
    "add a budget, see its use, reset it, a refused form, remove it, an agent's budgets on its page",
    async () => {
      const browser = await openRecordingBrowser();
      const { page } = browser;
      await page.setViewportSize({ width: 1280, height: 800 });
      try {
        await page.goto(`${broker.apiUrl}/`);
        await signInOnPage(page, OWNER);
        await page.goto(`${broker.apiUrl}/vaults/${VAULT}/settings`);
        expect(await page.textContent("h1")).toBe("Vault settings");
        expect(await page.textContent("#budgets-empty")).toContain("No budgets yet");

        // A whole-vault daily budget through the form.
        await page.fill("#f-budget-name", "daily-llm");
        await page.selectOption("#f-budget-period", "day");
        await page.fill("#f-budget-requests", "1000");
        await page.fill("#f-budget-total_tokens", "200000");
        await page.fill("#f-budget-cost", "20");
        await page.fill("#f-budget-soft_percent", "80");
        await submit(page, "#budget-submit");
        expect(page.url()).toMatch(/\/settings#budgets$/);
        expect(await page.textContent("#flash")).toContain("Budget daily-llm saved: 1,000 requests, 200,000 tokens and 20.00 USD per day.");
        expect(await row(page, "daily-llm").count()).toBe(1);
        expect(await row(page, "daily-llm").textContent()).toContain("Whole vault");
        expect(await row(page, "daily-llm").textContent()).toContain("0 / 1,000");

        // One agent's hourly budget, the agent chosen from the vault's; one for two hosts, with no period.
        await page.fill("#f-budget-name", "deploy-hourly");
        await page.check("#budget-scope-agent");
        expect(await page.isVisible("#f-budget-agent")).toBe(true);
        expect(await page.isVisible("#f-budget-hosts")).toBe(false);
        await page.selectOption("#f-budget-agent", "deploy-bot");
        await page.selectOption("#f-budget-period", "hour");
        await page.fill("#f-budget-requests", "");
        await page.fill("#f-budget-total_tokens", "");
        await page.fill("#f-budget-output_tokens", "50000");
        await page.fill("#f-budget-cost", "2.5");
        await page.fill("#f-budget-soft_percent", "75");
        await page.check("#budget-soft-approve");
        await submit(page, "#budget-submit");
        expect(await page.textContent("#flash")).toContain("Budget deploy-hourly saved");
        await page.fill("#f-budget-name", "llm-hosts");
        await page.check("#budget-scope-hosts");
        await page.fill("#f-budget-hosts", "api.openai.com\napi.anthropic.com");
        await page.selectOption("#f-budget-period", "none");
        await page.fill("#f-budget-requests", "500");
        await submit(page, "#budget-submit");
        expect(await page.textContent("#flash")).toContain("Budget llm-hosts saved: 500 requests in all.");
        const listed = (await broker.api("GET", `/v1/vaults/${VAULT}/budgets`, undefined, owner)).body.budgets;
        expect(listed.map((b: { name: string; scope: string }) => [b.name, b.scope])).toEqual([
          ["daily-llm", "vault"],
          ["deploy-hourly", "agent"],
          ["llm-hosts", "hosts"],
        ]);

        // Their use this period: one within budget, one past its soft threshold, one at its limit.
        await use("daily-llm", "day", {
          requests: 850,
          inputTokens: 90_000,
          outputTokens: 31_500,
          totalTokens: 121_500,
          costMicros: 9_870_000,
          unpricedCalls: 3,
        });
        await use("deploy-hourly", "hour", { requests: 40, outputTokens: 12_000, totalTokens: 20_000, costMicros: 1_200_000 });
        await use("llm-hosts", "none", { requests: 500 });
        await page.goto(`${broker.apiUrl}/vaults/${VAULT}/settings`);
        const daily = (await row(page, "daily-llm").textContent()) ?? "";
        expect(daily).toContain("850 / 1,000");
        expect(daily).toContain("121,500 / 200,000");
        expect(daily).toContain("9.87 USD / 20.00 USD");
        expect(daily).toContain("Past soft threshold");
        expect(daily).toContain("3 LLM calls with a model the price table does not name");
        expect(await row(page, "deploy-hourly").textContent()).toContain("soft at 75%: hold for approval");
        expect(await row(page, "deploy-hourly").textContent()).toContain("Within budget");
        expect(await row(page, "llm-hosts").textContent()).toContain("Limit reached");
        expect(await row(page, "llm-hosts").textContent()).toContain("never resets by itself");
        expect(await row(page, "daily-llm").locator("progress.budget-bar-soft").count()).toBe(1);
        expect(await row(page, "llm-hosts").locator("progress.budget-bar-exceeded").count()).toBe(1);
        await page.locator("#budgets").scrollIntoViewIfNeeded();
        await shots(page, "vault-settings-budgets");

        // Reset: the period counts again from nothing.
        await submit(page, `#budgets-table form[action$="/budgets/daily-llm/reset"] button`);
        expect(await page.textContent("#flash")).toContain("Budget daily-llm counts again from nothing this day.");
        expect(await row(page, "daily-llm").textContent()).toContain("0 / 1,000");
        expect(await row(page, "daily-llm").textContent()).toContain("Within budget");

        // A form without a limit is refused, said in the flash, the form kept as typed.
        await page.fill("#f-budget-name", "no-limits");
        await page.check("#budget-scope-vault");
        for (const f of ["requests", "total_tokens", "input_tokens", "output_tokens", "cost", "soft_percent"]) await page.fill(`#f-budget-${f}`, "");
        await submit(page, "#budget-submit");
        expect(await page.getAttribute("#flash", "class")).toContain("flash-error");
        expect(await page.textContent("#flash")).toBe("Set at least one limit: requests, tokens or cost.");
        expect(await page.inputValue("#f-budget-name")).toBe("no-limits");
        expect(await row(page, "no-limits").count()).toBe(0);
        await shots(page, "vault-settings-budget-refused");

        // Remove, behind the typed confirmation.
        await submit(page, '#budgets-table a[aria-label="Remove llm-hosts…"]');
        expect(page.url()).toMatch(/\/settings\?remove=llm-hosts#remove-budget$/);
        expect(await page.textContent("#remove-budget h3")).toBe("Remove budget llm-hosts?");
        await page.fill('#remove-budget input[name="confirm"]', "llm-hosts");
        await shots(page, "vault-settings-budget-remove");
        await submit(page, "#remove-budget button[type=submit]");
        expect(await page.textContent("#flash")).toContain("Budget llm-hosts removed");
        expect(await row(page, "llm-hosts").count()).toBe(0);

        // The agent's page, from the Agents list: its budget with its use, and one more set for it there.
        await page.click('nav[aria-label="Vault sections"] >> text=Agents');
        await submit(page, '#agents a:has-text("deploy-bot")');
        expect(await page.textContent("h1")).toBe("Agent deploy-bot");
        const hourly = (await row(page, "deploy-hourly").textContent()) ?? "";
        expect(hourly).toContain("12,000 / 50,000");
        expect(hourly).toContain("1.20 USD / 2.50 USD");
        expect(await row(page, "daily-llm").count()).toBe(0);
        await page.fill("#f-budget-name", "deploy-daily");
        await page.fill("#f-budget-requests", "300");
        await submit(page, "#budget-submit");
        expect(page.url()).toMatch(/\/agents\/deploy-bot#budgets$/);
        expect(await page.textContent("#flash")).toContain("Budget deploy-daily saved: 300 requests per day.");
        expect(await row(page, "deploy-daily").textContent()).toContain("0 / 300");
        await shots(page, "agent-budgets");
        const mine = (await broker.api("GET", `/v1/vaults/${VAULT}/budgets`, undefined, owner)).body.budgets.find(
          (b: { name: string }) => b.name === "deploy-daily",
        );
        expect(mine).toMatchObject({ scope: "agent", agent: "deploy-bot", limits: { requests: 300 } });
      } finally {
        await browser.close();
      }
    },
    90_000,
  );
});
