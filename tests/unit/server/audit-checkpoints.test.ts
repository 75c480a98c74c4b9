// GET /v1/audit/public-key (no authentication) and GET /v1/vaults/{vault}/audit/checkpoints (readers of the
// vault's logs): the published key verifies every listed checkpoint with node:crypto, a vault sees only the
// checkpoints that cover it with its own head in `heads` and everything signed in `signed_heads`, pages by
// after_id; a checkpoint reaches the vault's JSON webhooks (not its Slack ones); the owner's Settings page
// shows the key id and the PEM with a Copy button.

import { beforeEach, describe, expect, test } from "bun:test";
import { createHmac, verify as nodeVerify } from "node:crypto";
import { announceCheckpoint, startAuditCheckpointer } from "../../../src/app/audit-checkpointer.ts";
import { compileNetPolicy, systemResolver } from "../../../src/egress/index.ts";
import { createWebhookSender } from "../../../src/webhooks/index.ts";
import { loadAuditSigningKey, type AuditSigner } from "../../../src/crypto/index.ts";
import { createAuditLog, type AuditEntry } from "../../../src/egress/audit.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createApi } from "../../../src/server/app.ts";
import { createBrowser } from "./console-fixtures.ts";
import { addAgent, addUser, createHarness, createVault, mintScoped, register, type Harness } from "./fixtures.ts";

let h: Harness;
let owner: string;
let signer: AuditSigner;
let vaults: Record<string, number>;

function entry(vault: string, at: number): AuditEntry {
  return {
    at,
    principal: "agent:1",
    vaultId: vaults[vault]!,
    vault,
    ingress: "explicit",
    method: "GET",
    host: "api.example.com",
    path: "/v1/things",
    service: "api.example.com",
    credentialKeys: "API_KEY",
    status: 200,
    bytesIn: 0,
    bytesOut: 10,
    durationMs: 3,
    error: null,
    contained: false,
    approvedBy: null,
  };
}

/** Writes `n` records to each named vault through the audit writer, then signs a checkpoint of what moved. */
async function checkpointAfter(writes: Record<string, number>): Promise<void> {
  const audit = createAuditLog(h.store, { now: h.clock.now, log: createMemoryLogger(), flushIntervalMs: 60_000 });
  for (const [vault, n] of Object.entries(writes)) for (let i = 0; i < n; i++) audit.record(entry(vault, h.clock.now()));
  await audit.flush();
  const cp = startAuditCheckpointer(h.store, { signer, everyRecords: 1, everyMs: 1, pollMs: 3_600_000, now: h.clock.now, log: createMemoryLogger() });
  expect(await cp.tick()).toBeDefined();
  await cp.stop();
  h.clock.advance(1000);
}

function message(c: { id: number; at: number; key_id: string; signed_heads: { vault_id: number; seq: number; hash: string }[] }): Buffer {
  return Buffer.from(JSON.stringify(["broker-audit-checkpoint-v1", c.id, c.at, c.key_id, c.signed_heads.map((x) => [x.vault_id, x.seq, x.hash])]));
}

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "main");
  await createVault(h, owner, "other");
  vaults = { main: (await h.store.vaults.byName("main"))!.id, other: (await h.store.vaults.byName("other"))!.id };
});

describe("GET /v1/audit/public-key", () => {
  test("404 before the first start made a key; then the key, to anyone, without signing in", async () => {
    const none = await h.call("GET", "/v1/audit/public-key");
    expect([none.status, none.body.error]).toEqual([404, "not_found"]);
    signer = (await loadAuditSigningKey(h.store, h.domain.dataKey, h.clock.now())).signer;
    const res = await h.call("GET", "/v1/audit/public-key");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ key_id: signer.keyId, public_key_pem: signer.publicKeyPem, created_at: new Date(h.clock.now()).toISOString() });
    expect(res.body.public_key_pem).toStartWith("-----BEGIN PUBLIC KEY-----\n");
    expect(JSON.stringify(res.body)).not.toContain("PRIVATE");
  });
});

