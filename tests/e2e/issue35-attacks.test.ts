// Issue 35 attacks, from outside (in-process brokers on SQLite, and two compiled instances on PostgreSQL):
// (a) redaction after edits: an upstream that stores whatever it receives replays it to anyone, and vault
//     B's agent must never read vault A's value, whatever edits race A's request (bursts, a large vault,
//     new services and credentials, wildcards, rotations, deletions, a restart, two instances);
// (b) plans by host: spellings of a host match exactly as before, and edits take effect on the next request;
// (c) paging: hostile limits and cursors get 400 in the envelope or a correct page, never 500 or another's rows;
// (d) the audit journal: never a header value, query string, token or credential; a broken journal file;
// (e) /health and the breaker: unauthenticated floods, and a member's slow statement.
// Every value is compared without printing it.

import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cleanEnv, collectOutput } from "../helpers/binary.ts";
import { bearer } from "../helpers/big-vault.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { callApi, dumpResponse, startBroker, type Broker } from "./proxy-fixture.ts";
import { basicProxyAuth, dialProxy as dialProxySocket, openTunnel, type Conn } from "./tunnel-fixture.ts";
import { pgMissing, sharedPgCluster, type SharedPgCluster } from "../helpers/postgres.ts";
import {
  buildFreshBinary,
  createRecorder,
  findLeak,
  queryDb,
  spawnInstance,
  stopAllInstances,
  type Instance,
  type Recorder,
} from "./multi-instance-fixture.ts";

/** Longer than a change announcement takes to reach the other instance (15-500 ms measured under load). */
const NOTIFIED_MS = 500;

// ---------------------------------------------------------------------------------------------------------
// The storing upstream: every request's Authorization, URL and body are kept, and every answer replays the
// last ones, in the body and in a header, to whoever asks.

const kept: string[] = [];
function storing(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  kept.push(`${req.headers.authorization ?? ""} ${req.url} ${body.toString("latin1")}`);
  res.setHeader("content-type", "application/json");
  res.setHeader("x-replay", (req.headers.authorization ?? "").slice(0, 200) || "none");
  res.end(JSON.stringify({ replay: kept.slice(-40) }));
}

const NAMES = ["localhost", "upstream.test", "api.test", "*.wild.test", "xn--bcher-kva.test", "*.big.test", "api443.test"];
let up: TestUpstream;
/** An upstream on port 443 of a loopback address of its own: a service without a port, asked with and without ":443". */
let up443: TestUpstream;
const ADDRESS_443 = "127.77.35.1";
let broker: Broker;
let P: number; // the upstream's port
let caPem: string; // the broker's root CA, for tunnels
const outputs: string[] = []; // every answer an agent of another vault read (leak checks)
const secrets: string[] = []; // every value any test stored

const uniq = (tag: string) => `sk-${tag}-${Buffer.from(crypto.getRandomValues(new Uint8Array(18))).toString("base64url")}`;

async function must(method: string, path: string, body: unknown, token: string, status: number): Promise<any> {
  const r = await broker.api(method, path, body, token);
  if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}
const owner = () => broker.userToken;

/** A vault with services on the upstream, and a proxy-role session for it. */
async function vault(name: string, services: { host: string; auth: Record<string, unknown> }[], creds: Record<string, string> = {}) {
  await must("POST", "/v1/vaults", { name }, owner(), 201);
  for (const [k, v] of Object.entries(creds)) await must("PUT", `/v1/vaults/${name}/credentials/${k}`, { value: v }, owner(), 200);
  for (const s of services) await must("POST", `/v1/vaults/${name}/services`, s, owner(), 201);
  return { name, token: (await must("POST", "/v1/sessions", { vault: name, role: "proxy" }, owner(), 201)).token as string };
}

/** One call as an agent of `v`, through /proxy or the CONNECT tunnel; returns the whole answer as text. */
async function call(v: { name: string; token: string }, via: "proxy" | "tunnel", host: string, path = "/bin"): Promise<{ status: number; text: string }> {
  const res =
    via === "proxy"
      ? await fetch(`${broker.apiUrl}/proxy/${host}${path}`, { headers: { authorization: `Bearer ${v.token}` } })
      : await fetch(`https://${host}${path}`, {
          proxy: `http://${v.token}:${v.name}@${broker.proxyAddress}`,
          tls: { ca: caPem },
          keepalive: false,
        } as RequestInit);
  return { status: res.status, text: await dumpResponse(res) };
}

/** B's answers: kept for the final leak check; none may hold any of `values` (in the forms findLeak knows). */
function expectClean(texts: readonly string[], values: readonly string[]): void {
  for (const t of texts) outputs.push(t);
  const leaked = values.filter((v) => texts.some((t) => t.includes(v) || t.includes(Buffer.from(v).toString("base64"))));
  expect(leaked.length).toBe(0);
  // The replays did carry something: what B read in their place is the redaction.
  expect(texts.some((t) => t.includes("Bearer [redacted]"))).toBe(true);
}

/** How many times the upstream received `Bearer <value>` (it did get it: the replay had something to leak). */
const received = (value: string) => kept.filter((k) => k.startsWith(`Bearer ${value} `)).length;

beforeAll(async () => {
  up = await startUpstream(storing, { names: { dns: NAMES, ips: ["127.0.0.1"] } });
  P = up.port;
  up443 = await startUpstream(storing, { host: ADDRESS_443, port: 443, names: { dns: ["api443.test"], ips: [] } });
  broker = await startBroker({ caPem: `${up.pki.caPem}${up443.pki.caPem}`, tunnel: true, env: { BROKER_NETWORK_ALLOWLIST: "127.0.0.0/8" } });
  broker.dns.set("api443.test", [ADDRESS_443]);
  for (const n of [
    "upstream.test",
    "api.test",
    "x.wild.test",
    "y.wild.test",
    "a.b.wild.test",
    "wild.test",
    "xn--bcher-kva.test",
    "zzz.big.test",
    "del.wild.test",
  ])
    broker.dns.set(n, ["127.0.0.1"]);
  caPem = await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text();
});

afterAll(async () => {
  // Nothing any test stored appears in any answer, log line or audit record.
  const audit = JSON.stringify(await broker.auditLogs());
  const leaks = secrets.filter((s) => outputs.some((o) => o.includes(s)) || broker.logLines.some((l) => l.includes(s)) || audit.includes(s));
  await broker?.stop();
  await up?.close();
  await up443?.close();
  expect(leaks.length).toBe(0);
});

