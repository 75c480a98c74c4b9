// POST /v1/proposals (every validation rule, the pending cap, the 201 shape), reading a proposal
// (agent with X-Vault, scoped session, another vault's principal), expiry as a time-driven sweep,
// and the agent guide. Approval (API and page) lives in proposals-approve.test.ts.

import { beforeEach, describe, expect, test } from "bun:test";
import { expireProposals } from "../../../src/workflows/proposals.ts";
import { addAgent, createHarness, createVault, DAY, type Harness, mintScoped, register, sentinel, setCredential, expectNoLeak } from "./fixtures.ts";

let h: Harness;
let owner: string;
let agent: { token: string; headers: Record<string, string> };
let stored: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  stored = sentinel("stored");
  await setCredential(h, { token: owner }, "v1", "EXISTING_KEY", stored);
  agent = await addAgent(h, owner, "v1", "proxy", "bot");
});

const propose = (body: unknown, as: { token: string; headers?: Record<string, string> } = agent) =>
  h.call("POST", "/v1/proposals", { token: as.token, headers: as.headers, body });
const slot = (key: string, extra: Record<string, unknown> = {}) => ({ action: "set", key, description: `${key} desc`, ...extra });
const service = (host: string, extra: Record<string, unknown> = {}) => ({ action: "set", host, description: "d", auth: { type: "passthrough" }, ...extra });

async function expect400(body: unknown, field: string) {
  const res = await propose(body);
  expect({ status: res.status, error: res.body?.error, field: res.body?.field }).toEqual({ status: 400, error: "invalid_request", field });
  return res;
}

describe("POST /v1/proposals validation: each rule is a 400 naming the field", () => {
  test("more than 10 services or 10 slots; an empty proposal", async () => {
    await expect400({ services: Array.from({ length: 11 }, (_, i) => service(`h${i}.example.com`)) }, "services");
    await expect400({ credentials: Array.from({ length: 11 }, (_, i) => slot(`KEY_${i}`)) }, "credentials");
    await expect400({}, "services");
    await expect400({ services: [], credentials: [], message: "nothing" }, "services");
    // exactly 10 of each is fine
    const ok = await propose({
      services: Array.from({ length: 10 }, (_, i) => service(`h${i}.example.com`)),
      credentials: Array.from({ length: 10 }, (_, i) => slot(`KEY_${i}`)),
    });
    expect(ok.status).toBe(201);
  });

  test.each(["10.0.0.1", "127.0.0.1", "[::1]", "[::1]:8443", "192.168.1.1:8080"])("IP literal host %p", async (host) => {
    await expect400({ services: [service(host)] }, "services[0].host");
  });

  test.each(["*", "*.com", "a.*.com", "", "user@api.example.com"])("wildcard or malformed host %p", async (host) => {
    await expect400({ services: [service("ok.example.com"), service(host)] }, "services[1].host");
  });

  test.each(["lower_case", "1STARTS_WITH_DIGIT", "HAS-DASH", "", "A".repeat(129)])("bad key name %p", async (key) => {
    await expect400({ credentials: [slot(key)] }, "credentials[0].key");
  });

  test.each([
    "http://example.com/keys",
    "javascript:alert(1)",
    "https://user:pw@example.com/keys",
    "https://user@example.com/",
    "not a url",
    "data:text/html,hi",
  ])("obtain %p is refused", async (obtain) => {
    await expect400({ credentials: [slot("NEW_KEY", { obtain })] }, "credentials[0].obtain");
  });

  test("over-long texts", async () => {
    await expect400({ services: [service("a.example.com", { description: "d".repeat(501) })] }, "services[0].description");
    await expect400({ credentials: [slot("NEW_KEY", { description: "d".repeat(501) })] }, "credentials[0].description");
    await expect400({ credentials: [slot("NEW_KEY")], message: "m".repeat(2001) }, "message");
    await expect400({ credentials: [slot("NEW_KEY")], user_message: "m".repeat(2001) }, "user_message");
    await expect400({ credentials: [slot("NEW_KEY", { obtain_instructions: "i".repeat(2001) })] }, "credentials[0].obtain_instructions");
    // at the limits: accepted
    const ok = await propose({
      services: [service("a.example.com", { description: "d".repeat(500) })],
      credentials: [slot("NEW_KEY", { description: "d".repeat(500), obtain_instructions: "i".repeat(2000) })],
      message: "m".repeat(2000),
      user_message: "u".repeat(2000),
    });
    expect(ok.status).toBe(201);
  });

  test("duplicate hosts (in any spelling) and duplicate keys", async () => {
    await expect400({ services: [service("api.example.com"), service("API.example.com.")] }, "services");
    await expect400({ services: [service("api.example.com"), service("api.example.com:443")] }, "services");
    await expect400({ credentials: [slot("NEW_KEY"), slot("NEW_KEY")] }, "credentials");
  });

  test("a slot carrying a value is refused, and the value is not echoed or logged", async () => {
    const value = sentinel("agent-sent");
    const res = await expect400({ credentials: [slot("NEW_KEY", { value })] }, "credentials[0].value");
    expect(JSON.stringify(res.body)).not.toContain(value);
    expectNoLeak(h, value);
  });

  test("action other than set", async () => {
    await expect400({ services: [service("a.example.com", { action: "delete" })] }, "services[0].action");
    await expect400({ credentials: [slot("NEW_KEY", { action: "remove" })] }, "credentials[0].action");
  });

  test("auth.token must name a slot here or an existing key", async () => {
    const res = await expect400({ services: [service("a.example.com", { auth: { type: "bearer", token: "UNKNOWN_KEY" } })] }, "services[0].auth.token");
    expect(res.body.message).toContain("UNKNOWN_KEY");
    expect((await propose({ services: [service("a.example.com", { auth: { type: "bearer", token: "EXISTING_KEY" } })] })).status).toBe(201);
    expect(
      (await propose({ services: [service("b.example.com", { auth: { type: "bearer", token: "NEW_KEY" } })], credentials: [slot("NEW_KEY")] })).status,
    ).toBe(201);
  });
});

