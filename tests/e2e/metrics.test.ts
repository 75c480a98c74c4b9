// GET /metrics end to end: an in-process broker with the tunnel listener, real traffic on /proxy and
// through a tunnel, the exposition text parsed here and checked to move with it. No label may carry
// the session token, the credential value, a path or a query string that the traffic used.

import { afterAll, describe, expect, test } from "bun:test";
import { dumpResponse, expectEnvelope, expectNoLeak, startBroker } from "./proxy-fixture.ts";
import { createTestPki } from "../helpers/pki.ts";
import { startUpstream } from "../helpers/upstream.ts";
import { openTunnel, startTunnelEnv, type TunnelEnv } from "./tunnel-fixture.ts";

interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** A small parser of the text exposition format: samples with labels, # TYPE lines checked for shape. */
function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
      if (!m) throw new Error(`bad comment line: ${line}`);
      if (m[1] === "TYPE") types.set(m[2]!, m[3]!);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ([^ ]+)(?: \d+)?$/.exec(line);
    if (!m) throw new Error(`bad sample line: ${line}`);
    const labels: Record<string, string> = {};
    const body = m[2] ?? "";
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/gy;
    let consumed = 0;
    for (let l = re.exec(body); l; l = re.exec(body)) {
      labels[l[1]!] = l[2]!.replace(/\\n/g, "\n").replace(/\\"/g, '"').replace(/\\\\/g, "\\");
      consumed = re.lastIndex;
    }
    if (consumed !== body.length) throw new Error(`bad labels: ${line}`);
    const value = m[3] === "+Inf" ? Infinity : m[3] === "-Inf" ? -Infinity : Number(m[3]);
    if (Number.isNaN(value) && m[3] !== "NaN") throw new Error(`bad value: ${line}`);
    samples.push({ name: m[1]!, labels, value });
  }
  return { samples, types };
}

function sum(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);
}

