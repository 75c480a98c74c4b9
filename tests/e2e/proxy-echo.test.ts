// No reveal by echo on /proxy (architecture.md D15): a hostile upstream echoes the injected
// Authorization in a header and in bodies of every Content-Encoding (stacked too), whole and split
// across many small chunks; the agent reads [redacted] and the rest of the body intact, in the
// encoding the upstream chose. Encodings the broker cannot decode fail closed. Upstream cookies and
// X-Broker-Error never reach the agent on this path.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { CODINGS, decodeAs, echoBody, echoHandler, encodeAs } from "./echo-upstream.ts";
import { readAsAgent, readEventsAcrossRelease, TRICKS } from "./echo-upstream.ts";
import { dumpResponse, expectEnvelope, expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

let broker: Broker;
let upstream: TestUpstream;
let hostPort: string;
const secret = `sk-echo-${crypto.randomUUID()}`;
const seen: string[] = [];

beforeAll(async () => {
  upstream = await startUpstream((req, res) => echoHandler(req, res), { names: { dns: ["upstream.test", "passthrough.upstream.test"] } });
  broker = await startBroker({ caPem: upstream.pki.caPem });
  broker.dns.set("upstream.test", ["127.0.0.1"]);
  hostPort = `upstream.test:${upstream.port}`;
  await broker.setCredential("ECHO_KEY", secret);
  await broker.addService(hostPort, { type: "bearer", token: "ECHO_KEY" });
  broker.dns.set("passthrough.upstream.test", ["127.0.0.1"]);
  await broker.addService(`passthrough.upstream.test:${upstream.port}`, { type: "passthrough" });
});

afterAll(async () => {
  await expectNoLeak(broker, secret, seen);
  await broker.stop();
  await upstream.close();
});

async function getRaw(path: string): Promise<{ res: Response; bytes: Buffer }> {
  const res = await broker.proxy(hostPort, path, { headers: { "accept-encoding": "gzip, deflate, br, zstd" }, decompress: false } as RequestInit);
  const bytes = Buffer.from(await res.arrayBuffer());
  seen.push([...res.headers].join("\n"), bytes.toString("latin1"));
  return { res, bytes };
}

describe("echoed credential in every encoding", () => {
  for (const coding of CODINGS) {
    for (const size of ["small", "large"] as const) {
      test(`${coding}, ${size} body`, async () => {
        const { res, bytes } = await getRaw(`/echo?enc=${encodeURIComponent(coding)}&size=${size}`);
        expect(res.status).toBe(200);
        const expected = coding === "deflate-raw" ? "deflate" : coding;
        expect(res.headers.get("content-encoding")).toBe(coding === "identity" ? null : expected);
        const plain = decodeAs(res.headers.get("content-encoding"), bytes).toString("utf8");
        seen.push(plain);
        expect(plain).not.toContain(secret);
        expect(plain).toBe(echoBody("Bearer [redacted]", size));
        expect(res.headers.get("x-echo")).toBe("you sent Bearer [redacted]");
        if (res.headers.has("content-length")) expect(Number(res.headers.get("content-length"))).toBe(bytes.byteLength);
      });
    }
  }

  test("a real agent library (Bun fetch, decompressing) reads the redacted body", async () => {
    const res = await broker.proxy(hostPort, "/echo?enc=br&size=large");
    const text = await res.text();
    seen.push(text);
    expect(text).toBe(echoBody("Bearer [redacted]", "large"));
  });

  test("server-sent events stay immediate through gzip: the first event arrives before the second is sent", async () => {
    const res = await broker.proxy(hostPort, "/sse?enc=gzip");
    expect(res.headers.get("content-encoding")).toBe("gzip");
    const { first, all } = await readEventsAcrossRelease(res, () => broker.proxy(hostPort, "/release"));
    seen.push(all);
    expect(first).toBe("data: first Bearer [redacted]\n\n");
    expect(all).toBe("data: first Bearer [redacted]\n\ndata: second Bearer [redacted]\n\n");
  });
});

describe("fails closed", () => {
  test("an encoding the broker cannot decode is a 502 with the envelope, and audited", async () => {
    const res = await broker.proxy(hostPort, `/raw?enc=compress&body=${encodeURIComponent("plain echo")}`);
    await expectEnvelope(res, 502, "undecodable_response");
    await Bun.sleep(400);
    const rec = (await broker.auditLogs()).find((r: any) => r.path === "/raw");
    expect(rec?.error).toBe("undecodable_response");
  });

  test("a corrupt gzip body is a 502, never passed on", async () => {
    const res = await broker.proxy(hostPort, `/raw?enc=gzip&body=${encodeURIComponent("not gzip at all")}`);
    const body = await expectEnvelope(res, 502, "undecodable_response");
    expect(JSON.stringify(body)).not.toContain("not gzip");
  });
});

describe("headers only the broker may set", () => {
  test("an upstream's X-Broker-Error and Set-Cookie are dropped on /proxy, and the page is sandboxed", async () => {
    const res = await broker.proxy(hostPort, "/echo?size=small");
    seen.push(await dumpResponse(res));
    expect(res.status).toBe(200);
    expect(res.headers.has("x-broker-error")).toBe(false);
    expect(res.headers.getSetCookie()).toEqual([]);
    // Shown in a browser, an upstream page never runs on the broker's (the console's) origin.
    expect(res.headers.get("content-security-policy")).toBe("sandbox");
  });
});

describe("passthrough services (nothing injected)", () => {
  test("with no value stored in any vault, compressed bodies arrive byte for byte, unknown encodings included", async () => {
    await using bare = await startBroker({ caPem: upstream.pki.caPem });
    bare.dns.set("passthrough.upstream.test", ["127.0.0.1"]);
    await bare.addService(`passthrough.upstream.test:${upstream.port}`, { type: "passthrough" });
    for (const [enc, size] of [
      ["gzip", "small"],
      ["br", "large"],
    ] as const) {
      const res = await bare.proxy(`passthrough.upstream.test:${upstream.port}`, `/echo?enc=${enc}&size=${size}`, { decompress: false } as RequestInit);
      expect(res.headers.get("content-encoding")).toBe(enc);
      expect(Buffer.from(await res.arrayBuffer()).equals(encodeAs(enc, Buffer.from(echoBody("", size))))).toBe(true);
    }
    const odd = await bare.proxy(`passthrough.upstream.test:${upstream.port}`, "/raw?enc=compress&body=as-is", { decompress: false } as RequestInit);
    expect(odd.status).toBe(200);
    expect(await odd.text()).toBe("as-is");
  });

  test("once a vault holds a value, their answers are scanned for it (architecture.md D22): same content, same encoding; an undecodable encoding fails closed", async () => {
    for (const [enc, size] of [
      ["gzip", "small"],
      ["br", "large"],
    ] as const) {
      const res = await broker.proxy(`passthrough.upstream.test:${upstream.port}`, `/echo?enc=${enc}&size=${size}`, { decompress: false } as RequestInit);
      expect(res.headers.get("content-encoding")).toBe(enc);
      expect(decodeAs(enc, Buffer.from(await res.arrayBuffer())).equals(Buffer.from(echoBody("", size)))).toBe(true);
    }
    await expectEnvelope(
      await broker.proxy(`passthrough.upstream.test:${upstream.port}`, "/raw?enc=compress&body=as-is", { decompress: false } as RequestInit),
      502,
      "undecodable_response",
    );
  });
});

test("an echo in the status line's reason phrase is redacted", async () => {
  const res = await broker.proxy(hostPort, "/reason");
  seen.push(res.statusText);
  expect(res.status).toBe(418);
  expect(res.statusText).not.toContain(secret); // Bun's server writes its own reason phrase here
  expect(await res.text()).toBe("teapot");
});

describe("tricks to slip the echo past the scan", () => {
  for (const kind of TRICKS) {
    test(kind, async () => {
      const res = await broker.proxy(hostPort, `/trick?kind=${kind}`, { decompress: false } as RequestInit);
      const { headers, raw, plain } = await readAsAgent(res);
      seen.push(headers, raw, plain);
      expect(res.status).toBe(200);
      if (kind !== "header-name") expect(res.headers.get("content-encoding")).not.toBeNull(); // the agent is told how to read the body
      expect(plain.startsWith('{"ok":true')).toBe(true);
      for (const text of [headers, raw, plain]) expect(text).not.toContain(secret);
    });
  }
});
