// BROKER_RESOLVE end to end: a service for a public name (api.github.com) reaches a local stand-in on 127.0.0.1
// through /proxy, an intercepted tunnel (HTTP/1.1 and HTTP/2 upstream) and a blind tunnel, with DNS never asked,
// the certificate verified for the name (the stand-in's has no IP entry), SNI and Host the name. The network
// guard judges the mapped address as it would a DNS answer: without the allowlist it is 403 egress_blocked,
// and a metadata address is refused even with private ranges allowed and everything allowlisted.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as http2 from "node:http2";
import type { TLSSocket } from "node:tls";
import { h2Tls } from "../helpers/h2-frames.ts";
import { startH2Upstream, type H2Upstream } from "../helpers/h2-upstream.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { dumpResponse, expectEnvelope, expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";
import { basicProxyAuth, dialProxy, openTunnel, sendConnect, startTls } from "./tunnel-fixture.ts";

const NAME = "api.github.com";
const BLIND_NAME = "uploads.github.com"; // mapped, but no service: a blind tunnel
const SECRET = `ghp_mapped_${crypto.randomUUID().replaceAll("-", "")}`;

let upstream: TestUpstream;
let h2: H2Upstream;
/** The default fixture's allowlist (127.0.0.1): the mapping works. */
let allowed: Broker;
/** No allowlist, private ranges blocked: the same mapping is refused. */
let blocked: Broker;
/** Private ranges allowed and everything allowlisted, mapping to metadata endpoints: still refused. */
let metadata: Broker;
let brokerCa: string;
/** Every response text the brokers produced, for the leak check. */
const outputs: string[] = [];

beforeAll(async () => {
  // Neither stand-in's certificate names an IP: verification can only pass against the host name.
  upstream = await startUpstream(
    (req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ host: req.headers.host, sni: (req.socket as TLSSocket).servername, path: req.url }));
    },
    { names: { dns: [NAME, BLIND_NAME], ips: [] } },
  );
  h2 = await startH2Upstream({ pki: upstream.pki });
  const resolve = [`${NAME}:${upstream.port}:127.0.0.1`, `${BLIND_NAME}:${upstream.port}:127.0.0.1`, `${NAME}:${h2.port}:127.0.0.1`].join(",");
  allowed = await startBroker({ caPem: upstream.pki.caPem, tunnel: true, env: { BROKER_RESOLVE: resolve } });
  blocked = await startBroker({ caPem: upstream.pki.caPem, tunnel: true, env: { BROKER_RESOLVE: resolve, BROKER_NETWORK_ALLOWLIST: "" } });
  metadata = await startBroker({
    caPem: upstream.pki.caPem,
    env: {
      BROKER_RESOLVE: `${NAME}:443:169.254.169.254,api.stripe.com:443:[::ffff:169.254.169.254],api.openai.com:443:[fd00:ec2::254]`,
      BROKER_ALLOW_PRIVATE_RANGES: "true",
      BROKER_NETWORK_ALLOWLIST: "0.0.0.0/0,::/0",
    },
  });
  for (const b of [allowed, blocked]) {
    await b.setCredential("GITHUB_TOKEN", SECRET);
    await b.addService(`${NAME}:${upstream.port}`, { type: "bearer", token: "GITHUB_TOKEN" });
  }
  await allowed.addService(`${NAME}:${h2.port}`, { type: "bearer", token: "GITHUB_TOKEN" });
  await metadata.setCredential("GITHUB_TOKEN", SECRET);
  for (const host of [NAME, "api.stripe.com", "api.openai.com"]) await metadata.addService(host, { type: "bearer", token: "GITHUB_TOKEN" });
  brokerCa = await (await fetch(`${allowed.apiUrl}/v1/ca.pem`)).text();
});

afterAll(async () => {
  for (const b of [allowed, blocked, metadata]) await b?.stop();
  await upstream?.close();
  await h2?.close();
});

const authorizationsSeen = (path: string) =>
  upstream.received.filter((r) => r.url === path).flatMap((r) => r.rawHeaders.filter(([k]) => k.toLowerCase() === "authorization").map(([, v]) => v));

