// The Notifications section of the console's vault settings through app.request(): a human admin adds a
// webhook and sees its signing secret once (never again, never in a flash or redirect), the list shows the
// masked URL and the delivery status in words, removal needs a typed confirmation; a member sees no form.

import { beforeEach, describe, expect, test } from "bun:test";
import { addUser, type Harness, RAW_TOKEN } from "./fixtures.ts";
import { type PageBrowser, setUpOwnerConsole, signIn } from "./console-fixtures.ts";

let h: Harness;
let owner: string;
let b: PageBrowser;

const SLACK = "https://hooks.slack.com/services/T0001/B0002/abcdefghijklmnopqrstuvwx";

beforeEach(async () => {
  ({ h, owner, b } = await setUpOwnerConsole());
});

const hooks = async () => (await h.call("GET", "/v1/vaults/v1/webhooks", { token: owner })).body.webhooks as Array<{ id: number; url: string; format: string }>;

describe("vault settings: Notifications", () => {
  test("an admin adds a webhook and sees the secret once; the list shows it masked with its status; removal is confirmed", async () => {
    const settings = await b.get("/vaults/v1/settings");
    expect(settings.status).toBe(200);
    expect(settings.text).toContain('id="notifications"');
    expect(settings.text).toContain('id="add-webhook"');
    expect(settings.text).toContain('id="webhooks-empty"');

    await b.get("/vaults/v1/settings");
    const added = await b.post("/vaults/v1/settings/webhooks", { url: SLACK, slack: "on" });
    expect(added.status).toBe(200);
    expect(added.headers.get("cache-control")).toContain("no-store");
    const secret = /id="webhook-secret" value="(whsec_[A-Za-z0-9_-]{43})"/.exec(added.text)?.[1];
    expect(secret).toBeDefined();
    expect(added.text).toContain("Shown only once");
    expect(added.text).toContain("Broker-Signature");
    expect(added.text).not.toContain("abcdefghijklmnopqrstuvwx");
    const [hook] = await hooks();
    expect(hook).toMatchObject({ format: "slack" });

    const vault = (await h.store.vaults.byName("v1"))!;
    await h.store.webhooks.recordDelivery(hook!.id, {
      status: "blocked",
      event: "proposal.created",
      attempts: 1,
      error: "the network guard refused 10.0.0.1",
      at: h.clock.now(),
    });
    const list = await b.get("/vaults/v1/settings");
    expect(list.text).toContain("https://hooks.slack.com/services/");
    expect(list.text).toContain("blocked by the network guard");
    expect(list.text).toContain("proposal.created");
    expect(list.text).toContain("the network guard refused 10.0.0.1");
    expect(list.text).not.toContain(secret!);
    expect(list.text).not.toContain("abcdefghijklmnopqrstuvwx");

    const wrong = await b.submit(`/vaults/v1/settings/webhooks/${hook!.id}/delete`, { confirm: "webhook 99" });
    expect(wrong.text).toContain(`Type webhook ${hook!.id} exactly to confirm`);
    expect(await h.store.webhooks.count(vault.id)).toBe(1);
    const removed = await b.submit(`/vaults/v1/settings/webhooks/${hook!.id}/delete`, { confirm: `webhook ${hook!.id}` });
    expect(removed.text).toContain(`Webhook ${hook!.id} removed`);
    expect(removed.text).toContain('id="webhooks-empty"');
    expect(await hooks()).toEqual([]);

    // The secret appeared in exactly one response: the add page. No cookie, redirect or log holds it.
    expect(b.pages.filter((p) => p.html.includes(secret!)).length).toBe(1);
    expect(b.setCookies.some((c) => c.includes(secret!))).toBe(false);
    expect([...h.logs, ...b.logs].some((l) => l.includes(secret!) || RAW_TOKEN.test(l))).toBe(false);
  });

  test("a refused add says why and shows no secret", async () => {
    await b.get("/vaults/v1/settings");
    const bad = await b.submit("/vaults/v1/settings/webhooks", { url: "ftp://example.com/x" });
    expect(bad.location).toBe("/vaults/v1/settings#notifications");
    expect(bad.text).toContain("Url must start with https://");
    expect(bad.text).not.toContain("whsec_");
    expect(await hooks()).toEqual([]);
  });

  test("a member sees a note, no form, no list, and cannot add or remove", async () => {
    await h.call("POST", "/v1/vaults/v1/webhooks", { token: owner, body: { url: "https://example.com/hook" } });
    const [hook] = await hooks();
    await addUser(h, owner, "v1", "mia@example.com", "member");
    const mia = await signIn(h, "mia@example.com");
    const page = await mia.get("/vaults/v1/settings");
    expect(page.text).toContain('id="notifications-refused"');
    expect(page.text).not.toContain('id="add-webhook"');
    expect(page.text).not.toContain("example.com/hook");
    const add = await mia.submit("/vaults/v1/settings/webhooks", { url: "https://evil.example/hook" });
    expect(add.text).not.toContain("whsec_");
    expect(add.text).toContain("does not allow this");
    await mia.submit(`/vaults/v1/settings/webhooks/${hook!.id}/delete`, { confirm: `webhook ${hook!.id}` });
    expect((await hooks()).map((w) => w.id)).toEqual([hook!.id]);
  });
});