describe("GET /v1/vaults/{vault}/audit/checkpoints", () => {
  beforeEach(async () => {
    signer = (await loadAuditSigningKey(h.store, h.domain.dataKey, h.clock.now())).signer;
  });

  test("the vault's checkpoints, oldest first, its own head in heads, every signed head in signed_heads; each verifies with the published key", async () => {
    await checkpointAfter({ main: 3, other: 2 }); // covers both
    await checkpointAfter({ other: 1 }); // covers other only
    await checkpointAfter({ main: 1 }); // covers main only
    const pem = (await h.call("GET", "/v1/audit/public-key")).body.public_key_pem as string;
    const res = await h.call("GET", "/v1/vaults/main/audit/checkpoints", { token: owner });
    expect(res.status).toBe(200);
    expect(res.body.next_after_id).toBeNull();
    const list = res.body.checkpoints as any[];
    expect(list.map((c) => c.heads)).toEqual([
      [{ vault_id: vaults.main, seq: 3, hash: expect.stringMatching(/^[0-9a-f]{64}$/) }],
      [{ vault_id: vaults.main, seq: 4, hash: expect.stringMatching(/^[0-9a-f]{64}$/) }],
    ]);
    expect(list[0].signed_heads.map((x: any) => [x.vault_id, x.seq])).toEqual([
      [vaults.main, 3],
      [vaults.other, 2],
    ]);
    expect(list[1].signed_heads.map((x: any) => [x.vault_id, x.seq])).toEqual([[vaults.main, 4]]);
    const chain = (await h.store.auditChains.get(vaults.main!))!;
    expect(list[1].heads[0].hash).toBe(chain.headHash);
    for (const c of list) {
      expect(Object.keys(c).sort()).toEqual(["at", "heads", "id", "key_id", "signature", "signed_heads"]);
      expect(c.key_id).toBe(signer.keyId);
      expect(nodeVerify(null, message(c), pem, Buffer.from(c.signature, "base64url"))).toBe(true);
      // The vault's own head alone does not carry the signature when other heads were signed with it.
      if (c.signed_heads.length > 1) expect(nodeVerify(null, message({ ...c, signed_heads: c.heads }), pem, Buffer.from(c.signature, "base64url"))).toBe(false);
    }
    // The other vault sees its two.
    const other = await h.call("GET", "/v1/vaults/other/audit/checkpoints", { token: owner });
    expect(other.body.checkpoints.map((c: any) => c.heads[0].seq)).toEqual([2, 3]);
  });

  test("pages by after_id: next_after_id while a page is full, null on the last; a bad limit is 400", async () => {
    for (let i = 0; i < 3; i++) await checkpointAfter({ main: 1 });
    const first = await h.call("GET", "/v1/vaults/main/audit/checkpoints?limit=2", { token: owner });
    expect(first.body.checkpoints.map((c: any) => c.heads[0].seq)).toEqual([1, 2]);
    expect(first.body.next_after_id).toBe(first.body.checkpoints[1].id);
    const next = await h.call("GET", `/v1/vaults/main/audit/checkpoints?limit=2&after_id=${first.body.next_after_id}`, { token: owner });
    expect(next.body.checkpoints.map((c: any) => c.heads[0].seq)).toEqual([3]);
    expect(next.body.next_after_id).toBeNull();
    for (const q of ["limit=0", "limit=1001", "limit=x", "after_id=-1"]) {
      const bad = await h.call("GET", `/v1/vaults/main/audit/checkpoints?${q}`, { token: owner });
      expect({ q, status: bad.status }).toEqual({ q, status: 400 });
    }
  });

  test("the readers of the vault's logs and nobody else", async () => {
    await checkpointAfter({ main: 1 });
    const member = await addUser(h, owner, "main", "member@example.com", "member");
    const proxy = await addUser(h, owner, "main", "proxy@example.com", "proxy");
    const outsider = (await register(h, "outsider@example.com")).token;
    const agentMember = await addAgent(h, owner, "main", "member", "reader-bot");
    const agentProxy = await addAgent(h, owner, "main", "proxy", "proxy-bot");
    const scoped = (await mintScoped(h, { token: owner }, "main", { role: "member" })).body.token as string;
    const cases: [string, string | undefined, Record<string, string> | undefined, number][] = [
      ["owner", owner, undefined, 200],
      ["member", member, undefined, 200],
      ["proxy", proxy, undefined, 403],
      ["outsider", outsider, undefined, 404],
      ["agent member", agentMember.token, agentMember.headers, 200],
      ["agent proxy", agentProxy.token, agentProxy.headers, 403],
      ["scoped member", scoped, undefined, 200],
      ["nobody", undefined, undefined, 401],
    ];
    for (const [who, token, headers, status] of cases) {
      const res = await h.call("GET", "/v1/vaults/main/audit/checkpoints", { ...(token && { token }), ...(headers && { headers }) });
      expect({ who, status: res.status }).toEqual({ who, status });
    }
  });
});

