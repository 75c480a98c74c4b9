// Explicit proxy end to end: credential injection per auth type, header and body fidelity, query
// strings, methods, hot-path invalidation, audit records, and the "no reveal" rule throughout.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createChunkedDecoder } from "../../src/http/http1.ts";
import { startUpstream, type Received, type TestUpstream } from "../helpers/upstream.ts";
import { dumpResponse, expectEnvelope, expectNoLeak, rawRequest, startBroker, type Broker } from "./proxy-fixture.ts";

let upstream: TestUpstream;
let broker: Broker;
let hp: string; // "127.0.0.1:<port>"

function route(req: IncomingMessage, res: ServerResponse, body: Buffer) {
  const auth = req.headers.authorization ?? "";
  if (req.url?.startsWith("/echo-auth")) {
    // A misbehaving upstream that reflects the credential in a header and in the body.
    res.setHeader("x-echoed-authorization", auth);
    res.setHeader("content-type", "text/plain");
    return res.end(`you sent: ${auth} / ${req.headers["x-api-key"] ?? ""}`);
  }
  if (req.url?.startsWith("/sized-head")) {
    res.setHeader("content-length", "1234");
    return res.end(req.method === "HEAD" ? undefined : "x".repeat(1234));
  }
  if (req.url?.startsWith("/bytes")) {
    res.setHeader("content-type", "application/octet-stream");
    return res.end(body);
  }
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, bodyLength: body.length }));
}

