// The web console's foundation in a real browser: on a fresh broker a person registers as the owner,
// creates a vault, signs out, fails to sign in with a wrong password (the email stays typed), signs
// in, changes the password (every session ends) and signs in with the new one. Screenshots of the
// main pages go to docs/screenshots/ (with UPDATE_SCREENSHOTS=1). A credential set through the API never shows in any page.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { browserTestFor, openBrowser, openRecordingBrowser, signInOnPage, startBlankBroker, type BlankBroker } from "./browser.ts";

// Screenshots land in docs/screenshots/ only when asked (UPDATE_SCREENSHOTS=1), so a test run leaves the tree clean.
const SHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? join(import.meta.dir, "..", "..", "docs", "screenshots") : mkdtempSync(join(tmpdir(), "broker-shots-"));
const OWNER = { email: "owner@example.com", password: "correct horse battery", next: "battery staple horse" };
const browserTest = browserTestFor("console");

let broker: BlankBroker;
beforeAll(async () => {
  broker = await startBlankBroker();
  mkdirSync(SHOTS, { recursive: true });
});
afterAll(async () => {
  await broker?.stop();
});

describe("web console in Chromium", () => {
  browserTest(
    "first run, a vault, sign-out, a wrong then right password, a password change",
    async () => {
      const browser = await openRecordingBrowser(); // every page's HTML and CSP, for the leak and header checks at the end
      const { page, pages } = browser;
      const sentinel = `SENTINEL-console-${crypto.randomUUID()}`;
      try {
        // First run: `/` offers the owner registration.
        await page.goto(`${broker.apiUrl}/`);
        expect(await page.textContent("h1")).toBe("Set up this broker");
        await page.screenshot({ path: join(SHOTS, "first-run.png"), fullPage: true });
        await page.fill("#reg-email", OWNER.email);
        await page.fill("#reg-password", OWNER.password);
        await page.fill("#reg-password-again", OWNER.password);
        await Promise.all([page.waitForURL(`${broker.apiUrl}/`), page.click("#register")]);
        expect(await page.textContent("#flash")).toContain("You are the owner");
        expect(await page.textContent("h1")).toBe("Vaults");

        // Create a vault from the form; land on its overview.
        await page.fill("#f-name", "payments-bot");
        await Promise.all([page.waitForURL(/\/vaults\/payments-bot$/), page.click("#create-vault button")]);
        expect(await page.textContent("#flash")).toContain("Vault payments-bot created");
        await page.screenshot({ path: join(SHOTS, "vault-overview.png"), fullPage: true });
        await page.goto(`${broker.apiUrl}/`);
        expect(await page.textContent("#vaults")).toContain("payments-bot");
        expect(await page.textContent("#vaults")).toContain("admin");

        // A credential stored through the API must never reach a page.
        const login = await broker.api("POST", "/v1/auth/login", { email: OWNER.email, password: OWNER.password });
        expect((await broker.api("PUT", "/v1/vaults/payments-bot/credentials/API_KEY", { value: sentinel }, login.body.token)).status).toBe(200);
        await broker.api("POST", "/v1/vaults", { name: "staging" }, login.body.token);
        await page.reload();
        await page.screenshot({ path: join(SHOTS, "vaults.png"), fullPage: true });

        // Sign out (a POST); the page is the sign-in form again.
        await Promise.all([page.waitForURL(`${broker.apiUrl}/`), page.click("#sign-out button")]);
        expect(await page.textContent("#flash")).toContain("signed out");
        expect(await page.textContent("h1")).toBe("Sign in");

        // Wrong password: an error, the email kept, no session.
        await signInOnPage(page, { email: OWNER.email, password: "not the password" });
        expect(await page.textContent("#sign-in-error")).toContain("do not match");
        expect(await page.inputValue("#f-email")).toBe(OWNER.email);
        expect(await page.inputValue("#f-password")).toBe("");
        await page.screenshot({ path: join(SHOTS, "sign-in-error.png"), fullPage: true });
        await page.fill("#f-email", "");
        await page.goto(`${broker.apiUrl}/`);
        await page.screenshot({ path: join(SHOTS, "sign-in.png"), fullPage: true });

        // Right password.
        await signInOnPage(page, OWNER);
        expect(await page.textContent("h1")).toBe("Vaults");

        // Account: sessions listed (this browser and the API login), then a password change.
        await page.goto(`${broker.apiUrl}/account`);
        expect(await page.textContent("#sessions")).toContain("this browser");
        await page.screenshot({ path: join(SHOTS, "account.png"), fullPage: true });
        await page.fill("#f-current_password", OWNER.password);
        await page.fill("#f-new_password", OWNER.next);
        await page.fill("#f-new_password_again", OWNER.next);
        await Promise.all([page.waitForURL(`${broker.apiUrl}/`), page.click("#change-password button")]);
        expect(await page.textContent("#flash")).toContain("Password changed");
        expect(await page.textContent("h1")).toBe("Sign in");
        // Every session ended, the API login's too.
        expect((await broker.api("GET", "/v1/auth/whoami", undefined, login.body.token)).status).toBe(401);

        await signInOnPage(page, OWNER);
        expect(await page.textContent("#sign-in-error")).toContain("do not match");
        await signInOnPage(page, { email: OWNER.email, password: OWNER.next });
        expect(await page.textContent("h1")).toBe("Vaults");

        // A phone-sized view of the vault list, for the look at narrow screens.
        await page.setViewportSize({ width: 390, height: 844 });
        await page.reload();
        await page.screenshot({ path: join(SHOTS, "vaults-phone.png"), fullPage: true });

        expect(pages.length).toBeGreaterThan(8);
        for (const p of pages) {
          expect({ url: p.url, leaked: p.html.includes(sentinel) }).toEqual({ url: p.url, leaked: false });
          expect({ url: p.url, csp: p.csp?.includes("frame-ancestors 'none'") }).toEqual({ url: p.url, csp: true });
        }
        for (const line of broker.logLines) expect(line.includes(sentinel)).toBe(false);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );

  browserTest(
    "dark scheme screenshots",
    async () => {
      const browser = await openBrowser({ viewport: { width: 1200, height: 800 }, colorScheme: "dark" });
      try {
        await browser.page.goto(`${broker.apiUrl}/`);
        await browser.page.screenshot({ path: join(SHOTS, "sign-in-dark.png"), fullPage: true });
        await signInOnPage(browser.page, { email: OWNER.email, password: OWNER.next });
        await browser.page.screenshot({ path: join(SHOTS, "vaults-dark.png"), fullPage: true });
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
