// Human authentication: login failures that do not reveal whether an email exists,
// change-password ending every session (scoped ones the user minted included), session listing
// by public id only, revocation by id, logout.

import { beforeEach, describe, expect, test } from "bun:test";
import { hashToken } from "../../../src/crypto/tokens.ts";
import {
  createHarness,
  createVault,
  headerPairs,
  expectNoLeak,
  expectNoTokensInLogs,
  type Harness,
  login,
  mintScoped,
  PASSWORD,
  register,
  sentinel,
  setCredential,
} from "./fixtures.ts";

let h: Harness;
let reg: string; // the session from registration

beforeEach(async () => {
  h = await createHarness();
  reg = (await register(h, "alice@example.com")).token;
  await createVault(h, reg, "v1");
});

const status = async (token: string) => (await h.call("GET", "/v1/auth/whoami", { token })).status;

describe("login", () => {
  test("an unknown email and a wrong password get the identical answer", async () => {
    const unknown = await login(h, "nobody@example.com", "some password");
    const wrong = await login(h, "alice@example.com", "some password");
    expect(unknown.status).toBe(401);
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual(unknown.body);
    expect(wrong.body.error).toBe("unauthorized");
    expect(headerPairs(wrong.headers)).toEqual(headerPairs(unknown.headers));
    expect(JSON.stringify(wrong.body)).not.toContain("some password");
  });

  test("the right password logs in (email case-insensitive) with a fresh session", async () => {
    const res = await login(h, "ALICE@example.com");
    expect(res.status).toBe(200);
    expect(res.body.token).toMatch(/^av_sess_[A-Za-z0-9_-]{43}$/);
    expect(res.body.token).not.toBe(reg);
    expect(res.body.user).toEqual({ id: expect.any(Number), email: "alice@example.com", role: "owner" });
  });

  test.each([
    ["password", "too short", { email: "alice@example.com", password: "short" }],
    ["email", "not an address", { email: "not-an-email", password: PASSWORD }],
    ["password", "missing", { email: "alice@example.com" }],
  ])("register: %s %s → 400 naming it", async (field, _why, body) => {
    const res = await h.call("POST", "/v1/auth/register", { body });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe(field);
  });

  test("missing, malformed and unknown bearer tokens → 401", async () => {
    expect((await h.call("GET", "/v1/auth/whoami")).status).toBe(401);
    expect((await h.call("GET", "/v1/auth/whoami", { headers: { authorization: "Basic abc" } })).status).toBe(401);
    expect(await status("av_sess_" + "A".repeat(43))).toBe(401);
    expect(await status(hashToken(reg))).toBe(401); // the stored hash is not a credential
  });
});

describe("change-password", () => {
  test("ends every session of the user, scoped ones included, and returns a working token", async () => {
    const secret = sentinel("auth");
    await setCredential(h, { token: reg }, "v1", "API_KEY", secret);
    const other = (await login(h, "alice@example.com")).body.token as string;
    const scoped = await mintScoped(h, { token: other }, "v1", { role: "proxy" });
    const bob = (await register(h, "bob@example.com")).token;
    for (const t of [reg, other, scoped.body.token, bob]) expect(await status(t)).toBe(200);

    const res = await h.call("POST", "/v1/auth/change-password", { token: reg, body: { current_password: PASSWORD, new_password: "a brand new password" } });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(["token"]);
    const fresh = res.body.token as string;
    expect(fresh).toMatch(/^av_sess_/);

    for (const t of [reg, other, scoped.body.token]) expect(await status(t)).toBe(401);
    expect(await status(bob)).toBe(200); // other users are untouched
    const me = await h.call("GET", "/v1/auth/whoami", { token: fresh });
    expect(me.body.kind).toBe("user");
    expect((await h.call("GET", "/v1/vaults/v1/credentials/API_KEY", { token: fresh })).body.value).toBe(secret);

    expect((await login(h, "alice@example.com")).status).toBe(401);
    expect((await login(h, "alice@example.com", "a brand new password")).status).toBe(200);
    const sessions = await h.call("GET", "/v1/auth/sessions", { token: fresh });
    expect(sessions.body.sessions).toHaveLength(2); // the fresh one and the new login
    expectNoLeak(h, secret, (r) => r.path === "/v1/vaults/v1/credentials/API_KEY" && r.method === "GET");
    for (const line of h.logs) expect(line).not.toContain("a brand new password");
    expectNoTokensInLogs(h);
  });

  test("a wrong current password changes nothing", async () => {
    const res = await h.call("POST", "/v1/auth/change-password", {
      token: reg,
      body: { current_password: "not my password", new_password: "a brand new password" },
    });
    expect(res.status).toBe(401);
    expect(await status(reg)).toBe(200);
    expect((await login(h, "alice@example.com")).status).toBe(200);
    expect((await login(h, "alice@example.com", "a brand new password")).status).toBe(401);
  });

  test("needs a user session (not an agent or scoped session)", async () => {
    const scoped = await mintScoped(h, { token: reg }, "v1");
    const res = await h.call("POST", "/v1/auth/change-password", {
      token: scoped.body.token,
      body: { current_password: PASSWORD, new_password: "a brand new password" },
    });
    expect(res.status).toBe(403);
    expect((await login(h, "alice@example.com")).status).toBe(200);
  });
});

