// `broker vault webhook add|list|remove`, the CLI run from source against an in-process broker with a
// loopback receiver (BROKER_NETWORK_ALLOWLIST=127.0.0.1): the secret `add` prints once verifies the
// signature of the "created" event an agent's proposal sends, `list` shows the delivery with the URL
// masked, `remove` stops it. No output holds a session or agent token, nor the URL's secret parts.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestPki } from "../helpers/pki.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";
import { sourceCli } from "./cli-from-source.ts";

const URL_SECRET = "abcdefghijklmnopqrstuvwxyz0123";
let broker: Broker;
let home: string;
let receiver: ReturnType<typeof Bun.serve>;
let agentToken = "";
let secret = "";
const received: Array<{ path: string; headers: Headers; body: string }> = [];
const outputs: string[] = [];

const { cli, ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), outputs);

const hookUrl = () => `http://127.0.0.1:${receiver.port}/hook/${URL_SECRET}?k=v`;

beforeAll(async () => {
  receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      received.push({ path: new URL(req.url).pathname, headers: req.headers, body: await req.text() });
      return new Response("ok");
    },
  });
  broker = await startBroker({ caPem: (await createTestPki()).caPem, env: { BROKER_NETWORK_ALLOWLIST: "127.0.0.1" } });
  home = mkdtempSync(join(tmpdir(), "broker-cli-webhook-"));
  await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
  await ok(["vault", "use", broker.vault]);
  const inv = await broker.api("POST", `/v1/vaults/${broker.vault}/agent-invites`, { name: "filer", role: "proxy" }, broker.userToken);
  expect(inv.status).toBe(201);
  const redeemed = await fetch(inv.body.invite_url, { method: "POST" });
  expect(redeemed.status).toBe(201);
  agentToken = ((await redeemed.json()) as { token: string }).token;
});

afterAll(async () => {
  await broker?.stop();
  receiver?.stop(true);
  if (home) rmSync(home, { recursive: true, force: true });
});

async function waitFor<T>(probe: () => Promise<T | undefined> | T | undefined, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const v = await probe();
    if (v !== undefined) return v;
    await Bun.sleep(25);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("broker vault webhook", () => {
  test("add prints the secret once, masked URL and where to read how to verify", async () => {
    const out = await ok(["vault", "webhook", "add", hookUrl()]);
    secret = /^\s+(whsec_[A-Za-z0-9_-]{43})$/m.exec(out)?.[1] ?? "";
    expect(secret).not.toBe("");
    expect(out).toContain(`Added webhook 1 to vault ${broker.vault}: http://127.0.0.1:${receiver.port}/hook/***?*** (JSON events).`);
    expect(out).toContain("shown once; store it now");
    expect(out).toContain("docs/api.md, section Webhooks");
    expect(out).not.toContain(URL_SECRET);
    const dup = await cli(["vault", "webhook", "add", hookUrl()]);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain("hint: `broker vault webhook list` shows the vault's webhooks");
  });

  test("an agent's proposal reaches the receiver as a signed created event", async () => {
    const filed = await fetch(`${broker.apiUrl}/v1/proposals`, {
      method: "POST",
      headers: { authorization: `Bearer ${agentToken}`, "x-vault": broker.vault, "content-type": "application/json" },
      body: JSON.stringify({
        message: "need the example API",
        services: [{ action: "set", host: "api.example.com", description: "d", auth: { type: "bearer", token: "EX_KEY" } }],
        credentials: [{ action: "set", key: "EX_KEY", description: "the key" }],
      }),
    });
    expect(filed.status).toBe(201);
    const got = await waitFor(() => received[0], "the receiver");
    expect(got.path).toBe(`/hook/${URL_SECRET}`);
    expect(got.headers.get("broker-event")).toBe("proposal.created");
    const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(got.headers.get("broker-signature") ?? "");
    expect(m).not.toBeNull();
    expect(createHmac("sha256", secret).update(`${m![1]}.${got.body}`).digest("hex")).toBe(m![2]!);
    const event = JSON.parse(got.body);
    expect(event).toMatchObject({
      event: "proposal.created",
      vault: broker.vault,
      proposal: { requested_by: "filer", hosts: ["api.example.com"], keys: ["EX_KEY"] },
    });
  });

  test("list shows the delivery in words with the URL masked; --json too", async () => {
    const table = await waitFor(async () => {
      const out = await ok(["vault", "webhook", "list"]);
      return out.includes("delivered") ? out : undefined;
    }, "a delivered status");
    expect(table.split("\n")[0]).toMatch(/^ID\s+URL\s+FORMAT\s+STATUS\s+LAST EVENT\s+ATTEMPTS\s+LAST ERROR$/);
    expect(table).toMatch(/^1\s+http:\/\/127\.0\.0\.1:\d+\/hook\/\S+\s+json\s+delivered\s+proposal\.created \d{4}-\d\d-\d\d \d\d:\d\d UTC\s+1\s+-$/m);
    const [hook] = JSON.parse(await ok(["vault", "webhook", "list", "--json"]));
    expect(hook.delivery).toMatchObject({ status: "delivered", event: "proposal.created", attempts: 1, error: null });
    for (const o of [table, JSON.stringify(hook)]) {
      expect(o).not.toContain(URL_SECRET);
      expect(o).not.toContain("k=v");
      expect(o).not.toContain(secret);
    }
  });

  test("remove stops it; a wrong id says where the ids are", async () => {
    expect(await ok(["vault", "webhook", "remove", "1"])).toBe(`Removed webhook 1 from vault ${broker.vault}; it gets no more events.\n`);
    expect(await ok(["vault", "webhook", "list"])).toContain(`No webhooks in vault ${broker.vault}.`);
    const missing = await cli(["vault", "webhook", "remove", "1"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("no such webhook in this vault");
    expect(missing.stderr).toContain("hint: `broker vault webhook list` shows the ids");
  });

  test("help has an example; no output holds a token, and the secret only add's", async () => {
    expect(await ok(["vault", "webhook", "add", "--help"])).toContain("Example: broker vault webhook add https://hooks.slack.com/services/");
    for (const o of outputs) {
      expect(o).not.toMatch(/av_(?:sess|agt|inv|appr|uinv)_/);
      expect(o).not.toContain(agentToken);
    }
    expect(outputs.filter((o) => o.includes(secret)).length).toBe(1);
  });
});
