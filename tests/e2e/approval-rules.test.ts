// Service rules through a real browser: an agent files a proposal for a service with rules, a human
// opens the approval link in headless Chromium, reads the rules in plain words, narrows them by
// deleting a line, types the credential and approves; the agent's allowed request then reaches the
// upstream with the credential injected and the refused one gets 403 request_not_allowed. The
// refusal's hint, filed as a second proposal, shows in the console as wider than today's rules, and
// the Services page shows the narrowed rules in words. The credential is in no page, response or log.
// Screenshots (UPDATE_SCREENSHOTS=1) at 1280 and 390 px go to docs/screenshots/.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import type { TestUpstream } from "../helpers/upstream.ts";
import { browserTestFor, openBrowser, recordPages } from "./browser.ts";
import { dumpResponse, expectEnvelope, expectNoLeak, startNamedUpstream, type Broker } from "./proxy-fixture.ts";

const SHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? join(import.meta.dir, "..", "..", "docs", "screenshots") : mkdtempSync(join(tmpdir(), "broker-shots-"));
const OWNER = { email: "owner@example.com", password: "correct horse battery" }; // the owner startBroker() registers
const SECRET = `ghp_rules_${crypto.randomUUID()}`;
const ASKED = [
  { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] },
  { methods: ["DELETE"], paths: ["/repos/**"] },
];
const browserTest = browserTestFor("approval rules");

let upstream: TestUpstream;
let broker: Broker;
let host: string; // upstream.test:<port>
const agentSaw: string[] = [];

