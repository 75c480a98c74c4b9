// Token lifetimes against the injected clock (contract "Tokens" and "Limits"): user sessions (30 days
// idle, 1 year absolute), agent and vault invites, scoped sessions and agent tokens. The idle timer
// is refreshed in memory and written to the store at most once per 10 minutes.

import { beforeEach, describe, expect, test } from "bun:test";
import type { SqlValue } from "../../../src/store/index.ts";
import {
  addAgent,
  createAgentInvite,
  createHarness,
  createVault,
  DAY,
  expectNoTokensInLogs,
  type Harness,
  HOUR,
  login,
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
});

const whoami = (token: string, headers?: Record<string, string>) => h.call("GET", "/v1/auth/whoami", { token, headers });
const status = async (token: string, headers?: Record<string, string>) => (await whoami(token, headers)).status;

async function freshUserToken(): Promise<string> {
  const res = await login(h, "owner@example.com");
  expect(res.status).toBe(200);
  return res.body.token;
}

describe("user sessions", () => {
  test("are rejected after 30 idle days and accepted just before", async () => {
    const a = await freshUserToken();
    const b = await freshUserToken();
    h.clock.advance(30 * DAY - MINUTE);
    expect(await status(a)).toBe(200);
    h.clock.advance(MINUTE);
    const res = await whoami(b); // b has been idle exactly 30 days
    expect(res.status).toBe(401);
    expect(res.body.error).toBe("unauthorized");
    // the refused request did not refresh the idle timer
    h.clock.advance(MINUTE);
    expect(await status(b)).toBe(401);
    expect(await status(a)).toBe(200);
  });

  test("are kept alive by a request every 29 days, well past 30 days in total", async () => {
    const t = await freshUserToken();
    for (let i = 1; i <= 6; i++) {
      h.clock.advance(29 * DAY);
      expect(await status(t)).toBe(200);
    }
    h.clock.advance(30 * DAY);
    expect(await status(t)).toBe(401);
  });

  test("end after 1 year even with constant activity", async () => {
    const t = await freshUserToken();
    const w = await whoami(t);
    expect(Date.parse(w.body.session.expires_at) - h.clock.now()).toBe(365 * DAY);
    for (let i = 0; i < 12; i++) {
      h.clock.advance(29 * DAY);
      expect(await status(t)).toBe(200);
    }
    h.clock.advance(364 * DAY - 12 * 29 * DAY); // day 364
    expect(await status(t)).toBe(200);
    h.clock.advance(DAY); // day 365
    expect(await status(t)).toBe(401);
  });

  test("an idle-expired session is not listed among the user's active sessions", async () => {
    const old = await freshUserToken();
    const oldId = (await whoami(old)).body.session.id as string;
    h.clock.advance(20 * DAY);
    const recent = await freshUserToken();
    h.clock.advance(15 * DAY); // old: 35 days idle (dead); recent: 15 days (alive)
    expect(await status(old)).toBe(401);
    const list = await h.call("GET", "/v1/auth/sessions", { token: recent });
    expect(list.status).toBe(200);
    expect(list.body.sessions.map((s: { id: string }) => s.id)).not.toContain(oldId);
  });

  test("the idle refresh writes the store at most once per 10 minutes", async () => {
    const t = await freshUserToken();
    const id = (await whoami(t)).body.session.id as string;
    const stored = async () => Number((await h.store.db.get<{ s: number }>("SELECT last_seen_at AS s FROM sessions WHERE public_id = ?", [id]))!.s);
    const db = h.store.db as { run(sql: string, params?: readonly SqlValue[]): Promise<number> };
    const realRun = db.run;
    const writes: string[] = [];
    db.run = (sql, params) => {
      writes.push(sql);
      return realRun(sql, params);
    };
    try {
      const t0 = await stored();
      expect(t0).toBe(h.clock.now());
      for (const step of [MINUTE, 4 * MINUTE, 4 * MINUTE]) {
        h.clock.advance(step); // 1, 5, 9 minutes after the stored value
        expect(await status(t)).toBe(200);
        expect(await stored()).toBe(t0);
      }
      expect(writes).toEqual([]);
      h.clock.advance(MINUTE); // 10 minutes: written once
      expect(await status(t)).toBe(200);
      expect(await stored()).toBe(t0 + 10 * MINUTE);
      expect(writes).toHaveLength(1);
      expect(writes[0]).toMatch(/^UPDATE sessions SET last_seen_at/);
      for (let i = 0; i < 5; i++) {
        h.clock.advance(MINUTE);
        expect(await status(t)).toBe(200);
      }
      expect(await stored()).toBe(t0 + 10 * MINUTE);
      expect(writes).toHaveLength(1);
      h.clock.advance(5 * MINUTE);
      expect(await status(t)).toBe(200);
      expect(await stored()).toBe(t0 + 20 * MINUTE);
      expect(writes).toHaveLength(2);
    } finally {
      db.run = realRun;
    }
  });
});

