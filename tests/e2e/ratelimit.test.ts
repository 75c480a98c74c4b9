// Rate limits on real listeners: the PROXY tier on /proxy (per principal and vault) on a movable server clock,
// the one PROXY budget shared by /proxy and the tunnel (CONNECT and each request inside it), the GLOBAL
// in-flight ceiling across the API and the tunnel, settings surviving a restart (and pinned by the lock),
// and `broker owner settings set --ratelimit` through the compiled CLI.

import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ServerResponse } from "node:http";
import { loadConfig } from "../../src/config.ts";
import { createMemoryLogger } from "../../src/log.ts";
import { startServer } from "../../src/app/start.ts";
import { CHEAP_KDF, createClock } from "../helpers/api.ts";
import { cleanEnv, isolatedBinary, runBinary, startBinaryServer, tempDir } from "../helpers/binary.ts";
import { expectEnvelope } from "./proxy-fixture.ts";
import { basicProxyAuth, dialProxy, openTunnel, sendConnect, startTunnelEnv, type Conn, type TunnelEnv } from "./tunnel-fixture.ts";

const cleanup: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => {});
});

async function tunnelEnv(env: Record<string, string>, opts: Parameters<typeof startTunnelEnv>[0] = {}): Promise<TunnelEnv> {
  const t = await startTunnelEnv({ ...opts, env: { BROKER_RATELIMIT_PROFILE: "default", ...env } });
  cleanup.push(() => t.stop());
  return t;
}

/** Another principal on the fixture's vault: an agent with a proxy grant (scoped sessions count against their minter). */
async function addAgent(t: TunnelEnv, name = "bot"): Promise<string> {
  const inv = await t.broker.api("POST", `/v1/vaults/${t.broker.vault}/agent-invites`, { name, role: "proxy" }, t.broker.userToken);
  expect(inv.status).toBe(201);
  const red = await t.broker.api("POST", new URL(inv.body.invite_url).pathname);
  expect(red.status).toBe(201);
  return red.body.token;
}

const proxyAs = (t: TunnelEnv, token: string, vault?: string) =>
  t.broker.proxy(t.authority, "/x", { headers: { authorization: `Bearer ${token}`, ...(vault ? { "x-vault": vault } : {}) } });

async function inner(conn: Conn, t: TunnelEnv, path = "/inner") {
  conn.write(`GET ${path} HTTP/1.1\r\nHost: ${t.authority}\r\n\r\n`);
  return conn.readResponse();
}

async function expectLimitedFetch(res: Response, limit: number): Promise<any> {
  const retry = res.headers.get("retry-after");
  expect(res.headers.get("ratelimit-limit")).toBe(String(limit));
  expect(res.headers.get("ratelimit-remaining")).toBe("0");
  expect(retry).toMatch(/^[1-9]\d*$/);
  return expectEnvelope(res, 429, "rate_limited");
}

function expectLimitedRaw(r: { status: number; headers: Record<string, string>; body: Buffer }, limit: number): void {
  expect(r.status).toBe(429);
  expect(r.headers["x-broker-error"]).toBe("rate_limited");
  expect(JSON.parse(r.body.toString()).error).toBe("rate_limited");
  expect(r.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
  expect(r.headers["ratelimit-limit"]).toBe(String(limit));
}

describe("PROXY tier on /proxy (movable server clock)", () => {
  test("burst 4 per (principal, vault); another principal, and the same principal in another vault, are unaffected; a scoped session shares its minter's budget", async () => {
    const clock = createClock(Date.now());
    const t = await tunnelEnv({ BROKER_RATELIMIT_PROXY_BURST: "4", BROKER_RATELIMIT_PROXY_RPS: "1" }, { now: clock.now });
    const b = t.broker;
    // A second vault with the same service, for the owner's own (user) principal.
    expect((await b.api("POST", "/v1/vaults", { name: "second" }, b.userToken)).status).toBe(201);
    expect((await b.api("PUT", "/v1/vaults/second/credentials/API_KEY", { value: t.secret }, b.userToken)).status).toBe(200);
    expect((await b.api("POST", "/v1/vaults/second/services", { host: t.authority, auth: { type: "bearer", token: "API_KEY" } }, b.userToken)).status).toBe(
      201,
    );

    for (let i = 0; i < 4; i++) expect((await proxyAs(t, b.userToken, b.vault)).status).toBe(200);
    const denied = await expectLimitedFetch(await proxyAs(t, b.userToken, b.vault), 4);
    expect(denied.retry_after).toBe(1);
    const upstreamSeen = t.upstream.received.length;
    expect((await proxyAs(t, b.userToken, b.vault)).status).toBe(429);
    expect(t.upstream.received.length).toBe(upstreamSeen); // refused before any upstream call

    expect((await proxyAs(t, b.userToken, "second")).status).toBe(200); // same principal, other vault
    const agent = await addAgent(t);
    expect((await proxyAs(t, agent, b.vault)).status).toBe(200); // other principal, same vault
    // The fixture's scoped session was minted by the owner: it draws on the owner's (principal, vault) budget.
    await expectLimitedFetch(await proxyAs(t, b.sessionToken), 4);
    expect((await b.api("GET", "/v1/vaults", undefined, b.userToken)).status).toBe(200); // AUTHED is a separate budget

    clock.advance(1000);
    expect((await proxyAs(t, b.userToken, b.vault)).status).toBe(200);
    expect((await proxyAs(t, b.userToken, b.vault)).status).toBe(429);
  });

  test("profile off never limits, whatever the knobs say", async () => {
    const t = await tunnelEnv({ BROKER_RATELIMIT_PROFILE: "off", BROKER_RATELIMIT_PROXY_BURST: "1", BROKER_RATELIMIT_PROXY_RPS: "0.001" });
    for (let i = 0; i < 10; i++) {
      const res = await proxyAs(t, t.broker.sessionToken);
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit-limit")).toBeNull();
      await res.arrayBuffer();
    }
    const { conn } = await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem });
    for (let i = 0; i < 5; i++) expect((await inner(conn, t)).status).toBe(200);
    conn.close();
  });
});

