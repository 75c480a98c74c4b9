// Proposal notifications end to end in process: /v1/vaults/:vault/webhooks (add with the secret once,
// list with delivery status, remove; human admins only), and a loopback receiver getting signed events
// for created, approved, rejected and expired proposals through the network guard, with retries.

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { compileNetPolicy, systemResolver } from "../../../src/egress/index.ts";
import { createWebhookSender, type WebhookSender } from "../../../src/webhooks/index.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { ApprovalRequired } from "../../../src/errors.ts";
import { createRequestApprovalGate, expireProposals } from "../../../src/workflows/index.ts";
import { addAgent, createHarness, createVault, DAY, RAW_TOKEN, register, sentinel, setCredential, type Harness } from "./fixtures.ts";

interface Received {
  headers: Headers;
  body: string;
}

let h: Harness;
let owner: string;
let agent: { token: string; headers: Record<string, string> };
let stored: string;
let receiver: ReturnType<typeof Bun.serve>;
let received: Received[];
let answers: number[];
let sender: WebhookSender;
const senderLog = createMemoryLogger();

function startSender(allowLoopback: boolean) {
  sender = createWebhookSender({
    store: h.store,
    dataKey: h.domain.dataKey,
    policy: () => compileNetPolicy({ allowPrivateRanges: false, allowlist: allowLoopback ? ["127.0.0.1/32"] : [] }),
    resolver: systemResolver,
    now: h.clock.now,
    log: senderLog,
    retryDelaysMs: [20, 20],
  });
  Object.assign(h.domain, { webhooks: sender });
}

beforeEach(async () => {
  received = [];
  answers = [];
  receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      received.push({ headers: req.headers, body: await req.text() });
      return new Response("ok", { status: answers.shift() ?? 200 });
    },
  });
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  stored = sentinel("stored");
  await setCredential(h, { token: owner }, "v1", "EXISTING_KEY", stored);
  agent = await addAgent(h, owner, "v1", "admin", "ci-bot");
});

afterEach(async () => {
  await sender?.stop();
  receiver.stop(true);
});

const hookUrl = () => `http://127.0.0.1:${receiver.port}/hook?x=1`;
/** A receiver URL whose path is distinctive (a receiver's path is often its secret), for leak checks. */
const secretHookUrl = () => {
  const path = `/hook-${crypto.randomUUID()}`;
  return { url: `http://127.0.0.1:${receiver.port}${path}?x=1`, path };
};

/** None of `values` (the webhook secret, the receiver's path) in the hook's delivery error, the sender's log or the server's. */
async function expectNoWebhookLeak(values: string[]): Promise<void> {
  const hooks = (await h.call("GET", "/v1/vaults/v1/webhooks", { token: owner })).body.webhooks as { delivery: { error: string | null } }[];
  expect(hooks.length).toBeGreaterThan(0);
  const where = {
    "delivery error": hooks.map((w) => w.delivery.error ?? "").join("\n"),
    "sender log": senderLog.lines.join("\n"),
    "server log": h.logs.join("\n"),
  };
  for (const v of values) {
    expect(v.length).toBeGreaterThan(8); // distinctive, or the check proves nothing
    for (const [name, text] of Object.entries(where)) expect(`${name}: ${text.includes(v) ? "present" : "absent"}`).toBe(`${name}: absent`);
  }
}
const addHook = (body: unknown, token = owner) => h.call("POST", "/v1/vaults/v1/webhooks", { token, body });
const propose = () =>
  h.call("POST", "/v1/proposals", {
    token: agent.token,
    headers: agent.headers,
    body: {
      message: "need stripe for billing",
      services: [{ action: "set", host: "api.stripe.com", description: "d", auth: { type: "bearer", token: "STRIPE_KEY" } }],
      credentials: [{ action: "set", key: "STRIPE_KEY", description: "the key" }],
    },
  });

