// Real HTTP/2 clients through the transparent proxy (issue 19): curl --http2, Node's own node:http2
// client (200 streams on one connection, request bodies of every shape, HEAD, trailers, an HTTP/1.1
// upstream behind an h2 agent), and nghttp with 100 concurrent streams; the error envelope, gRPC's
// refusal and bodies the agent abandons. The upstream sees the injected credential and never the
// session token; echoes come back redacted; HTTP/1.1 still works.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { headerValues, patternBytes, sha256, startH2Upstream, type H2Received } from "../helpers/h2-upstream.ts";
import { createServer as createTlsServer } from "node:tls";
import { FLAG, FRAME, frame, requestBlock, rstFrame } from "../helpers/h2-frames.ts";
import { expectNoLeak, findClosedPort } from "./proxy-fixture.ts";
import { h2Request, openRawTunnel, startH2TunnelEnv, until, type H2TunnelEnv } from "./tunnel-h2-fixture.ts";
import { dialProxy, requireBinary, sendConnect, UPSTREAM_NAME } from "./tunnel-fixture.ts";

let env: H2TunnelEnv;
/** Everything a client printed, for the leak check at the end. */
const outputs: string[] = [];

beforeAll(async () => {
  env = await startH2TunnelEnv({ allowHTTP1: true });
}, 60_000);
afterAll(async () => {
  await env?.stop();
  // The recorded bodies (tens of MiB) would stay live for the rest of the run, and a larger live heap
  // lets later files' garbage pile higher before a collection (proxy-stream's RSS bounds).
  env?.h2.received.splice(0);
  env?.h1.received.splice(0);
});

