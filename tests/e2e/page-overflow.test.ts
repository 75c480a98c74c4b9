// Agent-chosen text never widens a page on a phone: a proposal whose description, credential key and
// query parameter are long unbroken strings is shown on the approval page and the console's
// Proposals page at 390 px without horizontal scrolling (they wrap inside their cards).

import { afterAll, expect } from "bun:test";
import { browserTestFor, openBrowser, startBlankBroker, type BlankBroker } from "./browser.ts";

const test = browserTestFor("page overflow");
const OWNER = { email: "owner@example.com", password: "correct horse battery staple" };
const KEY = `K_${"K".repeat(120)}`;
let broker: BlankBroker | undefined;
afterAll(async () => broker?.stop());

test("a proposal of long unbroken strings fits 390 px on the approval page and in the console", async () => {
  broker = await startBlankBroker();
  const b = broker;
  const must = async (method: string, path: string, body: unknown, token: string) => {
    const res = await b.api(method, path, body, token);
    expect([200, 201]).toContain(res.status);
    return res.body as any;
  };
  const owner = (await must("POST", "/v1/auth/register", OWNER, "")).token as string;
  await must("POST", "/v1/vaults", { name: "demo" }, owner);
  const invite = await must("POST", "/v1/vaults/demo/agent-invites", { name: "agent-1", role: "proxy" }, owner);
  const agent = (await b.api("POST", new URL(invite.invite_url).pathname)).body.token as string;
  const filed = await fetch(`${b.apiUrl}/v1/proposals`, {
    method: "POST",
    headers: { authorization: `Bearer ${agent}`, "x-vault": "demo", "content-type": "application/json" },
    body: JSON.stringify({
      services: [{ host: "wide.example", description: "d".repeat(400), auth: { type: "query", token: KEY, param: `p${"q".repeat(63)}` } }],
      credentials: [{ key: KEY, description: "c".repeat(400) }],
      message: "m".repeat(400),
    }),
  });
  expect(filed.status).toBe(201);
  const { approval_url } = (await filed.json()) as { approval_url: string };

  const browser = await openBrowser({ viewport: { width: 390, height: 844 } });
  try {
    const page = browser.page;
    const width = () => page.evaluate(() => document.documentElement.scrollWidth);
    await page.goto(approval_url);
    await page.fill("#email", OWNER.email);
    await page.fill("#password", OWNER.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("button", { name: "Approve" }).waitFor();
    expect(await page.getByText("d".repeat(400)).count()).toBe(1);
    expect(await width()).toBeLessThanOrEqual(390);
    await page.goto(`${b.apiUrl}/vaults/demo/proposals`);
    await page.getByText("Waiting for a decision").waitFor();
    expect(await width()).toBeLessThanOrEqual(390);
  } finally {
    await browser.close();
  }
});