async function scrape(apiUrl: string, token?: string) {
  const res = await fetch(`${apiUrl}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain");
  const text = await res.text();
  return { text, ...parseExposition(text) };
}

const cleanup: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f().catch(() => {});
});

describe("GET /metrics", () => {
  let t: TunnelEnv;
  const token = `metrics-${crypto.randomUUID()}`;

  test("counters and histograms move with /proxy and tunnel traffic; labels hold no token, path, query or value", async () => {
    t = await startTunnelEnv({
      env: { BROKER_METRICS: "true", BROKER_RATELIMIT_PROFILE: "default", BROKER_RATELIMIT_PROXY_BURST: "7", BROKER_RATELIMIT_PROXY_RPS: "0.001" },
    });
    cleanup.push(() => t.stop());
    const b = t.broker;
    const before = await scrape(b.apiUrl);
    expect(before.types.get("broker_proxied_requests_total")).toBe("counter");
    expect(before.types.get("broker_added_seconds")).toBe("histogram");
    expect(before.types.get("broker_upstream_seconds")).toBe("histogram");
    expect(before.types.get("broker_audit_queue_depth")).toBe("gauge");
    expect(before.samples.some((s) => s.name === "broker_audit_queue_depth")).toBe(true);
    expect(before.samples.some((s) => s.name === "broker_audit_dropped_total")).toBe(true);
    expect(before.samples.some((s) => s.name === "broker_proposals_pending")).toBe(true);
    expect(sum(before.samples, "broker_proxied_requests_total")).toBe(0);

    const secretPath = "/secret-path-a1b2";
    const secretQuery = "q=secret-query-c3d4";
    // Every response the agent saw, for the leak check at the end.
    const outputs: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await b.proxy(t.authority, `${secretPath}?${secretQuery}`);
      expect(r.status).toBe(200);
      outputs.push(await dumpResponse(r));
    }

    // One tunnel with two requests inside; it stays open for the gauge.
    const { conn, tls } = await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem });
    for (let i = 0; i < 2; i++) {
      conn.write(`GET ${secretPath}/inner?${secretQuery} HTTP/1.1\r\nHost: ${t.authority}\r\n\r\n`);
      const r = await conn.readResponse();
      expect(r.status).toBe(200);
      outputs.push(`${r.head}\r\n\r\n${r.body.toString("latin1")}`);
    }
    const during = await scrape(b.apiUrl);
    expect(sum(during.samples, "broker_open_tunnels")).toBe(1);
    expect(sum(during.samples, "broker_open_connections")).toBeGreaterThanOrEqual(1);
    tls.destroy();
    // A second tunnel to the same authority is served from the leaf cache.
    const hitsBefore = sum(during.samples, "broker_leaf_cache_hits_total");
    (await openTunnel(t.proxyPort, t.authority, t.proxyAuth, { ca: t.caPem })).tls.destroy();

    // The burst of 7 is spent (3 /proxy + CONNECT + 2 inside + CONNECT): the next /proxy call is refused by the PROXY tier.
    const refused = await b.proxy(t.authority, secretPath);
    expect(refused.status).toBe(429);
    outputs.push(await dumpResponse(refused));

    const after = await scrape(b.apiUrl);
    const s = after.samples;
    const ok = { vault: b.vault, service: t.authority, status_class: "2xx" };
    expect(sum(s, "broker_proxied_requests_total", { ingress: "explicit", ...ok })).toBe(3);
    expect(sum(s, "broker_proxied_requests_total", { ingress: "transparent", ...ok })).toBe(2);
    expect(sum(s, "broker_ratelimit_refusals_total", { tier: "proxy" })).toBe(1);
    expect(sum(s, "broker_ratelimit_refusals_total", { tier: "global" })).toBe(0);
    // Histograms: cumulative buckets ending in +Inf, whose count matches _count.
    for (const h of ["broker_added_seconds", "broker_upstream_seconds"]) {
      const buckets = s.filter((x) => x.name === `${h}_bucket` && x.labels.ingress === "explicit");
      expect(buckets.length).toBeGreaterThan(5);
      expect(buckets.at(-1)!.labels.le).toBe("+Inf");
      for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value);
      expect(buckets.at(-1)!.value).toBe(3);
      expect(sum(s, `${h}_count`, { ingress: "explicit" })).toBe(3);
      expect(sum(s, `${h}_count`, { ingress: "transparent" })).toBe(2);
    }
    expect(sum(s, "broker_leaf_mints_total")).toBeGreaterThanOrEqual(1);
    expect(sum(s, "broker_leaf_cache_hits_total")).toBeGreaterThan(hitsBefore);
    const later = after;

    const forbidden = [b.sessionToken, b.userToken, t.secret, secretPath, "secret-path", secretQuery, "secret-query", "/inner", "?"];
    for (const sample of later.samples) {
      for (const value of Object.values(sample.labels)) for (const f of forbidden) expect(value.includes(f)).toBe(false);
    }
    for (const f of forbidden.slice(0, 6)) expect(later.text.includes(f)).toBe(false);
    // The credential reaches none of the responses (/proxy, tunnel, 429), the logs or the audit.
    for (const o of outputs) expect(o).not.toContain(t.secret);
    await expectNoLeak(b, t.secret, outputs);
  }, 60_000);

  test("upstream connect errors are counted by kind", async () => {
    // A refused port on loopback: the dial fails with "connect".
    const closed = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = closed.port;
    closed.stop(true);
    const env = await startTunnelEnv({ env: { BROKER_METRICS: "true" } });
    cleanup.push(() => env.stop());
    await env.broker.addService(`upstream.test:${port}`, { type: "bearer", token: "API_KEY" });
    const failed = await env.broker.proxy(`upstream.test:${port}`, "/x");
    expect(failed.status).toBe(502);
    const dump = await dumpResponse(failed);
    expect(dump).not.toContain(env.secret);
    const s = (await scrape(env.broker.apiUrl)).samples;
    expect(sum(s, "broker_upstream_connect_errors_total", { kind: "connect" })).toBeGreaterThanOrEqual(1);
    expect(sum(s, "broker_proxied_requests_total", { ingress: "explicit", status_class: "5xx" })).toBe(1);
    await expectNoLeak(env.broker, env.secret, [dump]);
  }, 60_000);

  test("WebSocket upgrades are counted like requests: 101 as 1xx, a refused upgrade by its status", async () => {
    const pki = await createTestPki();
    const upstream = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      tls: { cert: pki.certPem, key: pki.keyPem },
      fetch: (req, srv) => (new URL(req.url).pathname === "/socket" && srv.upgrade(req, { data: undefined }) ? undefined : new Response("no", { status: 426 })),
      websocket: { message: (ws, msg) => void ws.send(`echo:${msg}`) },
    });
    cleanup.push(async () => void upstream.stop(true));
    const b = await startBroker({ caPem: pki.caPem, tunnel: true, env: { BROKER_METRICS: "true" } });
    cleanup.push(() => b.stop());
    const service = `upstream.test:${upstream.port}`;
    b.dns.set("upstream.test", ["127.0.0.1"]);
    const wsSecret = `sk-ws-${crypto.randomUUID()}`;
    await b.setCredential("WS_KEY", wsSecret);
    await b.addService(service, { type: "bearer", token: "WS_KEY" });
    const caPem = await (await fetch(`${b.apiUrl}/v1/ca.pem`)).text();
    const open = (path: string) =>
      new Promise<boolean>((resolve) => {
        // Bun's WebSocket accepts proxy and tls options (not in the DOM typings).
        const ws = new WebSocket(`wss://${service}${path}`, {
          proxy: `http://${b.sessionToken}:${b.vault}@${b.proxyAddress}`,
          tls: { ca: caPem },
        } as unknown as string[]);
        ws.onopen = () => ws.send("hi");
        ws.onmessage = () => (ws.close(), resolve(true));
        ws.onerror = () => resolve(false);
        setTimeout(() => resolve(false), 10_000);
      });
    expect(await open("/socket?secret-query=1")).toBe(true);
    expect(await open("/refused")).toBe(false);
    const { samples: s, text } = await scrape(b.apiUrl);
    const labels = { ingress: "transparent", vault: b.vault, service };
    expect(sum(s, "broker_proxied_requests_total", { ...labels, status_class: "1xx" })).toBe(1);
    expect(sum(s, "broker_proxied_requests_total", { ...labels, status_class: "4xx" })).toBe(1);
    expect(sum(s, "broker_added_seconds_count", { ingress: "transparent" })).toBe(2);
    expect(sum(s, "broker_upstream_seconds_count", { ingress: "transparent" })).toBe(2);
    for (const f of ["/socket", "/refused", "secret-query", b.sessionToken]) expect(text.includes(f)).toBe(false);
    await expectNoLeak(b, wsSecret, [text]);
  }, 60_000);
});

