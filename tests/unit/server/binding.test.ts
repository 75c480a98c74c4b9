// How tokens are bound to vaults: agent tokens name the vault in X-Vault on every vault-scoped
// call; scoped sessions address only their own vault; revoking an agent or deleting a vault ends
// the sessions that hang off it on the very next request.

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import {
  addAgent,
  addUser,
  createHarness,
  createVault,
  expectNoLeak,
  expectNoTokensInLogs,
  type Harness,
  mintScoped,
  register,
  sentinel,
  setCredential,
} from "./fixtures.ts";

let h: Harness;
let owner: string;
let secret: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  await createVault(h, owner, "v2");
  secret = sentinel("binding");
  await setCredential(h, { token: owner }, "v1", "API_KEY", secret);
  await setCredential(h, { token: owner }, "v2", "API_KEY", secret);
});

// Every test: the credential value is in no response and no log line; no token is in the logs.
afterEach(() => {
  expectNoLeak(h, secret);
  expectNoTokensInLogs(h);
});

describe("agent tokens and X-Vault", () => {
  test("work with a matching X-Vault, fail without it or with a different one", async () => {
    const agent = await addAgent(h, owner, "v1", "member", "bot");
    const ok = await h.call("GET", "/v1/vaults/v1/credentials", { token: agent.token, headers: { "x-vault": "v1" } });
    expect(ok.status).toBe(200);
    expect(ok.body.credentials.map((c: { key: string }) => c.key)).toEqual(["API_KEY"]);

    const missing = await h.call("GET", "/v1/vaults/v1/credentials", { token: agent.token });
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ error: "invalid_request", field: "x-vault" });
    expect(missing.headers.get("x-broker-error")).toBe("invalid_request");

    const other = await h.call("GET", "/v1/vaults/v1/credentials", { token: agent.token, headers: { "x-vault": "v2" } });
    expect(other.status).toBe(400);
    expect(other.body).toMatchObject({ error: "invalid_request", field: "x-vault" });

    // Writes are checked the same way, and a refused write changes nothing.
    const put = await h.call("PUT", "/v1/vaults/v1/credentials/NEW_KEY", { token: agent.token, body: { value: "x" } });
    expect(put.status).toBe(400);
    expect(put.body.field).toBe("x-vault");
    const keys = await h.call("GET", "/v1/vaults/v1/credentials", { token: owner });
    expect(keys.body.credentials.map((c: { key: string }) => c.key)).toEqual(["API_KEY"]);
  });

  test("a matching X-Vault on a vault without a grant is 404, as for a missing vault", async () => {
    const agent = await addAgent(h, owner, "v1", "admin", "bot");
    const res = await h.call("GET", "/v1/vaults/v2/services", { token: agent.token, headers: { "x-vault": "v2" } });
    expect(res.status).toBe(404);
    const missing = await h.call("GET", "/v1/vaults/nope/services", { token: agent.token, headers: { "x-vault": "nope" } });
    expect(missing.body).toEqual(res.body);
  });

  test("minting a scoped session with a different X-Vault is refused", async () => {
    const agent = await addAgent(h, owner, "v1", "proxy", "bot");
    const res = await mintScoped(h, { token: agent.token, headers: { "x-vault": "v2" } }, "v1");
    expect(res.status).toBe(400);
    expect(res.body.field).toBe("x-vault");
  });

  test("whoami names the agent without needing X-Vault", async () => {
    const agent = await addAgent(h, owner, "v1", "proxy", "bot");
    const res = await h.call("GET", "/v1/auth/whoami", { token: agent.token });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ kind: "agent", agent: { name: "bot", role: "member" }, session: { expires_at: null } });
  });
});