describe("mapped to a permitted address", () => {
  test("/proxy: the stand-in gets the credential, Host and SNI are the name, DNS is never asked", async () => {
    const res = await allowed.proxy(`${NAME}:${upstream.port}`, "/user");
    const text = await dumpResponse(res.clone());
    outputs.push(text);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ host: `${NAME}:${upstream.port}`, sni: NAME, path: "/user" });
    expect(authorizationsSeen("/user")).toEqual([`Bearer ${SECRET}`]);
    expect(allowed.lookups).not.toContain(NAME);
  });

  test("intercepted tunnel (HTTP/1.1): the same, through CONNECT", async () => {
    const authority = `${NAME}:${upstream.port}`;
    const { conn } = await openTunnel(port(allowed), authority, proxyAuth(allowed), { ca: brokerCa });
    conn.write(`GET /tunnel-user HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`);
    const res = await conn.readResponse();
    outputs.push(res.head, res.body.toString("latin1"));
    conn.close();
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString("utf8"))).toEqual({ host: authority, sni: NAME, path: "/tunnel-user" });
    expect(authorizationsSeen("/tunnel-user")).toEqual([`Bearer ${SECRET}`]);
    expect(allowed.lookups).not.toContain(NAME);
  });

  test("intercepted tunnel (HTTP/2 upstream): the HTTP/2 client dials the mapped address and verifies the name", async () => {
    const authority = `${NAME}:${h2.port}`;
    const sock = await dialProxy(port(allowed));
    expect((await sendConnect(sock, authority, proxyAuth(allowed))).status).toBe(200);
    const tls = await h2Tls({ socket: sock, host: NAME, ca: brokerCa });
    const session = http2.connect(`https://${authority}`, { createConnection: () => tls });
    session.on("error", () => {});
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = session.request({ ":method": "GET", ":path": "/h2-user" }, { endStream: true });
      let status = 0;
      const chunks: Buffer[] = [];
      req.on("response", (h) => (status = Number(h[":status"])));
      req.on("data", (d: Buffer) => chunks.push(d));
      req.on("end", () => resolve({ status, body: Buffer.concat(chunks).toString("utf8") }));
      req.on("error", reject);
    });
    session.destroy();
    outputs.push(body);
    expect(status).toBe(200);
    const seen = h2.received.find((r) => r.path === "/h2-user")!;
    expect(seen.protocol).toBe("h2");
    expect(seen.authority).toBe(authority);
    expect(seen.headers.filter(([k]) => k === "authorization").map(([, v]) => v)).toEqual([`Bearer ${SECRET}`]);
    expect(allowed.lookups).not.toContain(NAME);
  });

  test("blind tunnel (no service): dialled at the mapped address, the agent's TLS end to end with the name", async () => {
    const authority = `${BLIND_NAME}:${upstream.port}`;
    const sock = await dialProxy(port(allowed));
    expect((await sendConnect(sock, authority, proxyAuth(allowed))).status).toBe(200);
    const tls = await startTls(sock, { ca: upstream.pki.caPem, servername: BLIND_NAME });
    expect(tls.authorized).toBe(true); // the stand-in's own certificate, not the broker's
    tls.write(`GET /blind HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`);
    const raw = await new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      tls.on("data", (d: Buffer) => chunks.push(d));
      tls.on("close", () => resolve(Buffer.concat(chunks).toString("utf8")));
    });
    expect(raw).toStartWith("HTTP/1.1 200");
    expect(JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4))).toEqual({ host: authority, sni: BLIND_NAME, path: "/blind" });
    expect(authorizationsSeen("/blind")).toEqual([]);
    expect(allowed.lookups).not.toContain(BLIND_NAME);
  });
});

describe("the guard judges the mapped address", () => {
  test("without the allowlist, mapping to 127.0.0.1 is 403 egress_blocked and nothing reaches the stand-in", async () => {
    const before = upstream.received.length;
    const res = await blocked.proxy(`${NAME}:${upstream.port}`, "/user");
    outputs.push(await dumpResponse(res.clone()));
    const body = await expectEnvelope(res, 403, "egress_blocked");
    expect(body.host).toBe(NAME);
    expect(body.message).toBe(`egress to ${NAME} is blocked: loopback range 127.0.0.0/8`);
    expect(upstream.received.length).toBe(before);
    expect(blocked.lookups).toEqual([]);
  });

  test("without the allowlist, an intercepted tunnel's request is 403 egress_blocked too", async () => {
    const authority = `${NAME}:${upstream.port}`;
    const { conn } = await openTunnel(port(blocked), authority, proxyAuth(blocked), { ca: await (await fetch(`${blocked.apiUrl}/v1/ca.pem`)).text() });
    conn.write(`GET /user HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`);
    const res = await conn.readResponse();
    outputs.push(res.head, res.body.toString("latin1"));
    conn.close();
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body.toString("utf8")).error).toBe("egress_blocked");
  });

  test("without the allowlist, a blind CONNECT to a mapped loopback address is refused", async () => {
    const before = upstream.received.length;
    const sock = await dialProxy(port(blocked));
    const res = await sendConnect(sock, `${BLIND_NAME}:${upstream.port}`, proxyAuth(blocked));
    sock.destroy();
    expect(res.status).toBe(403);
    expect(res.headers["x-broker-error"]).toBe("egress_blocked");
    expect(upstream.received.length).toBe(before);
  });

  for (const [host, label] of [
    [NAME, "169.254.169.254"],
    ["api.stripe.com", "::ffff:169.254.169.254"],
    ["api.openai.com", "fd00:ec2::254"],
  ] as const) {
    test(`${host} mapped to ${label} is refused with private ranges allowed and everything allowlisted`, async () => {
      const res = await metadata.proxy(host, "/user");
      outputs.push(await dumpResponse(res.clone()));
      const body = await expectEnvelope(res, 403, "egress_blocked");
      expect(body.host).toBe(host);
      expect(body.message).toContain("cloud metadata endpoint");
      expect(metadata.lookups).toEqual([]);
    });
  }
});

test("the credential appears in no response, log line or audit record of any of the brokers", async () => {
  expect(outputs.length).toBeGreaterThan(5);
  for (const b of [allowed, blocked, metadata]) await expectNoLeak(b, SECRET, outputs);
  // The audit names the host the agent asked for.
  expect((await allowed.auditLogs()).some((l: { host: string }) => l.host === `${NAME}:${upstream.port}`)).toBe(true);
});

function port(b: Broker): number {
  return Number(b.server.proxyAddress!.split(":").at(-1));
}

function proxyAuth(b: Broker): string {
  return basicProxyAuth(b.sessionToken, b.vault);
}
