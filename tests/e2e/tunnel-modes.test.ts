// The CONNECT listener's session and host modes: a revoked session fails on its next request inside
// an open tunnel; hosts that are not services get a blind tunnel (end-to-end TLS with the host's own
// certificate, no injection, audited as "blind") or, with unmatched_hosts = deny, an intercepted
// tunnel whose request gets 403 forbidden with a proposal hint. Blind tunnels dial and audit through
// the egress core: a guard refusal is audited too.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { basicProxyAuth, Conn, dialProxy, openTunnel, sendConnect, startTunnelEnv, type TunnelEnv } from "./tunnel-fixture.ts";

let env: TunnelEnv;
let blind: TestUpstream;
let blindAuthority: string;

beforeAll(async () => {
  env = await startTunnelEnv();
  blind = await startUpstream(undefined, { names: { dns: ["blind.test"], ips: [] } });
  env.broker.dns.set("blind.test", ["127.0.0.1"]);
  blindAuthority = `blind.test:${blind.port}`;
});
afterAll(async () => {
  await env?.stop();
  await blind?.close();
});

const json = (b: Buffer) => JSON.parse(b.toString("utf8"));

describe("session re-checked on every request", () => {
  test("revoking the scoped session mid-tunnel: the next request on the same tunnel gets 407", async () => {
    const b = env.broker;
    const minted = await b.api("POST", "/v1/sessions", { vault: b.vault, role: "proxy" }, b.userToken);
    expect(minted.status).toBe(201);
    const { conn } = await openTunnel(env.proxyPort, env.authority, basicProxyAuth(minted.body.token, b.vault), { ca: env.caPem });
    conn.write(`GET /before-revoke HTTP/1.1\r\nHost: ${env.authority}\r\n\r\n`);
    expect((await conn.readResponse()).status).toBe(200);

    const del = await b.api("DELETE", `/v1/sessions/${minted.body.id}`, undefined, b.userToken);
    expect(del.status).toBeLessThan(300);

    const before = env.upstream.received.length;
    conn.write(`GET /after-revoke HTTP/1.1\r\nHost: ${env.authority}\r\n\r\n`);
    const res = await conn.readResponse();
    expect(res.status).toBe(407);
    expect(res.headers["x-broker-error"]).toBe("unauthorized");
    expect(res.headers["proxy-authenticate"]).toBe('Basic realm="broker"');
    expect(json(res.body).error).toBe("unauthorized");
    expect(env.upstream.received.length).toBe(before);
    conn.close();
  });
});

describe("unmatched hosts", () => {
  test("default (tunnel): CONNECT 200, end-to-end TLS with the host's own certificate, no injection, audited as blind", async () => {
    const { conn, tls } = await openTunnel(env.proxyPort, blindAuthority, env.proxyAuth, { ca: blind.pki.caPem });
    expect(tls.authorized).toBe(true); // the upstream's own CA, not the broker's
    expect(tls.getPeerX509Certificate()!.issuer).toContain("broker test CA");
    conn.write(`GET /blind-path HTTP/1.1\r\nHost: ${blindAuthority}\r\nConnection: close\r\n\r\n`);
    const res = await conn.readResponse();
    expect(res.status).toBe(200);
    const seen = blind.received.at(-1)!;
    expect(seen.url).toBe("/blind-path");
    expect(seen.rawHeaders.some(([k]) => /^(proxy-)?authorization$/i.test(k))).toBe(false);
    expect(JSON.stringify(seen.rawHeaders)).not.toContain(env.secret);
    conn.close();

    let record: any;
    for (let i = 0; i < 40 && !record; i++) {
      await Bun.sleep(100);
      record = (await env.broker.auditLogs()).find((l) => l.ingress === "blind" && l.host === blindAuthority);
    }
    expect(record).toBeDefined();
    expect(record.method).toBe("CONNECT");
    expect(record.service).toBeNull();
    expect(record.credential_keys).toEqual([]);
    expect(record.status).toBe(200);
    expect(record.error).toBeNull();
    // The TLS handshake and one request each way went through the relay.
    expect(record.bytes_in).toBeGreaterThan(0);
    expect(record.bytes_out).toBeGreaterThan(0);
  });

  test("the broker CA is not presented for a blind host (a client trusting only the broker CA fails)", async () => {
    await expect(openTunnel(env.proxyPort, blindAuthority, env.proxyAuth, { ca: env.caPem })).rejects.toThrow();
  });

  test("unmatched_hosts = deny: the CONNECT is intercepted and the request gets 403 forbidden with proposal_hint", async () => {
    const b = env.broker;
    const patch = await b.api("PATCH", `/v1/vaults/${b.vault}`, { unmatched_hosts: "deny" }, b.userToken);
    expect(patch.status).toBe(200);
    try {
      const before = blind.received.length;
      // The broker CA's leaf, not the host's own certificate: no upstream connection is made.
      const { conn, tls } = await openTunnel(env.proxyPort, blindAuthority, env.proxyAuth, { ca: env.caPem });
      expect(tls.authorized).toBe(true);
      const body = "never-forwarded";
      conn.write(`POST /denied HTTP/1.1\r\nHost: ${blindAuthority}\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      const res = await conn.readResponse();
      expect(res.status).toBe(403);
      expect(res.headers["x-broker-error"]).toBe("forbidden");
      const refusal = json(res.body);
      expect(refusal.error).toBe("forbidden");
      expect(refusal.proposal_hint).toBeDefined();
      expect(JSON.stringify(refusal.proposal_hint)).toContain("blind.test");
      expect(await conn.closesWithin()).toBe(true);
      expect(blind.received.length).toBe(before);

      // A service host is still intercepted under deny.
      const { conn: ok } = await openTunnel(env.proxyPort, env.authority, env.proxyAuth, { ca: env.caPem });
      ok.write(`GET /still-served HTTP/1.1\r\nHost: ${env.authority}\r\n\r\n`);
      expect((await ok.readResponse()).status).toBe(200);
      ok.close();
    } finally {
      await b.api("PATCH", `/v1/vaults/${b.vault}`, { unmatched_hosts: "tunnel" }, b.userToken);
    }
  });

  test("a blind CONNECT to a guarded address is refused (network guard still applies)", async () => {
    const sock = await dialProxy(env.proxyPort);
    const res = await sendConnect(sock, "169.254.169.254:443", env.proxyAuth);
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).not.toBe(407);
    sock.destroy();
    // Refused through the egress core, which audits the refusal like any other request's.
    let record: any;
    for (let i = 0; i < 40 && !record; i++) {
      await Bun.sleep(100);
      record = (await env.broker.auditLogs()).find((l) => l.ingress === "blind" && l.host === "169.254.169.254");
    }
    expect(record).toMatchObject({ method: "CONNECT", status: res.status, bytes_in: 0, bytes_out: 0 });
    expect(record.error).toBeTruthy();
  });
});