async function run(cmd: string[]) {
  const proc = Bun.spawn(cmd, {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: env.dir, LANG: "C.UTF-8" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  outputs.push(stdout, stderr);
  return { stdout, stderr, code };
}

function receivedAt(path: string): H2Received {
  const r = env.h2.received.find((x) => x.path === path);
  if (!r) throw new Error(`the h2 upstream never saw ${path}`);
  return r;
}

const injected = () => [`Bearer ${env.secret}`];

describe("curl", () => {
  test("curl --http2 through -x: HTTP/2 end to end, credential injected", async () => {
    if (!requireBinary("curl", "curl")) return;
    const r = await run([
      "curl",
      "-sS",
      "--http2",
      "-x",
      env.proxyUrl,
      "--cacert",
      env.caFile,
      "-w",
      "\n%{http_version} %{http_code}",
      `https://${env.authority}/curl-h2?x=1`,
    ]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.slice(r.stdout.lastIndexOf("\n") + 1)).toBe("2 200");
    expect(JSON.parse(r.stdout.slice(0, r.stdout.lastIndexOf("\n")))).toMatchObject({ protocol: "h2", method: "GET", path: "/curl-h2?x=1" });
    const seen = receivedAt("/curl-h2?x=1");
    expect(seen.protocol).toBe("h2");
    expect(headerValues(seen, "authorization")).toEqual(injected());
  });

  test("curl --http1.1 still works as before: HTTP/1.1 both sides, even to an upstream that offers h2", async () => {
    if (!requireBinary("curl", "curl")) return;
    const r = await run([
      "curl",
      "-sS",
      "--http1.1",
      "-x",
      env.proxyUrl,
      "--cacert",
      env.caFile,
      "-w",
      "\n%{http_version} %{http_code}",
      `https://${env.authority}/curl-h1`,
    ]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.slice(r.stdout.lastIndexOf("\n") + 1)).toBe("1.1 200");
    // The broker's upstream client speaks HTTP/2 only for agents that do (src/egress/upstream.ts).
    const seen = receivedAt("/curl-h1");
    expect(seen.protocol).toBe("http/1.1");
    expect(seen.authority).toBe(env.authority);
    expect(headerValues(seen, "authorization")).toEqual(injected());
  });

  test("curl --http1.1 to an upstream that speaks only HTTP/2: translated (the upstream gets h2, curl gets HTTP/1.1)", async () => {
    if (!requireBinary("curl", "curl")) return;
    const only = await startH2Upstream({ pki: env.h1.pki, allowHTTP1: false });
    try {
      const authority = `${UPSTREAM_NAME}:${only.port}`;
      await env.broker.addService(authority, { type: "bearer", token: "API_KEY" });
      for (const path of ["/only-h2/first", "/only-h2/again"]) {
        const r = await run([
          "curl",
          "-sS",
          "--http1.1",
          "-x",
          env.proxyUrl,
          "--cacert",
          env.caFile,
          "-w",
          "\n%{http_version} %{http_code}",
          `https://${authority}${path}`,
        ]);
        expect(r.stderr).toBe("");
        expect(r.stdout.slice(r.stdout.lastIndexOf("\n") + 1)).toBe("1.1 200");
        expect(r.stdout).not.toContain(env.secret);
        const seen = only.received.find((x) => x.path === path)!;
        expect(seen.protocol).toBe("h2");
        expect(headerValues(seen, "authorization")).toEqual(injected());
      }
    } finally {
      await only.close();
    }
  });
});

describe("Node's node:http2 client (run by node)", () => {
  let result: any;
  /** Warnings this process (the broker's) emitted while the agent ran. */
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);

  beforeAll(async () => {
    process.on("warning", onWarning);
    const agent = join(import.meta.dir, "h2-node-agent.mjs");
    const config = { proxyPort: env.proxyPort, proxyAuth: env.proxyAuth, caFile: env.caFile, h2: env.authority, h1: env.h1Authority };
    const r = await run(["node", agent, JSON.stringify(config)]);
    if (r.code !== 0) throw new Error(`node agent failed (${r.code}): ${r.stderr.slice(0, 2000)}`);
    result = JSON.parse(r.stdout);
    process.off("warning", onWarning);
  }, 120_000);

  // Every wait for "drain" while a body streams once added a "close" listener that stayed until the
  // stream ended: one per ~64 KiB under backpressure, thousands for a large body.
  test("streaming 5 MiB bodies both ways adds no listener per write (no MaxListenersExceededWarning)", () => {
    expect(warnings.filter((w) => w.includes("MaxListeners"))).toEqual([]);
  });

  test("the broker offers SETTINGS_MAX_CONCURRENT_STREAMS 100; 200 streams on one connection all succeed", () => {
    expect(result.h2.alpn).toBe("h2");
    expect(result.h2.maxConcurrentStreams).toBe(100);
    expect(result.h2.concurrent).toEqual(Array.from({ length: 200 }, (_, i) => ({ status: 200, path: `/concurrent/${i}` })));
    const seen = env.h2.received.filter((r) => r.path.startsWith("/concurrent/"));
    expect(seen.length).toBe(200);
    for (const r of seen) expect(headerValues(r, "authorization")).toEqual(injected());
  });

  test("POST bodies: small, 5 MiB with content-length, and unsized, arrive whole", () => {
    expect(result.h2.postSmall.status).toBe(200);
    expect(JSON.parse(result.h2.postSmall.text)).toMatchObject({ method: "POST", body: "hello h2" });
    expect(receivedAt("/post-small").body.toString()).toBe("hello h2");
    expect(JSON.parse(result.h2.post5MiB.text)).toEqual({ bytes: 5 * 1024 * 1024 + 7, sha256: result.h2.sent.big });
    expect(headerValues(receivedAt("/digest?case=5mib"), "content-length")).toEqual([String(5 * 1024 * 1024 + 7)]);
    expect(JSON.parse(result.h2.postUnsized.text)).toEqual({ bytes: 1024 * 1024 + 3, sha256: result.h2.sent.unsized });
    expect(headerValues(receivedAt("/digest?case=unsized"), "authorization")).toEqual(injected());
  });

  test("20 uploads and 20 downloads of 2 MiB at once on one connection: every body intact", () => {
    const p = result.parallel;
    expect(p.uploads).toEqual(Array(20).fill({ bytes: 2 * 1024 * 1024, sha256: p.sent }));
    expect(p.downloads).toEqual(Array(20).fill(p.sent));
  });

  test("HEAD keeps the upstream's content-length and has no body; trailers pass; a 5 MiB download is intact", () => {
    expect(result.h2.head.status).toBe(200);
    expect(result.h2.head.bytes).toBe(0);
    expect(Number(result.h2.head.headers["content-length"])).toBeGreaterThan(0);
    expect(receivedAt("/head").method).toBe("HEAD");
    expect(result.h2.trailers.text).toBe("body before trailers");
    expect(result.h2.trailers.trailers).toMatchObject({ "x-upstream-trailer": "done", "grpc-status": "0" });
    expect(result.h2.download.bytes).toBe(5 * 1024 * 1024 + 11);
    expect(result.h2.download.sha256).toBe(sha256(patternBytes(5 * 1024 * 1024 + 11)));
  });

  test("the credential echoed in a header, a trailer and the body comes back redacted", () => {
    const r = result.h2.echoAuth;
    expect(r.status).toBe(200);
    expect(r.headers["x-echo"]).toBe("Bearer [redacted]");
    expect(r.trailers["x-echo-trailer"]).toBe("Bearer [redacted]");
    expect(r.text).toBe("echo: Bearer [redacted]");
  });

  test("an h2 agent to an HTTP/1.1-only upstream: translated both ways", () => {
    const h1 = result.h1;
    expect(h1.alpn).toBe("h2");
    expect(h1.get.status).toBe(200);
    expect(h1.get.echo).toMatchObject({ method: "GET", url: "/h1/get?q=1" });
    expect(h1.get.echo.headers.host).toBe(env.h1Authority);
    expect(h1.post.echo.body.length).toBe(2 * 1024 * 1024 + 5);
    expect(h1.postUnsized.echo.body.length).toBe(1024 * 1024);
    expect(h1.head.status).toBe(200);
    expect(h1.head.bytes).toBe(0);
    expect(Number(h1.head.headers["content-length"])).toBeGreaterThan(0);
    expect(h1.many).toEqual(Array(20).fill(200));
    const at = (url: string) => env.h1.received.find((r) => r.url === url) ?? expect.unreachable(`h1 upstream never saw ${url}`);
    const header = (url: string, name: string) =>
      at(url)
        .rawHeaders.filter(([k]) => k.toLowerCase() === name)
        .map(([, v]) => v);
    for (const url of ["/h1/get?q=1", "/h1/post", "/h1/unsized", "/h1/head"]) expect(header(url, "authorization")).toEqual(injected());
    expect(header("/h1/post", "content-length")).toEqual([String(2 * 1024 * 1024 + 5)]);
    // No length announced over h2: the HTTP/1.1 upstream gets the body chunked (or sized), never cut short.
    const unsized = at("/h1/unsized");
    expect(unsized.body.byteLength).toBe(1024 * 1024);
    expect(header("/h1/unsized", "transfer-encoding").length + header("/h1/unsized", "content-length").length).toBe(1);
    expect(at("/h1/head").method).toBe("HEAD");
  });
});

/** A local TCP forwarder: each accepted connection gets its own CONNECT tunnel through the broker. */
async function startForwarder(authority: string): Promise<{ port: number; tunnels: () => number; close(): void }> {
  let tunnels = 0;
  const server: Server = createServer((client: Socket) => {
    client.pause();
    client.on("error", () => {});
    void (async () => {
      const upstream = await dialProxy(env.proxyPort);
      upstream.on("error", () => client.destroy());
      const res = await sendConnect(upstream, authority, env.proxyAuth);
      if (res.status !== 200) return void client.destroy();
      tunnels++;
      client.pipe(upstream).pipe(client);
      client.resume();
      upstream.resume();
    })().catch(() => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as { port: number }).port, tunnels: () => tunnels, close: () => server.close() };
}

describe("nghttp", () => {
  test("100 concurrent streams on one connection: 100 answers with status 200, each injected upstream", async () => {
    if (!requireBinary("nghttp", "nghttp2-client")) return;
    const fwd = await startForwarder(env.authority);
    try {
      // nghttp has no proxy support, hence the forwarder; it does not verify certificates either, so
      // this test proves HTTP/2 behaviour only (the other clients here verify the broker's leaf).
      const r = await run(["nghttp", "-n", "-v", "-m", "100", `-H:authority: ${env.authority}`, `https://127.0.0.1:${fwd.port}/nghttp`]);
      expect(r.code).toBe(0);
      expect(fwd.tunnels()).toBe(1);
      expect(r.stdout).toContain("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):100");
      const statuses = [...r.stdout.matchAll(/recv \(stream_id=(\d+)\) :status: (\d+)/g)];
      expect(statuses.length).toBe(100);
      expect(new Set(statuses.map((m) => m[1])).size).toBe(100);
      expect(statuses.every((m) => m[2] === "200")).toBe(true);
      const seen = env.h2.received.filter((x) => x.path === "/nghttp");
      expect(seen.length).toBe(100);
      for (const s of seen) expect(headerValues(s, "authorization")).toEqual(injected());
    } finally {
      fwd.close();
    }
  });
});

describe("broker errors and bodies the agent abandons or misstates", () => {
  test("an unreachable upstream: 502 with the JSON envelope over HTTP/2", async () => {
    const authority = `${UPSTREAM_NAME}:${await findClosedPort()}`;
    await env.broker.addService(authority, { type: "bearer", token: "API_KEY" });
    const r = await h2Request(env, "/nowhere", { authority });
    outputs.push(JSON.stringify(r.headers), r.body.toString());
    expect(r.status).toBe(502);
    expect(r.headers["x-broker-error"]).toBe("upstream_unreachable");
    expect(JSON.parse(r.body.toString())).toMatchObject({ error: "upstream_unreachable", message: expect.any(String) });
  });

  test("gRPC to an HTTP/1.1-only upstream: refused the gRPC way (trailers-only UNAVAILABLE), nothing sent", async () => {
    const before = env.h1.received.length;
    const r = await h2Request(env, "/pkg.Service/Method", {
      authority: env.h1Authority,
      method: "POST",
      headers: { "content-type": "application/grpc", te: "trailers" },
    });
    outputs.push(JSON.stringify(r.headers), r.body.toString());
    expect(r.status).toBe(200);
    expect(r.headers["grpc-status"]).toBe("14");
    expect(String(r.headers["grpc-message"])).toContain("HTTP/2");
    expect(env.h1.received.length).toBe(before);
  });

  test("the credential echoed one byte per DATA frame still comes back redacted", async () => {
    const r = await h2Request(env, "/echo-split?name=authorization");
    outputs.push(r.body.toString());
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe("echo: Bearer [redacted] end");
  });

  test("a body shorter than its content-length: refused, the upstream never gets a complete request", async () => {
    const h2 = await openRawTunnel(env);
    try {
      h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestBlock(env.authority, "/digest?short", "POST", [["content-length", "10"]])));
      h2.write(frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from("12345")));
      const refused = await h2.waitFor((f) => f.streamId === 1 && (f.type === FRAME.RST_STREAM || f.type === FRAME.HEADERS), 20_000);
      expect(refused).toBeDefined();
      await until(() => env.h2.received.some((r) => r.path === "/digest?short"), 1_000);
      expect(completed("/digest?short")).toEqual([]);
    } finally {
      h2.close();
    }
  });

  test("an agent resetting a sized upload mid-body: the h2 upstream's stream is reset too", async () => {
    const path = "/digest?reset-sized";
    await resetMidBody(path, [["content-length", "100000"]]);
    expect(completed(path)).toEqual([]);
  });

  // Bun's ServerHttp2Stream emits "end" for a stream the agent resets too; tunnel/h2-body.ts once took
  // it as the body's end when no content-length bounded it (a truncated body sent as complete).
  test("an agent resetting an unsized upload mid-body: the h2 upstream never gets it as complete", async () => {
    const path = "/digest?reset-unsized";
    await resetMidBody(path, []);
    expect(completed(path)).toEqual([]);
  });

  test("an agent resetting an unsized upload mid-body: an HTTP/1.1 upstream never gets the last chunk", async () => {
    let bytes = Buffer.alloc(0);
    let closed = false;
    const raw = createTlsServer({ cert: env.h1.pki.certPem, key: env.h1.pki.keyPem }, (sock) => {
      sock.on("data", (d: Buffer) => (bytes = Buffer.concat([bytes, d])));
      sock.on("close", () => (closed = true));
      sock.on("error", () => {});
    });
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    try {
      const authority = `${UPSTREAM_NAME}:${(raw.address() as { port: number }).port}`;
      await env.broker.addService(authority, { type: "bearer", token: "API_KEY" });
      const h2 = await openRawTunnel(env, authority);
      h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestBlock(authority, "/raw-reset", "POST")));
      h2.write(frame(FRAME.DATA, 0, 1, Buffer.from("part of a body")));
      expect(await until(() => bytes.includes("part of a body"), 10_000)).toBe(true);
      h2.write(rstFrame(1));
      await until(() => closed || bytes.toString("latin1").endsWith("0\r\n\r\n"), 5_000);
      h2.close();
      expect(bytes.toString("latin1")).toContain("Transfer-Encoding: chunked");
      expect(bytes.toString("latin1").endsWith("0\r\n\r\n")).toBe(false);
    } finally {
      raw.close();
    }
  });
});