// ---------------------------------------------------------------------------------------------------------
describe("(a) redaction after edits, one instance", () => {
  let a: { name: string; token: string };
  let b: { name: string; token: string };
  const H = () => `upstream.test:${P}`;

  beforeAll(async () => {
    const first = uniq("a-first");
    secrets.push(first);
    a = await vault("a", [{ host: `upstream.test:${P}`, auth: { type: "bearer", token: "KEY" } }], { KEY: first });
    const bValue = uniq("b-own");
    secrets.push(bValue);
    b = await vault(
      "b",
      [
        { host: `upstream.test:${P}`, auth: { type: "passthrough" } },
        { host: `api.test:${P}`, auth: { type: "bearer", token: "B_KEY" } },
      ],
      { B_KEY: bValue },
    );
    await call(b, "proxy", H()); // the first read of every vault is behind us
  });

  test("a burst of 20 PUTs of A's credential, each raced by A's request and B's on /proxy and the tunnel", async () => {
    const sent: string[] = [];
    for (let i = 0; i < 20; i++) {
      const v = uniq(`burst-${i}`);
      sent.push(v);
      secrets.push(v);
      await must("PUT", `/v1/vaults/a/credentials/KEY`, { value: v }, owner(), 200);
      // Same tick: A sends the new value while B's agents ask for the replay, on both ingresses.
      const racing = [
        call(b, "proxy", H()),
        call(a, i % 2 ? "tunnel" : "proxy", H()),
        call(b, "tunnel", H()),
        call(b, "proxy", H()),
        call(b, "proxy", `api.test:${P}`),
      ];
      const after = (await Promise.all(racing)).filter((_, k) => k !== 1);
      const late = await Promise.all([call(b, "proxy", H()), call(b, "tunnel", H())]);
      expectClean(
        [...after, ...late].map((r) => r.text),
        sent,
      );
    }
    expect(sent.filter((v) => received(v) === 0)).toHaveLength(0); // every value did reach the storing upstream
  });

  test("PUTs not awaited: A's requests fired while its credential is being changed", async () => {
    const sent: string[] = [];
    const racing: Promise<{ status: number; text: string }>[] = [];
    for (let i = 0; i < 15; i++) {
      const v = uniq(`unawaited-${i}`);
      sent.push(v);
      secrets.push(v);
      racing.push(must("PUT", `/v1/vaults/a/credentials/KEY`, { value: v }, owner(), 200).then(() => ({ status: 200, text: "" })));
      racing.push(call(a, "proxy", H()).then(() => ({ status: 200, text: "" })));
      racing.push(call(b, i % 2 ? "tunnel" : "proxy", H()));
    }
    const texts = (await Promise.all(racing)).map((r) => r.text).filter(Boolean);
    texts.push((await call(b, "proxy", H())).text, (await call(b, "tunnel", H())).text);
    expectClean(texts, sent);
  });

  test("a new service on a wildcard host with a new credential: its first request races B's", async () => {
    for (let i = 0; i < 5; i++) {
      const v = uniq(`wild-${i}`);
      secrets.push(v);
      await must("PUT", `/v1/vaults/a/credentials/WILD_${i}`, { value: v }, owner(), 200);
      await must("POST", `/v1/vaults/a/services`, { host: `*.wild.test:${P}`, auth: { type: "bearer", token: `WILD_${i}` } }, owner(), 201);
      const racing = await Promise.all([call(a, i % 2 ? "tunnel" : "proxy", `x.wild.test:${P}`), call(b, "proxy", H()), call(b, "tunnel", H())]);
      expect(racing[0]!.status).toBe(200);
      const late = [await call(b, "proxy", H()), await call(b, "tunnel", H())];
      expectClean(
        [...racing.slice(1), ...late].map((r) => r.text),
        [v],
      );
      expect(received(v)).toBeGreaterThan(0);
      await must("DELETE", `/v1/vaults/a/services/${encodeURIComponent(`*.wild.test:${P}`)}`, undefined, owner(), 204);
    }
  });

  test("a deleted service and credential: the value it sent stays redacted for B", async () => {
    const v = uniq("deleted");
    secrets.push(v);
    await must("PUT", `/v1/vaults/a/credentials/DEL`, { value: v }, owner(), 200);
    await must("POST", `/v1/vaults/a/services`, { host: `del.wild.test:${P}`, auth: { type: "bearer", token: "DEL" } }, owner(), 201);
    expect((await call(a, "proxy", `del.wild.test:${P}`)).status).toBe(200);
    await must("DELETE", `/v1/vaults/a/services/del.wild.test:${P}`, undefined, owner(), 204);
    await must("DELETE", `/v1/vaults/a/credentials/DEL`, undefined, owner(), 204);
    await Bun.sleep(300); // the background read has dropped it from the store half: it lives on as sent lately
    expectClean([(await call(b, "proxy", H())).text, (await call(b, "tunnel", H())).text], [v]);
    expect(received(v)).toBeGreaterThan(0);
  });

  test("a vault of 3,000 services: the credential of its last service changed, sent, and replayed to B at once", async () => {
    const big = await vault("big", [], {});
    const vaultId = (await broker.server.store.vaults.byName("big"))!.id;
    await broker.server.store.transaction(async (tx) => {
      for (let i = 0; i < 3000; i++) await tx.services.put(bearer(vaultId, `svc-${String(i).padStart(4, "0")}.big.test:${P}`, `K${i % 7}`), Date.now());
    });
    await must("POST", `/v1/vaults/big/services`, { host: `zzz.big.test:${P}`, auth: { type: "bearer", token: "LAST" } }, owner(), 201);
    for (let i = 0; i < 8; i++) {
      const v = uniq(`big-${i}`);
      secrets.push(v);
      await must("PUT", `/v1/vaults/big/credentials/LAST`, { value: v }, owner(), 200);
      const racing = await Promise.all([call(big, i % 2 ? "tunnel" : "proxy", `zzz.big.test:${P}`), call(b, "proxy", H()), call(b, "tunnel", H())]);
      expect(racing[0]!.status).toBe(200);
      const late = [await call(b, "proxy", H()), await call(b, "tunnel", H())];
      expectClean(
        [...racing.slice(1), ...late].map((r) => r.text),
        [v],
      );
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
describe("(b) plans by host: spellings match exactly as before; edits take effect on the next request", () => {
  let h: { name: string; token: string };
  const K: Record<string, string> = {};
  let n = 0;

  beforeAll(async () => {
    for (const k of ["K_API", "K_WILD", "K_IDN", "K_IP", "K_443", "K_DEEP"]) secrets.push((K[k] = uniq(k.toLowerCase())));
    h = await vault(
      "hosts",
      [
        { host: `api.test:${P}`, auth: { type: "bearer", token: "K_API" } },
        { host: `*.wild.test:${P}`, auth: { type: "bearer", token: "K_WILD" } },
        { host: `bücher.test:${P}`, auth: { type: "bearer", token: "K_IDN" } },
        { host: `127.0.0.1:${P}`, auth: { type: "bearer", token: "K_IP" } },
        { host: "api443.test", auth: { type: "bearer", token: "K_443" } },
      ],
      K,
    );
  });

  /** Which key's value the upstream got for the request to `path` (by name, never the value). */
  const sentKey = (path: string) => {
    const hit = [...kept].reverse().find((k) => k.split(" ")[2] === path || k.split(" ")[1] === path);
    if (!hit) return "not reached";
    return Object.entries(K).find(([, v]) => hit.startsWith(`Bearer ${v} `))?.[0] ?? "another value";
  };

  async function viaProxy(authority: string): Promise<string> {
    const path = `/spelling/${++n}`;
    const res = await fetch(`${broker.apiUrl}/proxy/${authority}${path}`, { headers: { authorization: `Bearer ${h.token}` } });
    const text = await res.text();
    if (res.status !== 200) return `${res.status} ${res.headers.get("x-broker-error")}`;
    expect(text.includes("[redacted]") || !Object.values(K).some((v) => text.includes(v))).toBe(true);
    return sentKey(path);
  }

  test("/proxy: case, trailing dot, punycode, explicit port, IP literals, one-label wildcards", async () => {
    const cases: [string, string][] = [
      [`api.test:${P}`, "K_API"],
      [`API.TEST:${P}`, "K_API"],
      [`api.test.:${P}`, "K_API"],
      [`Api.Test.:${P}`, "K_API"],
      [`api.test:${P + 1}`, "403 forbidden"],
      [`b%C3%BCcher.test:${P}`, "K_IDN"],
      [`B%C3%9CCHER.TEST:${P}`, "K_IDN"],
      [`xn--bcher-kva.test:${P}`, "K_IDN"],
      [`XN--BCHER-KVA.TEST.:${P}`, "K_IDN"],
      [`x.wild.test:${P}`, "K_WILD"],
      [`X.Wild.TEST.:${P}`, "K_WILD"],
      [`a.b.wild.test:${P}`, "403 forbidden"], // a wildcard covers one label, never two
      [`wild.test:${P}`, "403 forbidden"], // nor the bare domain
      [`%2A.wild.test:${P}`, "400 invalid_request"], // a wildcard is no concrete host
      [`127.0.0.1:${P}`, "K_IP"],
      [`127.1:${P}`, "400 invalid_request"],
      [`0x7f.0.0.1:${P}`, "400 invalid_request"],
      [`[::ffff:127.0.0.1]:${P}`, "403 forbidden"], // another address family's spelling is another host
      [`localhost:${P}`, "403 forbidden"],
      ["api443.test", "K_443"],
      ["api443.test:443", "K_443"],
      ["API443.TEST.:443", "K_443"],
      ["api443.test:8443", "403 forbidden"],
    ];
    const got: [string, string][] = [];
    for (const [authority] of cases) got.push([authority, await viaProxy(authority)]);
    expect(got).toEqual(cases);
  });

  async function viaTunnel(authority: string, servername: string): Promise<string> {
    let opened: { conn: Conn };
    try {
      // An IP literal cannot be a TLS server name: the chain is still verified, the name is not.
      const ip = /^[\d.]+$/.test(servername);
      opened = await openTunnel(Number(broker.proxyAddress!.split(":").pop()), authority, basicProxyAuth(h.token, h.name), {
        ca: caPem,
        servername: ip ? "localhost" : servername,
        anyName: ip,
      });
    } catch (err) {
      return `CONNECT refused: ${String(err).match(/HTTP\/1\.1 (\d{3})/)?.[1] ?? String(err)}`;
    }
    const path = `/tunnel-spelling/${++n}`;
    opened.conn.write(`GET ${path} HTTP/1.1\r\nHost: ${servername}\r\nConnection: close\r\n\r\n`);
    const r = await opened.conn.readResponse();
    opened.conn.close();
    if (r.status !== 200) return `${r.status} ${r.headers["x-broker-error"]}`;
    return sentKey(path);
  }

  test("CONNECT: the same spellings of the authority find the same service", async () => {
    const cases: [string, string, string][] = [
      [`API.TEST:${P}`, "api.test", "K_API"],
      [`api.test.:${P}`, "api.test", "K_API"],
      [`XN--BCHER-KVA.TEST:${P}`, "xn--bcher-kva.test", "K_IDN"],
      [`X.WILD.TEST.:${P}`, "x.wild.test", "K_WILD"],
      [`127.0.0.1:${P}`, "127.0.0.1", "K_IP"],
      ["API443.test.:443", "api443.test", "K_443"],
    ];
    const got: [string, string, string][] = [];
    for (const [authority, name] of cases) got.push([authority, name, await viaTunnel(authority, name)]);
    expect(got).toEqual(cases);
  });

  test("disabled, removed, moved and re-covered services take effect on the next request, inside an open tunnel too", async () => {
    const { conn } = await openTunnel(Number(broker.proxyAddress!.split(":").pop()), `y.wild.test:${P}`, basicProxyAuth(h.token, h.name), {
      ca: caPem,
      servername: "y.wild.test",
    });
    const inTunnel = async () => {
      const path = `/open-tunnel/${++n}`;
      conn.write(`GET ${path} HTTP/1.1\r\nHost: y.wild.test\r\n\r\n`);
      const r = await conn.readResponse();
      return r.status === 200 ? sentKey(path) : `${r.status} ${r.headers["x-broker-error"]}`;
    };
    const wild = encodeURIComponent(`*.wild.test:${P}`);
    expect([await inTunnel(), await viaProxy(`y.wild.test:${P}`)]).toEqual(["K_WILD", "K_WILD"]);
    await must("PATCH", `/v1/vaults/hosts/services/${wild}`, { enabled: false }, owner(), 200);
    expect([await inTunnel(), await viaProxy(`y.wild.test:${P}`)]).toEqual(["403 service_disabled", "403 service_disabled"]);
    await must("PATCH", `/v1/vaults/hosts/services/${wild}`, { enabled: true }, owner(), 200);
    expect(await inTunnel()).toBe("K_WILD");
    // An exact service added for the host wins over the wildcard at once.
    await must("POST", "/v1/vaults/hosts/services", { host: `y.wild.test:${P}`, auth: { type: "bearer", token: "K_DEEP" } }, owner(), 201);
    expect([await inTunnel(), await viaProxy(`y.wild.test:${P}`)]).toEqual(["K_DEEP", "K_DEEP"]);
    // "Moved to another host": the exact one removed, the wildcard removed too: refused at once.
    await must("DELETE", `/v1/vaults/hosts/services/y.wild.test:${P}`, undefined, owner(), 204);
    expect(await inTunnel()).toBe("K_WILD");
    await must("DELETE", `/v1/vaults/hosts/services/${wild}`, undefined, owner(), 204);
    expect([await inTunnel(), await viaProxy(`y.wild.test:${P}`), await viaProxy(`x.wild.test:${P}`)]).toEqual([
      "403 forbidden",
      "403 forbidden",
      "403 forbidden",
    ]);
    conn.close();
    // Re-covered (a host refused a moment ago, remembered as "no service"): served on the next request.
    await must("POST", "/v1/vaults/hosts/services", { host: `*.wild.test:${P}`, auth: { type: "bearer", token: "K_WILD" } }, owner(), 201);
    expect([await viaProxy(`y.wild.test:${P}`), await viaTunnel(`y.wild.test:${P}`, "y.wild.test")]).toEqual(["K_WILD", "K_WILD"]);
    // The IP literal's service moved to the name: the literal is refused, the name served, at once.
    await must("DELETE", `/v1/vaults/hosts/services/127.0.0.1:${P}`, undefined, owner(), 204);
    await must("POST", "/v1/vaults/hosts/services", { host: `localhost:${P}`, auth: { type: "bearer", token: "K_IP" } }, owner(), 201);
    broker.dns.set("localhost", ["127.0.0.1"]);
    expect([await viaProxy(`127.0.0.1:${P}`), await viaProxy(`localhost:${P}`)]).toEqual(["403 forbidden", "K_IP"]);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe("(c) paging: hostile limits and cursors, and who sees which rows", () => {
  let member: string; // a person who is a member of vault "pages" only
  let admin: string; // a person who administers vault "pages" only
  let agentPages: string; // an agent granted "member" in "pages"
  const otherMarkers: string[] = []; // what only vault "other" (or other people) holds: never in a page of "pages"
  const memberSessions: string[] = [];
  const ownerSessions: string[] = [];
  const agentSessions: string[] = [];

  async function person(vaultName: string, role: string, email: string): Promise<string> {
    const inv = await must("POST", `/v1/vaults/${vaultName}/invites`, { email, role }, owner(), 201);
    const r = await callApi(broker.apiUrl, "POST", `/v1/vault-invites/${inv.token}/accept`, { email, password: "correct horse battery" });
    if (r.status !== 200) throw new Error(`accept: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.token;
  }
  async function agent(vaultName: string, name: string, role: string): Promise<string> {
    const inv = await must("POST", `/v1/vaults/${vaultName}/agent-invites`, { name, role }, owner(), 201);
    const r = await fetch(inv.invite_url, { method: "POST" });
    if (r.status !== 201) throw new Error(`redeem: ${r.status} ${await r.text()}`);
    return ((await r.json()) as { token: string }).token;
  }

  beforeAll(async () => {
    await vault("pages", [
      { host: `api.test:${P}`, auth: { type: "passthrough" } },
      { host: `*.wild.test:${P}`, auth: { type: "passthrough" } },
      { host: `p-three.test:${P}`, auth: { type: "passthrough" } },
    ]);
    await vault("other", [{ host: `other-only.test:${P}`, auth: { type: "passthrough" } }]);
    otherMarkers.push("other-only.test", "other-agent");
    member = await person("pages", "member", "member@example.com");
    admin = await person("pages", "admin", "admin@example.com");
    agentPages = await agent("pages", "pages-agent", "member");
    await agent("other", "other-agent", "member");
    for (let i = 0; i < 3; i++) {
      ownerSessions.push((await must("POST", "/v1/sessions", { vault: "pages", role: "proxy" }, owner(), 201)).id);
      memberSessions.push((await must("POST", "/v1/sessions", { vault: "pages", role: "proxy" }, member, 201)).id);
    }
    for (let i = 0; i < 2; i++) agentSessions.push((await must("POST", "/v1/sessions", { vault: "pages", role: "proxy" }, agentPages, 201)).id);
    const otherSession = await must("POST", "/v1/sessions", { vault: "other", role: "proxy" }, owner(), 201);
    otherMarkers.push(otherSession.id);
  });

  const LIMITS = ["0", "-1", "501", "1e9", "abc", "1.5", " 5", "0x10", "５", "1000000", "9".repeat(30), "NaN", "Infinity", "\u0000", "1,2", "+5"];
  const CURSORS = () => [
    "' OR 1=1 --",
    "1; DROP TABLE services; --",
    '") OR ("1"="1',
    "9".repeat(15),
    "9".repeat(16),
    "9".repeat(400),
    "9007199254740993",
    "-1",
    "0",
    "1e5",
    "ünïcödé",
    "💩",
    "\u0000",
    "a".repeat(300),
    "a".repeat(301),
    "a5",
    "r999999999999999",
    "a-1",
    `other-only.test:${P}`,
    "other-agent",
    "*",
    "%",
    "\\",
    "_",
    "NaN",
  ];
  const LISTS: { path: string; cursor: string; rows: string }[] = [
    { path: "/v1/vaults/pages/services", cursor: "after", rows: "services" },
    { path: "/v1/agents", cursor: "after", rows: "agents" },
    { path: "/v1/sessions?vault=pages", cursor: "after", rows: "sessions" },
    { path: "/v1/proposals?vault=pages", cursor: "before", rows: "proposals" },
    { path: "/v1/vaults/pages/request-approvals", cursor: "after", rows: "request_approvals" },
    { path: "/v1/auth/sessions", cursor: "after", rows: "sessions" },
    { path: "/v1/vaults/pages/logs", cursor: "before", rows: "logs" },
    { path: "/v1/vaults/pages/logs", cursor: "after", rows: "logs" },
  ];
  /** A GET as `token`; agent tokens name their vault in X-Vault, as the API asks. */
  async function get(token: string, url: string): Promise<{ status: number; body: any; headers: Headers }> {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (token === agentPages) headers["x-vault"] = "pages";
    const res = await fetch(`${broker.apiUrl}${url}`, { headers });
    const text = await res.text();
    let body: any = text;
    try {
      body = JSON.parse(text);
    } catch {}
    return { status: res.status, body, headers: res.headers };
  }
  const withQuery = (path: string, q: string) => `${path}${path.includes("?") ? "&" : "?"}${q}`;

  /** 400 in the envelope, or 200 with the list; never a 5xx, never a row of vault "other" or another person's. */
  async function probe(token: string, url: string, rows: string): Promise<string | undefined> {
    const r = await get(token, url);
    if (token === agentPages && url.startsWith("/v1/auth/sessions") && r.status === 403) return undefined; // a person's list
    if (r.status === 400) {
      if (r.body?.error !== "invalid_request" || typeof r.body?.message !== "string" || r.headers.get("x-broker-error") !== "invalid_request")
        return `${url}: 400 without the envelope: ${JSON.stringify(r.body)}`;
      return undefined;
    }
    if (r.status !== 200) return `${url}: ${r.status} ${JSON.stringify(r.body)}`;
    if (!Array.isArray(r.body?.[rows])) return `${url}: no ${rows} list`;
    if (!("next_cursor" in r.body)) return `${url}: no next_cursor`;
    const text = JSON.stringify(r.body);
    if (token === owner()) return undefined; // the owner may see every vault's rows
    const found = otherMarkers.find((m) => text.includes(m));
    return found ? `${url}: shows another vault's row (${found})` : undefined;
  }

  test("every list, every hostile limit and cursor, as a member, an admin, an agent and the owner", async () => {
    const problems: string[] = [];
    for (const token of [member, admin, agentPages, owner()]) {
      for (const list of LISTS) {
        for (const l of LIMITS) {
          const p = await probe(token, withQuery(list.path, `limit=${encodeURIComponent(l)}`), list.rows);
          if (p) problems.push(p);
        }
        for (const c of CURSORS()) {
          const p = await probe(token, withQuery(list.path, `${list.cursor}=${encodeURIComponent(c)}`), list.rows);
          if (p) problems.push(p);
        }
        // Both cursors at once, a cursor repeated, and an empty one.
        for (const q of ["after=1&before=1", `${list.cursor}=1&${list.cursor}=abc`, `${list.cursor}=`, "limit=1&limit=0"]) {
          const p = await probe(token, withQuery(list.path, q), list.rows);
          if (p) problems.push(p);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  test("console pages: hostile cursors and filters get a page or a 400 page, never a 500, never another vault's rows", async () => {
    const pages: [string, string][] = [
      ["/vaults/pages/services", "after"],
      ["/vaults/pages/agents", "after"],
      ["/vaults/pages/requests", "after"],
      ["/vaults/pages/proposals", "before"],
      ["/account", "after"],
      ["/vaults/pages/logs", "before"],
      ["/vaults/pages/logs", "host"],
      ["/vaults/pages/logs", "who"],
      ["/vaults/pages/logs", "status"],
    ];
    const bad: string[] = [];
    for (const token of [admin, member]) {
      for (const [path, param] of pages) {
        for (const v of [...CURSORS(), "", "\u0000x"]) {
          const url = `${path}?${param}=${encodeURIComponent(v)}`;
          const res = await fetch(`${broker.apiUrl}${url}`, { headers: { cookie: `broker_session=${token}` }, redirect: "manual" });
          const text = await res.text();
          if (res.status >= 500) bad.push(`${url.slice(0, 80)}: ${res.status}`);
          // (A filter's own value is shown back in its form field: that is no other vault's row.)
          const leak = otherMarkers.find((m) => text.includes(m) && !v.includes(m));
          if (leak) bad.push(`${url.slice(0, 80)}: shows ${leak}`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  /** Every entry of a list, a page of `limit` at a time, following next_cursor. */
  async function walk(token: string, path: string, cursor: string, rows: string, limit = 1): Promise<any[]> {
    const out: any[] = [];
    let next: string | null = "";
    for (let guard = 0; next !== null && guard < 100; guard++) {
      const r = await get(token, withQuery(path, `limit=${limit}${next ? `&${cursor}=${encodeURIComponent(next)}` : ""}`));
      if (r.status !== 200) throw new Error(`${path} after ${next}: ${r.status} ${JSON.stringify(r.body)}`);
      out.push(...r.body[rows]);
      next = r.body.next_cursor;
    }
    return out;
  }

  test("sessions: a member pages through their own only; an agent its own; a vault admin all of the vault's", async () => {
    const ids = async (token: string) => (await walk(token, "/v1/sessions?vault=pages", "after", "sessions")).map((s) => s.id).sort();
    expect(await ids(member)).toEqual([...memberSessions].sort());
    expect(await ids(agentPages)).toEqual([...agentSessions].sort());
    const all = await ids(admin);
    for (const id of [...memberSessions, ...ownerSessions, ...agentSessions]) expect(all).toContain(id);
    // A cursor just before another's session changes nothing: still only their own.
    const r = await get(member, "/v1/sessions?vault=pages&after=0&limit=500");
    expect(r.body.sessions.map((s: any) => s.id).sort()).toEqual([...memberSessions].sort());
    // A member asking for a vault they are not in learns nothing about it.
    const other = await get(member, "/v1/sessions?vault=other&limit=5");
    expect([403, 404]).toContain(other.status);
    expect(JSON.stringify(other.body)).not.toContain(otherMarkers[2]!);
    // /v1/auth/sessions: a person's own, never another's, page after page.
    const mine = await walk(member, "/v1/auth/sessions", "after", "sessions");
    for (const id of [...ownerSessions, ...agentSessions]) expect(mine.map((s) => s.id)).not.toContain(id);
  });

  test("agents: a vault admin pages through the agents of the vaults they administer only; a member and an agent see what their role allows", async () => {
    const names = async (token: string) => (await walk(token, "/v1/agents", "after", "agents")).map((a) => a.name);
    expect(await names(admin)).toEqual(["pages-agent"]);
    expect(await names(member)).toEqual([]);
    expect(await names(agentPages)).toEqual([]); // a member-role agent administers nothing
    const all = await names(owner());
    expect(all).toContain("other-agent");
    expect(all).toContain("pages-agent");
  });

  test("services: pages follow host order with no gap and no repeat, a member's and an agent's alike", async () => {
    for (const token of [member, agentPages]) {
      const hosts = (await walk(token, "/v1/vaults/pages/services", "after", "services")).map((s) => s.host);
      expect(hosts).toEqual([`*.wild.test:${P}`, `api.test:${P}`, `p-three.test:${P}`]);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
// Two compiled instances on one PostgreSQL database: A's agent on the first, B's on the second.
describe.skipIf(pgMissing)("(a, c, e) two instances on PostgreSQL", () => {
  let cluster: SharedPgCluster;
  let dbUrl: string;
  let bin: string;
  let i1: Instance;
  let i2: Instance;
  let rec: Recorder;
  let ownerToken: string;
  const hp = () => `127.0.0.1:${P}`;

  beforeAll(async () => {
    kept.length = 0; // a replay shows only what this deployment's agents sent (the other brokers' values are not theirs to know)
    bin = buildFreshBinary();
    cluster = await sharedPgCluster();
    dbUrl = await cluster.createDatabase();
    rec = createRecorder(up);
    const spawn = (name: string, env: Record<string, string> = {}) => spawnInstance(name, { bin, databaseUrl: dbUrl, upstreamCaPem: up.pki.caPem, env });
    i1 = await spawn("one");
    i2 = await spawn("two");
    ownerToken = (await rec.must(i1, "POST", "/v1/auth/register", { email: "owner@example.com", password: "correct horse battery" }, "", 201)).token;
  }, 120_000);

  afterAll(async () => {
    const logs = [i1, i2].filter(Boolean).map((i) => i.logs());
    await stopAllInstances();
    await cluster?.release();
    for (const s of secrets) expect(findLeak(logs, s)).toBeUndefined();
  });

  async function pgVault(inst: Instance, name: string, services: { host: string; auth: Record<string, unknown> }[], creds: Record<string, string>) {
    await rec.must(inst, "POST", "/v1/vaults", { name }, ownerToken, 201);
    for (const [k, v] of Object.entries(creds)) await rec.must(inst, "PUT", `/v1/vaults/${name}/credentials/${k}`, { value: v }, ownerToken, 200);
    for (const s of services) await rec.must(inst, "POST", `/v1/vaults/${name}/services`, s, ownerToken, 201);
    return { name, token: (await rec.must(inst, "POST", "/v1/sessions", { vault: name, role: "proxy" }, ownerToken, 201)).token as string };
  }

  async function callOn(inst: Instance, v: { name: string; token: string }, via: "proxy" | "tunnel"): Promise<string> {
    const res =
      via === "proxy"
        ? await fetch(`${inst.url}/proxy/${hp()}/bin`, { headers: { authorization: `Bearer ${v.token}` } })
        : await fetch(`https://localhost:${P}/bin`, {
            proxy: `http://${v.token}:${v.name}@127.0.0.1:${inst.proxyPort}`,
            tls: { ca: await (await fetch(`${inst.url}/v1/ca.pem`)).text() },
            keepalive: false,
          } as RequestInit);
    return dumpResponse(res);
  }

  // D22: the second instance learns A's new value from the store only, with the change's announcement; from then
  // on its answers wait until A's vault is read whole. Before the announcement arrives (its own delay, the README's
  // "Not covered") it cannot know: each round starts once the announcement has had time to arrive.
  test("A's credential changed and sent through instance 1, replayed to B through instance 2 at once: never revealed", async () => {
    const first = uniq("pg-a-first");
    secrets.push(first);
    const a = await pgVault(
      i1,
      "pg-a",
      [
        { host: hp(), auth: { type: "bearer", token: "KEY" } },
        { host: `localhost:${P}`, auth: { type: "bearer", token: "KEY" } },
      ],
      { KEY: first },
    );
    const b = await pgVault(
      i1,
      "pg-b",
      [
        { host: hp(), auth: { type: "passthrough" } },
        { host: `localhost:${P}`, auth: { type: "passthrough" } },
      ],
      {},
    );
    await callOn(i2, b, "proxy"); // instance 2 has read every vault once
    const leaks: string[] = [];
    for (let i = 0; i < 10; i++) {
      const v = uniq(`pg-race-${i}`);
      secrets.push(v);
      await rec.must(i1, "PUT", "/v1/vaults/pg-a/credentials/KEY", { value: v }, ownerToken, 200);
      await Bun.sleep(NOTIFIED_MS);
      const t0 = performance.now();
      await callOn(i1, a, i % 2 ? "tunnel" : "proxy"); // A sends the new value through instance 1
      const texts = await Promise.all([callOn(i2, b, "proxy"), callOn(i2, b, "tunnel")]);
      const ms = Math.round(performance.now() - t0);
      if (texts.some((t) => t.includes(v))) leaks.push(`round ${i}: revealed to B on instance 2 ${ms} ms after the change`);
      else outputs.push(...texts); // (what this test reports is not counted again by the file's last check)
    }
    console.log(`[issue35-attacks] two instances: ${leaks.length} of 10 rounds revealed A's new value to B\n${leaks.join("\n")}`);
    expect(leaks).toEqual([]);
  }, 60_000);

  test("the same with A's vault holding 20,000 services before the edited one: B's answers on instance 2, fired with A's request", async () => {
    const first = uniq("pg-big-first");
    secrets.push(first);
    const a = await pgVault(
      i1,
      "pg-big",
      [
        { host: hp(), auth: { type: "bearer", token: "KEY" } },
        { host: `localhost:${P}`, auth: { type: "bearer", token: "KEY" } },
      ],
      { KEY: first },
    );
    const b = await pgVault(
      i1,
      "pg-big-b",
      [
        { host: hp(), auth: { type: "passthrough" } },
        { host: `localhost:${P}`, auth: { type: "passthrough" } },
      ],
      {},
    );
    // 20,000 services that sort before both hosts the agent uses ("127.0.0.1:…" and "localhost:…"): pages of the read come first.
    await queryDb(dbUrl, [
      [
        `INSERT INTO services (vault_id, host, description, auth_type, auth_key, enabled, created_at, updated_at)
         SELECT v.id, '0-filler-' || lpad(g::text, 5, '0') || '.test', '', 'passthrough', NULL, 1, 0, 0 FROM vaults v, generate_series(1, 20000) g WHERE v.name = 'pg-big'`,
        [],
      ],
    ]);
    await Bun.sleep(500); // both instances have read the vault after the insert's announcement
    await callOn(i2, b, "proxy");
    const leaks: string[] = [];
    for (let i = 0; i < 10; i++) {
      const v = uniq(`pg-big-race-${i}`);
      secrets.push(v);
      await rec.must(i1, "PUT", "/v1/vaults/pg-big/credentials/KEY", { value: v }, ownerToken, 200);
      await Bun.sleep(NOTIFIED_MS);
      const t0 = performance.now();
      const sending = callOn(i1, a, i % 2 ? "tunnel" : "proxy");
      const texts: string[] = [];
      // B asks instance 2 again and again while A's request is under way, and right after it.
      for (let k = 0; k < 6; k++) texts.push(await callOn(i2, b, k % 2 ? "tunnel" : "proxy"));
      await sending;
      const tA = Math.round(performance.now() - t0);
      texts.push(await callOn(i2, b, "proxy"), await callOn(i2, b, "tunnel"));
      if (process.env.DEBUG35)
        console.log(
          `round ${i}: A done at ${tA} ms, rest at ${Math.round(performance.now() - t0)} ms; redacted in ${texts.filter((t) => t.includes("[redacted]")).length} of ${texts.length}`,
        );
      const ms = Math.round(performance.now() - t0);
      if (!texts.some((t) => t.includes(v))) outputs.push(...texts); // (what this test reports is not counted again at the end)
      if (received(v) === 0) leaks.push(`round ${i}: A's value never reached the upstream`);
      if (texts.some((t) => t.includes(v))) leaks.push(`round ${i}: revealed to B on instance 2 within ${ms} ms of the change`);
    }
    console.log(`[issue35-attacks] two instances, 20,000-service vault: ${leaks.length} of 10 rounds revealed A's new value to B\n${leaks.join("\n")}`);
    expect(leaks).toEqual([]);
  }, 60_000);

  // A statement past BROKER_DATABASE_STATEMENT_TIMEOUT_MS opens the breaker only when the probe connection no
  // longer hears the server (D31): one member's slow statement (a log filter whose every part matches half the
  // log, the whole combination nothing) is that member's 503, the server cancels it, and everyone else is served.
  // Shown with the bound at its minimum (100 ms) over 600,000 rows.
  test("a member's slow log page does not make the database unavailable for everyone else", async () => {
    const i3 = await spawnInstance("three", { bin, databaseUrl: dbUrl, upstreamCaPem: up.pki.caPem, env: { BROKER_DATABASE_STATEMENT_TIMEOUT_MS: "100" } });
    await pgVault(i1, "pg-logs", [{ host: hp(), auth: { type: "passthrough" } }], {});
    await pgVault(i1, "pg-quiet", [{ host: hp(), auth: { type: "passthrough" } }], {});
    await queryDb(dbUrl, [
      [
        `INSERT INTO audit_logs (at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, status, bytes_in, bytes_out, duration_ms, error, contained)
         SELECT 1, CASE WHEN g % 2 = 0 THEN 'agent:1' ELSE 'agent:2' END, v.id, v.name, 'proxy', 'GET', 'h.example', '/', NULL, '',
                CASE WHEN g % 2 = 0 THEN 200 ELSE 500 END, 0, 0, 0, NULL, 0
         FROM vaults v, generate_series(1, 600000) g WHERE v.name = 'pg-logs'`,
        [],
      ],
      "ANALYZE audit_logs",
    ]);
    const filter = "/v1/vaults/pg-logs/logs?host=h.example&status=200&principal=agent:2&limit=100";
    const t0 = performance.now();
    const slow = await rec.api(i1, "GET", filter, undefined, ownerToken); // on an instance with the default bound
    console.log(
      `[issue35-attacks] a log page filtered on three common values, none together: ${slow.status} in ${Math.round(performance.now() - t0)} ms (600,000 rows)`,
    );
    for (let k = 0; k < 100 && (await rec.api(i3, "GET", "/health")).body.status !== "ok"; k++) await Bun.sleep(100);
    expect((await rec.api(i3, "GET", "/health")).body.status).toBe("ok");
    const member = await rec.api(i3, "GET", filter, undefined, ownerToken);
    // Everyone else, right after, on the same instance.
    const other = await rec.api(i3, "GET", "/v1/vaults/pg-quiet/services", undefined, ownerToken);
    const health = (await rec.api(i3, "GET", "/health")).body;
    console.log(
      `[issue35-attacks] the slow page on the 100 ms instance: ${member.status}; another vault's call right after: ${other.status}; /health: ${health.status}`,
    );
    // With the default bound (2 s, instance 1): 40 such pages at once, well within the AUTHED burst of 100.
    await Bun.sleep(1500);
    const t1 = performance.now();
    const burst = await Promise.all(Array.from({ length: 40 }, () => rec.api(i1, "GET", filter, undefined, ownerToken)));
    const otherOn1 = await rec.api(i1, "GET", "/v1/vaults/pg-quiet/services", undefined, ownerToken);
    const healthOn1 = (await rec.api(i1, "GET", "/health")).body;
    const byStatus = burst.reduce<Record<number, number>>((m, r) => ((m[r.status] = (m[r.status] ?? 0) + 1), m), {});
    console.log(
      `[issue35-attacks] 40 slow pages at once on the default 2 s instance: ${JSON.stringify(byStatus)} in ${Math.round(performance.now() - t1)} ms; another vault's call right after: ${otherOn1.status}; /health: ${healthOn1.status}`,
    );
    // The tests after this one need instance 1 back: the breaker probes once a second.
    for (let k = 0; k < 100 && (await rec.api(i1, "GET", "/health")).body.status !== "ok"; k++) await Bun.sleep(100);
    await i3.kill("SIGTERM");
    expect({ other: other.status, health: health.status, otherOn1: otherOn1.status, healthOn1: healthOn1.status }).toEqual({
      other: 200,
      health: "ok",
      otherOn1: 200,
      healthOn1: "ok",
    });
  }, 120_000);

  test("an agent's odd bytes in a request line cannot make a batch of everyone's audit records fail on PostgreSQL", async () => {
    const odd = await pgVault(i1, "pg-odd", [{ host: `localhost:${P}`, auth: { type: "passthrough" } }], {});
    const quiet = await pgVault(i1, "pg-odd-quiet", [{ host: hp(), auth: { type: "passthrough" } }], {});
    const ca = await (await fetch(`${i2.url}/v1/ca.pem`)).text();
    const statuses: (number | string)[] = [];
    for (const target of ["/nul\u0000x", "/ff\u00ffx", "/bad-utf8\u00c3(", "/ctl\u0001x", "/del\u007fx", "/ok?q=\u00ff\u0000"]) {
      const { conn } = await openTunnel(i2.proxyPort, `localhost:${P}`, basicProxyAuth(odd.token, odd.name), { ca, servername: "localhost" });
      conn.write(Buffer.from(`GET ${target} HTTP/1.1\r\nHost: localhost\r\n\r\n`, "latin1"));
      statuses.push(
        await conn.readResponse({ timeoutMs: 3000 }).then(
          (r) => r.status,
          () => "closed",
        ),
      );
      conn.close();
    }
    for (const target of ["/pct%00x", "/pct%FFx", "/pct%C3("]) {
      const res = await fetch(`${i2.url}/proxy/localhost:${P}${target}`, { headers: { authorization: `Bearer ${odd.token}` } });
      statuses.push(res.status);
    }
    const path = `/quiet/${crypto.randomUUID()}`;
    await fetch(`${i2.url}/proxy/${hp()}${path}`, { headers: { authorization: `Bearer ${quiet.token}` } });
    await Bun.sleep(800);
    const logs = await rec.api(i1, "GET", "/v1/vaults/pg-odd-quiet/logs?limit=10", undefined, ownerToken);
    console.log(`[issue35-attacks] odd request lines through the tunnel: ${JSON.stringify(statuses)}`);
    expect(JSON.stringify(logs.body)).toContain(path);
    expect(i2.logs()).not.toContain("audit_write_failed");
  });

  test("an unauthenticated flood (bogus tokens on the API and the tunnel, 32 clients for 3 s) neither slows /health nor trips the breaker", async () => {
    const quiet = await pgVault(i1, "pg-flood-quiet", [{ host: hp(), auth: { type: "passthrough" } }], {});
    const stopAt = Date.now() + 3000;
    let sent = 0;
    const flood = async (k: number) => {
      while (Date.now() < stopAt) {
        sent++;
        if (k % 2) await fetch(`${i2.url}/v1/vaults`, { headers: { authorization: `Bearer av_sess_${crypto.randomUUID()}` } }).then((r) => r.text());
        else {
          const sock = await dialProxySocket(i2.proxyPort);
          sock.write(
            `CONNECT ${hp()} HTTP/1.1\r\nHost: ${hp()}\r\nProxy-Authorization: Basic ${btoa(`av_sess_${crypto.randomUUID()}:pg-flood-quiet`)}\r\n\r\n`,
          );
          await new Promise((r) => (sock.once("data", r), sock.once("close", r), setTimeout(r, 1000)));
          sock.destroy();
        }
      }
    };
    const worst = { health: 0, owner: 0 };
    const bad: string[] = [];
    const probe = (async () => {
      while (Date.now() < stopAt) {
        let t = performance.now();
        const h = await rec.api(i2, "GET", "/health");
        worst.health = Math.max(worst.health, performance.now() - t);
        if (h.status !== 200 || h.body.status !== "ok") bad.push(`/health ${h.status} ${h.body?.status}`);
        t = performance.now();
        const o = await rec.api(i2, "GET", "/v1/vaults/pg-flood-quiet/services", undefined, ownerToken);
        worst.owner = Math.max(worst.owner, performance.now() - t);
        if (o.status !== 200) bad.push(`owner call ${o.status}`);
        const p = await fetch(`${i2.url}/proxy/${hp()}/flood`, { headers: { authorization: `Bearer ${quiet.token}` } });
        if (p.status !== 200) bad.push(`proxied ${p.status}`);
        await p.text();
        await Bun.sleep(50);
      }
    })();
    await Promise.all(Array.from({ length: 32 }, (_, k) => flood(k)));
    await probe;
    console.log(
      `[issue35-attacks] PostgreSQL, ${sent} bogus requests in 3 s: worst /health ${Math.round(worst.health)} ms, worst owner call ${Math.round(worst.owner)} ms`,
    );
    expect(bad).toEqual([]);
    expect(worst.health).toBeLessThan(1000);
  }, 60_000);

  test("hostile filters and cursors on PostgreSQL: 400 in the envelope or a page, never a 500", async () => {
    await pgVault(i1, "pg-pages", [{ host: hp(), auth: { type: "passthrough" } }], {});
    const bad: string[] = [];
    const values = ["\u0000", "a\u0000b", "' OR 1=1 --", "💩", "\uD800", "9".repeat(15), "x".repeat(5000), "%", "_"];
    const urls: string[] = [];
    for (const v of values) {
      const e = encodeURIComponent(v.replace("\uD800", "\uFFFD"));
      urls.push(
        `/v1/vaults/pg-pages/logs?host=${e}`,
        `/v1/vaults/pg-pages/logs?principal=${e}`,
        `/v1/vaults/pg-pages/logs?status=${e}`,
        `/v1/vaults/pg-pages/services?after=${e}`,
        `/v1/agents?after=${e}`,
        `/v1/sessions?vault=pg-pages&after=${e}`,
        `/v1/proposals?vault=pg-pages&before=${e}`,
        `/v1/proposals?vault=pg-pages&status=${e}`,
        `/v1/vaults/pg-pages/request-approvals?after=${e}`,
        `/v1/auth/sessions?after=${e}`,
      );
    }
    urls.push(
      "/v1/vaults/pg-pages/logs?before=9007199254740991",
      "/v1/vaults/pg-pages/logs?after=9007199254740991",
      "/v1/sessions?vault=pg-pages&after=999999999999999",
    );
    for (const url of urls) {
      const r = await rec.api(i2, "GET", url, undefined, ownerToken);
      if (r.status >= 500 || (r.status === 400 && r.body?.error !== "invalid_request"))
        bad.push(`${url.slice(0, 90)}: ${r.status} ${JSON.stringify(r.body).slice(0, 160)}`);
    }
    expect(bad).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------------------
// The compiled binary on SQLite, its data directory prepared once and copied for each case.
describe("(d) the audit journal", () => {
  let bin: string;
  let template: string; // a stopped broker's data directory: owner, vault "j", a bearer service on the upstream
  let ownerTok: string;
  let agentTok: string;
  const journalSecret = uniq("journal-cred");
  const dirs: string[] = [];

  interface Run {
    readonly url: string;
    readonly proxyPort: number;
    readonly proc: ReturnType<typeof Bun.spawn>;
    logs(): string;
  }
  const LISTENING = /"event":"listening","api":"(http:\/\/[^"]+)","proxy":"[^"]*:(\d+)"/;

  /** Starts `broker server` on `dataDir`; resolves once it listens, or with the reason it did not within `limitMs`. */
  async function run(dataDir: string, limitMs = 15_000): Promise<Run | { failed: string }> {
    const home = mkdtempSync(join(tmpdir(), "issue35-home-"));
    dirs.push(home);
    const caFile = join(home, "upstream-ca.pem");
    writeFileSync(caFile, up.pki.caPem);
    const proc = Bun.spawn([bin, "server"], {
      env: cleanEnv({
        HOME: home,
        BROKER_DATA_DIR: dataDir,
        BROKER_PORT: "0",
        BROKER_PROXY_PORT: "0",
        BROKER_NETWORK_ALLOWLIST: "127.0.0.1",
        BROKER_UPSTREAM_CA_FILE: caFile,
        BROKER_RATELIMIT_PROFILE: "off",
      }),
      cwd: home,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const out = collectOutput(proc);
    const deadline = Date.now() + limitMs;
    while (Date.now() < deadline) {
      const m = LISTENING.exec(out.text());
      if (m) return { url: m[1]!, proxyPort: Number(m[2]), proc, logs: out.text };
      if (proc.exitCode !== null) return { failed: `exited ${proc.exitCode}: ${out.text().slice(-600)}` };
      await Bun.sleep(25);
    }
    proc.kill("SIGKILL");
    await proc.exited;
    return { failed: `did not listen within ${limitMs} ms (memory ${Math.round(process.memoryUsage().rss / 1e6)} MB here): ${out.text().slice(-300)}` };
  }

  async function stop(r: Run): Promise<void> {
    r.proc.kill("SIGTERM");
    await r.proc.exited;
  }

  /** A copy of the prepared data directory. */
  function copyOfTemplate(): string {
    const d = mkdtempSync(join(tmpdir(), "issue35-data-"));
    dirs.push(d);
    const data = join(d, "data");
    Bun.spawnSync(["cp", "-a", template, data]);
    return data;
  }

  /** Serves after whatever was done to the journal: /health, a proxied request, its audit record. */
  async function serves(r: Run): Promise<string[]> {
    const problems: string[] = [];
    const health = await fetch(`${r.url}/health`);
    if (health.status !== 200) problems.push(`/health ${health.status}`);
    const path = `/serves/${crypto.randomUUID()}`;
    const res = await fetch(`${r.url}/proxy/127.0.0.1:${P}${path}`, { headers: { authorization: `Bearer ${agentTok}` } });
    outputs.push(await dumpResponse(res));
    if (res.status !== 200) problems.push(`proxy ${res.status}`);
    await Bun.sleep(600);
    const logs = await callApi(r.url, "GET", "/v1/vaults/j/logs?limit=50", undefined, ownerTok);
    if (!JSON.stringify(logs.body).includes(path)) problems.push("the request was not audited");
    return problems;
  }

  /** The log lines that speak of the journal. */
  const journalLines = (r: Run) =>
    r
      .logs()
      .split("\n")
      .filter((l) => /journal/i.test(l));

  beforeAll(async () => {
    bin = buildFreshBinary();
    secrets.push(journalSecret);
    const d = mkdtempSync(join(tmpdir(), "issue35-template-"));
    dirs.push(d);
    template = join(d, "data");
    const r = await run(template);
    if ("failed" in r) throw new Error(r.failed);
    ownerTok = (await callApi(r.url, "POST", "/v1/auth/register", { email: "owner@example.com", password: "correct horse battery" })).body.token;
    const api = async (method: string, path: string, body?: unknown) => {
      const x = await callApi(r.url, method, path, body, ownerTok);
      if (x.status >= 300) throw new Error(`${method} ${path}: ${x.status}`);
      return x.body;
    };
    await api("POST", "/v1/vaults", { name: "j" });
    await api("PUT", "/v1/vaults/j/credentials/KEY", { value: journalSecret });
    await api("POST", "/v1/vaults/j/services", { host: `127.0.0.1:${P}`, auth: { type: "bearer", token: "KEY" } });
    await api("POST", "/v1/vaults/j/services", { host: `localhost:${P}`, auth: { type: "query", param: "api_key", token: "KEY" } });
    // A session that outlives this run (the copies serve it).
    agentTok = (await api("POST", "/v1/sessions", { vault: "j", role: "proxy", ttl_seconds: 604800 })).token;
    await stop(r);
  }, 60_000);

  // Each case is a deployment of its own (a copy of the template): its replays show only what it sent.
  beforeEach(() => void (kept.length = 0));

  afterAll(() => {
    for (const d of dirs) {
      Bun.spawnSync(["sh", "-c", `chattr -R -i '${d}' 2>/dev/null; true`]);
      rmSync(d, { recursive: true, force: true });
    }
  });

  test("never a header value, query string, token or credential, through /proxy and the tunnel", async () => {
    const data = copyOfTemplate();
    const r = await run(data);
    if ("failed" in r) throw new Error(r.failed);
    const journal = join(data, "audit-journal.jsonl");
    const planted = { query: uniq("in-query"), header: uniq("in-header"), cookie: uniq("in-cookie"), body: uniq("in-body"), fragment: uniq("in-fragment") };
    // (The agent's own planted values are no stored credential: the storing upstream replays them, as it may.)
    const seen: string[] = [];
    const snapshot = () => seen.push(readFileSync(journal, "latin1"));
    const headers = { authorization: `Bearer ${agentTok}`, "x-api-key": planted.header, cookie: `s=${planted.cookie}` };
    for (const host of [`127.0.0.1:${P}`, `localhost:${P}`]) {
      await fetch(`${r.url}/proxy/${host}/q?token=${planted.query}&api_key=${planted.query}`, { method: "POST", headers, body: planted.body });
      snapshot(); // read before the writer empties it (records reach the file within the tick, the database 250 ms later)
    }
    // Through the tunnel: the query in the request line, headers, and a raw request line with a fragment.
    const ca = await (await fetch(`${r.url}/v1/ca.pem`)).text();
    const { conn } = await openTunnel(r.proxyPort, `localhost:${P}`, basicProxyAuth(agentTok, "j"), { ca, servername: "localhost" });
    conn.write(`GET /t?secret=${planted.query} HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: ${planted.header}\r\nCookie: s=${planted.cookie}\r\n\r\n`);
    await conn.readResponse();
    snapshot();
    conn.write(`GET /f#${planted.fragment} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    await conn.readResponse().catch(() => undefined);
    snapshot();
    conn.close();
    // The journal kept while the database is unreachable holds the same: stop with records queued is not possible on
    // SQLite, so the file is also read after a kill -9 right after a request.
    await fetch(`${r.url}/proxy/127.0.0.1:${P}/k?token=${planted.query}`, { headers });
    r.proc.kill("SIGKILL");
    await r.proc.exited;
    snapshot();
    const text = seen.join("\n");
    expect(text).toContain('"seq"'); // the snapshots did catch records
    const found = [journalSecret, agentTok, ...Object.values(planted)].filter((v) => text.includes(v) || text.includes(encodeURIComponent(v)));
    expect(found.map((v) => Object.entries(planted).find(([, p]) => p === v)?.[0] ?? (v === agentTok ? "token" : "credential"))).toEqual([]);
  }, 60_000);

  // Not new with issue 35, now in the README's list of what is not caught: the values sent lately
  // (the recent half) live in memory only. A value rotated away before a restart is no longer stored, so after
  // the restart nothing looks for it, and an upstream that kept it replays it to another vault's agent whole.
  test.todo("(a) a value rotated away, then a restart: the storing upstream's replay of the old value to B is still redacted", async () => {
    const data = copyOfTemplate();
    const first = await run(data);
    if ("failed" in first) throw new Error(first.failed);
    const old = uniq("before-restart");
    secrets.push(old);
    const put = (r: Run, value: string) => callApi(r.url, "PUT", "/v1/vaults/j/credentials/KEY", { value }, ownerTok);
    await callApi(first.url, "POST", "/v1/vaults", { name: "rb" }, ownerTok);
    await callApi(first.url, "POST", "/v1/vaults/rb/services", { host: `127.0.0.1:${P}`, auth: { type: "passthrough" } }, ownerTok);
    const bTok = (await callApi(first.url, "POST", "/v1/sessions", { vault: "rb", role: "proxy", ttl_seconds: 604800 }, ownerTok)).body.token;
    const asB = async (r: Run) => dumpResponse(await fetch(`${r.url}/proxy/127.0.0.1:${P}/replay`, { headers: { authorization: `Bearer ${bTok}` } }));
    await put(first, old);
    await fetch(`${first.url}/proxy/127.0.0.1:${P}/send-old`, { headers: { authorization: `Bearer ${agentTok}` } });
    expect(received(old)).toBeGreaterThan(0);
    const fresh = uniq("after-rotation");
    secrets.push(fresh);
    await put(first, fresh); // rotated: the old value is no longer stored
    const before = await asB(first);
    outputs.push(before);
    expect(before.includes(old)).toBe(false); // held while the process lives (the recent half)
    await stop(first);
    const second = await run(data);
    if ("failed" in second) throw new Error(second.failed);
    try {
      const after = await asB(second);
      const revealed = after.includes(old);
      if (!revealed) outputs.push(after);
      expect(revealed).toBe(false);
    } finally {
      await stop(second);
    }
  }, 60_000);

  async function afterTampering(tamper: (journal: string) => void): Promise<{ problems: string[]; lines: string[] }> {
    const data = copyOfTemplate();
    tamper(join(data, "audit-journal.jsonl"));
    const r = await run(data);
    if ("failed" in r) return { problems: [`did not start: ${r.failed}`], lines: [] };
    try {
      return { problems: await serves(r), lines: journalLines(r) };
    } finally {
      await stop(r);
    }
  }

  test("replaced by garbage: starts, serves, and says in one line that the unreadable journal was set aside", async () => {
    const { problems, lines } = await afterTampering((j) => writeFileSync(j, crypto.getRandomValues(new Uint8Array(4096)), { mode: 0o600 }));
    expect(problems).toEqual([]);
    expect(lines.length).toBe(1);
  }, 60_000);

  test("a readable header, then records that are not: starts, serves, and says so in one line", async () => {
    const { problems, lines } = await afterTampering((j) => {
      const header = readFileSync(j, "utf8").split("\n")[0]!;
      writeFileSync(j, `${header}\n{"seq":1,"entry":{"at":1}\nnot json\n{"seq":"x"}\n`, { mode: 0o600 });
    });
    expect(problems).toEqual([]);
    expect(lines.length).toBe(1);
  }, 60_000);

  test("a directory in its place: starts, serves, and says in one line that records will not survive the process", async () => {
    const { problems, lines } = await afterTampering((j) => {
      rmSync(j, { force: true });
      mkdirSync(j);
    });
    expect(problems).toEqual([]);
    expect(lines.length).toBe(1);
  }, 60_000);

  test("read-only (immutable, so even root cannot write it): starts, serves, says so in one line", async () => {
    const { problems, lines } = await afterTampering((j) => {
      if (!existsSync(j)) writeFileSync(j, "", { mode: 0o600 });
      chmodSync(j, 0o400);
      Bun.spawnSync(["chattr", "+i", j]);
    });
    expect(problems).toEqual([]);
    expect(lines.length).toBe(1);
  }, 60_000);

  test("a full disk (the journal is /dev/full): starts, serves, says so in one line", async () => {
    const { problems, lines } = await afterTampering((j) => {
      rmSync(j, { force: true });
      symlinkSync("/dev/full", j);
    });
    expect(problems).toEqual([]);
    expect(lines.length).toBe(1);
  }, 60_000);

  test("a named pipe in its place: starts, serves, says so in one line", async () => {
    const { problems, lines } = await afterTampering((j) => {
      rmSync(j, { force: true });
      Bun.spawnSync(["mkfifo", j]);
    });
    expect(problems).toEqual([]);
    expect(lines.length).toBe(1);
  }, 60_000);

  test("made read-only while records are in it: the broker keeps running and auditing, and says so once", async () => {
    const data = copyOfTemplate();
    const r = await run(data);
    if ("failed" in r) throw new Error(r.failed);
    const journal = join(data, "audit-journal.jsonl");
    try {
      await fetch(`${r.url}/proxy/127.0.0.1:${P}/before-immutable`, { headers: { authorization: `Bearer ${agentTok}` } });
      Bun.spawnSync(["chattr", "+i", journal]); // within the writer's 250 ms: the file holds the record
      await Bun.sleep(800);
      const alive = r.proc.exitCode === null;
      if (process.env.DEBUG35) console.log(r.logs());
      const problems = alive
        ? await serves(r)
        : [
            `the broker exited (${r.proc.exitCode}): ${r
              .logs()
              .split("\n")
              .filter((l) => /error|EPERM/.test(l))
              .slice(-3)
              .join(" | ")}`,
          ];
      expect(problems).toEqual([]);
      expect(journalLines(r).length).toBe(1);
    } finally {
      Bun.spawnSync(["chattr", "-i", journal]);
      if (r.proc.exitCode === null) await stop(r);
    }
  }, 60_000);

  test("the disk fills up while serving (a 6 MB tmpfs): the broker keeps serving and says so once", async () => {
    const mnt = mkdtempSync(join(tmpdir(), "issue35-tmpfs-"));
    dirs.push(mnt);
    if (Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs", mnt]).exitCode !== 0)
      return console.log("[issue35-attacks] no tmpfs mount here: skipped");
    try {
      const data = join(mnt, "data");
      Bun.spawnSync(["cp", "-a", template, data]);
      const r = await run(data);
      if ("failed" in r) throw new Error(r.failed);
      try {
        Bun.spawnSync(["sh", "-c", `dd if=/dev/zero of='${mnt}/filler' bs=64k 2>/dev/null; true`]);
        const statuses: number[] = [];
        for (let i = 0; i < 20; i++)
          statuses.push((await fetch(`${r.url}/proxy/127.0.0.1:${P}/full/${i}`, { headers: { authorization: `Bearer ${agentTok}` } })).status);
        await Bun.sleep(800);
        expect(r.proc.exitCode).toBeNull();
        expect(statuses.filter((s) => s !== 200)).toEqual([]);
        expect((await fetch(`${r.url}/health`)).status).toBe(200);
        expect(journalLines(r).length).toBe(1);
        rmSync(join(mnt, "filler"));
        expect(await serves(r)).toEqual([]);
      } finally {
        if (r.proc.exitCode === null) await stop(r);
      }
    } finally {
      Bun.spawnSync(["umount", "-l", mnt]);
    }
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------------------
describe("(e) /health under an unauthenticated flood", () => {
  test("bogus tokens on the API and the tunnel, 16 clients for 2 s: /health stays fast and 200", async () => {
    const stopAt = Date.now() + 2000;
    const port = Number(broker.proxyAddress!.split(":").pop());
    const flood = async (k: number) => {
      let n = 0;
      while (Date.now() < stopAt) {
        n++;
        if (k % 2) await fetch(`${broker.apiUrl}/v1/vaults`, { headers: { authorization: `Bearer av_sess_${crypto.randomUUID()}` } }).then((r) => r.text());
        else {
          const sock = await dialProxySocket(port);
          sock.write(`CONNECT api.test:${P} HTTP/1.1\r\nHost: api.test:${P}\r\nProxy-Authorization: Basic ${btoa(`av_sess_${k}${n}:x`)}\r\n\r\n`);
          await new Promise((r) => (sock.once("data", r), sock.once("close", r), setTimeout(r, 1000)));
          sock.destroy();
        }
      }
      return n;
    };
    const samples: number[] = [];
    const statuses: number[] = [];
    const probe = (async () => {
      while (Date.now() < stopAt) {
        const t = performance.now();
        statuses.push((await fetch(`${broker.apiUrl}/health`)).status);
        samples.push(performance.now() - t);
        await Bun.sleep(50);
      }
    })();
    const counts = await Promise.all(Array.from({ length: 16 }, (_, k) => flood(k)));
    await probe;
    const worst = Math.round(Math.max(...samples));
    console.log(
      `[issue35-attacks] /health during a flood of ${counts.reduce((a, b) => a + b, 0)} bogus requests: worst ${worst} ms over ${samples.length} probes`,
    );
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(worst).toBeLessThan(1000);
  });
});
