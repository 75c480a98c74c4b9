// Held requests decided in a real browser (issue 21): an agent's POST matching a rule with
// "approve": "each" gets 428; its approval_url opened in headless Chromium asks the person to sign in,
// then shows the request as it will be sent (method, URL, headers, the JSON body pretty-printed, the
// credential the agent put in it redacted) with Allow and Deny. Allowed, the agent's identical retry
// reaches the upstream once and a second one is held again; a request denied on the console's Requests
// page gets 403 approval_denied. A member with the proxy role sees nothing of a request. The credential
// appears in no page, response or log line.
// Screenshots (UPDATE_SCREENSHOTS=1) go to docs/screenshots/.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { browserTestFor, openRecordingBrowser, submit, type SeenPage } from "./browser.ts";
import { callApi, dumpResponse, expectEnvelope, expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const READER = { email: "reader@example.com", password: "another horse battery" };
const SECRET = `sk-browser-${crypto.randomUUID()}`;
const SHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? join(import.meta.dir, "..", "..", "docs", "screenshots") : mkdtempSync(join(tmpdir(), "broker-shots-"));
const browserTest = browserTestFor("request-approval-browser");

let upstream: TestUpstream;
let broker: Broker;
let hp: string;
const outputs: string[] = [];
const pages: SeenPage[] = [];

beforeAll(async () => {
  upstream = await startUpstream((req, res, body) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ refunded: req.url, bytes: body.length }));
  });
  broker = await startBroker({ caPem: upstream.pki.caPem });
  hp = `127.0.0.1:${upstream.port}`;
  await broker.setCredential("STRIPE_KEY", SECRET);
  await broker.addService(
    hp,
    { type: "bearer", token: "STRIPE_KEY" },
    {
      rules: [
        { methods: ["GET"], paths: ["/v1/**"] },
        { methods: ["POST"], paths: ["/v1/refunds"], approve: "each" },
      ],
    },
  );
  // A second person, a member with the proxy role only: may not approve.
  expect((await callApi(broker.apiUrl, "POST", "/v1/auth/register", READER)).status).toBe(201);
  const reader = (await callApi(broker.apiUrl, "POST", "/v1/auth/login", READER)).body.token as string;
  const invite = await broker.api("POST", `/v1/vaults/${broker.vault}/invites`, { email: READER.email, role: "proxy" }, broker.userToken);
  expect(invite.status).toBe(201);
  expect((await callApi(broker.apiUrl, "POST", `/v1/vault-invites/${invite.body.token}/accept`, undefined, reader)).status).toBe(200);
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

async function refund(body: unknown): Promise<Response> {
  const res = await broker.proxy(hp, "/v1/refunds", {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json", "idempotency-key": "refund-1" },
  });
  outputs.push(await dumpResponse(res.clone()));
  return res;
}
const reached = () => upstream.received.filter((r) => r.url === "/v1/refunds").length;

/** Signs in on an approval page's form, or (`console`) on the console's sign-in page. */
async function signIn(page: Page, who: { email: string; password: string }, console = false) {
  await page.fill(console ? "#f-email" : "#email", who.email);
  await page.fill(console ? "#f-password" : "#password", who.password);
  await submit(page, "button:has-text('Sign in')");
}