describe("webhooks", () => {
  test("a checkpoint reaches the vault's JSON webhooks, HMAC-signed, never its Slack ones", async () => {
    signer = (await loadAuditSigningKey(h.store, h.domain.dataKey, h.clock.now())).signer;
    const received: { path: string; event: string | null; signature: string | null; body: string }[] = [];
    const receiver = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => {
        received.push({
          path: new URL(req.url).pathname,
          event: req.headers.get("broker-event"),
          signature: req.headers.get("broker-signature"),
          body: await req.text(),
        });
        return new Response("ok");
      },
    });
    try {
      const json = await h.call("POST", "/v1/vaults/main/webhooks", { token: owner, body: { url: `http://127.0.0.1:${receiver.port}/json` } });
      const slack = await h.call("POST", "/v1/vaults/main/webhooks", {
        token: owner,
        body: { url: `http://127.0.0.1:${receiver.port}/slack`, format: "slack" },
      });
      expect([json.status, slack.status]).toEqual([201, 201]);
      const sender = createWebhookSender({
        store: h.store,
        dataKey: h.domain.dataKey,
        policy: () => compileNetPolicy({ allowPrivateRanges: false, allowlist: ["127.0.0.1/32"] }),
        resolver: systemResolver,
        now: h.clock.now,
        log: createMemoryLogger(),
        retryDelaysMs: [],
      });
      const audit = createAuditLog(h.store, { now: h.clock.now, log: createMemoryLogger(), flushIntervalMs: 60_000 });
      audit.record(entry("main", h.clock.now()));
      audit.record(entry("other", h.clock.now()));
      await audit.flush();
      const cp = startAuditCheckpointer(h.store, {
        signer,
        everyRecords: 1,
        everyMs: 1,
        pollMs: 3_600_000,
        now: h.clock.now,
        log: createMemoryLogger(),
      });
      const c = (await cp.tick())!;
      await cp.stop();
      await announceCheckpoint(h.store, sender, "http://broker.test", c); // what start.ts's onCheckpoint does
      await sender.idle();
      expect(received.map((r) => [r.path, r.event])).toEqual([["/json", "audit.checkpoint"]]);
      const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(received[0]!.signature ?? "")!;
      expect(createHmac("sha256", json.body.secret).update(`${t}.${received[0]!.body}`).digest("hex")).toBe(v1!);
      const event = JSON.parse(received[0]!.body);
      expect(event).toMatchObject({ event: "audit.checkpoint", vault: "main", console_url: "http://broker.test/vaults/main/logs" });
      expect(event.checkpoint.id).toBe(c.id);
      expect(event.checkpoint.heads).toEqual([{ vault_id: vaults.main, seq: 1, hash: c.heads.find((x) => x.vaultId === vaults.main)!.hash }]);
      expect(nodeVerify(null, message(event.checkpoint), signer.publicKeyPem, Buffer.from(event.checkpoint.signature, "base64url"))).toBe(true);
      await sender.stop();
    } finally {
      receiver.stop(true);
    }
  });
});

describe("the owner's Settings page", () => {
  test("shows the key id, when it was made and the public key with a Copy button; never a private key", async () => {
    signer = (await loadAuditSigningKey(h.store, h.domain.dataKey, h.clock.now())).signer;
    const app = createApi({ domain: h.domain, log: createMemoryLogger(), auditKey: signer });
    const page = await createBrowser(app, { session: owner }).get("/settings");
    expect(page.status).toBe(200);
    expect(page.text).toContain('id="audit-key"');
    expect(page.text).toContain(signer.keyId);
    // The PEM as it is, line breaks included (a textarea keeps them, so Copy copies a usable file).
    const textarea = /<textarea id="audit-public-key"[^>]*>([^<]*)<\/textarea>/.exec(page.text);
    expect(textarea?.[1]?.trim()).toBe(signer.publicKeyPem.trim());
    expect(page.text).toContain('data-copy="audit-public-key"');
    expect(page.text).toContain('src="/assets/copy.js"');
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(page.text).not.toContain("PRIVATE KEY");
  });
});