describe("GET /metrics access", () => {
  test("off by default: 404", async () => {
    const up = await startUpstream();
    cleanup.push(() => up.close());
    const b = await startBroker({ caPem: up.pki.caPem });
    cleanup.push(() => b.stop());
    await expectEnvelope(await fetch(`${b.apiUrl}/metrics`), 404, "not_found");
  });

  test("BROKER_METRICS_TOKEN: 401 envelope without or with a wrong token, 200 with it", async () => {
    const up = await startUpstream();
    cleanup.push(() => up.close());
    const token = `tok-${crypto.randomUUID()}`;
    const b = await startBroker({ caPem: up.pki.caPem, env: { BROKER_METRICS_TOKEN: token } });
    cleanup.push(() => b.stop());
    // Each 401 is kept whole (status, headers, body) for the leak check below.
    const refusals: string[] = [];
    const refused = async (headers: Record<string, string>) => {
      const res = await fetch(`${b.apiUrl}/metrics`, { headers });
      refusals.push(await dumpResponse(res.clone()));
      return res;
    };
    await expectEnvelope(await refused({}), 401, "unauthorized");
    await expectEnvelope(await refused({ authorization: `Bearer ${token}x` }), 401, "unauthorized");
    await expectEnvelope(await refused({ authorization: `Bearer ${b.sessionToken}` }), 401, "unauthorized");
    const ok = await scrape(b.apiUrl, token);
    expect(ok.types.get("broker_proxied_requests_total")).toBe("counter");
    // The metrics token appears in no 401, no exposition text, no log line and no audit record.
    expect(refusals).toHaveLength(3);
    for (const r of refusals) expect(r).not.toContain(token);
    await expectNoLeak(b, token, [...refusals, ok.text]);
  });
});