async function settle() {
  for (let i = 0; i < 100; i++) {
    await Bun.sleep(10);
    await sender.idle();
    const hooks = await h.store.webhooks.list((await h.store.vaults.byName("v1"))!.id);
    if (hooks.every((w) => w.lastStatus !== "retrying" && w.lastStatus !== null)) return;
  }
}

function verify(r: Received, secret: string): unknown {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(r.headers.get("broker-signature") ?? "");
  expect(m).not.toBeNull();
  const t = Number(m![1]); // the harness clock's time of sending (it moves in the expiry test)
  expect(t).toBeGreaterThanOrEqual(Math.floor(Date.UTC(2026, 0, 1) / 1000));
  expect(t).toBeLessThanOrEqual(Math.floor(h.clock.now() / 1000));
  expect(createHmac("sha256", secret).update(`${m![1]}.${r.body}`).digest("hex")).toBe(m![2]!);
  return JSON.parse(r.body);
}

describe("managing webhooks", () => {
  test("add shows the secret once; list shows status, never the secret; remove", async () => {
    startSender(true);
    const add = await addHook({ url: hookUrl() });
    expect(add.status).toBe(201);
    expect({ id: typeof add.body.id, url: add.body.url, format: add.body.format }).toEqual({ id: "number", url: hookUrl(), format: "json" });
    expect(add.body.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const list = await h.call("GET", "/v1/vaults/v1/webhooks", { token: owner });
    // The list masks the query and a lone path segment (the full URL was only in the 201).
    expect(list.body.webhooks).toEqual([
      {
        id: add.body.id,
        url: `http://127.0.0.1:${receiver.port}/…`,
        format: "json",
        created_at: expect.any(String),
        delivery: { status: "never", event: null, attempts: 0, error: null, at: null },
      },
    ]);
    expect(JSON.stringify(list.body).includes(String(add.body.secret))).toBe(false);
    expect((await addHook({ url: hookUrl() })).status).toBe(409);
    const del = await h.call("DELETE", `/v1/vaults/v1/webhooks/${add.body.id}`, { token: owner });
    expect({ status: del.status, body: del.body }).toEqual({ status: 204, body: undefined });
    expect((await h.call("DELETE", `/v1/vaults/v1/webhooks/${add.body.id}`, { token: owner })).status).toBe(404);
  });

  test("a Slack incoming-webhook URL is a secret: whole in the 201, masked after the first path segment in the list", async () => {
    const slackPath = `/services/T0${crypto.randomUUID().slice(0, 8)}/B0${crypto.randomUUID().slice(0, 8)}/${crypto.randomUUID()}`;
    const url = `https://hooks.slack.com:8443${slackPath}`;
    const add = await addHook({ url, format: "slack" });
    expect({ status: add.status, url: add.body.url }).toEqual({ status: 201, url });
    const list = await h.call("GET", "/v1/vaults/v1/webhooks", { token: owner });
    expect(list.body.webhooks.map((w: { url: string }) => w.url)).toEqual(["https://hooks.slack.com:8443/services/…"]);
    expect(JSON.stringify(list.body).includes(slackPath.split("/").at(-1)!)).toBe(false);
  });

  test("a receiver whose only path segment is its secret (webhook.site) is listed without it", async () => {
    const token = crypto.randomUUID();
    expect((await addHook({ url: `https://webhook.site/${token}` })).status).toBe(201);
    const list = await h.call("GET", "/v1/vaults/v1/webhooks", { token: owner });
    expect(list.body.webhooks.map((w: { url: string }) => w.url)).toContain("https://webhook.site/…");
    expect(JSON.stringify(list.body).includes(token)).toBe(false);
  });

  test("agents (even admins) are refused; bad URLs are 400 naming url", async () => {
    expect((await h.call("POST", "/v1/vaults/v1/webhooks", { token: agent.token, headers: agent.headers, body: { url: hookUrl() } })).status).toBe(403);
    expect((await h.call("GET", "/v1/vaults/v1/webhooks", { token: agent.token, headers: agent.headers })).status).toBe(403);
    for (const url of ["ftp://x.example/", "https://u:p@x.example/", "not a url", "https://x.example/#f"]) {
      const res = await addHook({ url });
      expect({ status: res.status, field: res.body.field }).toEqual({ status: 400, field: "url" });
    }
    expect((await addHook({ url: hookUrl(), format: "xml" })).body.field).toBe("format");
  });
});

describe("delivery", () => {
  test("created, approved, rejected and expired arrive signed, with names, hosts and keys, never a value or token", async () => {
    startSender(true);
    const secret: string = (await addHook({ url: hookUrl() })).body.secret;
    const first = await propose();
    expect(first.status).toBe(201);
    await settle();
    const approveValue = sentinel("approve");
    expect((await h.call("POST", `/v1/proposals/${first.body.id}/approve`, { token: owner, body: { credentials: { STRIPE_KEY: approveValue } } })).status).toBe(
      200,
    );
    await settle();
    const second = await propose();
    await settle();
    expect((await h.call("POST", `/v1/proposals/${second.body.id}/reject`, { token: owner })).status).toBe(200);
    await settle();
    await propose();
    await settle();
    h.clock.advance(8 * DAY);
    expect(await expireProposals(h.domain)).toBe(1);
    await settle();

    const events = received.map((r) => verify(r, secret) as any);
    expect(events.map((e) => e.event)).toEqual([
      "proposal.created",
      "proposal.approved",
      "proposal.created",
      "proposal.rejected",
      "proposal.created",
      "proposal.expired",
    ]);
    expect(events[0]).toMatchObject({
      vault: "v1",
      approval_url: first.body.approval_url,
      proposal: {
        id: first.body.id,
        requested_by: "ci-bot",
        requested_by_kind: "agent",
        message: "need stripe for billing",
        hosts: ["api.stripe.com"],
        keys: ["STRIPE_KEY"],
      },
    });
    expect(events[1].proposal).toMatchObject({ status: "applied", decided_by: "owner@example.com" });
    expect(events[1].approval_url).toBeNull();
    expect(received[0]!.headers.get("broker-event")).toBe("proposal.created");
    const all = received.map((r) => r.body).join("\n") + senderLog.lines.join("\n") + h.logs.join("\n");
    for (const value of [stored, approveValue, owner, agent.token, secret]) expect(all.includes(value)).toBe(false);
    // the only token anywhere is the read-only approval token, in the created events' approval_url
    expect(all.replace(/"approval_url":"[^"]*"/g, "")).not.toMatch(RAW_TOKEN);
    const list = await h.call("GET", "/v1/vaults/v1/webhooks", { token: owner });
    expect(list.body.webhooks[0].delivery).toMatchObject({ status: "delivered", event: "proposal.expired", attempts: 1, error: null });
  });

  test("a receiver answering 500 is retried until it answers 200", async () => {
    startSender(true);
    const hook500 = secretHookUrl();
    const whsec: string = (await addHook({ url: hook500.url })).body.secret;
    answers = [500];
    await propose();
    await settle();
    expect(received.length).toBe(2);
    expect(received[0]!.headers.get("broker-delivery")).toBe(received[1]!.headers.get("broker-delivery")!);
    const [hook] = (await h.call("GET", "/v1/vaults/v1/webhooks", { token: owner })).body.webhooks;
    expect(hook.delivery).toMatchObject({ status: "delivered", attempts: 2, error: null });
    await expectNoWebhookLeak([whsec, hook500.path]);
  });

  test("a receiver that is down is retried, then marked failed", async () => {
    startSender(true);
    const { url, path } = secretHookUrl();
    receiver.stop(true);
    const whsec: string = (await addHook({ url })).body.secret;
    await propose();
    await settle();
    const [hook] = (await h.call("GET", "/v1/vaults/v1/webhooks", { token: owner })).body.webhooks;
    expect(hook.delivery).toMatchObject({ status: "failed", event: "proposal.created", attempts: 3, error: expect.stringContaining("cannot connect") });
    await expectNoWebhookLeak([whsec, path]);
  });

  test("a loopback receiver is refused by the guard unless allowed, and the status says so", async () => {
    startSender(false);
    const blocked = secretHookUrl();
    const whsec: string = (await addHook({ url: blocked.url })).body.secret;
    await propose();
    await settle();
    expect(received).toEqual([]);
    const [hook] = (await h.call("GET", "/v1/vaults/v1/webhooks", { token: owner })).body.webhooks;
    expect(hook.delivery).toMatchObject({ status: "blocked", attempts: 1, error: expect.stringContaining("network guard") });
    await expectNoWebhookLeak([whsec, blocked.path]);
  });

  test("slack format sends the incoming-webhook text, still signed", async () => {
    startSender(true);
    const slackHook = secretHookUrl();
    const add = await addHook({ url: slackHook.url, slack: true });
    expect(add.body.format).toBe("slack");
    const p = await propose();
    await settle();
    const body = verify(received[0]!, add.body.secret) as any;
    expect(body).toEqual({ text: `agent ci-bot asks for api.stripe.com, credential STRIPE_KEY in vault v1: ${p.body.approval_url}` });
    expect(received[0]!.body.includes(add.body.secret)).toBe(false);
    await expectNoWebhookLeak([add.body.secret, slackHook.path]);
  });

  test("a held request (rule with approve: each) is announced when held and when decided, without its body or query", async () => {
    startSender(true);
    const secret: string = (await addHook({ url: hookUrl() })).body.secret;
    const slack = await addHook({ url: `http://127.0.0.1:${receiver.port}/slack`, format: "slack" });
    const vault = (await h.store.vaults.byName("v1"))!;
    const agentId = (await h.store.agents.byName("ci-bot"))!.id;
    const held = {
      vault: { id: vault.id, name: "v1" },
      principal: `agent:${agentId}`,
      viaSession: false,
      fingerprint: "f".repeat(64),
      method: "POST",
      host: "api.stripe.com",
      target: "/v1/refunds?customer=cus_secretish",
      service: "api.stripe.com",
      headers: [["content-type", "application/json"]] as [string, string][],
      bodyPreview: '{"charge":"ch_1","amount":500}',
      bodyBytes: 30,
      bodySha256: "b".repeat(64),
    };
    const refused = await createRequestApprovalGate(h.domain)
      .pass(held, { waitMs: 0 })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApprovalRequired);
    const id = (refused as ApprovalRequired).links.approval_id;
    await settle();
    expect((await h.call("POST", `/v1/vaults/v1/request-approvals/${id}/approve`, { token: owner })).status).toBe(200);
    await settle();
    const json = received.filter((r) => !r.body.startsWith('{"text"')).map((r) => verify(r, secret) as any);
    expect(json.map((e) => e.event)).toEqual(["request_approval.created", "request_approval.approved"]);
    expect(json[0]).toMatchObject({
      vault: "v1",
      approval_url: `${h.domain.publicUrl}/approve/requests/${id}`,
      request_approval: {
        id,
        state: "pending",
        requested_by: "ci-bot",
        requested_by_kind: "agent",
        method: "POST",
        url: "https://api.stripe.com/v1/refunds",
        body_bytes: 30,
      },
    });
    expect(json[1].request_approval).toMatchObject({ state: "approved", decided_by: "owner@example.com" });
    const texts = received.filter((r) => r.body.startsWith('{"text"')).map((r) => (verify(r, slack.body.secret) as { text: string }).text);
    expect(texts[0]).toBe(
      `agent ci-bot asks to send POST https://api.stripe.com/v1/refunds in vault v1; approve or deny it: ${h.domain.publicUrl}/approve/requests/${id}`,
    );
    expect(texts[1]).toBe("POST https://api.stripe.com/v1/refunds (agent ci-bot) in vault v1 was approved by owner@example.com");
    const all = received.map((r) => r.body).join("\n");
    for (const hidden of ["cus_secretish", "ch_1", owner, agent.token, stored]) expect(all.includes(hidden)).toBe(false);
  });
});