beforeAll(async () => {
  upstream = await startUpstream(route);
  broker = await startBroker({ caPem: upstream.pki.caPem });
  hp = `127.0.0.1:${upstream.port}`;
  broker.dns.set("upstream.test", ["127.0.0.1"]);
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

const last = (): Received => upstream.received.at(-1)!;
const authLines = (r: Received) => r.rawHeaders.filter(([k]) => k.toLowerCase() === "authorization");
const unique = (tag: string) => `sk-${tag}-${crypto.randomUUID()}`;

describe("injection", () => {
  test("bearer: upstream sees exactly one Authorization, the vault's; client token replaced", async () => {
    const secret = unique("bearer");
    await broker.setCredential("BEARER_KEY", secret);
    await broker.addService(hp, { type: "bearer", token: "BEARER_KEY" });
    const res = await broker.proxy(hp, "/v1/thing?x=1");
    const out = await dumpResponse(res);
    expect(res.status).toBe(200);
    expect(authLines(last())).toEqual([["authorization", `Bearer ${secret}`]]);
    expect(last().rawHeaders.some(([, v]) => v.includes(broker.sessionToken))).toBe(false);
    await expectNoLeak(broker, secret, [out]);
  });

  test("basic with and without username; header with prefix (via a resolved host name)", async () => {
    const secret = unique("basic");
    await broker.setCredential("BASIC_KEY", secret);
    await broker.setCredential("HDR_KEY", secret);
    const outs: string[] = [];

    await broker.addService(`upstream.test:${upstream.port}`, { type: "basic", token: "BASIC_KEY", username: "alice" });
    outs.push(await dumpResponse(await broker.proxy(`upstream.test:${upstream.port}`, "/u")));
    expect(authLines(last())).toEqual([["authorization", `Basic ${Buffer.from(`alice:${secret}`).toString("base64")}`]]);
    expect(last().rawHeaders.find(([k]) => k.toLowerCase() === "host")?.[1]).toBe(`upstream.test:${upstream.port}`);

    await broker.api(
      "PATCH",
      `/v1/vaults/${broker.vault}/services/${encodeURIComponent(`upstream.test:${upstream.port}`)}`,
      { auth: { type: "basic", token: "BASIC_KEY" } },
      broker.userToken,
    );
    outs.push(await dumpResponse(await broker.proxy(`upstream.test:${upstream.port}`, "/nouser")));
    expect(authLines(last())).toEqual([["authorization", `Basic ${Buffer.from(secret).toString("base64")}`]]);

    await broker.api(
      "PATCH",
      `/v1/vaults/${broker.vault}/services/${encodeURIComponent(`upstream.test:${upstream.port}`)}`,
      { auth: { type: "header", header: "X-Api-Key", token: "HDR_KEY", prefix: "Token " } },
      broker.userToken,
    );
    outs.push(await dumpResponse(await broker.proxy(`upstream.test:${upstream.port}`, "/hdr", { headers: { "x-api-key": "client-value" } })));
    const keys = last().rawHeaders.filter(([k]) => k.toLowerCase() === "x-api-key");
    expect(keys.map(([, v]) => v)).toEqual([`Token ${secret}`]);
    expect(authLines(last())).toEqual([]); // the session token is not forwarded either
    await expectNoLeak(broker, secret, outs);
  });

  test("passthrough: no auth header reaches the upstream", async () => {
    // Same upstream, new name, so the service table is separate.
    broker.dns.set("localhost", ["127.0.0.1"]);
    await broker.addService(`localhost:${upstream.port}`, { type: "passthrough" });
    const res = await broker.proxy(`localhost:${upstream.port}`, "/pass", { headers: { authorization: `Bearer ${broker.sessionToken}` } });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(authLines(last())).toEqual([]);
  });

  test("an echoing upstream gets [redacted] in header and body", async () => {
    const secret = unique("echo");
    await broker.setCredential("BEARER_KEY", secret);
    const res = await broker.proxy(hp, "/echo-auth");
    const h = res.headers.get("x-echoed-authorization");
    const body = await res.text();
    // Needles are the raw value and the full header value; either way the value is gone.
    expect(h).toBe("Bearer [redacted]");
    expect(body).toBe("you sent: Bearer [redacted] / ");
    await expectNoLeak(broker, secret, [h ?? "", body]);
  });

  test("a credential changed through the API is used on the very next request", async () => {
    const a = unique("first");
    const b = unique("second");
    await broker.setCredential("BEARER_KEY", a);
    await (await broker.proxy(hp, "/one")).arrayBuffer();
    expect(authLines(last())).toEqual([["authorization", `Bearer ${a}`]]);
    await broker.setCredential("BEARER_KEY", b);
    await (await broker.proxy(hp, "/two")).arrayBuffer();
    expect(authLines(last())).toEqual([["authorization", `Bearer ${b}`]]);
  });
});

describe("fidelity", () => {
  test("vendor headers, duplicate headers and a binary POST body reach the upstream unchanged", async () => {
    const secret = unique("fidelity");
    await broker.setCredential("BEARER_KEY", secret);
    const body = new Uint8Array(4096);
    for (let i = 0; i < body.length; i++) body[i] = (i * 131 + 7) & 0xff;
    body.set([0x00, 0x0d, 0x0a, 0x0d, 0x0a, 0xff], 100); // bytes that look like framing
    const sent: [string, string][] = [
      ["anthropic-version", "2023-06-01"],
      ["anthropic-beta", "tools-2024-04-04"],
      ["X-Dup", "one"],
      ["If-None-Match", '"abc"'],
      ["traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"],
      ["x-dup", "two"],
      ["Content-Type", "application/octet-stream"],
    ];
    const head = [
      `POST /proxy/${hp}/bytes?k=v HTTP/1.1`,
      `Host: ${new URL(broker.apiUrl).host}`,
      `Authorization: Bearer ${broker.sessionToken}`,
      ...sent.map(([k, v]) => `${k}: ${v}`),
      `Content-Length: ${body.length}`,
      "Connection: close",
      "",
      "",
    ].join("\r\n");
    const raw = await rawRequest(broker.apiUrl, Buffer.concat([Buffer.from(head, "latin1"), body]));
    const split = raw.indexOf("\r\n\r\n");
    expect(raw.subarray(0, 12).toString()).toBe("HTTP/1.1 200");
    const respHead = raw.subarray(0, split).toString("latin1").toLowerCase();
    let respBody: Uint8Array = raw.subarray(split + 4);
    if (respHead.includes("transfer-encoding: chunked")) respBody = Buffer.concat(createChunkedDecoder().push(respBody).data);
    expect(Buffer.from(respBody).equals(Buffer.from(body))).toBe(true); // echoed back unchanged

    const got = last();
    expect(got.method).toBe("POST");
    expect(Buffer.from(got.body).equals(Buffer.from(body))).toBe(true);
    const forwarded = got.rawHeaders.filter(([k]) => !["host", "connection", "content-length", "authorization"].includes(k.toLowerCase()));
    // Bun.serve hands the broker a Headers object, which merges duplicates and lower-cases names, so
    // compare per name (case-insensitive, values joined as a list). See report: order/duplicates are not kept.
    const norm = (list: [string, string][]) => {
      const m = new Map<string, string[]>();
      for (const [k, v] of list) m.set(k.toLowerCase(), [...(m.get(k.toLowerCase()) ?? []), v]);
      return Object.fromEntries([...m].map(([k, v]) => [k, v.join(", ")]).sort());
    };
    expect(norm(forwarded)).toEqual(norm(sent));
    expect(authLines(got)).toEqual([["authorization", `Bearer ${secret}`]]);
    await expectNoLeak(broker, secret, [raw.toString("latin1")]);
  });

  test("query string and encoded path are kept exactly", async () => {
    const target = "/a%2Fb/c%20d/?x=%2F&x=2&y=a+b&z&empty=&u=%E2%9C%93";
    const res = await broker.proxy(hp, target);
    expect(res.status).toBe(200);
    expect((await res.json()).url).toBe(target);
    expect(last().url).toBe(target);
  });

  test("HEAD keeps the upstream's Content-Length", async () => {
    await broker.addService(`${hp}`, { type: "passthrough" }).catch(() => {}); // the host may have a service already
    // A real server (S3's HeadObject, nginx) states the length a GET would get; the agent must see it.
    const res = await fetch(`${broker.apiUrl}/proxy/${hp}/sized-head`, { method: "HEAD", headers: { authorization: `Bearer ${broker.sessionToken}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-length")).toBe("1234");
  });

  test("every method but TRACE is forwarded; TRACE gets the 405 envelope", async () => {
    for (const method of ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]) {
      const before = upstream.received.length;
      const hasBody = ["POST", "PUT", "PATCH"].includes(method);
      const res = await broker.proxy(hp, `/m/${method}`, { method, body: hasBody ? `body-${method}` : undefined });
      expect(res.status, method).toBe(200);
      const text = await res.text();
      expect(upstream.received.length).toBe(before + 1);
      expect(last().method).toBe(method);
      expect(last().url).toBe(`/m/${method}`);
      if (hasBody) expect(last().body.toString()).toBe(`body-${method}`);
      if (method === "HEAD") expect(text).toBe("");
      else expect(JSON.parse(text).method).toBe(method);
    }
    const before = upstream.received.length;
    // fetch refuses TRACE itself, so send it raw.
    const raw = (
      await rawRequest(
        broker.apiUrl,
        Buffer.from(
          `TRACE /proxy/${hp}/t HTTP/1.1\r\nHost: ${new URL(broker.apiUrl).host}\r\nAuthorization: Bearer ${broker.sessionToken}\r\nConnection: close\r\n\r\n`,
        ),
      )
    ).toString();
    expect(raw.startsWith("HTTP/1.1 405")).toBe(true);
    expect(raw.toLowerCase()).toContain("x-broker-error: method_not_allowed");
    expect(raw).toContain('"error":"method_not_allowed"');
    expect(upstream.received.length).toBe(before);
  });

  test("a 302 is handed back with its Location, not followed", async () => {
    const up = await startUpstream((_req, r) => {
      r.statusCode = 302;
      r.setHeader("location", "https://127.0.0.1:1/elsewhere");
      r.end("moved");
    });
    // The second upstream has its own CA, so a fresh broker trusts it.
    await using b2 = await startBroker({ caPem: up.pki.caPem });
    const hp2 = `127.0.0.1:${up.port}`;
    await b2.addService(hp2, { type: "passthrough" });
    const r2 = await b2.proxy(hp2, "/go");
    expect(r2.status).toBe(302);
    expect(r2.headers.get("location")).toBe("https://127.0.0.1:1/elsewhere");
    expect(await r2.text()).toBe("moved");
    expect(up.received.length).toBe(1);
    await up.close();
  });
});

describe("audit", () => {
  test("one record per request with method, host, path without query, status and key names", async () => {
    const secret = unique("audit");
    await broker.setCredential("BEARER_KEY", secret);
    await Bun.sleep(400);
    const before = (await broker.auditLogs()).length;
    await (await broker.proxy(hp, "/audit/a?secret=q1")).arrayBuffer();
    await (await broker.proxy(hp, "/audit/b", { method: "POST", body: "x" })).arrayBuffer();
    await expectEnvelope(await broker.proxy("unknown.example:443", "/nope"), 403, "forbidden");
    await Bun.sleep(400);
    const logs = await broker.auditLogs();
    expect(logs.length).toBe(before + 3);
    const mine = logs.slice(0, 3).reverse(); // newest first
    expect(mine[0]).toMatchObject({ method: "GET", host: hp, path: "/audit/a", status: 200, credential_keys: ["BEARER_KEY"], ingress: "explicit" });
    expect(mine[1]).toMatchObject({ method: "POST", host: hp, path: "/audit/b", status: 200, credential_keys: ["BEARER_KEY"], bytes_in: 1 });
    expect(mine[2]).toMatchObject({ method: "GET", host: "unknown.example", path: "/nope", status: 403, credential_keys: [], error: "forbidden" });
    expect(JSON.stringify(logs)).not.toContain("secret=q1");
    await expectNoLeak(broker, secret);
  });
});
