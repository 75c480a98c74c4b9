// Attacks on the first-hour features (issue 34 follow-up): session activity, agent redeem, vault run's
// NO_PROXY, IP-literal proposals vs the network guard, effective settings, session client info, and doctor's
// use of a token against whatever answers on the port. A test named "found:" is what this attack found, fixed with it.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";
import { settingsToCheck } from "../../src/cli/kit/doctor-running.ts";
import { updateCliState, statePath } from "../../src/cli/kit/state.ts";
import { noProxyFor } from "../../src/cli/commands/vault-run.ts";
import { Secret } from "../../src/secret.ts";

const ROOT = resolve(import.meta.dir, "..", "..");
const METRICS_SECRET = `metrics_${crypto.randomUUID()}`;
const CRED = `sk_fha_${crypto.randomUUID()}`;

let upstream: TestUpstream;
let broker: Broker;
const outputs: string[] = [];
const tokens: string[] = []; // every token minted here: none may appear in outputs or logs
const dirs: string[] = [];

function tmp(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

beforeAll(async () => {
  upstream = await startUpstream(undefined, { names: { dns: ["pay.test"], ips: ["127.0.0.1"] } });
  broker = await startBroker({ caPem: upstream.pki.caPem, env: { BROKER_METRICS_TOKEN: METRICS_SECRET } });
  broker.dns.set("pay.test", ["127.0.0.1"]);
  await broker.setCredential("PAY_KEY", CRED);
  tokens.push(broker.userToken, broker.sessionToken);
});

afterAll(async () => {
  await expectNoLeak(broker, CRED, outputs);
  for (const t of tokens) await expectNoLeak(broker, t, outputs);
  await expectNoLeak(broker, METRICS_SECRET, outputs);
  await broker?.stop();
  await upstream?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function api(method: string, path: string, body?: unknown, token?: string) {
  const r = await broker.api(method, path, body, token);
  outputs.push(String(JSON.stringify(r.body)));
  r.headers.forEach((v, k) => outputs.push(`${k}: ${v}`));
  return r;
}

async function mintScoped(): Promise<{ id: string; token: string }> {
  // The token is in this answer by design (shown once): not kept among the leak-checked outputs.
  const r = await broker.api("POST", "/v1/sessions", { vault: broker.vault, role: "proxy" }, broker.userToken);
  expect(r.status).toBe(201);
  tokens.push(r.body.token);
  return { id: r.body.id, token: r.body.token };
}

async function mintAgent(): Promise<string> {
  const inv = await api("POST", `/v1/vaults/${broker.vault}/agent-invites`, {}, broker.userToken);
  expect(inv.status).toBe(201);
  const res = await fetch(inv.body.invite_url.replace(/^https?:\/\/[^/]+/, broker.apiUrl), { method: "POST" });
  const body = (await res.json()) as any;
  expect(res.status).toBe(201);
  tokens.push(body.token);
  return body.token;
}

describe("GET /v1/sessions/{id}/activity", () => {
  test("held: only the session itself reads it; another session, the minting person, an agent and no token get nothing", async () => {
    const a = await mintScoped();
    const b = await mintScoped();
    const agent = await mintAgent();
    const own = await api("GET", `/v1/sessions/${a.id}/activity`, undefined, a.token);
    expect(own.status).toBe(200);
    expect(own.body).toEqual({ id: a.id, connects: 0, unmatched_hosts: [] });
    for (const [who, token] of [
      ["another session", b.token],
      ["the owner", broker.userToken],
      ["an agent", agent],
    ] as const) {
      const r = await api("GET", `/v1/sessions/${a.id}/activity`, undefined, token);
      expect({ who, status: r.status }).toEqual({ who, status: 404 });
    }
    const anon = await api("GET", `/v1/sessions/${a.id}/activity`);
    expect(anon.status).toBe(401);
  });

  test("held: wait is bounded (0-30) and junk is refused; a waiting read answers when its time is up", async () => {
    const a = await mintScoped();
    for (const q of ["wait=31", "wait=-1", "wait=abc", "wait=1e9", "after=-5", "after=x"]) {
      const r = await api("GET", `/v1/sessions/${a.id}/activity?${q}`, undefined, a.token);
      expect({ q, status: r.status }).toEqual({ q, status: 400 });
    }
    const t0 = Date.now();
    const r = await api("GET", `/v1/sessions/${a.id}/activity?wait=1`, undefined, a.token);
    expect(r.status).toBe(200);
    expect(Date.now() - t0).toBeLessThan(5000);
  });
});

describe("GET /v1/owner/effective-settings", () => {
  test("held: owner only (scoped session, agent token, no token refused) and no secret in it", async () => {
    const owner = await api("GET", "/v1/owner/effective-settings", undefined, broker.userToken);
    expect(owner.status).toBe(200);
    const text = JSON.stringify(owner.body);
    expect(text).not.toContain(METRICS_SECRET);
    expect(text.toLowerCase()).not.toContain("password");
    expect(Object.keys(owner.body).sort()).toEqual(
      [
        "allow_private_ranges",
        "api_port",
        "bind_host",
        "database",
        "host_mappings",
        "network_allowlist",
        "oidc_issuer",
        "proxy_port",
        "public_url",
        "rate_limit_profile",
      ].sort(),
    );
    const agent = await mintAgent();
    expect((await api("GET", "/v1/owner/effective-settings", undefined, broker.sessionToken)).status).toBe(403);
    expect((await api("GET", "/v1/owner/effective-settings", undefined, agent)).status).toBe(403);
    expect((await api("GET", "/v1/owner/effective-settings")).status).toBe(401);
  });
});

describe("proposals naming an IP literal: the guard's verdict is egress's verdict", () => {
  test("held: every spelling of a blocked address is refused, and none the guard passes is blocked at egress", async () => {
    const apiPort = Number(new URL(broker.apiUrl).port);
    const denied = await broker.proxy(`127.0.0.1:${upstream.port}`, "/v1/x");
    expect(denied.status).toBe(403);
    const hint = (await denied.json()).proposal_hint;
    const spellings = [
      "169.254.169.254",
      "::ffff:169.254.169.254",
      "[::ffff:169.254.169.254]",
      "[::ffff:a9fe:a9fe]",
      "[0:0:0:0:0:ffff:a9fe:a9fe]:443",
      "[64:ff9b::a9fe:a9fe]",
      "[2002:a9fe:a9fe::1]",
      "[::169.254.169.254]",
      "0.0.0.0",
      "[::]",
      "255.255.255.255",
      "2130706433",
      "0x7f000001",
      "0177.0.0.1",
      "127.1",
      "0x7f.0.0.1",
      "169.254.169.254.",
      "[fe80::1%25eth0]",
      `127.0.0.1:${apiPort}`,
      `[::ffff:127.0.0.1]:${apiPort}`,
      `[::1]:${apiPort}`,
      `[::ffff:127.0.0.1]:${upstream.port}`,
      "10.0.0.1",
      "[fd00::1]",
    ];
    const mismatches: string[] = [];
    for (const host of spellings) {
      const p = structuredClone(hint.proposal);
      p.services[0].host = host;
      const filed = await api("POST", "/v1/proposals", p, broker.sessionToken);
      expect({ host, ok: filed.status === 201 || filed.status === 400 }).toEqual({ host, ok: true });
      if (filed.status !== 201) continue;
      // The guard passed it: the owner saves the same host, and egress must not block it.
      const added = await api("POST", `/v1/vaults/${broker.vault}/services`, { host, auth: { type: "bearer", token: "PAY_KEY" } }, broker.userToken);
      if (added.status !== 201) continue;
      const res = await broker.proxy(added.body.host ?? host, "/v1/x");
      const body = await res.text();
      outputs.push(body);
      if (res.status === 403 && body.includes("egress_blocked")) mismatches.push(host);
      await api("DELETE", `/v1/vaults/${broker.vault}/services/${encodeURIComponent(added.body.host ?? host)}`, undefined, broker.userToken);
    }
    expect(mismatches).toEqual([]);
    // Only the allow-listed upstream spelled in decimal was accepted among these.
    for (const host of spellings.filter((h) => !h.endsWith(`:${upstream.port}`))) {
      const p = structuredClone(hint.proposal);
      p.services[0].host = host;
      const filed = await api("POST", "/v1/proposals", p, broker.sessionToken);
      expect({ host, status: filed.status }).toEqual({ host, status: 400 });
    }
  });
});

describe("vault run's NO_PROXY", () => {
  test("held: a fixed list, never built from service names (no comma/newline injection, no size)", () => {
    expect(noProxyFor(["evil.test,*\nLD_PRELOAD=/tmp/x", "a".repeat(10_000)])).toBe("localhost,127.0.0.1");
    expect(noProxyFor(["127.0.0.2:8443"])).toBe("");
    expect(noProxyFor(["[::1]:8443"])).toBe("");
    expect(noProxyFor(["*.localhost"])).toBe("");
  });

  // Found (low, fixed): Python requests (should_bypass_proxies) and urllib treat a NO_PROXY entry as a plain
  // suffix: `localhost` bypasses the proxy for `api.devlocalhost`, a valid service host. That service's
  // traffic then skips the broker (fails without its credential, and is not audited).
  test("found: no service host is bypassed by a suffix-matching client (Python requests' rule)", () => {
    for (const host of ["api.devlocalhost", "mylocalhost:8443"]) {
      const noProxy = noProxyFor([host]);
      const name = host.replace(/:\d+$/, "");
      const bypassed = noProxy
        .split(",")
        .filter(Boolean)
        .some((entry) => name.endsWith(entry) || host.endsWith(entry));
      expect({ host, bypassed }).toEqual({ host, bypassed: false });
    }
  });
});

describe("broker doctor against whatever answers on the port", () => {
  async function listen() {
    const seen: string[] = [];
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch(req) {
        seen.push(req.headers.get("authorization") ?? "");
        return Response.json({
          bind_host: "0.0.0.0",
          api_port: 1,
          proxy_port: null,
          public_url: null,
          allow_private_ranges: true,
          network_allowlist: [],
          host_mappings: [],
          database: "sqlite",
          oidc_issuer: null,
          rate_limit_profile: "off",
        });
      },
    });
    return { seen, server, port: server.port };
  }
  const config = (port: number) => ({ bindHost: "127.0.0.1", apiPort: port, allowPrivateRanges: false, networkAllowlist: [], publicUrl: undefined }) as any;

  test("held: a login saved for another server is never sent to the process on the port", async () => {
    const fake = await listen();
    try {
      const dir = tmp("fha-doctor-");
      const saved = `av_sess_${crypto.randomUUID()}`;
      updateCliState(dir, { address: "https://broker.example.com", token: new Secret(saved), email: "owner@example.com", vault: null });
      const r = await settingsToCheck(config(fake.port!), { BROKER_CONFIG_DIR: dir });
      expect(fake.seen.join("\n")).not.toContain(saved);
      expect(JSON.stringify(r)).not.toContain(saved);
    } finally {
      fake.server.stop(true);
    }
  });

  // Found (medium, fixed): BROKER_SESSION_TOKEN (set by `vault run` for its child, or by an owner for a remote
  // broker via BROKER_ADDR) is sent by doctor to http://127.0.0.1:<BROKER_PORT>, whatever listens there,
  // although BROKER_ADDR names another server: openContext sends an env token to any address.
  test("found: BROKER_SESSION_TOKEN for BROKER_ADDR=another server is not sent to the local port", async () => {
    const fake = await listen();
    try {
      const dir = tmp("fha-doctor-env-");
      const envToken = `av_sess_${crypto.randomUUID()}`;
      const r = await settingsToCheck(config(fake.port!), {
        BROKER_CONFIG_DIR: dir,
        BROKER_ADDR: "https://broker.example.com",
        BROKER_SESSION_TOKEN: envToken,
      });
      expect(JSON.stringify(r)).not.toContain(envToken);
      expect(fake.seen.join("\n")).not.toContain(envToken);
    } finally {
      fake.server.stop(true);
    }
  });
});

describe("broker agent redeem with a hostile link", () => {
  async function cli(args: string[], configDir: string, env: Record<string, string> = {}) {
    const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: configDir, BROKER_CONFIG_DIR: join(configDir, "config"), ...env },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    outputs.push(stdout, stderr);
    return { code, stdout, stderr };
  }
  function hostile(answer: (req: Request) => Response) {
    const seen: string[] = [];
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch(req) {
        seen.push(`${req.method} ${new URL(req.url).pathname} auth=${req.headers.get("authorization") ?? ""}`);
        return answer(req);
      },
    });
    return { seen, server, base: `http://127.0.0.1:${server.port}` };
  }
  const redeemed = (name: string, vault: string) =>
    Response.json({ token: `av_agt_${crypto.randomUUID()}`, agent: { name }, vaults: [{ name: vault, role: "proxy" }], expires_at: null }, { status: 201 });

  test("held: a person's saved login is neither replaced nor sent to another server's link", async () => {
    const home = tmp("fha-redeem-person-");
    const login = await broker.api("POST", "/v1/auth/login", { email: "owner@example.com", password: "correct horse battery" });
    const personToken: string = login.body.token;
    tokens.push(personToken);
    updateCliState(join(home, "config"), { address: broker.apiUrl, token: new Secret(personToken), email: "owner@example.com", vault: null });
    const evil = hostile(() => redeemed("x", "y"));
    try {
      const r = await cli(["agent", "redeem", `${evil.base}/invite/av_inv_abc`], home);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("logged in as a person");
      expect(evil.seen.join("\n")).not.toContain(personToken);
      expect(JSON.parse(readFileSync(statePath(join(home, "config")), "utf8")).token).toBe(personToken);
      // With --replace-login, the link's server is asked anonymously: the person's token never goes there.
      await cli(["agent", "redeem", "--replace-login", `${evil.base}/invite/av_inv_abc`], home);
      expect(evil.seen.join("\n")).not.toContain(personToken);
      expect(evil.seen.every((s) => s.endsWith("auth="))).toBe(true);
    } finally {
      evil.server.stop(true);
    }
  });

  test("held: a link that redirects (to the real broker) saves nothing", async () => {
    const home = tmp("fha-redeem-redirect-");
    const evil = hostile(() => new Response(null, { status: 307, headers: { location: `${broker.apiUrl}/invite/av_inv_abc` } }));
    try {
      const r = await cli(["agent", "redeem", `${evil.base}/invite/av_inv_abc`], home);
      expect(r.code).not.toBe(0);
      expect(existsSync(statePath(join(home, "config"))) && JSON.parse(readFileSync(statePath(join(home, "config")), "utf8")).token).toBeFalsy();
    } finally {
      evil.server.stop(true);
    }
  });

  test("held: a real redeem saves the agent token 0600 in a 0700 directory and never prints it", async () => {
    const home = tmp("fha-redeem-real-");
    const inv = await api("POST", `/v1/vaults/${broker.vault}/agent-invites`, {}, broker.userToken);
    const link = inv.body.invite_url.replace(/^https?:\/\/[^/]+/, broker.apiUrl);
    const r = await cli(["agent", "redeem", link], home);
    expect(r.code).toBe(0);
    const file = statePath(join(home, "config"));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, "config")).mode & 0o777).toBe(0o700);
    const saved = JSON.parse(readFileSync(file, "utf8"));
    tokens.push(saved.token);
    expect(saved.token).toStartWith("av_agt_");
    expect(saved.address).toBe(broker.apiUrl);
    expect(r.stdout + r.stderr).not.toContain(saved.token);
  });

  // Found (low, fixed): the link's server writes the agent and vault names to the agent's terminal as they are:
  // escape sequences (retitle the window, rewrite earlier lines, OSC 52 clipboard writes) pass through.
  test("found: control characters from the link's answer never reach the terminal", async () => {
    const home = tmp("fha-redeem-ansi-");
    const evil = hostile(() => redeemed("bot\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2K\rRedeemed: agent ok", "v\x1b[31mred"));
    try {
      const r = await cli(["agent", "redeem", `${evil.base}/invite/av_inv_abc`], home);
      expect(r.stdout + r.stderr).not.toContain("\x1b");
    } finally {
      evil.server.stop(true);
    }
  });
  // Found (low, fixed): the CLI read an answer whole however large, so a link leading to an endless
  // stream could exhaust the agent's memory. Answers are now read no further than 64 MiB.
  test("found: an endless answer from the link's server is cut off with a clear error, nothing saved", async () => {
    const home = tmp("fha-redeem-endless-");
    const chunk = new Uint8Array(1024 * 1024).fill(0x20);
    const evil = hostile(
      () =>
        new Response(
          new ReadableStream({
            pull(ctrl) {
              ctrl.enqueue(chunk);
            },
          }),
          { status: 201, headers: { "content-type": "application/json" } },
        ),
    );
    try {
      const r = await cli(["agent", "redeem", `${evil.base}/invite/av_inv_abc`], home);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("larger than 67108864 bytes, more than any broker sends");
    } finally {
      evil.server.stop(true);
    }
  });
});

