// Explicit proxy error rows: every broker-made error carries the envelope and X-Broker-Error, and
// the network guard (including DNS rebinding) refuses before anything is dialled.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { dumpResponse, expectEnvelope, expectNoLeak, findClosedPort, startBroker, type Broker } from "./proxy-fixture.ts";

let upstream: TestUpstream;
let broker: Broker;
let hp: string;
const SECRET = `sk-errors-${crypto.randomUUID()}`;

beforeAll(async () => {
  upstream = await startUpstream();
  broker = await startBroker({ caPem: upstream.pki.caPem });
  hp = `127.0.0.1:${upstream.port}`;
  await broker.setCredential("API_KEY", SECRET);
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

/** The test certificate names only localhost, upstream.test and 127.0.0.1: tests that need a resolved name
 * take turns on upstream.test:<port>, replacing its service. */
async function useNamedService(auth: Record<string, unknown>, answers: string[] | (() => string[]) = ["127.0.0.1"]): Promise<string> {
  const host = `upstream.test:${upstream.port}`;
  broker.dns.set("upstream.test", answers);
  await broker.api("DELETE", `/v1/vaults/${broker.vault}/services/${encodeURIComponent(host)}`, undefined, broker.userToken);
  await broker.addService(host, auth);
  return host;
}

describe("error envelope rows", () => {
  test("403 forbidden with proposal_hint for a host with no service", async () => {
    const before = upstream.received.length;
    const body = await expectEnvelope(await broker.proxy("api.unmatched.example", "/v1/x?q=1"), 403, "forbidden");
    expect(body.proposal_hint).toBeDefined();
    expect(JSON.stringify(body.proposal_hint)).toContain("api.unmatched.example");
    expect(broker.lookups).not.toContain("api.unmatched.example"); // refused before any DNS
    expect(upstream.received.length).toBe(before);
  });

  test("403 service_disabled after PATCH enabled:false; 200 again after re-enabling", async () => {
    const host = await useNamedService({ type: "bearer", token: "API_KEY" });
    expect((await broker.proxy(host, "/")).status).toBe(200);
    const patch = await broker.api("PATCH", `/v1/vaults/${broker.vault}/services/${encodeURIComponent(host)}`, { enabled: false }, broker.userToken);
    expect(patch.status).toBe(200);
    const before = upstream.received.length;
    await expectEnvelope(await broker.proxy(host, "/"), 403, "service_disabled");
    expect(upstream.received.length).toBe(before);
    await broker.api("PATCH", `/v1/vaults/${broker.vault}/services/${encodeURIComponent(host)}`, { enabled: true }, broker.userToken);
    expect((await broker.proxy(host, "/")).status).toBe(200);
  });

  test("502 credential_not_found naming the key", async () => {
    const host = await useNamedService({ type: "bearer", token: "NEVER_SET_KEY" });
    const before = upstream.received.length;
    const body = await expectEnvelope(await broker.proxy(host, "/"), 502, "credential_not_found");
    expect(body.key).toBe("NEVER_SET_KEY");
    expect(upstream.received.length).toBe(before);
    // Setting it afterwards works at once (the cached miss is invalidated).
    await broker.setCredential("NEVER_SET_KEY", SECRET);
    expect((await broker.proxy(host, "/")).status).toBe(200);
  });

  test("401 for a bad or missing token", async () => {
    await expectEnvelope(await broker.proxy(hp, "/", { headers: { authorization: "Bearer av_sess_not-a-real-token" } }), 401, "unauthorized");
    const res = await fetch(`${broker.apiUrl}/proxy/${hp}/`);
    await expectEnvelope(res, 401, "unauthorized");
  });

  test("403 egress_blocked: resolved private address, or a private IP literal", async () => {
    broker.dns.set("internal.test", ["10.0.0.1"]);
    await broker.addService("internal.test", { type: "bearer", token: "API_KEY" });
    const b1 = await expectEnvelope(await broker.proxy("internal.test", "/"), 403, "egress_blocked");
    expect(b1.message).toContain("internal.test");
    expect(JSON.stringify(b1)).not.toContain("API_KEY");

    broker.dns.set("mixed.test", ["127.0.0.1", "10.0.0.1"]);
    await broker.addService(`mixed.test:${upstream.port}`, { type: "passthrough" });
    const before = upstream.received.length;
    await expectEnvelope(await broker.proxy(`mixed.test:${upstream.port}`, "/"), 403, "egress_blocked");
    expect(upstream.received.length).toBe(before);

    await broker.addService("10.0.0.1", { type: "passthrough" });
    await expectEnvelope(await broker.proxy("10.0.0.1", "/"), 403, "egress_blocked");
    await broker.addService("169.254.169.254", { type: "passthrough" });
    await expectEnvelope(await broker.proxy("169.254.169.254", "/latest/meta-data/"), 403, "egress_blocked");
  });

  test("403 egress_blocked for the broker's own listener", async () => {
    const port = new URL(broker.apiUrl).port;
    await broker.addService(`127.0.0.1:${port}`, { type: "passthrough" });
    await expectEnvelope(await broker.proxy(`127.0.0.1:${port}`, "/health"), 403, "egress_blocked");
  });

  test("502 upstream_unreachable for a port with nothing listening", async () => {
    const port = await findClosedPort();
    await broker.addService(`127.0.0.1:${port}`, { type: "bearer", token: "API_KEY" });
    await expectEnvelope(await broker.proxy(`127.0.0.1:${port}`, "/"), 502, "upstream_unreachable");
  });

  test("502 upstream_unreachable when the host does not resolve", async () => {
    await broker.addService("nxdomain.test", { type: "passthrough" });
    await expectEnvelope(await broker.proxy("nxdomain.test", "/"), 502, "upstream_unreachable");
  });

  test("an untrusted upstream certificate (name mismatch) is refused", async () => {
    broker.dns.set("wrongname.test", ["127.0.0.1"]); // not in the test certificate's names
    await broker.addService(`wrongname.test:${upstream.port}`, { type: "bearer", token: "API_KEY" });
    const before = upstream.received.length;
    const res = await broker.proxy(`wrongname.test:${upstream.port}`, "/");
    expect(res.status).toBe(502);
    expect(res.headers.get("x-broker-error")).toBe("upstream_unreachable");
    await res.arrayBuffer();
    expect(upstream.received.length).toBe(before); // the credential never left
  });

  test("target_host that is a wildcard or malformed → 400 invalid_request", async () => {
    await expectEnvelope(await broker.proxy("*.example.com", "/"), 400, "invalid_request");
    await expectEnvelope(await broker.proxy("user@127.0.0.1:1", "/"), 400, "invalid_request");
  });

  test("no error response, log line or audit record carries the credential", async () => {
    const outs = [await dumpResponse(await broker.proxy("internal.test", "/"))];
    await expectNoLeak(broker, SECRET, outs);
  });
});

describe("DNS rebinding", () => {
  // A fresh broker per test: its connection pool must hold nothing checked under earlier answers.
  async function rebindingBroker(answers: () => string[]): Promise<{ b: Broker; host: string }> {
    const b = await startBroker({ caPem: upstream.pki.caPem });
    await b.setCredential("API_KEY", SECRET);
    const host = `upstream.test:${upstream.port}`;
    b.dns.set("upstream.test", answers);
    await b.addService(host, { type: "bearer", token: "API_KEY" });
    return { b, host };
  }

  test("second lookup answers a private address → 403, the upstream saw one request only", async () => {
    let calls = 0;
    const { b, host } = await rebindingBroker(() => (++calls === 1 ? ["127.0.0.1"] : ["10.0.0.1"]));
    await using _ = b;
    const before = upstream.received.length;
    // The upstream closes this connection, so nothing checked at the first lookup stays pooled.
    const first = await b.proxy(host, "/first", { headers: { "x-test-close": "1" } });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    // Every new connection resolves again (answers are never cached) and the rebound answer is refused.
    await expectEnvelope(await b.proxy(host, "/second"), 403, "egress_blocked");
    await expectEnvelope(await b.proxy(host, "/third"), 403, "egress_blocked");
    expect(calls).toBe(3);
    expect(upstream.received.length).toBe(before + 1);
    expect(upstream.received.at(-1)!.url).toBe("/first");
  });

  test("a pooled keep-alive connection (to an address checked when it was opened) is reused without a lookup", async () => {
    let calls = 0;
    const { b, host } = await rebindingBroker(() => (++calls === 1 ? ["127.0.0.1"] : ["10.0.0.1"]));
    await using _ = b;
    for (const path of ["/a", "/b", "/c"]) {
      const res = await b.proxy(host, path);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    expect(calls).toBe(1); // the rebound answer was never needed, and 10.0.0.1 was never dialled
  });
});

describe("size cap", () => {
  test("413 payload_too_large above BROKER_MAX_REQUEST_BYTES; nothing reaches the upstream", async () => {
    await using small = await startBroker({ caPem: upstream.pki.caPem, env: { BROKER_MAX_REQUEST_BYTES: "1024" } });
    await small.setCredential("API_KEY", SECRET);
    await small.addService(hp, { type: "bearer", token: "API_KEY" });
    const before = upstream.received.length;
    const ok = await small.proxy(hp, "/small", { method: "POST", body: "x".repeat(1024) });
    expect(ok.status).toBe(200);
    await ok.arrayBuffer();
    await expectEnvelope(await small.proxy(hp, "/big", { method: "POST", body: "x".repeat(1025) }), 413, "payload_too_large");
    expect(upstream.received.length).toBe(before + 1);

    // A streamed body of unknown length is cut off too, and never silently truncated upstream.
    const chunk = new Uint8Array(512).fill(120);
    let n = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(ctrl) {
        if (n++ < 8) ctrl.enqueue(chunk);
        else ctrl.close();
      },
    });
    const res = await small.proxy(hp, "/streamed", { method: "POST", body: stream, duplex: "half" } as RequestInit);
    expect(res.status).toBe(413);
    expect(res.headers.get("x-broker-error")).toBe("payload_too_large");
    await res.arrayBuffer();
    const reached = upstream.received.filter((r) => r.url === "/streamed");
    for (const r of reached) expect(r.body.length).toBeLessThanOrEqual(1024);
    await expectNoLeak(small, SECRET);
  });
});
