// The console's Agents, Proposals and Members pages in real Chromium: a person invites an agent
// from the Agents page, the agent redeems the link with real curl, files a proposal with its token,
// the person approves it from the Proposals list by typing the value, and the agent's next /proxy
// request reaches a local upstream with the credential injected. The value never appears in any
// page's HTML, any agent-visible answer or any log line. Screenshots with UPDATE_SCREENSHOTS=1.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestUpstream } from "../helpers/upstream.ts";
import { browserTestFor, openRecordingBrowser, signInOnPage } from "./browser.ts";
import { startNamedUpstream, type Broker } from "./proxy-fixture.ts";

const SHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? join(import.meta.dir, "..", "..", "docs", "screenshots") : mkdtempSync(join(tmpdir(), "broker-shots-"));
const OWNER = { email: "owner@example.com", password: "correct horse battery" }; // registered by startBroker()
const VAULT = "payments";
const browserTest = browserTestFor("console people");

let upstream: TestUpstream;
let broker: Broker;
let host: string;

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  ({ upstream, broker, host } = await startNamedUpstream());
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

/** A JSON call as the agent (bearer token, X-Vault); keeps every answer it saw for the leak check. */
function agentClient(token: string, seen: string[]) {
  return async (method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, "x-vault": VAULT };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${broker.apiUrl}${path}`, { method, headers, redirect: "manual", body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    seen.push(text, JSON.stringify([...res.headers]));
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
}

const proposalFor = (key: string, message: string) => ({
  services: [{ action: "set", host, description: "Payments API", auth: { type: "bearer", token: key } }],
  credentials: [
    {
      action: "set",
      key,
      description: "Payments API key (read-only is enough)",
      obtain: "https://dashboard.example.com/api-keys",
      obtain_instructions: "Dashboard → Developers → API keys → Create restricted key",
    },
  ],
  message,
});

describe("console: agents, proposals, members in Chromium", () => {
  browserTest(
    "invite an agent, curl redeems it, it proposes, the person approves from the list, /proxy injects",
    async () => {
      const secret = `SENTINEL-people-${crypto.randomUUID()}`;
      const agentSaw: string[] = [];
      expect((await broker.api("POST", "/v1/vaults", { name: VAULT }, broker.userToken)).status).toBe(201);
      const browser = await openRecordingBrowser();
      const { page, pages } = browser;
      try {
        await page.goto(`${broker.apiUrl}/`);
        await signInOnPage(page, OWNER);

        // Agents: empty, then invite; the link is on the answer page only.
        await page.goto(`${broker.apiUrl}/vaults/${VAULT}/agents`);
        expect(await page.textContent("#agent-list")).toContain("No agents yet");
        await page.fill("#f-name", "billing-bot");
        await page.selectOption("#f-role", "proxy");
        await Promise.all([page.waitForLoadState("load"), page.click("#invite-agent-submit")]);
        expect(await page.textContent("h1")).toBe("Agent invite created");
        const inviteUrl = await page.inputValue("#invite-url");
        expect(inviteUrl).toStartWith(`${broker.apiUrl}/invite/av_inv_`);
        expect(await page.inputValue("#redeem-command")).toBe(`curl -X POST ${inviteUrl}`);
        expect(await page.isVisible("button[data-copy=invite-url]")).toBe(true); // the script revealed it
        expect(page.url()).not.toContain("av_inv_");

        // The agent redeems with real curl.
        // (async: the broker runs in this process, so a blocking spawn would starve it)
        const curl = Bun.spawn(["curl", "-sS", "-X", "POST", inviteUrl], { stdout: "pipe", stderr: "pipe" });
        const out = await new Response(curl.stdout).text();
        expect(await curl.exited).toBe(0);
        const redeemed = JSON.parse(out);
        agentSaw.push(out);
        expect(redeemed.agent.name).toBe("billing-bot");
        expect(redeemed.vaults).toEqual([{ name: VAULT, role: "proxy" }]);
        const agent = agentClient(redeemed.token as string, agentSaw);

        // A second invite left pending, so the list shows both tables.
        await page.goto(`${broker.apiUrl}/vaults/${VAULT}/agents`);
        await page.fill("#f-name", "report-bot");
        await Promise.all([page.waitForLoadState("load"), page.click("#invite-agent-submit")]);
        await page.goto(`${broker.apiUrl}/vaults/${VAULT}/agents`);
        expect(await page.textContent("#agents")).toContain("billing-bot");
        expect(await page.textContent("#agent-invites")).toContain("report-bot");
        await page.screenshot({ path: join(SHOTS, "agents.png"), fullPage: true });

        // The agent is refused, then proposes twice; the person denies the first.
        const refused = await agent("GET", `/proxy/${host}/data`);
        expect(refused.status).toBe(403);
        const first = await agent("POST", "/v1/proposals", proposalFor("STAGING_KEY", "Staging payments, for a dry run."));
        expect(first.status).toBe(201);
        await page.goto(`${broker.apiUrl}/vaults/${VAULT}/proposals`);
        await Promise.all([page.waitForLoadState("load"), page.click(`#deny-${first.body.id}-button`)]);
        expect(await page.textContent("#flash")).toContain("denied");
        const second = await agent(
          "POST",
          "/v1/proposals",
          proposalFor("PAYMENTS_KEY", "I need read access to the payments API to reconcile last month's invoices."),
        );
        expect(second.status).toBe(201);
        const id = second.body.id as number;
        await page.goto(`${broker.apiUrl}/vaults/${VAULT}/proposals`);
        const card = await page.textContent(`#proposal-${id}`);
        expect(card).toContain("billing-bot");
        expect(card).not.toMatch(/agent:\d/);
        expect(card).toContain(host);
        expect(card).toContain("Create restricted key");
        expect(await page.textContent("#proposal-history")).toContain("by owner@example.com");
        await page.screenshot({ path: join(SHOTS, "proposals.png"), fullPage: true });

        // Approve from the list, typing the value.
        await page.fill(`#value-${id}-PAYMENTS_KEY`, secret);
        await Promise.all([page.waitForLoadState("load"), page.click(`#approve-${id}-button`)]);
        expect(await page.textContent("#flash")).toContain(`Proposal #${id} approved`);
        expect((await agent("GET", `/v1/proposals/${id}`)).body.status).toBe("applied");

        // The agent's next request carries the credential upstream; the agent never sees it.
        const before = upstream.received.length;
        const ok = await agent("GET", `/proxy/${host}/data`);
        expect(ok.status).toBe(200);
        expect(ok.body).toEqual({ data: "upstream says hello" });
        const got = upstream.received.at(-1)!;
        expect(upstream.received.length).toBe(before + 1);
        expect(got.rawHeaders.filter(([k]) => k.toLowerCase() === "authorization")).toEqual([["authorization", `Bearer ${secret}`]]);

        // Members: a person invite, shown once.
        await page.goto(`${broker.apiUrl}/vaults/${VAULT}/members`);
        await page.fill("#f-email", "dana@example.com");
        await page.selectOption("#f-role", "member");
        await Promise.all([page.waitForLoadState("load"), page.click("#invite-person-submit")]);
        expect(await page.inputValue("#invite-url")).toContain("/v1/vault-invites/av_uinv_");
        await page.goto(`${broker.apiUrl}/vaults/${VAULT}/members`);
        expect(await page.textContent("#members")).toContain(OWNER.email);
        expect(await page.textContent("#vault-invites")).toContain("dana@example.com");
        await page.screenshot({ path: join(SHOTS, "members.png"), fullPage: true });

        // No page, agent answer or log line holds the value; every page had the CSP.
        expect(pages.length).toBeGreaterThan(8);
        for (const p of pages) {
          expect({ url: p.url, leaked: p.html.includes(secret) }).toEqual({ url: p.url, leaked: false });
          expect(p.csp).toContain("default-src 'none'");
        }
        for (const s of agentSaw) expect(s.includes(secret)).toBe(false);
        await Bun.sleep(300);
        for (const line of broker.logLines) expect(line.includes(secret)).toBe(false);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
