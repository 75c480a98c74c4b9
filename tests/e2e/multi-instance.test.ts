// Two compiled broker processes on one PostgreSQL database: what one instance changes, the other
// honours within a second (credentials, revoked sessions, approved proposals, a rotated CA), a
// SIGKILL mid-write loses nothing committed and leaves nothing half-applied, and two instances
// starting together on an empty database migrate it once. Every credential value handled here is
// checked against every response and both processes' logs. Propagation delays are printed.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { IncomingMessage, ServerResponse } from "node:http";
import { MIGRATIONS } from "../../src/store/schema.ts";
import { pgMissing, sharedPgCluster, type SharedPgCluster } from "../helpers/postgres.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { startVaultServer } from "../helpers/secret-stores/vault-server.ts";
import { callApi } from "./proxy-fixture.ts";
import { basicProxyAuth, dialProxy, openTunnel, sendConnect, startTls, type Conn } from "./tunnel-fixture.ts";
import {
  adminUrl,
  buildFreshBinary,
  createRecorder,
  dumpResponse,
  findLeak,
  pollUntil,
  queryDb,
  spawnInstance,
  stopAllInstances,
  waitForQuietDatabase,
  type Instance,
  type Recorder,
} from "./multi-instance-fixture.ts";

const PROPAGATION_MS = 1000; // the acceptance bound: a change on one instance is honoured by the other within a second
// While announcements are lost caches are re-checked every second; one poll and one request on top of that.
const DEGRADED_MS = PROPAGATION_MS + 400; // + one poll and one request, which a busy two-core machine can stretch past 150 ms

let cluster: SharedPgCluster;
let dbUrl: string;
let upstream: TestUpstream;
let bin: string;
let a: Instance;
let b: Instance;
const everyInstance: Instance[] = [];
let owner: string; // the owner's user session (valid on both instances: sessions live in the database)
let hostIp: string; // 127.0.0.1:<port>
let hostName: string; // localhost:<port>: proposals refuse IP literals, and CONNECT leaves are checked by name
let rec: Recorder; // calls the instances, keeps every response for the leak checks
const touchedVaults: string[] = [];

/** The upstream answers with a fixed body: what it received is read from upstream.received. */
function answer(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ ok: true, url: req.url }));
}

const unique = (tag: string, bytes = 24) => `sk-${tag}-${Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("base64url")}`;

function spawn(name: string): Promise<Instance> {
  return spawnInstance(name, { bin, databaseUrl: dbUrl, upstreamCaPem: upstream.pki.caPem }).then((i) => (everyInstance.push(i), i));
}

beforeAll(async () => {
  bin = buildFreshBinary();
  [cluster, upstream] = await Promise.all([sharedPgCluster(), startUpstream(answer)]);
  rec = createRecorder(upstream);
  dbUrl = await cluster.createDatabase();
  hostIp = `127.0.0.1:${upstream.port}`;
  hostName = `localhost:${upstream.port}`;
  // Both at the same moment on the empty database: the migration race is part of every run.
  [a, b] = await Promise.all([spawn("a"), spawn("b")]);
  owner = (await must(a, "POST", "/v1/auth/register", { email: "owner@example.com", password: "correct horse battery" }, "", 201)).token;
}, 60_000);

afterAll(async () => {
  await stopAllInstances();
  await upstream?.close();
  await cluster?.release();
});

const api: Recorder["api"] = (...args) => rec.api(...args);
const must: Recorder["must"] = (...args) => rec.must(...args);
const proxyVia: Recorder["proxy"] = (...args) => rec.proxy(...args);
const labelAuth: Recorder["labelAuth"] = (...args) => rec.labelAuth(...args);
const tunnelGet = (conn: Conn, tag: string) => rec.tunnelGet(conn, hostName, tag);

/** A vault on A with one credential, a bearer service for `host`, and a scoped proxy session. */
async function createVault(name: string, host: string, key: string, value: string) {
  touchedVaults.push(name);
  await must(a, "POST", "/v1/vaults", { name }, owner, 201);
  await must(a, "PUT", `/v1/vaults/${name}/credentials/${key}`, { value }, owner, 200);
  await must(a, "POST", `/v1/vaults/${name}/services`, { host, auth: { type: "bearer", token: key } }, owner, 201);
  return mintSession(name);
}

