// A vault's overview and the pending badges, in real Chromium: an empty vault shows zero counts and
// the next steps (Add a service opens the "Add a service" page, the `broker vault run` line is there to
// copy); a busy vault (a credential, a service, an agent, two agent proposals, two requests held by an
// approve rule) says first what waits, each count a link to its tab; the Proposals and Requests tabs
// carry their counts on every vault page, and the vault list says what waits in each vault. Screenshots
// at 1280 and 390 px go to CONSOLE_SHOTS_DIR when set (else a temporary directory), with each page's
// height in heights.json (the Account page's sessions too); no page is wider than the window, and the
// credential appears on none.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import type { TestUpstream } from "../helpers/upstream.ts";
import { browserTestFor, openRecordingBrowser, signInOnPage, submit } from "./browser.ts";
import { callApi, startRuledUpstream, type Broker } from "./proxy-fixture.ts";

const browserTest = browserTestFor("console overview");
const SHOTS = process.env.CONSOLE_SHOTS_DIR ?? mkdtempSync(join(tmpdir(), "broker-shots-"));
const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const SECRET = `sk-overview-${crypto.randomUUID()}`;
const EMPTY = "fresh-start";

let upstream: TestUpstream;
let broker: Broker;
let hp: string;
const heights: Record<string, number> = {};

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  ({ upstream, broker, hp } = await startRuledUpstream(SECRET, [
    { methods: ["GET"], paths: ["/v1/**"] },
    { methods: ["POST"], paths: ["/v1/refunds"], approve: "each" },
  ]));
  const vault = broker.vault;
  // An agent with the member role files two proposals.
  const invite = await broker.api("POST", `/v1/vaults/${vault}/agent-invites`, { name: "report-bot", role: "member" }, broker.userToken);
  const agent = await callApi(broker.apiUrl, "POST", new URL(invite.body.invite_url).pathname);
  expect(agent.status).toBe(201);
  for (const host of ["reports.example.com", "billing.example.com"]) {
    const res = await fetch(`${broker.apiUrl}/v1/proposals`, {
      method: "POST",
      headers: { authorization: `Bearer ${agent.body.token}`, "x-vault": vault, "content-type": "application/json" },
      body: JSON.stringify({
        message: `Needs ${host} for the weekly report`,
        services: [{ action: "set", host, description: "Reports", auth: { type: "bearer", token: "REPORTS_KEY" } }],
        credentials: [{ action: "set", key: "REPORTS_KEY", description: "The reports key" }],
      }),
    });
    expect(res.status).toBe(201);
  }
  // Two refunds held by the approve rule.
  for (const amount of [500, 700]) {
    const res = await broker.proxy(hp, "/v1/refunds", { method: "POST", body: JSON.stringify({ amount }), headers: { "content-type": "application/json" } });
    expect(res.status).toBe(428);
  }
  expect((await broker.api("POST", "/v1/vaults", { name: EMPTY }, broker.userToken)).status).toBe(201);
});
afterAll(async () => {
  writeFileSync(join(SHOTS, "heights.json"), `${JSON.stringify(heights, null, 2)}\n`);
  await broker?.stop();
  await upstream?.close();
});

/** A full-page screenshot at `width` (its height recorded), after checking nothing is wider than the window. */
async function shoot(page: Page, name: string, width: number) {
  await page.setViewportSize({ width, height: width > 600 ? 800 : 844 });
  const size = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    client: document.documentElement.clientWidth,
    height: document.documentElement.scrollHeight,
  }));
  expect({ name, width, overflows: size.scroll > size.client }).toEqual({ name, width, overflows: false });
  heights[`${name}-${width}`] = size.height;
  await page.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
}

async function shootBoth(page: Page, name: string) {
  await shoot(page, name, 1280);
  await shoot(page, name, 390);
  await page.setViewportSize({ width: 1280, height: 800 });
}

/** The Vault sections tab named `label`, as the person (and a screen reader) reads it. */
const tab = (page: Page, label: string) => page.locator('nav[aria-label="Vault sections"] a', { hasText: label });