describe("one PROXY budget for /proxy and the tunnel", () => {
  test("burst 4: three /proxy calls + the CONNECT spend it; the first request inside the tunnel is 429; the clock refills it", async () => {
    const clock = createClock(Date.now());
    const t = await tunnelEnv({ BROKER_RATELIMIT_PROXY_BURST: "4", BROKER_RATELIMIT_PROXY_RPS: "1" }, { now: clock.now });
    for (let i = 0; i < 3; i++) expect((await proxyAs(t, t.broker.sessionToken)).status).toBe(200);
    const { conn } = await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem }); // the 4th token
    const first = await inner(conn, t);
    expectLimitedRaw(first, 4);
    expect(t.upstream.received.filter((r) => r.url === "/inner")).toHaveLength(0);
    // The tunnel stays usable: once the clock has refilled two tokens, two requests pass and the third is refused.
    clock.advance(2000);
    expect((await inner(conn, t)).status).toBe(200);
    expect((await inner(conn, t)).status).toBe(200);
    expectLimitedRaw(await inner(conn, t), 4);
    // ... and /proxy sees the same empty bucket.
    await expectLimitedFetch(await proxyAs(t, t.broker.sessionToken), 4);
    conn.close();
  });

  test("four /proxy calls leave nothing: the CONNECT itself is refused with a 429 envelope; another principal still connects", async () => {
    const clock = createClock(Date.now());
    const t = await tunnelEnv({ BROKER_RATELIMIT_PROXY_BURST: "4", BROKER_RATELIMIT_PROXY_RPS: "1" }, { now: clock.now });
    for (let i = 0; i < 4; i++) expect((await proxyAs(t, t.broker.sessionToken)).status).toBe(200);
    const sock = await dialProxy(t.proxyPort);
    const res = await sendConnect(sock, t.authority, t.proxyAuth);
    expect(res.status).toBe(429);
    expect(res.headers["x-broker-error"]).toBe("rate_limited");
    expect(res.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
    sock.destroy();
    const agent = await addAgent(t);
    const { conn } = await openTunnel(t.proxyPort, t.authority, basicProxyAuth(agent, t.broker.vault), { ca: t.caPem });
    expect((await inner(conn, t)).status).toBe(200);
    conn.close();
  });
});

describe("GLOBAL in-flight ceiling across the API and the tunnel", () => {
  test("3 requests held open against a slow upstream: the 4th (API or tunnel) is refused; released, all pass", async () => {
    const held: ServerResponse[] = [];
    let hold = true;
    const t = await tunnelEnv(
      { BROKER_RATELIMIT_GLOBAL_INFLIGHT: "3" },
      {
        handler: (_req, res) => {
          if (!hold) return void res.end("ok");
          held.push(res);
        },
      },
    );
    const { conn } = await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem }); // CONNECT takes no slot
    const pending = [0, 1, 2].map(() => proxyAs(t, t.broker.sessionToken));
    const deadline = Date.now() + 15_000;
    while (held.length < 3 && Date.now() < deadline) await Bun.sleep(20);
    expect(held).toHaveLength(3);

    const health = await fetch(`${t.broker.apiUrl}/health`);
    const body = await expectLimitedFetch(health, 3);
    expect(body.message).toContain("in flight");
    expect(health.headers.get("retry-after")).toBe("1");
    expectLimitedRaw(await inner(conn, t), 3);
    expect((await fetch(`${t.broker.apiUrl}/health`)).status).toBe(429);

    hold = false;
    for (const res of held) res.end("ok");
    for (const res of await Promise.all(pending)) expect(res.status).toBe(200);
    expect((await fetch(`${t.broker.apiUrl}/health`)).status).toBe(200);
    expect((await inner(conn, t)).status).toBe(200);
    conn.close();
  });
});