describe("sessions", () => {
  test("the list shows public ids and no token, and marks the current session", async () => {
    const other = (await login(h, "alice@example.com")).body.token as string;
    const scoped = await mintScoped(h, { token: reg }, "v1", { role: "member", ttl_seconds: 3600 });
    const res = await h.call("GET", "/v1/auth/sessions", { token: other });
    expect(res.status).toBe(200);
    const list = res.body.sessions as any[];
    expect(list).toHaveLength(3);
    for (const s of list) {
      expect(s.id).toMatch(/^ses_[A-Za-z0-9_-]+$/);
      expect(Object.keys(s).sort()).toEqual([
        "address",
        "channel",
        "client",
        "created_at",
        "current",
        "expires_at",
        "id",
        "kind",
        "last_seen_at",
        "role",
        "vault",
      ]);
    }
    expect(list.filter((s) => s.current)).toHaveLength(1);
    const scopedView = list.find((s) => s.id === scoped.body.id);
    expect(scopedView).toEqual({
      id: scoped.body.id,
      kind: "scoped",
      vault: "v1",
      role: "member",
      channel: "api",
      client: null,
      address: null,
      created_at: expect.any(String),
      last_seen_at: expect.any(String),
      expires_at: scoped.body.expires_at,
      current: false,
    });
    const text = JSON.stringify(res.body);
    expect(text).not.toMatch(/av_(sess|agt|inv|uinv|appr)_/);
    for (const t of [reg, other, scoped.body.token]) {
      expect(text).not.toContain(t);
      expect(text).not.toContain(hashToken(t));
    }
    // Only user sessions may list.
    expect((await h.call("GET", "/v1/auth/sessions", { token: scoped.body.token })).status).toBe(403);
  });

  test("each session records how it was made, the creating client's User-Agent and address, and no token", async () => {
    const cli = { "user-agent": "broker-cli/0.1.0" };
    const viaCli = await h.call("POST", "/v1/auth/login", { body: { email: "alice@example.com", password: PASSWORD }, headers: cli, ip: "203.0.113.7" });
    const viaCurl = await h.call("POST", "/v1/auth/login", {
      body: { email: "alice@example.com", password: PASSWORD },
      headers: { "user-agent": "curl/8.5.0" },
      ip: "2001:db8::5",
    });
    const run = await h.call("POST", "/v1/sessions", { token: viaCli.body.token, body: { vault: "v1" }, headers: cli, ip: "203.0.113.8" });
    expect(run.status).toBe(201);
    const list = (await h.call("GET", "/v1/auth/sessions", { token: viaCli.body.token })).body.sessions as any[];
    const pick = (current: boolean, kind: string, client: string | null) => list.find((s) => s.current === current && s.kind === kind && s.client === client);
    expect(pick(true, "user", "broker-cli/0.1.0")).toMatchObject({ channel: "api", address: "203.0.113.7" });
    expect(pick(false, "user", "curl/8.5.0")).toMatchObject({ channel: "api", address: "2001:db8::5" });
    expect(pick(false, "scoped", "broker-cli/0.1.0")).toMatchObject({ channel: "api", address: "203.0.113.8", vault: "v1", id: run.body.id });
    const text = JSON.stringify(list);
    for (const t of [viaCli.body.token, viaCurl.body.token, run.body.token]) {
      expect(text).not.toContain(t);
      expect(text).not.toContain(hashToken(t));
    }
  });

  test("a User-Agent is kept cut to 256 characters", async () => {
    const long = `x-tool/${"9".repeat(400)}`;
    const res = await h.call("POST", "/v1/auth/login", { body: { email: "alice@example.com", password: PASSWORD }, headers: { "user-agent": long } });
    const mine = ((await h.call("GET", "/v1/auth/sessions", { token: res.body.token })).body.sessions as any[]).find((s) => s.current);
    expect(mine.client).toBe(long.slice(0, 256));
  });

  test("revoking by id ends that session only; someone else's id is 404", async () => {
    const other = (await login(h, "alice@example.com")).body.token as string;
    const list = (await h.call("GET", "/v1/auth/sessions", { token: reg })).body.sessions as { id: string; current: boolean }[];
    const target = list.find((s) => !s.current)!;
    expect((await h.call("DELETE", `/v1/auth/sessions/${target.id}`, { token: reg })).status).toBe(204);
    expect(await status(other)).toBe(401);
    expect(await status(reg)).toBe(200);
    expect((await h.call("DELETE", `/v1/auth/sessions/${target.id}`, { token: reg })).status).toBe(404);

    const bob = (await register(h, "bob@example.com")).token;
    const bobId = (await h.call("GET", "/v1/auth/whoami", { token: bob })).body.session.id;
    const res = await h.call("DELETE", `/v1/auth/sessions/${bobId}`, { token: reg });
    expect(res.status).toBe(404);
    expect(await status(bob)).toBe(200);
    expect((await h.call("DELETE", "/v1/auth/sessions/ses_nope", { token: reg })).status).toBe(404);
  });

  test("a scoped session can be revoked from the sessions list", async () => {
    const scoped = await mintScoped(h, { token: reg }, "v1");
    expect((await h.call("DELETE", `/v1/auth/sessions/${scoped.body.id}`, { token: reg })).status).toBe(204);
    expect(await status(scoped.body.token)).toBe(401);
  });

  test("logout ends the calling session only", async () => {
    const other = (await login(h, "alice@example.com")).body.token as string;
    const res = await h.call("POST", "/v1/auth/logout", { token: other });
    expect(res.status).toBe(204);
    expect(await status(other)).toBe(401);
    expect((await h.call("POST", "/v1/auth/logout", { token: other })).status).toBe(401);
    expect(await status(reg)).toBe(200);
    expectNoTokensInLogs(h);
  });
});