describe("the pending cap", () => {
  test("the 21st pending proposal is a 409; rejected, applied and expired ones do not count", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await propose({ credentials: [slot(`K_${i}`)] });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
    }
    const over = await propose({ credentials: [slot("ONE_MORE")] });
    expect(over.status).toBe(409);
    expect(over.body.error).toBe("conflict");

    expect((await h.call("POST", `/v1/proposals/${ids[0]}/reject`, { token: owner })).status).toBe(200);
    const afterReject = await propose({ credentials: [slot("ONE_MORE")] });
    expect(afterReject.status).toBe(201);
    expect((await propose({ credentials: [slot("TWO_MORE")] })).status).toBe(409);

    expect((await h.call("POST", `/v1/proposals/${ids[1]}/approve`, { token: owner, body: { credentials: { K_1: "v" } } })).status).toBe(200);
    expect((await propose({ credentials: [slot("TWO_MORE")] })).status).toBe(201);
    expect((await propose({ credentials: [slot("THREE_MORE")] })).status).toBe(409);

    h.clock.advance(7 * DAY + 1);
    expect(await expireProposals(h.domain)).toBe(20);
    for (let i = 0; i < 20; i++) expect((await propose({ credentials: [slot(`NEW_${i}`)] })).status).toBe(201);
    expect((await propose({ credentials: [slot("OVER")] })).status).toBe(409);
  });
});

