// The agent protocol end to end with a real browser: an agent hits 403 forbidden, files the
// proposal_hint's skeleton, a human approves (or denies) it on the approval page in headless
// Chromium, the agent polls until the decision and retries; the upstream then receives the injected
// credential. The credential value never reaches the agent, the broker's logs or the page.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { join } from "node:path";
import type { Page } from "playwright-core";
import type { TestUpstream } from "../helpers/upstream.ts";
import { browserTestFor, openBrowser } from "./browser.ts";
import { expectNoLeak, startNamedUpstream, type Broker } from "./proxy-fixture.ts";

// The owner startBroker() registers.
const OWNER = { email: "owner@example.com", password: "correct horse battery" };

const browserTest = browserTestFor("approval-flow");

let upstream: TestUpstream;
let broker: Broker;
let host: string; // "upstream.test:<port>"
let vaultSeq = 0;

beforeAll(async () => {
  ({ upstream, broker, host } = await startNamedUpstream());
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

/** An agent holding a scoped proxy session for its own fresh vault; records every response it saw. */
async function newAgent() {
  const vault = `approval-${++vaultSeq}`;
  const v = await broker.api("POST", "/v1/vaults", { name: vault }, broker.userToken);
  expect(v.status).toBe(201);
  const s = await broker.api("POST", "/v1/sessions", { vault, role: "proxy" }, broker.userToken);
  expect(s.status).toBe(201);
  const token: string = s.body.token;
  const seen: string[] = [];
  async function call(method: string, url: string, body?: unknown) {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(url, { method, headers, redirect: "manual", body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    const lines = [`${res.status} ${res.statusText}`];
    res.headers.forEach((val, k) => lines.push(`${k}: ${val}`));
    seen.push(`${lines.join("\n")}\n\n${text}`);
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {}
    return { status: res.status, headers: res.headers, body: json, text };
  }
  return { vault, token, seen, call };
}
type Agent = Awaited<ReturnType<typeof newAgent>>;

/** Steps (a) and (b): the forbidden call, then the hint's proposal (edited) filed by the agent. */
async function forbiddenThenPropose(agent: Agent, edit: (proposal: any) => void) {
  const denied = await agent.call("GET", `${broker.apiUrl}/proxy/${host}/data?q=1`);
  expect(denied.status).toBe(403);
  expect(denied.headers.get("x-broker-error")).toBe("forbidden");
  expect(denied.body.error).toBe("forbidden");
  const hint = denied.body.proposal_hint;
  expect(hint.host).toBe(host);
  expect(hint.endpoint).toBe(`${broker.apiUrl}/v1/proposals`);
  expect(hint.method).toBe("POST");
  expect(hint.proposal.services[0].host).toBe(host);

  const proposal = structuredClone(hint.proposal);
  edit(proposal);
  const filed = await agent.call(hint.method, hint.endpoint, proposal);
  expect(filed.status).toBe(201);
  expect(filed.body.status).toBe("pending");
  expect(filed.body.vault).toBe(agent.vault);
  expect(filed.body.approval_url).toStartWith(`${broker.apiUrl}/approve/${filed.body.id}?token=av_appr_`);
  return { id: filed.body.id as number, approvalUrl: filed.body.approval_url as string };
}

/** Step (d): polls the proposal every 200 ms until it is no longer pending (or, one GET after `stop.done` is set). */
async function pollUntilDecided(agent: Agent, id: number, stop: { done: boolean }, deadlineMs = 15_000): Promise<any> {
  const end = Date.now() + deadlineMs;
  while (Date.now() < end) {
    const r = await agent.call("GET", `${broker.apiUrl}/v1/proposals/${id}`);
    expect(r.status).toBe(200);
    if (r.body.status !== "pending") return r.body;
    if (stop.done) break; // the human's side is over (a last GET above saw its outcome)
    await Bun.sleep(200);
  }
  throw new Error(`proposal ${id} still pending (polled ${deadlineMs} ms or the browser step failed)`);
}

/** Step (c) up to the decision form: open the link, check the note, sign in through the page. */
async function openAndSignIn(page: Page, approvalUrl: string, note: string) {
  const res = await page.goto(approvalUrl);
  expect(res?.status()).toBe(200);
  expect(await page.locator("#status").textContent()).toBe("pending");
  expect(await page.locator(".note").first().textContent()).toBe(note);
  expect(await page.getByRole("button", { name: "Approve" }).count()).toBe(0); // read-only until signed in
  await page.fill("#email", OWNER.email);
  await page.fill("#password", OWNER.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  // Back on the approval page (303 to GET), now signed in as an approver; or a notice saying why not.
  await page.getByRole("button", { name: "Approve" }).or(page.locator("#notice")).first().waitFor();
  if ((await page.locator("#notice").count()) > 0) {
    throw new Error(`sign-in through the approval page failed (${page.url()}): ${await page.locator("#notice").textContent()}`);
  }
  expect(page.url()).toBe(approvalUrl);
  expect(await page.locator("#status").textContent()).toBe("pending");
  expect(await page.locator("#email").count()).toBe(0);
}

describe("agent protocol with a human in a real browser", () => {
  browserTest("forbidden → proposal → human approves in the page → agent polls applied → retry injects the credential", async () => {
    const agent = await newAgent();
    const secret = `sk-live-${crypto.randomUUID()}`;
    const note = "I need to read /data on the upstream to finish the report.";
    const { id, approvalUrl } = await forbiddenThenPropose(agent, (p) => {
      p.services[0].description = "Upstream data API";
      p.credentials[0].key = "UPSTREAM_TOKEN";
      p.credentials[0].description = "Read-only token for the upstream data API";
      p.services[0].auth = { type: "bearer", token: "UPSTREAM_TOKEN" };
      p.message = note;
      p.user_message = "Please paste a read-only token for the upstream.";
    });

    // (d) the agent polls while the human decides.
    const stop = { done: false };
    const decided = pollUntilDecided(agent, id, stop);
    decided.catch(() => {}); // awaited below; a browser failure must not leave it unhandled

    const browser = await openBrowser();
    let html: string;
    try {
      const { page } = browser;
      await openAndSignIn(page, approvalUrl, note);
      // Who asked, by name; the expiry in words (never `agent:N` or a raw timestamp).
      // A session the owner minted (vault run) files as its minter, and the page says it was that session.
      expect((await page.locator("#requester").textContent())!.replace(/\s+/g, " ")).toContain(`Requested by a broker vault run session of ${OWNER.email}`);
      expect(await page.locator("time").first().textContent()).toMatch(/^in \d+ (day|hour|minute)s?$/);
      if (process.env.UPDATE_SCREENSHOTS === "1")
        await page.screenshot({ path: join(import.meta.dir, "..", "..", "docs", "screenshots", "approval.png"), fullPage: true });
      await page.fill("input[name=value_UPSTREAM_TOKEN]", secret);
      await page.getByRole("button", { name: "Approve" }).click();
      await page.locator("#notice").waitFor();
      expect(await page.locator("#notice").textContent()).toStartWith("Approved");
      // Post-redirect-get: the result is the page itself, not the /decide URL, and a reload re-posts nothing.
      expect(page.url()).not.toContain("/decide");
      if (process.env.UPDATE_SCREENSHOTS === "1")
        await page.screenshot({ path: join(import.meta.dir, "..", "..", "docs", "screenshots", "approval-result.png"), fullPage: true });
      expect(await page.locator("#status").textContent()).toBe("applied");
      html = await page.content();
    } finally {
      stop.done = true;
      await browser.close();
    }
    expect(html).not.toContain(secret);

    const view = await decided;
    expect(view.status).toBe("applied");
    expect(view.decided_at).toBeString();

    // (e) the original request now reaches the upstream with the credential injected.
    const before = upstream.received.length;
    const retried = await agent.call("GET", `${broker.apiUrl}/proxy/${host}/data?q=1`);
    expect(retried.status).toBe(200);
    expect(retried.body).toEqual({ data: "upstream says hello" });
    expect(upstream.received.length).toBe(before + 1);
    const got = upstream.received.at(-1)!;
    expect(got.url).toBe("/data?q=1");
    expect(got.rawHeaders.filter(([k]) => k.toLowerCase() === "authorization")).toEqual([["authorization", `Bearer ${secret}`]]);
    expect(got.rawHeaders.some(([, v]) => v.includes(agent.token))).toBe(false);

    // Never in anything the agent saw, any log line, or the audit log.
    expect(agent.seen.length).toBeGreaterThanOrEqual(4);
    await expectNoLeak(broker, secret, [...agent.seen, html]);
  });

  browserTest("the human clicks Deny → the agent polls rejected and the host stays forbidden", async () => {
    const agent = await newAgent();
    const note = "Deny me, please.";
    const { id, approvalUrl } = await forbiddenThenPropose(agent, (p) => {
      p.message = note;
    });
    const stop = { done: false };
    const decided = pollUntilDecided(agent, id, stop);
    decided.catch(() => {}); // awaited below; a browser failure must not leave it unhandled
    const browser = await openBrowser();
    try {
      const { page } = browser;
      await openAndSignIn(page, approvalUrl, note);
      // Deny needs no value (formnovalidate).
      await page.getByRole("button", { name: "Deny" }).click();
      await page.locator("#notice").waitFor();
      expect(await page.locator("#notice").textContent()).toStartWith("Denied");
      expect(await page.locator("#status").textContent()).toBe("rejected");
      expect(await page.getByRole("button", { name: "Approve" }).count()).toBe(0);
    } finally {
      stop.done = true;
      await browser.close();
    }
    const view = await decided;
    expect(view.status).toBe("rejected");

    const before = upstream.received.length;
    const again = await agent.call("GET", `${broker.apiUrl}/proxy/${host}/data`);
    expect(again.status).toBe(403);
    expect(again.body.error).toBe("forbidden");
    expect(upstream.received.length).toBe(before);
  });

  browserTest("hostile proposal text is shown literally and executes nothing in the browser", async () => {
    const agent = await newAgent();
    const script = "<script>window.__pwned=1</script>";
    const img = `<img src=x onerror="window.__pwned=2">`;
    const { approvalUrl } = await forbiddenThenPropose(agent, (p) => {
      p.message = script;
      p.user_message = img;
      p.services[0].description = img;
      p.credentials[0].description = script;
      p.credentials[0].obtain_instructions = `${img}${script}`;
    });
    const browser = await openBrowser();
    try {
      const { page } = browser;
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(String(e)));
      const check = async () => {
        await page.waitForLoadState("load");
        expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();
        expect(await page.locator("script").count()).toBe(0);
        expect(await page.locator("img").count()).toBe(0);
        const notes = await page.locator(".note").allTextContents();
        expect(notes).toEqual([script, img]);
        expect(await page.locator("body").textContent()).toContain(`${img}${script}`);
      };
      await page.goto(approvalUrl);
      await check(); // anonymous read-only view
      await openAndSignIn(page, approvalUrl, script);
      await check(); // signed-in view with the decision form
      await Bun.sleep(200); // give a stray onerror a chance to fire
      expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
