// No reveal by echo inside the transparent proxy (architecture.md D15): the same hostile upstream as
// proxy-echo.test.ts, reached as https://upstream.test through CONNECT by real clients (Bun fetch,
// curl --compressed). The agent reads [redacted] in every encoding, whole or split across chunks,
// and the rest of the body intact. Inside the tunnel the agent talks to the real origin, so upstream
// cookies are forwarded; a forged X-Broker-Error never is. WebSocket echoes: tunnel-websocket*.test.ts.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { CODINGS, decodeAs, echoBody, echoHandler } from "./echo-upstream.ts";
import { readAsAgent, readEventsAcrossRelease, TRICKS } from "./echo-upstream.ts";
import { expectEnvelope, expectNoLeak } from "./proxy-fixture.ts";
import { requireBinary, startTunnelEnv, type TunnelEnv } from "./tunnel-fixture.ts";

let env: TunnelEnv;
const seen: string[] = [];

beforeAll(async () => {
  env = await startTunnelEnv({ handler: (req, res) => echoHandler(req, res) });
});

afterAll(async () => {
  await expectNoLeak(env.broker, env.secret, seen);
  await env.stop();
});

const url = (path: string) => `https://${env.authority}${path}`;

function get(path: string, init: Record<string, unknown> = {}): Promise<Response> {
  return fetch(url(path), { proxy: env.proxyUrl, tls: { ca: env.caPem }, ...init } as RequestInit);
}

describe("echoed credential in every encoding", () => {
  for (const coding of CODINGS) {
    for (const size of ["small", "large"] as const) {
      test(`${coding}, ${size} body`, async () => {
        const res = await get(`/echo?enc=${encodeURIComponent(coding)}&size=${size}`, {
          headers: { "accept-encoding": "gzip, deflate, br, zstd" },
          decompress: false,
        });
        const bytes = Buffer.from(await res.arrayBuffer());
        seen.push([...res.headers].join("\n"), bytes.toString("latin1"));
        expect(res.status).toBe(200);
        expect(res.headers.get("content-encoding")).toBe(coding === "identity" ? null : coding === "deflate-raw" ? "deflate" : coding);
        const plain = decodeAs(res.headers.get("content-encoding"), bytes).toString("utf8");
        seen.push(plain);
        expect(plain).toBe(echoBody(`Bearer [redacted]`, size));
        expect(res.headers.get("x-echo")).toBe("you sent Bearer [redacted]");
      });
    }
  }

  test("curl --compressed reads the redacted body", async () => {
    if (!requireBinary("curl", "curl")) return;
    const proc = Bun.spawn(["curl", "-sS", "-i", "--compressed", "--proxy", env.proxyUrl, "--cacert", env.caFile, url("/echo?enc=gzip&size=large")], {
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err] = [await new Response(proc.stdout).text(), await new Response(proc.stderr).text()];
    expect(await proc.exited).toBe(0);
    seen.push(out, err);
    expect(out).toContain(echoBody("Bearer [redacted]", "large"));
    expect(out).toContain("x-echo: you sent Bearer [redacted]");
  });

  test("server-sent events stay immediate through gzip", async () => {
    const res = await get("/sse?enc=gzip");
    const { first, all } = await readEventsAcrossRelease(res, () => get("/release"));
    seen.push(all);
    expect(first).toBe("data: first Bearer [redacted]\n\n");
    expect(all).toBe("data: first Bearer [redacted]\n\ndata: second Bearer [redacted]\n\n");
  });

  test("an encoding the broker cannot decode fails closed with the envelope", async () => {
    const res = await get(`/raw?enc=compress&body=${encodeURIComponent("plain echo")}`);
    await expectEnvelope(res, 502, "undecodable_response");
  });
});

describe("headers", () => {
  test("upstream cookies reach the agent inside the tunnel, each intact; X-Broker-Error does not", async () => {
    const res = await get("/echo?size=small");
    seen.push([...res.headers].join("\n"), await res.text());
    expect(res.status).toBe(200);
    expect(res.headers.getSetCookie()).toEqual(["sid=abc123; Path=/; HttpOnly", "theme=dark; Expires=Wed, 21 Oct 2026 07:28:00 GMT"]);
    expect(res.headers.has("x-broker-error")).toBe(false);
  });
});

test("an echo in the status line's reason phrase is redacted", async () => {
  const res = await get("/reason");
  seen.push(res.statusText);
  expect(res.status).toBe(418);
  expect(res.statusText).toBe("Echo Bearer [redacted]");
  expect(await res.text()).toBe("teapot");
});

describe("tricks to slip the echo past the scan", () => {
  for (const kind of TRICKS) {
    test(kind, async () => {
      const res = await get(`/trick?kind=${kind}`, { decompress: false });
      const { headers, raw, plain } = await readAsAgent(res);
      seen.push(headers, raw, plain);
      expect(res.status).toBe(200);
      if (kind !== "header-name") expect(res.headers.get("content-encoding")).not.toBeNull(); // the agent is told how to read the body
      expect(plain.startsWith('{"ok":true')).toBe(true);
      for (const text of [headers, raw, plain]) expect(text).not.toContain(env.secret);
    });
  }
});