describe("invites", () => {
  test("an agent invite is usable at 14 minutes and gone at 15", async () => {
    const early = await createAgentInvite(h, owner, "v1", { name: "early" });
    const late = await createAgentInvite(h, owner, "v1", { name: "late" });
    expect(Date.parse(late.body.expires_at) - h.clock.now()).toBe(15 * MINUTE);
    h.clock.advance(14 * MINUTE);
    expect((await h.call("POST", pathOf(early.body.invite_url))).status).toBe(201);
    h.clock.advance(MINUTE);
    const res = await h.call("POST", pathOf(late.body.invite_url));
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("not_found");
    expect((await h.call("GET", "/v1/vaults/v1/agent-invites", { token: owner })).body.invites).toEqual([]);
    expect(await h.store.agents.byName("late")).toBeUndefined();
  });

  test("a vault invite is usable just before 48 hours and gone at 48", async () => {
    const a = await h.call("POST", "/v1/vaults/v1/invites", { token: owner, body: { role: "member" } });
    const b = await h.call("POST", "/v1/vaults/v1/invites", { token: owner, body: { role: "member" } });
    expect(Date.parse(b.body.expires_at) - h.clock.now()).toBe(48 * HOUR);
    h.clock.advance(48 * HOUR - MINUTE);
    const ok = await h.call("POST", `/v1/vault-invites/${a.body.token}/accept`, { body: { email: "a@example.com", password: "long enough pw" } });
    expect(ok.status).toBe(200);
    h.clock.advance(MINUTE);
    const gone = await h.call("POST", `/v1/vault-invites/${b.body.token}/accept`, { body: { email: "b@example.com", password: "long enough pw" } });
    expect(gone.status).toBe(404);
    expect(await h.store.users.byEmail("b@example.com")).toBeUndefined();
  });
});

describe("scoped sessions", () => {
  test.each([
    [299, 400],
    [300, 201],
    [604800, 201],
    [604801, 400],
    [0, 400],
    [-300, 400],
    [300.5, 400],
    ["3600", 400],
  ])("ttl_seconds %p → %p", async (ttl, want) => {
    const res = await mintScoped(h, { token: owner }, "v1", { ttl_seconds: ttl });
    expect(res.status).toBe(want);
    if (want === 400) expect(res.body).toEqual({ error: "invalid_request", message: expect.any(String), field: "ttl_seconds" });
    else expect(Date.parse(res.body.expires_at) - h.clock.now()).toBe((ttl as number) * 1000);
  });

  test.each([
    ["default (24 hours)", undefined, 24 * HOUR],
    ["5 minutes", 300, 5 * MINUTE],
    ["7 days", 604800, 7 * DAY],
  ])("%s: works until the TTL, 401 at it", async (_name, ttl, ms) => {
    const res = await mintScoped(h, { token: owner }, "v1", ttl === undefined ? {} : { ttl_seconds: ttl });
    expect(res.status).toBe(201);
    expect(Date.parse(res.body.expires_at) - h.clock.now()).toBe(ms);
    h.clock.advance(ms - 1000);
    expect(await status(res.body.token)).toBe(200);
    h.clock.advance(1000);
    expect(await status(res.body.token)).toBe(401);
    expectNoTokensInLogs(h);
  });
});

describe("agent tokens", () => {
  test("with token_ttl_seconds expire that long after redemption", async () => {
    const inv = await createAgentInvite(h, owner, "v1", { name: "short", token_ttl_seconds: 3600 });
    h.clock.advance(10 * MINUTE);
    const red = await h.call("POST", pathOf(inv.body.invite_url));
    expect(red.status).toBe(201);
    expect(Date.parse(red.body.expires_at) - h.clock.now()).toBe(HOUR);
    const headers = { "x-vault": "v1" };
    h.clock.advance(HOUR - 1000);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: red.body.token, headers })).status).toBe(200);
    h.clock.advance(1000);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: red.body.token, headers })).status).toBe(401);
  });

  test("without a TTL never expire (2 years later, idle all along, still valid)", async () => {
    const agent = await addAgent(h, owner, "v1", "proxy", "forever");
    expect((await whoami(agent.token)).body.session.expires_at).toBeNull();
    h.clock.advance(2 * 365 * DAY);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: agent.token, headers: agent.headers })).status).toBe(200);
  });

  test.each([59, 0, 1.5, "3600", 10 * 365 * 86400 + 1])("token_ttl_seconds %p is refused", async (ttl) => {
    const res = await createAgentInvite(h, owner, "v1", { token_ttl_seconds: ttl });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe("token_ttl_seconds");
  });
});