describe("session client info on the Account page", () => {
  let accountHtml = "";
  function cookiesOf(res: Response, jar: Map<string, string>) {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const i = pair!.indexOf("=");
      jar.set(pair!.slice(0, i), pair!.slice(i + 1));
    }
  }
  const cookieHeader = (jar: Map<string, string>) => [...jar].map(([k, v]) => `${k}=${v}`).join("; ");

  test("held: an HTML User-Agent is escaped, and X-Forwarded-For is not believed without a trusted proxy", async () => {
    const jar = new Map<string, string>();
    const page = await fetch(`${broker.apiUrl}/`, { redirect: "manual", headers: { accept: "text/html" } });
    cookiesOf(page, jar);
    const html = await page.text();
    const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1];
    expect(csrf).toBeTruthy();
    const ua = `<img/src=x/onerror=alert(1)>${"A".repeat(6000)}`;
    const form = new URLSearchParams({ email: "owner@example.com", password: "correct horse battery", csrf: csrf! });
    const signed = await fetch(`${broker.apiUrl}/login`, {
      method: "POST",
      redirect: "manual",
      body: form,
      headers: {
        accept: "text/html",
        cookie: cookieHeader(jar),
        origin: broker.apiUrl,
        "content-type": "application/x-www-form-urlencoded",
        "user-agent": ua,
        "x-forwarded-for": "6.6.6.6",
      },
    });
    expect([302, 303]).toContain(signed.status);
    cookiesOf(signed, jar);
    const account = await fetch(`${broker.apiUrl}/account`, { headers: { accept: "text/html", cookie: cookieHeader(jar) } });
    const body = await account.text();
    outputs.push(body);
    expect(account.status).toBe(200);
    expect(body).not.toContain("<img/src=x");
    expect(body).toContain("&lt;img");
    expect(body).not.toContain("6.6.6.6");
    expect(body).toContain("127.0.0.1");
    for (const l of broker.logLines) expect(l.includes("<img/src=x")).toBe(false);
    accountHtml = body;
  });

  // A 6,000-character User-Agent is kept and shown cut (a few hundred characters), escaped.
  test("held: a very long User-Agent is cut before it is stored and shown", () => {
    expect(accountHtml).toContain("&lt;img");
    expect(accountHtml).not.toContain("A".repeat(500));
  });
});
