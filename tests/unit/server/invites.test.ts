// Agent invites (redeemed once at POST {invite_url}; a failed redemption does not burn them),
// vault invites for humans (join logged in, or register on the way; email and allowed-domain
// rules), and who becomes owner at registration.

import { beforeEach, describe, expect, test } from "bun:test";
import { addUser, createAgentInvite, createHarness, createVault, expectNoTokensInLogs, type Harness, login, pathOf, register } from "./fixtures.ts";

let h: Harness;
let owner: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
});

const accept = (token: string, opts: { token?: string; body?: unknown } = {}) => h.call("POST", `/v1/vault-invites/${token}/accept`, opts);
const vaultInvite = async (body: Record<string, unknown>, as = owner) => {
  const res = await h.call("POST", "/v1/vaults/v1/invites", { token: as, body });
  expect(res.status).toBe(201);
  return res.body as { id: string; token: string; invite_url: string; email: string | null; role: string };
};

describe("agent invites", () => {
  test("redemption at the invite_url returns an agent token, its name and vaults; a second one is 404", async () => {
    const inv = await createAgentInvite(h, owner, "v1", { name: "bot", role: "member" });
    expect(inv.status).toBe(201);
    expect(inv.body.token).toMatch(/^av_inv_[A-Za-z0-9_-]{43}$/);
    expect(inv.body.invite_url).toBe(`http://broker.test/invite/${inv.body.token}`);
    expect(inv.body).toEqual({
      id: expect.stringMatching(/^inv_/),
      invite_url: inv.body.invite_url,
      token: inv.body.token,
      name: "bot",
      role: "member",
      expires_at: expect.any(String),
    });

    // GET explains, and does not burn.
    expect((await h.call("GET", pathOf(inv.body.invite_url))).status).toBe(200);
    const red = await h.call("POST", pathOf(inv.body.invite_url));
    expect(red.status).toBe(201);
    expect(red.body).toEqual({
      token: expect.stringMatching(/^av_agt_[A-Za-z0-9_-]{43}$/),
      agent: { name: "bot", role: "member", instance_role: "member" },
      broker_url: "http://broker.test",
      proxy_url: "http://broker.test/proxy",
      https_proxy: "http://broker.test:14322",
      vaults: [{ name: "v1", role: "member" }],
      expires_at: null,
    });
    const me = await h.call("GET", "/v1/auth/whoami", { token: red.body.token });
    expect(me.body.kind).toBe("agent");

    const again = await h.call("POST", pathOf(inv.body.invite_url));
    expect(again.status).toBe(404);
    expect(again.body.error).toBe("not_found");
    expect((await h.call("GET", "/v1/vaults/v1/agent-invites", { token: owner })).body.invites).toEqual([]);
    expect((await h.call("POST", "/invite/av_inv_unknown")).status).toBe(404);
    expectNoTokensInLogs(h);
  });

  test("the invite list never shows tokens", async () => {
    const inv = await createAgentInvite(h, owner, "v1", { name: "bot" });
    const list = await h.call("GET", "/v1/vaults/v1/agent-invites", { token: owner });
    expect(list.body.invites).toEqual([{ id: inv.body.id, name: "bot", role: "proxy", expires_at: inv.body.expires_at }]);
    expect(JSON.stringify(list.body)).not.toContain(inv.body.token);
  });

  test("a failed redemption does not burn the invite", async () => {
    const inv = await createAgentInvite(h, owner, "v1", { name: "bot" });
    const squatter = await h.store.agents.create({ name: "bot", role: "member", createdBy: null, createdAt: h.clock.now() });
    const failed = await h.call("POST", pathOf(inv.body.invite_url));
    expect(failed.status).toBeGreaterThanOrEqual(400);
    expect(await h.store.access.grantsOfAgent(squatter.id)).toEqual([]); // the failed attempt granted nothing
    await h.store.agents.remove(squatter.id);
    const ok = await h.call("POST", pathOf(inv.body.invite_url));
    expect(ok.status).toBe(201);
    expect(ok.body.agent.name).toBe("bot");
    expect((await h.call("POST", pathOf(inv.body.invite_url))).status).toBe(404);
  });

  test("names: taken or pending → 409; invalid → 400; generated when absent", async () => {
    await createAgentInvite(h, owner, "v1", { name: "bot" });
    expect((await createAgentInvite(h, owner, "v1", { name: "bot" })).status).toBe(409);
    const bad = await createAgentInvite(h, owner, "v1", { name: "Bad_Name" });
    expect(bad.status).toBe(400);
    expect(bad.body.field).toBe("name");
    const gen = await createAgentInvite(h, owner, "v1", {});
    expect(gen.body.name).toMatch(/^[a-z0-9][a-z0-9-]{0,62}$/);
    expect(gen.body.role).toBe("proxy");
  });
});

