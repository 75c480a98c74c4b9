// Count limits (contract "Limits"): 10 pending agent invites and 50 pending vault invites per vault,
// 10 active sessions per agent (its token plus the scoped sessions it minted). Only live entries
// count: expired, used or revoked ones make room again.

import { beforeEach, describe, expect, test } from "bun:test";
import {
  addAgent,
  createAgentInvite,
  createHarness,
  createVault,
  DAY,
  expectNoTokensInLogs,
  type Harness,
  HOUR,
  MINUTE,
  mintScoped,
  pathOf,
  register,
} from "./fixtures.ts";

let h: Harness;
let owner: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  await createVault(h, owner, "v2");
});

const vaultInvite = (vault = "v1") => h.call("POST", `/v1/vaults/${vault}/invites`, { token: owner, body: { role: "member" } });

function expectConflict(res: { status: number; body: any; headers: Headers }) {
  expect(res.status).toBe(409);
  expect(res.body.error).toBe("conflict");
  expect(res.headers.get("x-broker-error")).toBe("conflict");
}

describe("pending agent invites per vault", () => {
  test("the 11th is refused with 409; another vault has its own room", async () => {
    for (let i = 0; i < 10; i++) expect((await createAgentInvite(h, owner, "v1", { name: `a${i}` })).status).toBe(201);
    expectConflict(await createAgentInvite(h, owner, "v1", { name: "a10" }));
    expect((await h.call("GET", "/v1/vaults/v1/agent-invites", { token: owner })).body.invites).toHaveLength(10);
    expect((await createAgentInvite(h, owner, "v2", { name: "other" })).status).toBe(201);
    expectNoTokensInLogs(h);
  });

  test("expired invites do not count", async () => {
    for (let i = 0; i < 10; i++) expect((await createAgentInvite(h, owner, "v1")).status).toBe(201);
    h.clock.advance(14 * MINUTE);
    expectConflict(await createAgentInvite(h, owner, "v1"));
    h.clock.advance(MINUTE);
    for (let i = 0; i < 10; i++) expect((await createAgentInvite(h, owner, "v1")).status).toBe(201);
    expectConflict(await createAgentInvite(h, owner, "v1"));
  });

  test("redeemed and revoked invites do not count", async () => {
    const made = [];
    for (let i = 0; i < 10; i++) made.push((await createAgentInvite(h, owner, "v1", { name: `a${i}` })).body);
    expect((await h.call("POST", pathOf(made[0].invite_url))).status).toBe(201);
    expect((await createAgentInvite(h, owner, "v1", { name: "b1" })).status).toBe(201);
    expectConflict(await createAgentInvite(h, owner, "v1", { name: "b2" }));
    expect((await h.call("DELETE", `/v1/vaults/v1/agent-invites/${made[1].id}`, { token: owner })).status).toBe(204);
    expect((await h.call("POST", pathOf(made[1].invite_url))).status).toBe(404); // a revoked invite is dead
    expect((await createAgentInvite(h, owner, "v1", { name: "b2" })).status).toBe(201);
  });
});

describe("pending vault invites per vault", () => {
  test("the 51st is refused with 409; expired and accepted ones make room", async () => {
    const made = [];
    for (let i = 0; i < 50; i++) {
      const res = await vaultInvite();
      expect(res.status).toBe(201);
      made.push(res.body);
    }
    expectConflict(await vaultInvite());
    expect((await vaultInvite("v2")).status).toBe(201);

    const acc = await h.call("POST", `/v1/vault-invites/${made[0].token}/accept`, { body: { email: "new@example.com", password: "long enough pw" } });
    expect(acc.status).toBe(200);
    expect((await vaultInvite()).status).toBe(201);
    expectConflict(await vaultInvite());

    h.clock.advance(48 * HOUR);
    expect((await h.call("GET", "/v1/vaults/v1/invites", { token: owner })).body.invites).toHaveLength(0);
    for (let i = 0; i < 50; i++) expect((await vaultInvite()).status).toBe(201);
    expectConflict(await vaultInvite());
  });
});

describe("active sessions per agent", () => {
  test("its token counts as one: 9 scoped sessions succeed, the 10th is refused", async () => {
    const agent = await addAgent(h, owner, "v1", "member", "bot");
    const ids: string[] = [];
    for (let i = 0; i < 9; i++) {
      const res = await mintScoped(h, agent, "v1", { role: "proxy" });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
    }
    expectConflict(await mintScoped(h, agent, "v1", { role: "proxy" }));
    const listed = await h.call("GET", "/v1/agents", { token: owner });
    expect(listed.body.agents[0].sessions).toBe(10);

    // Revoking one (the agent may revoke what it minted) makes room for exactly one more.
    expect((await h.call("DELETE", `/v1/sessions/${ids[0]}`, { token: agent.token, headers: agent.headers })).status).toBe(204);
    expect((await mintScoped(h, agent, "v1", { role: "proxy" })).status).toBe(201);
    expectConflict(await mintScoped(h, agent, "v1", { role: "proxy" }));
    // The agent token itself still works.
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: agent.token, headers: agent.headers })).status).toBe(200);
    expectNoTokensInLogs(h);
  });

  test("expired scoped sessions do not count", async () => {
    const agent = await addAgent(h, owner, "v1", "proxy", "bot");
    for (let i = 0; i < 9; i++) expect((await mintScoped(h, agent, "v1", { ttl_seconds: 300 })).status).toBe(201);
    expectConflict(await mintScoped(h, agent, "v1"));
    h.clock.advance(5 * MINUTE);
    for (let i = 0; i < 9; i++) expect((await mintScoped(h, agent, "v1")).status).toBe(201);
    expectConflict(await mintScoped(h, agent, "v1"));
    h.clock.advance(DAY);
    expect((await mintScoped(h, agent, "v1")).status).toBe(201);
  });

  test("the limit is per agent, not per vault or instance", async () => {
    const a = await addAgent(h, owner, "v1", "proxy", "bot-a");
    const b = await addAgent(h, owner, "v1", "proxy", "bot-b");
    for (let i = 0; i < 9; i++) expect((await mintScoped(h, a, "v1")).status).toBe(201);
    expectConflict(await mintScoped(h, a, "v1"));
    expect((await mintScoped(h, b, "v1")).status).toBe(201);
    // Humans are not bound by the agent limit.
    for (let i = 0; i < 11; i++) expect((await mintScoped(h, { token: owner }, "v1")).status).toBe(201);
  });
});