describe("vault overview and pending badges (Chromium)", () => {
  browserTest(
    "an empty vault's next steps, a busy vault's counts and what waits, badges on the tabs and the vault list",
    async () => {
      const browser = await openRecordingBrowser({ origin: broker.apiUrl });
      const { page, pages, flushed } = browser;
      const base = broker.apiUrl;
      try {
        await page.goto(`${base}/`);
        await signInOnPage(page, OWNER);
        expect(await page.textContent("h1")).toBe("Vaults");

        // The vault list: what waits in each vault, each part a link.
        const busyRow = page.locator("#vaults tr", { has: page.locator(`a[href="/vaults/${broker.vault}"]`) });
        expect((await busyRow.locator(".pending-link").allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim())).toEqual(["2 proposals", "2 held requests"]);
        const emptyRow = page.locator("#vaults tr", { has: page.locator(`a[href="/vaults/${EMPTY}"]`) });
        expect(await emptyRow.locator(".pending-link").count()).toBe(0);
        await shootBoth(page, "vault-list");

        // An empty vault: zero counts, the next steps, the line to copy.
        await page.goto(`${base}/vaults/${EMPTY}`);
        expect(await page.textContent("h1")).toBe("Overview");
        expect(await tab(page, "Overview").getAttribute("aria-current")).toBe("page");
        for (const id of ["credentials", "services", "agents", "proposals", "requests"]) expect(await page.textContent(`#count-${id} .tile-n`)).toBe("0");
        expect(await page.locator("#waiting").count()).toBe(0);
        expect(await page.locator("#next-steps .step").count()).toBe(4); // three to take, then the command to run
        expect(await page.textContent("#run-command")).toBe(`broker vault run --vault ${EMPTY} -- <command>`);
        expect(await page.textContent("#sections-note")).toContain("Requests");
        expect(await tab(page, "Proposals").innerText()).toBe("Proposals");
        await shootBoth(page, "overview-empty");
        await submit(page, "#step-service a");
        expect(page.url()).toBe(`${base}/vaults/${EMPTY}/services/new`);
        expect(await page.textContent("h1")).toBe("Add a service");

        // A busy vault: what waits first, then the counts, each a link to its tab.
        await page.goto(`${base}/vaults/${broker.vault}`);
        expect((await page.innerText("#waiting")).replace(/\s+/g, " ")).toBe("2 proposals and 2 held requests wait for a decision: approve or deny them.");
        const counts = Object.fromEntries(
          await Promise.all(
            ["credentials", "services", "agents", "proposals", "requests"].map(async (id) => [id, await page.textContent(`#count-${id} .tile-n`)]),
          ),
        );
        expect(counts).toEqual({ credentials: "1", services: "1", agents: "1", proposals: "2", requests: "2" });
        expect(await page.locator("#next-steps").count()).toBe(0);
        expect(await page.textContent("#run-command")).toBe(`broker vault run --vault ${broker.vault} -- <command>`);
        await shootBoth(page, "overview-busy");

        // The tabs carry the counts, read as "Proposals (2 waiting)"; the tile leads to its tab.
        await submit(page, "#count-requests");
        expect(await page.textContent("h1")).toBe("Requests");
        expect(await tab(page, "Requests").getAttribute("aria-current")).toBe("page");
        expect(await tab(page, "Proposals").textContent()).toBe("Proposals (2 waiting)");
        expect(await tab(page, "Requests").textContent()).toBe("Requests (2 waiting)");
        expect(await tab(page, "Proposals").locator(".count").isVisible()).toBe(true);
        expect(await tab(page, "Logs").locator(".count").count()).toBe(0);
        await shootBoth(page, "tab-requests");

        // Deciding one held request on the Requests page lowers its badge at once.
        await submit(page, "#pending article:first-of-type button:has-text('Deny')");
        expect(await page.textContent("#flash")).toStartWith("Denied POST");
        expect(await tab(page, "Requests").textContent()).toBe("Requests (1 waiting)");

        await submit(page, 'nav[aria-label="Vault sections"] a[href$="/proposals"]');
        expect(await page.textContent("h1")).toBe("Proposals");
        expect(await tab(page, "Proposals").getAttribute("aria-current")).toBe("page");
        await shootBoth(page, "tab-proposals");

        // The Account page names each session: this browser, and the fixture's API sign-in and vault run session.
        await page.goto(`${base}/account`);
        const sessions = (await page.innerText("#sessions")).replace(/\s+/g, " ");
        expect(sessions).toContain("Browser sign-in");
        expect(sessions).toContain("Headless Chrome on Linux");
        expect(sessions).toContain("127.0.0.1");
        expect(sessions).toContain("Scoped session from vault run");
        await shootBoth(page, "account");

        await flushed();
        for (const p of pages) expect({ url: p.url, leaked: p.html.includes(SECRET) }).toEqual({ url: p.url, leaked: false });
        for (const line of broker.logLines) expect(line.includes(SECRET)).toBe(false);
      } finally {
        await browser.close();
      }
    },
    90_000,
  );
});