describe("vault invites", () => {
  test("a logged-in user accepts and joins with the invite's role; single use", async () => {
    const { token } = await register(h, "bob@example.com");
    expect((await h.call("GET", "/v1/vaults/v1", { token })).status).toBe(404);
    const inv = await vaultInvite({ role: "proxy" });
    expect(inv.token).toMatch(/^av_uinv_/);
    expect(inv.invite_url).toBe(`http://broker.test/v1/vault-invites/${inv.token}/accept`);
    const res = await accept(inv.token, { token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ vault: "v1", role: "proxy" });
    expect((await h.call("GET", "/v1/vaults", { token })).body.vaults).toEqual([{ name: "v1", role: "proxy", created_at: expect.any(String) }]);
    const members = await h.call("GET", "/v1/vaults/v1/members", { token: owner });
    expect(members.body.members).toContainEqual({ email: "bob@example.com", role: "proxy" });
    const { token: carol } = await register(h, "carol@example.com");
    expect((await accept(inv.token, { token: carol })).status).toBe(404);
  });

  test("registering through an invite creates a member with a working session", async () => {
    const inv = await vaultInvite({ email: "New@Example.com", role: "member" });
    expect(inv.email).toBe("new@example.com");
    const res = await accept(inv.token, { body: { email: "new@example.com", password: "long enough pw" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      vault: "v1",
      role: "member",
      token: expect.stringMatching(/^av_sess_/),
      user: { id: expect.any(Number), email: "new@example.com", role: "member" },
    });
    expect((await h.call("GET", "/v1/vaults/v1/credentials", { token: res.body.token })).status).toBe(200);
    expect((await login(h, "new@example.com", "long enough pw")).status).toBe(200);
    expectNoTokensInLogs(h);
  });

  test("an invite for another email is refused (403) and stays usable", async () => {
    const inv = await vaultInvite({ email: "bob@example.com" });
    const { token: eve } = await register(h, "eve@example.com");
    expect((await accept(inv.token, { token: eve })).status).toBe(403);
    const reg = await accept(inv.token, { body: { email: "mallory@example.com", password: "long enough pw" } });
    expect(reg.status).toBe(403);
    expect(await h.store.users.byEmail("mallory@example.com")).toBeUndefined();
    const { token: bob } = await register(h, "bob@example.com");
    expect((await accept(inv.token, { token: bob })).status).toBe(200);
  });

  test("registering through an invite with a taken email → 409, and the invite stays usable", async () => {
    await register(h, "bob@example.com");
    const inv = await vaultInvite({});
    const res = await accept(inv.token, { body: { email: "bob@example.com", password: "long enough pw" } });
    expect(res.status).toBe(409);
    expect((await accept(inv.token, { body: { email: "carol@example.com", password: "long enough pw" } })).status).toBe(200);
  });

  test("agents and scoped sessions cannot accept vault invites", async () => {
    const inv = await vaultInvite({});
    const s = await h.call("POST", "/v1/sessions", { token: owner, body: { vault: "v1" } });
    expect((await accept(inv.token, { token: s.body.token })).status).toBe(403);
    expect((await accept(inv.token, { token: "av_sess_not-a-real-token" })).status).toBe(401);
  });

  test("invites die with their vault", async () => {
    const inv = await vaultInvite({});
    expect((await h.call("DELETE", "/v1/vaults/v1", { token: owner })).status).toBe(204);
    expect((await accept(inv.token, { body: { email: "x@example.com", password: "long enough pw" } })).status).toBe(404);
  });
});

describe("allowed domains", () => {
  test("apply to registration and to both ways of accepting; the owner is exempt", async () => {
    const { token: outsider } = await register(h, "out@other.test"); // before the rule
    const patched = await h.call("PATCH", "/v1/owner/settings", { token: owner, body: { allowed_domains: ["Corp.Example", "@corp.test"] } });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ allowed_domains: ["corp.example", "corp.test"] });

    expect((await h.call("POST", "/v1/auth/register", { body: { email: "x@other.test", password: "long enough pw" } })).status).toBe(403);
    expect((await h.call("POST", "/v1/auth/register", { body: { email: "x@CORP.example", password: "long enough pw" } })).status).toBe(201);

    const inv = await vaultInvite({});
    expect((await accept(inv.token, { token: outsider })).status).toBe(403);
    expect((await accept(inv.token, { body: { email: "y@other.test", password: "long enough pw" } })).status).toBe(403);
    expect((await accept(inv.token, { body: { email: "y@corp.test", password: "long enough pw" } })).status).toBe(200);

    // The owner's own domain is not listed; the owner may still accept an invite to someone else's vault.
    const staff = (await login(h, "x@corp.example", "long enough pw")).body.token;
    await createVault(h, staff, "theirs");
    const toOwner = await h.call("POST", "/v1/vaults/theirs/invites", { token: staff, body: { role: "member" } });
    expect((await accept(toOwner.body.token, { token: owner })).status).toBe(200);

    expect((await h.call("PATCH", "/v1/owner/settings", { token: owner, body: { allowed_domains: [] } })).status).toBe(200);
    expect((await h.call("POST", "/v1/auth/register", { body: { email: "z@other.test", password: "long enough pw" } })).status).toBe(201);
  });

  test("invalid domains are refused", async () => {
    for (const bad of [["not a domain"], ["*.example.com"], "example.com", [42]]) {
      const res = await h.call("PATCH", "/v1/owner/settings", { token: owner, body: { allowed_domains: bad } });
      expect(res.status).toBe(400);
      expect(res.body.field).toBe("allowed_domains");
    }
    expect((await h.call("GET", "/v1/owner/settings", { token: owner })).body).toEqual({ allowed_domains: [] });
  });
});

describe("registration", () => {
  test("first user is owner, later ones members; duplicate email → 409 (case-insensitively)", async () => {
    const fresh = await createHarness();
    const first = await register(fresh, "First@Example.com");
    expect(first.user).toEqual({ id: expect.any(Number), email: "first@example.com", role: "owner" });
    const second = await register(fresh, "second@example.com");
    expect(second.user.role).toBe("member");
    for (const email of ["second@example.com", "SECOND@example.com", "first@example.com"]) {
      const dup = await fresh.call("POST", "/v1/auth/register", { body: { email, password: "another password" } });
      expect(dup.status).toBe(409);
      expect(dup.body.error).toBe("conflict");
    }
    expect((await fresh.call("POST", "/v1/auth/login", { body: { email: "second@example.com", password: "another password" } })).status).toBe(401);
  });

  test("an added user appears among the vault's members with their role", async () => {
    await addUser(h, owner, "v1", "m@example.com", "member");
    const res = await h.call("GET", "/v1/vaults/v1/members", { token: owner });
    expect(res.body.members).toEqual([
      { email: "m@example.com", role: "member" },
      { email: "owner@example.com", role: "admin" },
    ]);
  });
});