describe("held requests in the browser", () => {
  browserTest("Allow on the approval page: the identical retry is sent once, a second is held again", async () => {
    const body = { charge: "ch_browser", amount: 1250, reason: "requested_by_customer", note: `the key is ${SECRET}` };
    const held = await expectEnvelope(await refund(body), 428, "approval_required");
    const browser = await openRecordingBrowser({ origin: broker.apiUrl, into: pages });
    try {
      const { page } = browser;
      await page.goto(held.approval_url);
      // Signed out: a sign-in form, and nothing of the request.
      expect(await page.locator("#request-line").count()).toBe(0);
      expect(await page.content()).not.toContain("ch_browser");
      await signIn(page, OWNER);
      expect(await page.textContent("#request-line")).toContain(`POST`);
      expect(await page.textContent("#request-line")).toContain(`https://${hp}/v1/refunds`);
      expect(await page.textContent("#state")).toBe("pending");
      const shown = (await page.textContent("#body"))!;
      expect(shown).toContain('"amount": 1250'); // pretty-printed
      expect(shown).toContain('"note": "the key is [redacted]"');
      expect(await page.textContent("#headers")).toContain("idempotency-key");
      expect(await page.textContent("#headers")).not.toContain("authorization");
      await page.screenshot({ path: join(SHOTS, "request-approval.png"), fullPage: true });
      expect(reached()).toBe(0);
      await submit(page, "button.allow");
      expect(await page.textContent("#notice")).toContain("Approved");
      expect(await page.textContent("#state")).toBe("approved");
      expect(await page.locator("button.allow").count()).toBe(0);
      await browser.flushed();
    } finally {
      await browser.close();
    }
    const sent = await refund(body);
    expect(sent.status).toBe(200);
    expect(reached()).toBe(1);
    expect(upstream.received.at(-1)!.rawHeaders).toContainEqual(["authorization", `Bearer ${SECRET}`]);
    const again = await expectEnvelope(await refund(body), 428, "approval_required");
    expect(again.approval_id).not.toBe(held.approval_id);
    expect(reached()).toBe(1);
  });

  browserTest("a body that names a key twice is shown whole, as sent, under a warning", async () => {
    const raw = '{"charge":"ch_twice","amount":100000,"amount":1,"fee":100000000000000000001,"note":"\\u202e0001 = tnuoma"}';
    const res = await broker.proxy(hp, "/v1/refunds", {
      method: "POST",
      body: raw,
      headers: { "content-type": "application/json", "idempotency-key": "refund-2" },
    });
    outputs.push(await dumpResponse(res.clone()));
    const held = await expectEnvelope(res, 428, "approval_required");
    const browser = await openRecordingBrowser({ origin: broker.apiUrl, into: pages });
    try {
      const { page } = browser;
      await page.goto(held.approval_url);
      await signIn(page, OWNER);
      expect(await page.textContent("#duplicate-keys")).toContain("amount");
      const shown = (await page.textContent("#body"))!;
      expect(shown).toContain('"amount": 100000,');
      expect(shown).toContain('"amount": 1,');
      expect(shown).toContain('"fee": 100000000000000000001');
      expect(shown).toContain('"note": "\\u202e0001 = tnuoma"');
      await page.setViewportSize({ width: 390, height: 844 });
      await page.screenshot({ path: join(SHOTS, "request-approval-repeated-key.png"), fullPage: true });
      await submit(page, "button.deny");
      expect(await page.textContent("#state")).toBe("denied");
      await browser.flushed();
    } finally {
      await browser.close();
    }
    expect(reached()).toBe(1);
  });

  browserTest("Deny on the console's Requests page: the retry gets 403 approval_denied", async () => {
    const body = { charge: "ch_console", amount: 99 };
    await expectEnvelope(await refund(body), 428, "approval_required");
    const browser = await openRecordingBrowser({ origin: broker.apiUrl, into: pages });
    try {
      const { page } = browser;
      await page.goto(`${broker.apiUrl}/`);
      await signIn(page, OWNER, true);
      // The refund approved in the first test is in the log with its approver.
      await page.goto(`${broker.apiUrl}/vaults/${broker.vault}/logs`);
      expect(await page.textContent("table")).toContain("via /proxy, approved by owner@example.com");
      await page.goto(`${broker.apiUrl}/vaults/${broker.vault}/requests`);
      const card = page.locator("article", { hasText: "ch_console" });
      expect(await card.count()).toBe(1);
      await page.screenshot({ path: join(SHOTS, "console-requests.png"), fullPage: true });
      await Promise.all([page.waitForNavigation(), card.getByRole("button", { name: "Deny" }).click()]);
      expect(await page.textContent(".flash")).toContain("Denied POST");
      expect(await page.textContent("#history")).toContain("denied");
      await browser.flushed();
    } finally {
      await browser.close();
    }
    const before = reached();
    await expectEnvelope(await refund(body), 403, "approval_denied");
    expect(reached()).toBe(before);
  });

  browserTest("a member with the proxy role sees nothing of a held request, and cannot decide it", async () => {
    const held = await expectEnvelope(await refund({ charge: "ch_reader" }), 428, "approval_required");
    const browser = await openRecordingBrowser({ origin: broker.apiUrl, into: pages });
    try {
      const { page } = browser;
      await page.goto(held.approval_url);
      await signIn(page, READER);
      expect(await page.locator("#not-allowed").count()).toBe(1);
      expect(await page.content()).not.toContain("ch_reader");
      expect(await page.locator("button.allow").count()).toBe(0);
      await page.goto(`${broker.apiUrl}/vaults/${broker.vault}/requests`);
      expect(await page.content()).not.toContain("ch_reader");
      await browser.flushed();
    } finally {
      await browser.close();
    }
    const state = await broker.api("GET", `/v1/vaults/${broker.vault}/request-approvals/${held.approval_id}`, undefined, broker.userToken);
    expect(state.body.state).toBe("pending");
  });

  browserTest("no page, answer or log line holds the credential", async () => {
    expect(pages.length).toBeGreaterThan(5);
    for (const p of pages) expect(p.html).not.toContain(SECRET);
    await expectNoLeak(broker, SECRET, outputs);
  });
});