/** Requests to `path` the h2 upstream saw end normally (as {path, bytes}: a short diff when one did). */
function completed(path: string): { path: string; bytes: number }[] {
  return env.h2.received.filter((r) => r.path === path && !r.aborted).map((r) => ({ path: r.path, bytes: r.body.byteLength }));
}

/** Opens an upload on a raw client, waits until its head reached the upstream, then resets it. */
async function resetMidBody(path: string, extra: [string, string][]): Promise<void> {
  const h2 = await openRawTunnel(env);
  try {
    h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestBlock(env.authority, path, "POST", extra)));
    h2.write(frame(FRAME.DATA, 0, 1, Buffer.alloc(16_000, 1)));
    expect(await until(() => env.h2.started.includes(path), 10_000)).toBe(true);
    h2.write(rstFrame(1));
    // Bun's compat request emits "end" whether the stream ended or was reset; either way it is recorded.
    await until(() => env.h2.received.some((r) => r.path === path), 5_000);
  } finally {
    h2.close();
  }
}

describe("what the upstream saw, and leaks", () => {
  test("every request carried the injected credential once, never the session token or proxy credentials", () => {
    const all = [...env.h2.received.map((r) => JSON.stringify(r.headers)), ...env.h1.received.map((r) => JSON.stringify(r.rawHeaders))];
    expect(all.length).toBeGreaterThan(300);
    for (const h of all) {
      expect(h).not.toContain(env.broker.sessionToken);
      expect(h.toLowerCase()).not.toContain("proxy-authorization");
    }
    for (const r of env.h2.received) expect(headerValues(r, "authorization")).toEqual(injected());
  });

  test("no client output, broker log line or audit record holds the credential", async () => {
    expect(outputs.length).toBeGreaterThan(0);
    await expectNoLeak(env.broker, env.secret, outputs);
  });
});