async function mintSession(vault: string): Promise<{ id: string; token: string }> {
  const s = await must(a, "POST", "/v1/sessions", { vault, role: "proxy" }, owner, 201);
  return { id: s.id, token: s.token };
}

/** DESIGN §5: no credential value in any response, in either (or any earlier) process's log, or in the audit log. */
async function expectNoLeak(secrets: readonly string[]): Promise<void> {
  await Bun.sleep(400); // audit records are flushed every 250 ms
  const audit: string[] = [];
  for (const v of touchedVaults) audit.push(JSON.stringify((await callApi(b.url, "GET", `/v1/vaults/${v}/logs?limit=1000`, undefined, owner)).body));
  const texts = [...rec.outputs, ...everyInstance.map((i) => i.logs()), ...audit];
  for (const s of secrets) expect(findLeak(texts, s)).toBeUndefined();
}

function report(what: string, delayMs: number | undefined, extra = ""): void {
  console.log(`[multi-instance] ${what}: ${delayMs === undefined ? "NOT within the limit" : `${delayMs} ms`}${extra}`);
}

describe.skipIf(pgMissing)("several broker instances on one PostgreSQL", () => {
  test("both started at the same moment on an empty database: one row per migration, one keyring, both healthy", async () => {
    const [versions, keyrings, cas] = await queryDb(dbUrl, [
      "SELECT version, count(*)::int AS n FROM schema_migrations GROUP BY version ORDER BY version",
      "SELECT count(*)::int AS n FROM keyring",
      "SELECT count(*)::int AS n FROM ca_certs",
    ]);
    expect(versions!.map((r) => [Number(r.version), r.n])).toEqual(MIGRATIONS.map((m) => [m.version, 1]));
    expect(keyrings![0]!.n).toBe(1);
    console.log(`[multi-instance] concurrent start: ${cas![0]!.n} root CA row(s) created`);
    expect(everyInstance.filter((i) => i.logs().includes('"event":"keyring_created"')).length).toBe(1);
    for (const inst of [a, b]) {
      const health = await api(inst, "GET", "/health");
      expect(health.body).toMatchObject({
        status: "ok",
        database: { backend: "postgres", reachable: true, announcements: "listening", audit_queued: expect.any(Number) },
      });
    }
    // Whatever each created at start, they settle on one root CA (the newest) once announcements flow.
    const t0 = performance.now();
    const same = await pollUntil(
      t0,
      PROPAGATION_MS,
      async () => (await fetch(`${a.url}/v1/ca.pem`).then((r) => r.text())) === (await fetch(`${b.url}/v1/ca.pem`).then((r) => r.text())),
    );
    expect(same ?? Infinity).toBeLessThanOrEqual(PROPAGATION_MS);
  });

  test("a credential changed through A is injected by B within one second", async () => {
    const before = unique("before");
    const after = unique("after");
    const s = await createVault("cred-sync", hostIp, "API_KEY", before);
    const primed = await proxyVia(b, s.token, hostIp, "prime"); // B now holds the vault's plan, old value included
    expect([primed.status, labelAuth(primed.path, { before })]).toEqual([200, "before"]);

    await must(a, "PUT", "/v1/vaults/cred-sync/credentials/API_KEY", { value: after }, owner, 200);
    const t0 = performance.now();
    const seen: string[] = [];
    const delay = await pollUntil(t0, PROPAGATION_MS, async () => {
      const r = await proxyVia(b, s.token, hostIp, "after");
      seen.push(r.status === 200 ? labelAuth(r.path, { before, after }) : `${r.status} ${r.code}`);
      return seen.at(-1) === "after";
    });
    report("credential changed on A, injected by B", delay, ` (${seen.length} request(s) to B)`);
    expect(seen.every((x) => x === "before" || x === "after")).toBe(true);
    expect(delay ?? Infinity).toBeLessThanOrEqual(PROPAGATION_MS);
    await expectNoLeak([before, after]);
  });

  test("a credential by reference: both inject the store's value, a rotation reaches both within one refresh interval, a connection moved on A is read through its new address by B within a second", async () => {
    const store = await startVaultServer();
    try {
      const first = unique("kv-first");
      const rotated = unique("kv-rotated");
      const storeToken = unique("hvs", 18);
      store.addToken(storeToken);
      store.put("apps/api", { key: first });
      touchedVaults.push("by-ref");
      await must(a, "POST", "/v1/vaults", { name: "by-ref" }, owner, 201);
      const conn = {
        name: "kv",
        kind: "vault",
        address: store.address,
        ca_pem: store.pki.caPem,
        auth: { method: "token", token: storeToken },
        refresh_seconds: 10,
      };
      await must(a, "POST", "/v1/secret-stores", conn, owner, 201);
      await must(a, "PUT", "/v1/secret-stores/kv/vaults/by-ref", undefined, owner, 200);
      const set = await must(a, "PUT", "/v1/vaults/by-ref/credentials/API_KEY", { ref: "kv:apps/api#key" }, owner, 200);
      expect([set.reference.version_seen, set.reference.last_error]).toEqual(["1", null]);
      await must(a, "POST", "/v1/vaults/by-ref/services", { host: hostIp, auth: { type: "bearer", token: "API_KEY" } }, owner, 201);
      const s = await mintSession("by-ref");
      for (const inst of [a, b]) {
        const r = await proxyVia(inst, s.token, hostIp, `first-${inst.name}`);
        expect([r.status, labelAuth(r.path, { first })]).toEqual([200, "first"]);
      }
      // Rotated in the store: each instance reads it itself, within one interval (10 s) and its sweep (1 s).
      store.put("apps/api", { key: rotated });
      const t0 = performance.now();
      for (const inst of [a, b]) {
        const delay = await pollUntil(
          t0,
          12_000,
          async () => labelAuth((await proxyVia(inst, s.token, hostIp, `rotated-${inst.name}`)).path, { first, rotated }) === "rotated",
        );
        report(`rotation in the store, injected by ${inst.name}`, delay);
        expect(delay ?? Infinity).toBeLessThanOrEqual(12_000);
      }
      // Unsharing on A is refused while a credential of the vault refers to the connection.
      await must(a, "DELETE", "/v1/secret-stores/kv/vaults/by-ref", undefined, owner, 409);
      // The connection's address changed on A: B drops what it read through it and reads again through the new one.
      const moved = await startVaultServer();
      try {
        moved.addToken(storeToken);
        moved.put("apps/api", { key: first });
        await must(
          a,
          "PATCH",
          "/v1/secret-stores/kv",
          { address: moved.address, ca_pem: moved.pki.caPem, auth: { method: "token", token: storeToken } },
          owner,
          200,
        );
        const t1 = performance.now();
        const delay = await pollUntil(
          t1,
          PROPAGATION_MS + 500,
          async () => labelAuth((await proxyVia(b, s.token, hostIp, "moved")).path, { first, rotated }) === "first",
        );
        report("connection moved on A, read through the new address by B", delay);
        expect(delay ?? Infinity).toBeLessThanOrEqual(PROPAGATION_MS + 500);
      } finally {
        await moved.close();
      }
      await expectNoLeak([first, rotated, storeToken]);
    } finally {
      await store.close();
    }
  }, 60_000);

  test("a scoped session revoked on A is refused by B's /proxy within one second", async () => {
    const value = unique("revoke");
    const s = await createVault("revoke", hostIp, "API_KEY", value);
    const primed = await proxyVia(b, s.token, hostIp, "prime-revoke"); // B has the session cached (5 s trust)
    expect([primed.status, labelAuth(primed.path, { value })]).toEqual([200, "value"]);

    await must(a, "DELETE", `/v1/sessions/${s.id}`, undefined, owner, 204);
    const t0 = performance.now();
    const statuses: number[] = [];
    const delay = await pollUntil(t0, PROPAGATION_MS, async () => {
      const r = await proxyVia(b, s.token, hostIp, "revoked");
      statuses.push(r.status);
      return r.status === 401;
    });
    report("session revoked on A, refused by B (/proxy)", delay, ` (statuses ${[...new Set(statuses)].join(",")})`);
    expect(delay ?? Infinity).toBeLessThanOrEqual(PROPAGATION_MS);
    expect(statuses.every((x) => x === 200 || x === 401)).toBe(true);
    expect((await proxyVia(a, s.token, hostIp, "revoked-a")).status).toBe(401);
    await expectNoLeak([value]);
  });

  test("a scoped session revoked on A is refused by B's CONNECT tunnel within one second (open tunnel and new CONNECT)", async () => {
    const value = unique("tunnel");
    const s = await createVault("revoke-tunnel", hostName, "API_KEY", value);
    const ca = await fetch(`${b.url}/v1/ca.pem`).then((r) => r.text());
    const proxyAuth = basicProxyAuth(s.token, "revoke-tunnel");
    const { conn } = await openTunnel(b.proxyPort, hostName, proxyAuth, { ca });
    try {
      const primed = await tunnelGet(conn, "tunnel-prime");
      expect([primed.status, labelAuth(primed.path, { value })]).toEqual([200, "value"]);

      await must(a, "DELETE", `/v1/sessions/${s.id}`, undefined, owner, 204);
      const t0 = performance.now();
      const statuses: number[] = [];
      const delay = await pollUntil(t0, PROPAGATION_MS, async () => {
        const r = await tunnelGet(conn, "tunnel-revoked");
        statuses.push(r.status);
        return r.status !== 200;
      });
      report("session revoked on A, refused inside B's open tunnel", delay, ` (statuses ${[...new Set(statuses)].join(",")})`);
      expect(delay ?? Infinity).toBeLessThanOrEqual(PROPAGATION_MS);
      expect(statuses.at(-1)).toBe(407);
    } finally {
      conn.close();
    }
    const sock = await dialProxy(b.proxyPort);
    try {
      const refused = await sendConnect(sock, hostName, proxyAuth);
      expect(refused.status).toBe(407);
    } finally {
      sock.destroy();
    }
    await expectNoLeak([value]);
  });

  test("a proposal filed on A and approved on B is applied as seen from A: the agent's next request through A is injected", async () => {
    const seed = unique("seed");
    const value = unique("approved");
    await createVault("proposals", hostIp, "SEED", seed);
    const agent = await mintSession("proposals");
    const before = await proxyVia(a, agent.token, hostName, "before-approval"); // A caches the vault's plan: no such service
    expect([before.status, before.code]).toEqual([403, "forbidden"]);

    const filed = await must(
      a,
      "POST",
      "/v1/proposals",
      { services: [{ host: hostName, auth: { type: "bearer", token: "NEW_KEY" } }], credentials: [{ key: "NEW_KEY" }], message: "need the upstream" },
      agent.token,
      201,
    );
    await must(b, "POST", `/v1/proposals/${filed.id}/approve`, { credentials: { NEW_KEY: value } }, owner, 200);
    const t0 = performance.now();
    // The agent's protocol: poll the proposal (through A) until it is no longer pending, then use the service.
    expect((await must(a, "GET", `/v1/proposals/${filed.id}`, undefined, agent.token, 200)).status).toBe("applied");
    const next = await proxyVia(a, agent.token, hostName, "after-approval");
    report("proposal approved on B, next request through A", Math.round(performance.now() - t0), ` (status ${next.status})`);
    expect([next.status, labelAuth(next.path, { value })]).toEqual([200, "value"]);
    await expectNoLeak([seed, value]);
  });

  test("a CA rotated on A is served by B within one second, and B's new tunnels present leaves signed by it", async () => {
    const value = unique("ca");
    const s = await createVault("ca-rotate", hostName, "API_KEY", value);
    const oldCa = await fetch(`${b.url}/v1/ca.pem`).then((r) => r.text());
    const primed = await openTunnel(b.proxyPort, hostName, basicProxyAuth(s.token, "ca-rotate"), { ca: oldCa }); // B caches a leaf for the host
    expect((await tunnelGet(primed.conn, "ca-prime")).status).toBe(200);
    primed.conn.close();

    const rotated = await must(a, "POST", "/v1/ca/rotate", undefined, owner, 200);
    const t0 = performance.now();
    const newCa: string = rotated.certificate;
    expect(newCa).not.toBe(oldCa);
    const delay = await pollUntil(t0, PROPAGATION_MS, async () => (await fetch(`${b.url}/v1/ca.pem`).then((r) => r.text())) === newCa);
    report("CA rotated on A, served by B", delay);
    expect(delay ?? Infinity).toBeLessThanOrEqual(PROPAGATION_MS);

    const fresh = await openTunnel(b.proxyPort, hostName, basicProxyAuth(s.token, "ca-rotate"), { ca: newCa }); // only the new CA trusted
    try {
      const r = await tunnelGet(fresh.conn, "ca-new-leaf");
      expect([r.status, labelAuth(r.path, { value })]).toEqual([200, "value"]);
    } finally {
      fresh.conn.close();
    }
    const sock = await dialProxy(b.proxyPort);
    expect((await sendConnect(sock, hostName, basicProxyAuth(s.token, "ca-rotate"))).status).toBe(200);
    const oldOnly = await startTls(sock, { ca: oldCa, servername: "localhost" }).then(
      (t) => (t.destroy(), "accepted"),
      (err: { code?: string }) => err.code ?? "refused",
    );
    sock.destroy();
    expect(oldOnly).not.toBe("accepted"); // the leaf is not signed by the old CA any more
    await expectNoLeak([value]);
  });

  test("a change committed while B's listen connection is being re-established is not lost: B drops its caches when it re-subscribes", async () => {
    const value = unique("gap");
    const s = await createVault("listen-gap", hostIp, "API_KEY", value);
    const primed = await proxyVia(b, s.token, hostIp, "gap-prime"); // B holds the vault's plan (trusted until announced otherwise)
    expect([primed.status, labelAuth(primed.path, { value })]).toEqual([200, "value"]);
    // Another writer (a tool, or an instance) disables the service just after the listen connections
    // drop: Bun re-subscribes within milliseconds, faster than a missed heartbeat shows, and the
    // announcement made in between reaches nobody.
    await queryDb(dbUrl, [
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
      ["UPDATE services SET enabled = 0 WHERE host = $1 AND vault_id = (SELECT id FROM vaults WHERE name = 'listen-gap')", [hostIp]],
    ]);
    const t0 = performance.now();
    const seen: string[] = [];
    const delay = await pollUntil(t0, PROPAGATION_MS, async () => {
      const r = await proxyVia(b, s.token, hostIp, "gap-after");
      seen.push(`${r.status} ${r.code ?? ""}`.trim());
      return r.code === "service_disabled";
    });
    report("change made while B re-subscribed, honoured by B", delay, ` (answers ${[...new Set(seen)].join(", ")})`);
    expect(delay ?? Infinity).toBeLessThanOrEqual(PROPAGATION_MS);
    const health = await pollUntil(performance.now(), 5000, async () => (await api(b, "GET", "/health")).body?.database?.announcements === "listening");
    expect(health).toBeDefined();
    await expectNoLeak([value]);
  });

  test("while announcements cannot be heard, B re-checks what it caches every second: a credential and a rotated CA", async () => {
    const before = unique("lost-before");
    const after = unique("lost-after");
    const s = await createVault("announcements-lost", hostIp, "API_KEY", before);
    const primed = await proxyVia(b, s.token, hostIp, "lost-prime");
    expect([primed.status, labelAuth(primed.path, { before })]).toEqual([200, "before"]);
    // New connections to the database are refused and the listen connections dropped: the instances
    // keep their open pool connections, but neither can subscribe again, so B's heartbeat stops coming back.
    const admin = adminUrl(dbUrl);
    const dbName = new URL(dbUrl).pathname.slice(1);
    await queryDb(admin, [
      `ALTER DATABASE "${dbName}" WITH ALLOW_CONNECTIONS false`,
      ["SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'", [dbName]],
    ]);
    try {
      const lost = await pollUntil(performance.now(), 5000, async () => (await api(b, "GET", "/health")).body?.database?.announcements === "lost");
      expect(lost).toBeDefined();
      const reprimed = await proxyVia(b, s.token, hostIp, "lost-reprime"); // cached again, now trusted for a second only
      expect([reprimed.status, labelAuth(reprimed.path, { before })]).toEqual([200, "before"]);
      await must(a, "PUT", "/v1/vaults/announcements-lost/credentials/API_KEY", { value: after }, owner, 200);
      const t0 = performance.now();
      const seen: string[] = [];
      const credDelay = await pollUntil(t0, DEGRADED_MS, async () => {
        const r = await proxyVia(b, s.token, hostIp, "lost-after");
        seen.push(r.status === 200 ? labelAuth(r.path, { before, after }) : `${r.status} ${r.code}`);
        return seen.at(-1) === "after";
      });
      report("announcements lost: credential changed on A, injected by B", credDelay, ` (${seen.length} request(s) to B)`);
      expect(seen.every((x) => x === "before" || x === "after")).toBe(true);
      expect(credDelay ?? Infinity).toBeLessThanOrEqual(DEGRADED_MS);

      const rotated = await must(a, "POST", "/v1/ca/rotate", undefined, owner, 200);
      const t1 = performance.now();
      const caDelay = await pollUntil(t1, DEGRADED_MS, async () => (await fetch(`${b.url}/v1/ca.pem`).then((r) => r.text())) === rotated.certificate);
      report("announcements lost: CA rotated on A, served by B", caDelay);
      expect(caDelay ?? Infinity).toBeLessThanOrEqual(DEGRADED_MS);
    } finally {
      await queryDb(admin, [`ALTER DATABASE "${dbName}" WITH ALLOW_CONNECTIONS true`]);
    }
    const back = await pollUntil(performance.now(), 15_000, async () => (await api(b, "GET", "/health")).body?.database?.announcements === "listening", 100);
    report("announcements heard again by B after connections were allowed", back);
    expect(back).toBeDefined();
    await expectNoLeak([before, after]);
  }, 30_000);

  test("SIGKILL of A mid-write and mid-approval: every acknowledged write is on B whole, nothing half-applied, B keeps working", async () => {
    await crashTest();
  }, 40_000);
});