describe("creating and reading", () => {
  test("201 shape: integer id, pending, vault, approval_url with an av_appr_ token, message with the link", async () => {
    const res = await propose({ credentials: [slot("NEW_KEY")], message: "hi" });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.any(Number), status: "pending", vault: "v1", approval_url: expect.any(String), message: expect.any(String) });
    expect(Number.isInteger(res.body.id)).toBe(true);
    expect(res.body.approval_url).toMatch(new RegExp(`^http://broker\\.test/approve/${res.body.id}\\?token=av_appr_[A-Za-z0-9_-]+$`));
    expect(res.body.message).toContain(res.body.approval_url);
  });

  test("agents need X-Vault; a scoped session reads its own vault; a user reads; another vault's principal gets 404", async () => {
    const created = await propose({ credentials: [slot("NEW_KEY")], message: "read me" });
    const path = `/v1/proposals/${created.body.id}`;
    const viaAgent = await h.call("GET", path, agent);
    expect(viaAgent.status).toBe(200);
    expect(viaAgent.body).toMatchObject({ id: created.body.id, status: "pending", vault: "v1", message: "read me", user_message: "", decided_at: null });
    expect(viaAgent.body.credentials).toEqual([{ action: "set", key: "NEW_KEY", description: "NEW_KEY desc", obtain: "", obtain_instructions: "" }]);
    expect(Date.parse(viaAgent.body.expires_at) - Date.parse(viaAgent.body.created_at)).toBe(7 * DAY);

    const scoped = await mintScoped(h, { token: owner }, "v1", { role: "proxy" });
    expect(scoped.status).toBe(201);
    expect((await h.call("GET", path, { token: scoped.body.token })).body.status).toBe("pending");
    expect((await h.call("GET", path, { token: owner })).status).toBe(200);
    const listed = await h.call("GET", "/v1/proposals?status=pending", agent);
    expect(listed.body.proposals.map((p: { id: number }) => p.id)).toEqual([created.body.id]);
    expect((await h.call("GET", "/v1/proposals?status=bogus", agent)).status).toBe(400);

    // Someone in another vault only: 404, as if it did not exist.
    const other = (await register(h, "other@example.com")).token;
    await createVault(h, other, "v2");
    expect((await h.call("GET", path, { token: other })).status).toBe(404);
    const otherScoped = await mintScoped(h, { token: other }, "v2", { role: "proxy" });
    expect((await h.call("GET", path, { token: otherScoped.body.token })).status).toBe(404);
    const otherAgent = await addAgent(h, other, "v2", "admin", "other-bot");
    expect((await h.call("GET", path, { token: otherAgent.token, headers: { "x-vault": "v2" } })).status).toBe(404);
    expect((await h.call("GET", path, { token: otherAgent.token, headers: { "x-vault": "v1" } })).status).toBe(404);
    expect((await h.call("GET", "/v1/proposals/999999", agent)).status).toBe(404);
  });
});

// Contract: instance-level agent tokens must send X-Vault on every vault-scoped request (400 naming x-vault).
test("an agent reading a proposal without X-Vault gets 400 naming x-vault", async () => {
  const created = await propose({ credentials: [slot("NEW_KEY")] });
  const bare = await h.call("GET", `/v1/proposals/${created.body.id}`, { token: agent.token });
  expect({ status: bare.status, field: bare.body?.field }).toEqual({ status: 400, field: "x-vault" });
});

describe("expiry", () => {
  test("after 7 days the sweep marks pending proposals expired, with no read in between", async () => {
    const a = (await propose({ credentials: [slot("A_KEY")] })).body.id as number;
    h.clock.advance(7 * DAY - 1000);
    const b = (await propose({ credentials: [slot("B_KEY")] })).body.id as number;
    expect(await expireProposals(h.domain)).toBe(0);
    expect((await h.store.proposals.byId(a))?.status).toBe("pending");
    h.clock.advance(1000);
    expect(await expireProposals(h.domain)).toBe(1);
    expect((await h.store.proposals.byId(a))?.status).toBe("expired");
    expect((await h.store.proposals.byId(b))?.status).toBe("pending");
    expect((await h.call("GET", `/v1/proposals/${a}`, agent)).body.status).toBe("expired");
    // An expired proposal can no longer be approved.
    expect((await h.call("POST", `/v1/proposals/${a}/approve`, { token: owner, body: { credentials: { A_KEY: "x" } } })).status).toBe(409);
  });
});

test("GET /v1/skills/agent: the markdown guide with discover, proposals and the polling rule", async () => {
  const res = await h.call("GET", "/v1/skills/agent");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/markdown");
  const text = String(res.body);
  expect(text).toContain("/discover");
  expect(text).toContain("/v1/proposals");
  expect(text).toContain("http://broker.test");
  expect(text).not.toContain("{base_url}");
  expect(text).toMatch(/every 3 seconds/);
  expect(text).toMatch(/first 30 seconds/);
  expect(text).toMatch(/every 10 seconds/);
});