describe("rate-limit settings across restarts", () => {
  test("saved settings apply after a restart on the same data dir; BROKER_RATELIMIT_LOCK pins them to the environment", async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-ratelimit-restart-"));
    cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
    const clock = createClock(Date.now()); // stands still: Argon2id time must not refill the AUTH bucket
    const boot = (env: Record<string, string> = {}) =>
      startServer({
        config: loadConfig({ BROKER_DATA_DIR: join(dir, "data"), BROKER_PORT: "0", BROKER_PROXY_PORT: "0", ...env }),
        log: createMemoryLogger(),
        masterPassword: undefined,
        passwordKdf: CHEAP_KDF,
        now: clock.now,
      });
    const call = async (url: string, method: string, path: string, body?: unknown, token?: string) => {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: await res.json().catch(() => undefined), headers: res.headers };
    };
    const creds = { email: "owner@example.com", password: "correct horse battery" };

    let s = await boot();
    const owner = (await call(s.apiUrl, "POST", "/v1/auth/register", creds)).body.token;
    const patched = await call(s.apiUrl, "PATCH", "/v1/owner/settings", { rate_limits: { proxy: { rps: 100 }, auth: { burst: 3 } } }, owner);
    expect(patched.status).toBe(200);
    expect(patched.body.rate_limits.proxy).toEqual({ rps: 100, burst: 200 });
    await s.stop();

    s = await boot();
    const login = await call(s.apiUrl, "POST", "/v1/auth/login", creds);
    expect(login.status).toBe(200);
    const got = await call(s.apiUrl, "GET", "/v1/owner/settings", undefined, login.body.token);
    expect(got.body.rate_limits).toMatchObject({ locked: false, proxy: { rps: 100, burst: 200 }, auth: { rps: 5, burst: 3 } });
    expect((await call(s.apiUrl, "POST", "/v1/auth/login", { ...creds, password: "wrong password" })).status).toBe(401);
    expect((await call(s.apiUrl, "POST", "/v1/auth/login", { ...creds, password: "wrong password" })).status).toBe(401);
    const limited = await call(s.apiUrl, "POST", "/v1/auth/login", creds);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("ratelimit-limit")).toBe("3");
    await s.stop();

    s = await boot({ BROKER_RATELIMIT_LOCK: "true", BROKER_RATELIMIT_PROXY_BURST: "300" });
    cleanup.push(() => s.stop());
    const token = (await call(s.apiUrl, "POST", "/v1/auth/login", creds)).body.token;
    const locked = await call(s.apiUrl, "GET", "/v1/owner/settings", undefined, token);
    expect(locked.body.rate_limits).toMatchObject({ locked: true, proxy: { rps: 50, burst: 300 }, auth: { rps: 5, burst: 20 } });
    const refused = await call(s.apiUrl, "PATCH", "/v1/owner/settings", { rate_limits: { proxy: { rps: 100 } } }, token);
    expect(refused.status).toBe(403);
    expect(refused.body.message).toContain("BROKER_RATELIMIT_LOCK");
  });
});

describe("broker owner settings (compiled CLI)", () => {
  const { bin, dir } = isolatedBinary();
  const password = "owner password 123";

  async function ownerOf(serverEnv: Record<string, string>) {
    const server = await startBinaryServer(bin, cleanEnv({ BROKER_DATA_DIR: join(tempDir(), "data"), ...serverEnv }), dir);
    cleanup.push(() => server.stop());
    const env = cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-cli-"), "config") });
    const reg = await runBinary(bin, ["auth", "register", "--email", "owner@example.com", "--password-stdin", "--address", server.url], {
      env,
      stdin: `${password}\n`,
      cwd: dir,
    });
    expect(reg.exitCode).toBe(0);
    return { env, cli: (args: string[]) => runBinary(bin, args, { env, cwd: dir }) };
  }

  test("set --ratelimit proxy.rps=100 shows and keeps the new numbers", async () => {
    const { cli } = await ownerOf({});
    const set = await cli(["owner", "settings", "set", "--ratelimit", "proxy.rps=100,proxy.burst=400"]);
    expect(set.exitCode).toBe(0);
    expect(set.stdout).toMatch(/proxy \(per principal and vault\)\s+100\/s, burst 400/);
    expect(set.stdout).toContain("profile default");
    const got = JSON.parse((await cli(["owner", "settings", "get", "--json"])).stdout);
    expect(got.rate_limits).toMatchObject({ locked: false, proxy: { rps: 100, burst: 400 }, authed: { rps: 20, burst: 100 } });
    const bad = await cli(["owner", "settings", "set", "--ratelimit", "proxy.burst=0"]);
    expect(bad.exitCode).not.toBe(0);
    expect(bad.stdout + bad.stderr).toContain("proxy.burst");
  });

  test("against a locked server the CLI fails and names BROKER_RATELIMIT_LOCK", async () => {
    const { cli } = await ownerOf({ BROKER_RATELIMIT_LOCK: "true" });
    const set = await cli(["owner", "settings", "set", "--ratelimit", "proxy.rps=100"]);
    expect(set.exitCode).not.toBe(0);
    expect(set.stdout + set.stderr).toContain("BROKER_RATELIMIT_LOCK");
    expect((await cli(["owner", "settings", "get"])).stdout).toContain("read-only");
  });
});