/** A write sent to A as it dies: `ok` once answered 200; `unknown` when the answer was lost or an error (it may have committed). */
interface Write {
  readonly key: string;
  readonly value: string;
  state: "pending" | "ok" | "unknown";
}

async function crashTest(): Promise<void> {
  const vault = "crash";
  const seed = unique("crash-seed");
  await createVault(vault, hostIp, "SEED", seed);
  const agent = await mintSession(vault);
  // Proposals to approve while A dies: the first names the real upstream so an applied one can be used.
  const proposals: (Write & { id: number; host: string })[] = [];
  for (let i = 0; i < 6; i++) {
    const host = i === 0 ? hostName : `crash-${i}.example.com`;
    const key = `PROP_${i}`;
    const filed = await must(
      a,
      "POST",
      "/v1/proposals",
      { services: [{ host, auth: { type: "bearer", token: key } }], credentials: [{ key }] },
      agent.token,
      201,
    );
    proposals.push({ id: filed.id, host, key, value: unique(`prop${i}`, 512), state: "pending" });
  }
  const attempts: Write[] = [];
  let okCount = 0;
  let killed = false;
  const send = async (x: Write, method: string, path: string, body: unknown) => {
    try {
      const res = await fetch(`${a.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      rec.outputs.push(await dumpResponse(res));
      x.state = res.status === 200 ? "ok" : "unknown";
    } catch {
      x.state = "unknown";
    }
    if (x.state === "ok") okCount++;
  };
  const writer = async () => {
    while (!killed && attempts.length < 400) {
      const x: Write = { key: `K_${attempts.length}`, value: unique(`w${attempts.length}`, 768), state: "pending" };
      attempts.push(x);
      await send(x, "PUT", `/v1/vaults/${vault}/credentials/${x.key}`, { value: x.value });
    }
  };
  const writers = Array.from({ length: 8 }, writer);
  const approvals: Promise<void>[] = [];
  // Approvals go out between the writes, the last a moment before the kill, so some are mid-flight.
  for (const [i, p] of proposals.entries()) {
    while (okCount < 5 + 8 * i && attempts.length < 400) await Bun.sleep(1);
    approvals.push(send(p, "POST", `/v1/proposals/${p.id}/approve`, { credentials: { [p.key]: p.value } }));
  }
  await Bun.sleep(3);
  killed = true;
  expect(await a.kill("SIGKILL")).not.toBe(0);
  await Promise.all([...writers, ...approvals]);
  // A statement A sent before it died (a COMMIT, say) may still be finishing in PostgreSQL: judge the
  // state once the dead instance's transactions have ended, committed or rolled back.
  await waitForQuietDatabase(dbUrl);

  const states = (xs: { state: string }[]) => ({ ok: xs.filter((x) => x.state === "ok").length, unknown: xs.filter((x) => x.state === "unknown").length });
  const keys = new Set<string>((await must(b, "GET", `/v1/vaults/${vault}/credentials`, undefined, owner, 200)).credentials.map((c: { key: string }) => c.key));

  // Every acknowledged write is there, and every write that is there (acknowledged or not) holds its whole value.
  const lost = attempts.filter((x) => x.state === "ok" && !keys.has(x.key)).map((x) => x.key);
  expect(lost).toEqual([]);
  const wrong: string[] = [];
  for (const x of attempts.filter((x) => keys.has(x.key))) {
    await must(b, "PATCH", `/v1/vaults/${vault}/services/${encodeURIComponent(hostIp)}`, { auth: { type: "bearer", token: x.key } }, owner, 200);
    const r = await proxyVia(b, agent.token, hostIp, `crash-${x.key}`);
    if (r.status !== 200 || labelAuth(r.path, { value: x.value }) !== "value") wrong.push(`${x.key}: ${r.status} ${labelAuth(r.path, { value: x.value })}`);
  }
  expect(wrong).toEqual([]);
  const unknownPresent = attempts.filter((x) => x.state === "unknown" && keys.has(x.key)).length;

  // A proposal is pending with nothing of it written, or applied with its service and its credential.
  const services = new Set<string>((await must(b, "GET", `/v1/vaults/${vault}/services`, undefined, owner, 200)).services.map((s: { host: string }) => s.host));
  const outcome: string[] = [];
  for (const p of proposals) {
    const status = (await must(b, "GET", `/v1/proposals/${p.id}`, undefined, owner, 200)).status as string;
    outcome.push(`${p.id}:${p.state}->${status}`);
    if (p.state === "ok") expect(status).toBe("applied");
    expect(["pending", "applied"]).toContain(status);
    expect([services.has(p.host), keys.has(p.key)]).toEqual(status === "applied" ? [true, true] : [false, false]);
  }
  const first = proposals[0]!;
  if (keys.has(first.key)) {
    const r = await proxyVia(b, agent.token, first.host, "crash-proposal");
    expect([r.status, labelAuth(r.path, { value: first.value })]).toEqual([200, "value"]);
  }
  console.log(
    `[multi-instance] SIGKILL: writes ${JSON.stringify(states(attempts))} (${unknownPresent} unacknowledged present, whole), approvals ${JSON.stringify(states(proposals))} [${outcome.join(" ")}]`,
  );

  // B keeps working, and A comes back on the same database.
  expect((await api(b, "GET", "/health")).body).toMatchObject({ status: "ok", database: { reachable: true, announcements: "listening" } });
  await must(b, "PATCH", `/v1/vaults/${vault}/services/${encodeURIComponent(hostIp)}`, { auth: { type: "bearer", token: "SEED" } }, owner, 200);
  const still = await proxyVia(b, agent.token, hostIp, "crash-after");
  expect([still.status, labelAuth(still.path, { seed })]).toEqual([200, "seed"]);
  a = await spawn("a2");
  const back = await proxyVia(a, agent.token, hostIp, "crash-restarted");
  expect([back.status, labelAuth(back.path, { seed })]).toEqual([200, "seed"]);
  await expectNoLeak([seed, ...attempts.map((x) => x.value), ...proposals.map((p) => p.value)]);
}