describe("scoped sessions", () => {
  test("address only their own vault (403 for another existing vault)", async () => {
    const s = await mintScoped(h, { token: owner }, "v1", { role: "member" });
    expect(s.status).toBe(201);
    // structuredClone: Bun 1.4.5's toMatchObject writes asymmetric matchers into the received object.
    expect(structuredClone(s.body)).toMatchObject({
      vault: "v1",
      role: "member",
      token: expect.stringMatching(/^av_sess_/),
      id: expect.stringMatching(/^ses_/),
    });
    expect((await h.call("GET", "/v1/vaults/v1/credentials", { token: s.body.token })).status).toBe(200);
    for (const [method, path] of [
      ["GET", "/v1/vaults/v2/credentials"],
      ["GET", "/v1/vaults/v2/services"],
      ["GET", "/v1/vaults/v2"],
      ["DELETE", "/v1/vaults/v2/credentials/API_KEY"],
    ] as const) {
      const res = await h.call(method, path, { token: s.body.token });
      expect(res.status).toBe(403);
      expect(res.body.error).toBe("forbidden");
    }
    expect((await h.call("GET", "/v1/vaults/v2/credentials", { token: owner })).body.credentials).toHaveLength(1);
    const whoami = await h.call("GET", "/v1/auth/whoami", { token: s.body.token });
    expect(whoami.body).toMatchObject({ kind: "scoped", vault: "v1", role: "member" });
    const list = await h.call("GET", "/v1/vaults", { token: s.body.token });
    expect(list.body.vaults.map((v: { name: string }) => v.name)).toEqual(["v1"]);
  });

  test("the role defaults to the minter's own", async () => {
    const member = await addUser(h, owner, "v1", "m@example.com", "member");
    const agent = await addAgent(h, owner, "v1", "proxy", "bot");
    expect((await mintScoped(h, { token: owner }, "v1")).body.role).toBe("admin");
    expect((await mintScoped(h, { token: member }, "v1")).body.role).toBe("member");
    expect((await mintScoped(h, agent, "v1")).body.role).toBe("proxy");
  });

  test("a scoped session cannot mint another one", async () => {
    const s = await mintScoped(h, { token: owner }, "v1");
    const again = await mintScoped(h, { token: s.body.token }, "v1", { role: "proxy" });
    expect(again.status).toBe(403);
  });

  test("after its vault is deleted, a scoped session gets 401 (user- and agent-minted alike)", async () => {
    const agent = await addAgent(h, owner, "v1", "member", "bot");
    const byUser = await mintScoped(h, { token: owner }, "v1", { role: "proxy" });
    const byAgent = await mintScoped(h, agent, "v1", { role: "proxy" });
    expect([byUser.status, byAgent.status]).toEqual([201, 201]);
    for (const t of [byUser.body.token, byAgent.body.token]) expect((await h.call("GET", "/v1/auth/whoami", { token: t })).status).toBe(200);

    expect((await h.call("DELETE", "/v1/vaults/v1", { token: owner })).status).toBe(204);
    for (const t of [byUser.body.token, byAgent.body.token]) {
      const res = await h.call("GET", "/v1/auth/whoami", { token: t });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe("unauthorized");
    }
    // The agent itself is an instance identity: still authenticated, but the vault is gone.
    expect((await h.call("GET", "/v1/auth/whoami", { token: agent.token })).status).toBe(200);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: agent.token, headers: agent.headers })).status).toBe(404);
    // A vault re-created under the same name does not revive anything.
    await createVault(h, owner, "v1");
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: byUser.body.token })).status).toBe(401);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: agent.token, headers: agent.headers })).status).toBe(404);
  });

  test("a scoped session loses access when its minter is removed from the vault", async () => {
    const admin = await addUser(h, owner, "v1", "admin@example.com", "admin");
    const s = await mintScoped(h, { token: admin }, "v1", { role: "member" });
    expect((await h.call("GET", "/v1/vaults/v1/credentials", { token: s.body.token })).status).toBe(200);
    const user = (await h.store.users.byEmail("admin@example.com"))!;
    const vault = (await h.store.vaults.byName("v1"))!;
    await h.store.db.run("DELETE FROM vault_members WHERE vault_id = ? AND user_id = ?", [vault.id, user.id]);
    expect((await h.call("GET", "/v1/vaults/v1/credentials", { token: s.body.token })).status).toBe(404);
  });
});

describe("revoking an agent", () => {
  test("its token and the scoped sessions it minted get 401 on the next request", async () => {
    const agent = await addAgent(h, owner, "v1", "member", "bot");
    const scoped = await mintScoped(h, agent, "v1", { role: "proxy" });
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: agent.token, headers: agent.headers })).status).toBe(200);

    const listed = await h.call("GET", "/v1/agents", { token: owner });
    expect(listed.body.agents).toEqual([
      { name: "bot", role: "member", created_at: expect.any(String), vaults: [{ name: "v1", role: "member" }], sessions: 2 },
    ]);

    expect((await h.call("DELETE", "/v1/agents/bot", { token: owner })).status).toBe(204);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: agent.token, headers: agent.headers })).status).toBe(401);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: scoped.body.token })).status).toBe(401);
    expect((await h.call("GET", "/v1/agents", { token: owner })).body.agents).toEqual([]);
    expect((await h.call("DELETE", "/v1/agents/bot", { token: owner })).status).toBe(404);
  });

  test("needs the owner or admin of every vault the agent can use", async () => {
    const admin1 = await addUser(h, owner, "v1", "admin1@example.com", "admin");
    const member = await addUser(h, owner, "v1", "member@example.com", "member");
    const agent = await addAgent(h, owner, "v1", "proxy", "bot");
    const grants = (await h.store.agents.byName("bot"))!;
    await h.store.access.setGrant((await h.store.vaults.byName("v2"))!.id, grants.id, "proxy", h.clock.now());

    expect((await h.call("DELETE", "/v1/agents/bot", { token: member })).status).toBe(404); // administers none of its vaults
    expect((await h.call("DELETE", "/v1/agents/bot", { token: admin1 })).status).toBe(403); // admin of v1, not of v2
    expect((await h.call("DELETE", "/v1/agents/bot", { token: agent.token })).status).toBe(404);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: agent.token, headers: agent.headers })).status).toBe(200);
    expect((await h.call("DELETE", "/v1/agents/bot", { token: owner })).status).toBe(204);
  });
});