beforeAll(async () => {
  ({ upstream, broker, host } = await startNamedUpstream());
  mkdirSync(SHOTS, { recursive: true });
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

/** An agent of the broker's vault (role proxy), invited by the owner and redeemed. */
async function newAgent(name: string) {
  const inv = await broker.api("POST", `/v1/vaults/${broker.vault}/agent-invites`, { name, role: "proxy" }, broker.userToken);
  expect(inv.status).toBe(201);
  const red = await broker.api("POST", new URL(inv.body.invite_url).pathname);
  expect(red.status).toBe(201);
  const token: string = red.body.token;
  return async function call(method: string, path: string, body?: unknown): Promise<Response> {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, "x-vault": broker.vault };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${broker.apiUrl}${path}`, { method, headers, redirect: "manual", body: body === undefined ? undefined : JSON.stringify(body) });
    agentSaw.push(await dumpResponse(res.clone()));
    return res;
  };
}

async function shoot(page: Page, name: string) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: join(SHOTS, `${name}-phone.png`), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });
}

describe("a proposal with rules, narrowed by the human in Chromium", () => {
  browserTest(
    "ask GET/HEAD on issues and DELETE on repos → the human deletes the DELETE line and approves → GET passes with the credential, DELETE is 403 request_not_allowed",
    async () => {
      const agent = await newAgent("issues-bot");
      const filed = await agent("POST", "/v1/proposals", {
        services: [{ host, description: "Issue tracker API", auth: { type: "bearer", token: "GH_TOKEN" }, rules: ASKED }],
        credentials: [{ key: "GH_TOKEN", description: "A token that can read issues", obtain: "https://github.com/settings/tokens" }],
        message: "I triage issues: I need to read them, and to delete stale repositories.",
      });
      expect(filed.status).toBe(201);
      const { id, approval_url: approvalUrl } = (await filed.json()) as { id: number; approval_url: string };

      const browser = await openBrowser({ viewport: { width: 1280, height: 800 } });
      const seen = recordPages(browser.page, { origin: broker.apiUrl });
      try {
        const { page } = browser;
        await page.goto(approvalUrl);
        // Read-only before sign-in: the rules in words, no box yet.
        expect(await page.textContent("#service-0-rules-asked")).toBe("GET and HEAD on /repos/*/issues/**; DELETE on /repos/**");
        expect(await page.locator("#rules-0").count()).toBe(0);
        await page.fill("#email", OWNER.email);
        await page.fill("#password", OWNER.password);
        await Promise.all([page.waitForURL(approvalUrl), page.getByRole("button", { name: "Sign in" }).click()]);
        await page.getByRole("button", { name: "Approve" }).waitFor();

        // The box holds the asked rules, one per line; the human deletes the DELETE line.
        const box = page.getByLabel(`Allowed requests to ${host} after approval`);
        expect(await box.inputValue()).toBe("GET HEAD /repos/*/issues/**\nDELETE /repos/**");
        await shoot(page, "approval-rules");
        const narrowed = (await box.inputValue())
          .split("\n")
          .filter((line) => !line.startsWith("DELETE"))
          .join("\n");
        await box.fill(narrowed);
        await page.fill("input[name=value_GH_TOKEN]", SECRET);
        await Promise.all([page.waitForURL(/decided=1/), page.getByRole("button", { name: "Approve" }).click()]);
        expect(await page.textContent("#notice")).toStartWith("Approved");
        expect(await page.textContent("#status")).toBe("applied");
        // The result page: what was asked, and what the service allows now (the human's narrower rules).
        expect(await page.textContent("#service-0-rules-now")).toBe("GET and HEAD on /repos/*/issues/**");
        await page.screenshot({ path: join(SHOTS, "approval-rules-result.png"), fullPage: true });

        // The agent: the allowed request reaches the upstream with the credential injected.
        const before = upstream.received.length;
        const ok = await agent("GET", `/proxy/${host}/repos/a/issues/1`);
        expect(ok.status).toBe(200);
        expect(await ok.json()).toEqual({ data: "upstream says hello" });
        expect(upstream.received.length).toBe(before + 1);
        const got = upstream.received.at(-1)!;
        expect(got.url).toBe("/repos/a/issues/1");
        expect(got.rawHeaders.filter(([k]) => k.toLowerCase() === "authorization")).toEqual([["authorization", `Bearer ${SECRET}`]]);
        // ...and the one the human removed is refused by the broker, never reaching the upstream.
        const refused = await expectEnvelope(await agent("DELETE", `/proxy/${host}/repos/a`), 403, "request_not_allowed");
        expect(refused.allowed).toEqual([ASKED[0]]);
        expect(upstream.received.length).toBe(before + 1);

        // The agent files the refusal's hint: the console shows it as wider than today's rules.
        const again = await agent(refused.proposal_hint.method, new URL(refused.proposal_hint.endpoint).pathname, refused.proposal_hint.proposal);
        expect(again.status).toBe(201);
        const second = ((await again.json()) as { id: number }).id;
        await page.goto(`${broker.apiUrl}/vaults/${broker.vault}/proposals`);
        const card = page.locator(`#proposal-${second}`);
        expect(await card.locator(`#rules-${second}-0-now`).textContent()).toBe("GET and HEAD on /repos/*/issues/**");
        expect(await card.locator(`#rules-${second}-0-asked`).textContent()).toBe("GET and HEAD on /repos/*/issues/**; DELETE on /repos/a");
        expect(await card.locator(`#rules-${second}-0-wider`).textContent()).toContain("Adds DELETE on /repos/a.");
        await shoot(page, "proposals-rules");
        await Promise.all([page.waitForURL(/\/proposals$/), card.getByRole("button", { name: "Deny" }).click()]);
        expect(await page.textContent("#flash")).toContain(`Proposal #${second} denied`);

        // The Services page: the narrowed rules in words; the edit form holds them as lines.
        await page.goto(`${broker.apiUrl}/vaults/${broker.vault}/services`);
        const row = page.locator("#services tr", { hasText: host });
        expect(await row.locator('td[data-label="Allowed requests"]').textContent()).toBe("GET and HEAD on /repos/*/issues/**");
        await shoot(page, "services-rules");
        await page.goto(`${broker.apiUrl}/vaults/${broker.vault}/services/${encodeURIComponent(host)}/edit`);
        expect(await page.inputValue("#f-rules")).toBe("GET HEAD /repos/*/issues/**");
        await shoot(page, "service-rules-edit");
        expect(id).toBeLessThan(second);
      } finally {
        await seen.flushed();
        await browser.close();
      }
      expect(seen.pages.length).toBeGreaterThan(5);
      await expectNoLeak(broker, SECRET, [...agentSaw, ...seen.pages.map((p) => p.html)]);
    },
    60_000,
  );
});
