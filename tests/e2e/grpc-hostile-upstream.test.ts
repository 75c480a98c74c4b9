// No reveal through gRPC's own encodings (issue 31, items 2 and 3), against a hostile upstream
// (tests/helpers/grpc-hostile-server.ts) that echoes the injected Authorization where a scan of the
// text it sends would not see it:
// - a gRPC body that is also a raw-deflate stream, sent with Content-Encoding: deflate, which curl
//   --compressed inflated to the value: refused (502, or UNAVAILABLE on a gRPC call) on /proxy, in the
//   tunnel over HTTP/1.1 and HTTP/2, from an HTTP/1.1-only upstream and from an HTTP/2-only one;
// - the value base64 in `-bin` headers and trailers (padded, unpadded, one of several parts,
//   grpc-status-details-bin), which gRPC libraries decode for the caller: it decodes to
//   "Bearer [redacted]"; a `-bin` header that is not base64 refuses the response, such a trailer is
//   dropped and the call fails.
// Checked with curl, fetch, node:http2 and an official gRPC client (@grpc/grpc-js, tests/e2e/grpc-agent.mjs);
// everything the agent got, raw and decoded (inflate, base64), holds no value, nor any log or audit line.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as http2 from "node:http2";
import { join } from "node:path";
import { constants, gunzipSync, inflateRawSync, inflateSync } from "node:zlib";
import { GRPC_PROTO } from "../helpers/grpc-server.ts";
import { startHostileGrpcServer, type HostileGrpcServer } from "../helpers/grpc-hostile-server.ts";
import { expectEnvelope, expectNoLeak } from "./proxy-fixture.ts";
import { h2SessionThrough } from "./tunnel-h2-fixture.ts";
import { requireBinary, startTunnelEnv, UPSTREAM_NAME, type TunnelEnv } from "./tunnel-fixture.ts";

const REDACTED_AUTH = "Bearer [redacted]";
/** gRPC status codes (grpc/doc/statuscodes.md). */
const CODE = { OK: 0, FAILED_PRECONDITION: 9, INTERNAL: 13, UNAVAILABLE: 14 } as const;

let env: TunnelEnv;
/** The same hostile answers from an HTTP/1.1-only upstream and from an HTTP/2-only one. */
let h1: HostileGrpcServer;
let h2: HostileGrpcServer;
let h1Target: string;
let h2Target: string;
/** Everything any agent received (and its decoded views), for the leak check. */
const seen: string[] = [];

beforeAll(async () => {
  env = await startTunnelEnv();
  h1 = await startHostileGrpcServer({ pki: env.upstream.pki, protocol: "http/1.1" });
  h2 = await startHostileGrpcServer({ pki: env.upstream.pki, protocol: "h2" });
  h1Target = `${UPSTREAM_NAME}:${h1.port}`;
  h2Target = `${UPSTREAM_NAME}:${h2.port}`;
  await env.broker.addService(h1Target, { type: "bearer", token: "API_KEY" });
  await env.broker.addService(h2Target, { type: "bearer", token: "API_KEY" });
}, 60_000);

afterAll(async () => {
  await expectNoLeak(env.broker, env.secret, seen);
  await h1?.close();
  await h2?.close();
  await env?.stop();
});

/** The upstream really got the credential (so its answer really echoed it). */
function expectEchoed(server: HostileGrpcServer, answer: string): void {
  const call = server.calls.filter((c) => c.answer === answer).at(-1);
  expect(call?.authorization).toBe(`Bearer ${env.secret}`);
}

/** Bytes as the agent might read them: raw, and inflated every way zlib knows (partial streams too). */
function views(bytes: Buffer): string[] {
  const out = [bytes.toString("latin1")];
  const opts = { finishFlush: constants.Z_SYNC_FLUSH };
  // A gRPC frame's message, in case the value hides behind the 5-byte prefix.
  const candidates = bytes.byteLength > 5 ? [bytes, bytes.subarray(5)] : [bytes];
  for (const b of candidates) {
    for (const decode of [inflateRawSync, inflateSync, gunzipSync]) {
      try {
        out.push(decode(b, opts).toString("latin1"));
      } catch {}
    }
  }
  seen.push(...out);
  return out;
}

function expectNoValueIn(texts: string[]): void {
  // A boolean, so a failure names no value.
  for (const t of texts) expect(t.includes(env.secret)).toBe(false);
}

/** Every comma-separated part of a `-bin` value, base64-decoded as gRPC libraries do. */
function decodeBin(value: unknown): string[] {
  const parts = String(value)
    .split(",")
    .map((p) => Buffer.from(p.trim(), "base64").toString("latin1"));
  seen.push(String(value), ...parts);
  return parts;
}

interface CurlResult {
  status: number;
  head: string;
  body: Buffer;
}

/** curl -i with `args`; the answer after any CONNECT head. */
async function curl(args: string[]): Promise<CurlResult> {
  const proc = Bun.spawn(["curl", "-sS", "-i", ...args], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).arrayBuffer(), new Response(proc.stderr).text(), proc.exited]);
  const all = Buffer.from(out);
  seen.push(all.toString("latin1"), err);
  expect({ code, err }).toEqual({ code: 0, err: "" });
  let at = 0;
  for (;;) {
    const end = all.indexOf("\r\n\r\n", at);
    if (end < 0) throw new Error(`curl printed no response head: ${all.toString("latin1").slice(0, 300)}`);
    const head = all.subarray(at, end).toString("latin1");
    at = end + 4;
    if (/^HTTP\/1\.[01] 200 Connection established/i.test(head)) continue;
    return { status: Number(head.split(" ")[1]), head, body: all.subarray(at) };
  }
}

const tunnelCurl = (target: string, answer: string, extra: string[]) =>
  curl(["--proxy", env.proxyUrl, "--cacert", env.caFile, "-H", `x-answer: ${answer}`, ...extra, `https://${target}/echo.v1.Echo/Unary`]);

const proxyCurl = (target: string, answer: string, extra: string[]) =>
  curl([
    "-H",
    `authorization: Bearer ${env.broker.sessionToken}`,
    "-H",
    `x-answer: ${answer}`,
    ...extra,
    `${env.broker.apiUrl}/proxy/${target}/echo.v1.Echo/Unary`,
  ]);

function expectCurl502(r: CurlResult): void {
  expect(r.status).toBe(502);
  expect(r.head.toLowerCase()).toContain("x-broker-error: undecodable_response");
  expect(JSON.parse(r.body.toString()).error).toBe("undecodable_response");
  expectNoValueIn(views(r.body));
}

/** /proxy with Bun's fetch, body left encoded. */
async function viaProxy(target: string, answer: string): Promise<{ res: Response; body: Buffer }> {
  const res = await env.broker.proxy(target, "/echo.v1.Echo/Unary", { headers: { "x-answer": answer }, decompress: false } as RequestInit);
  const body = Buffer.from(await res.arrayBuffer());
  seen.push([...res.headers].join("\n"));
  return { res, body };
}

/** Through the tunnel over HTTP/1.1 with Bun's fetch, body left encoded. */
async function viaTunnel(target: string, answer: string): Promise<{ res: Response; body: Buffer }> {
  const res = await fetch(`https://${target}/echo.v1.Echo/Unary`, {
    proxy: env.proxyUrl,
    tls: { ca: env.caPem },
    headers: { "x-answer": answer },
    decompress: false,
  } as RequestInit);
  const body = Buffer.from(await res.arrayBuffer());
  seen.push([...res.headers].join("\n"));
  return { res, body };
}

interface H2Answer {
  status: number;
  headers: Record<string, unknown>;
  trailers: Record<string, unknown>;
  body: Buffer;
}

/** One HTTP/2 request through a new tunnel (node:http2), trailers asked for. */
async function viaTunnelH2(target: string, answer: string, headers: http2.OutgoingHttpHeaders = {}): Promise<H2Answer> {
  const session = await h2SessionThrough(env, target);
  try {
    return await new Promise<H2Answer>((resolve, reject) => {
      const req = session.request({ ":method": "GET", ":path": "/echo.v1.Echo/Unary", te: "trailers", "x-answer": answer, ...headers }, { endStream: true });
      const out: H2Answer = { status: 0, headers: {}, trailers: {}, body: Buffer.alloc(0) };
      const chunks: Buffer[] = [];
      req.on("response", (h) => ((out.status = Number(h[":status"])), (out.headers = { ...h })));
      req.on("trailers", (t) => (out.trailers = { ...t }));
      req.on("data", (d: Buffer) => chunks.push(d));
      req.on("end", () => {
        const result = { ...out, body: Buffer.concat(chunks) };
        seen.push(JSON.stringify(result.headers), JSON.stringify(result.trailers));
        resolve(result);
      });
      req.on("error", reject);
    });
  } finally {
    session.destroy();
  }
}

describe("a gRPC body that is also a raw-deflate stream, sent with Content-Encoding: deflate", () => {
  test("/proxy with fetch: a 502 envelope, nothing of the value raw or inflated, from both upstreams", async () => {
    for (const [server, target] of [
      [h1, h1Target],
      [h2, h2Target],
    ] as const) {
      const { res, body } = await viaProxy(target, "polyglot");
      expect(res.status).toBe(502);
      expect(res.headers.get("x-broker-error")).toBe("undecodable_response");
      expectNoValueIn(views(body));
      expectEchoed(server, "polyglot");
    }
  });

  test("/proxy read by curl --compressed, from both upstreams", async () => {
    if (!requireBinary("curl", "curl")) return;
    expectCurl502(await proxyCurl(h1Target, "polyglot", ["--compressed"]));
    expectCurl502(await proxyCurl(h2Target, "polyglot", ["--compressed"]));
    expectEchoed(h1, "polyglot");
    expectEchoed(h2, "polyglot");
  });

  test("in the tunnel over HTTP/1.1, read by curl --compressed and raw, from both upstreams", async () => {
    if (!requireBinary("curl", "curl")) return;
    for (const target of [h1Target, h2Target]) {
      expectCurl502(await tunnelCurl(target, "polyglot", ["--http1.1", "--compressed"]));
      expectCurl502(await tunnelCurl(target, "polyglot", ["--http1.1"]));
    }
    expectEchoed(h1, "polyglot");
    expectEchoed(h2, "polyglot");
  });

  test("in the tunnel over HTTP/2, read by curl --http2 --compressed and by node:http2, from both upstreams", async () => {
    if (!requireBinary("curl", "curl")) return;
    for (const target of [h1Target, h2Target]) {
      const r = await tunnelCurl(target, "polyglot", ["--http2", "--compressed"]);
      expect(r.head.startsWith("HTTP/2 502")).toBe(true);
      expectCurl502(r);
      const viaNode = await viaTunnelH2(target, "polyglot");
      expect(viaNode.status).toBe(502);
      expect(viaNode.headers["x-broker-error"]).toBe("undecodable_response");
      expectNoValueIn(views(viaNode.body));
    }
    expectEchoed(h1, "polyglot");
    expectEchoed(h2, "polyglot");
  });
});

describe("-bin metadata echoing the value", () => {
  /** The `bin` answer's head fields (padded, unpadded, second of two parts), decoded. */
  function expectBinHeaders(get: (name: string) => unknown): void {
    expect(decodeBin(get("x-echo-bin"))).toEqual([REDACTED_AUTH]);
    expect(decodeBin(get("x-echo-unpadded-bin"))).toEqual([REDACTED_AUTH]);
    expect(decodeBin(get("x-multi-bin"))).toEqual(["first", REDACTED_AUTH]);
    // Re-encoded as it came: padded where it was, unpadded where it was not.
    expect(String(get("x-echo-bin")).endsWith("=")).toBe(true);
    expect(String(get("x-echo-unpadded-bin")).endsWith("=")).toBe(false);
  }

  test("/proxy: the head's -bin fields decode to [redacted], from both upstreams", async () => {
    for (const [server, target] of [
      [h1, h1Target],
      [h2, h2Target],
    ] as const) {
      const { res, body } = await viaProxy(target, "bin");
      expect(res.status).toBe(200);
      expectBinHeaders((n) => res.headers.get(n));
      expectNoValueIn(views(body));
      expectEchoed(server, "bin");
    }
  });

  test("tunnel over HTTP/1.1: the head's -bin fields decode to [redacted], from both upstreams", async () => {
    for (const target of [h1Target, h2Target]) {
      const { res } = await viaTunnel(target, "bin");
      expect(res.status).toBe(200);
      expectBinHeaders((n) => res.headers.get(n));
    }
  });

  test("tunnel over HTTP/2: head and trailer -bin fields decode to [redacted], grpc-status-details-bin too", async () => {
    const r = await viaTunnelH2(h2Target, "bin");
    expect(r.status).toBe(200);
    expectBinHeaders((n) => r.headers[n]);
    expectBinHeaders((n) => r.trailers[n]);
    expect(decodeBin(r.trailers["grpc-status-details-bin"])).toEqual([REDACTED_AUTH]);
    expect(r.trailers["grpc-status"]).toBe("0");
    expectEchoed(h2, "bin");
    // An HTTP/2 agent to the HTTP/1.1 upstream: the head alone (HTTP/1.1 trailers do not pass).
    const fromH1 = await viaTunnelH2(h1Target, "bin");
    expectBinHeaders((n) => fromH1.headers[n]);
  });

  test("a -bin header that is not base64 (though Node's lenient decoder reads the value in it): 502 on every path", async () => {
    for (const target of [h1Target, h2Target]) {
      const { res, body } = await viaProxy(target, "bad-bin-header");
      await expectEnvelope(new Response(new Uint8Array(body), { status: res.status, headers: res.headers }), 502, "undecodable_response");
      expectNoValueIn(views(body));
      const tunnelled = await viaTunnel(target, "bad-bin-header");
      expect(tunnelled.res.status).toBe(502);
      expect(tunnelled.res.headers.has("x-echo-bin")).toBe(false);
      const overH2 = await viaTunnelH2(target, "bad-bin-header");
      expect(overH2.status).toBe(502);
      expect("x-echo-bin" in overH2.headers).toBe(false);
    }
    expectEchoed(h1, "bad-bin-header");
    expectEchoed(h2, "bad-bin-header");
  });

  test("a -bin trailer that is not base64, over HTTP/2: dropped, and the status made INTERNAL", async () => {
    const r = await viaTunnelH2(h2Target, "bad-bin-trailer");
    expect(r.status).toBe(200);
    expect("x-echo-bin" in r.trailers).toBe(false); // a boolean: a failure prints no encoded value
    expect(r.trailers).toMatchObject({ "grpc-status": String(CODE.INTERNAL), "x-broker-error": "undecodable_response", "x-note": "kept" });
    expectEchoed(h2, "bad-bin-trailer");
  });
});

interface CallResult {
  code: number;
  details: string;
  headers: Record<string, string[]>;
  trailers: Record<string, string[]>;
  replies: unknown[];
}

/** Unary Echo calls by @grpc/grpc-js under Node, through the tunnel (grpc_proxy, as vault run sets it). */
async function grpcCalls(calls: { name: string; answer: string }[]): Promise<Record<string, CallResult>> {
  const config = {
    proto: GRPC_PROTO,
    calls: calls.map((c) => ({
      name: c.name,
      kind: "unary",
      service: "Echo",
      method: "Unary",
      target: h2Target,
      requests: [{}],
      metadata: { "x-answer": c.answer },
    })),
  };
  const proc = Bun.spawn(["node", join(import.meta.dir, "grpc-agent.mjs"), JSON.stringify(config)], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", grpc_proxy: env.proxyUrl, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: env.caFile },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  seen.push(stdout, stderr);
  if (code !== 0) throw new Error(`grpc-agent.mjs exited ${code}: ${stderr.slice(0, 1000)}`);
  return JSON.parse(stdout.trim().split("\n").at(-1)!).results;
}

describe("an official gRPC client (@grpc/grpc-js) reading the metadata it decoded", () => {
  let results: Record<string, CallResult>;

  beforeAll(async () => {
    results = await grpcCalls([
      { name: "bin", answer: "bin" },
      { name: "binTrailersOnly", answer: "bin-trailers-only" },
      { name: "badBinHeader", answer: "bad-bin-header" },
      { name: "badBinTrailer", answer: "bad-bin-trailer" },
      { name: "polyglot", answer: "polyglot" },
    ]);
  }, 60_000);

  /** grpc-agent.mjs prints binary metadata as base64 of the bytes grpc-js decoded. */
  const decoded = (values: string[] | undefined) => (values ?? []).flatMap(decodeBin);

  test("header and trailer metadata, padded, unpadded and multi-part, read Bearer [redacted]", () => {
    const r = results.bin!;
    expect(r.code).toBe(CODE.OK);
    for (const md of [r.headers, r.trailers]) {
      expect(decoded(md["x-echo-bin"])).toEqual([REDACTED_AUTH]);
      expect(decoded(md["x-echo-unpadded-bin"])).toEqual([REDACTED_AUTH]);
      expect(decoded(md["x-multi-bin"])).toEqual(["first", REDACTED_AUTH]);
    }
    expect(decoded(r.trailers["grpc-status-details-bin"])).toEqual([REDACTED_AUTH]);
    expectEchoed(h2, "bin");
  });

  test("a trailers-only status's grpc-status-details-bin reads Bearer [redacted]", () => {
    const r = results.binTrailersOnly!;
    expect(r).toMatchObject({ code: CODE.FAILED_PRECONDITION, details: "echo in details" });
    expect(decoded(r.trailers["grpc-status-details-bin"])).toEqual([REDACTED_AUTH]);
  });

  test("a -bin header that is not base64: the call fails UNAVAILABLE with the broker's undecodable_response", () => {
    const r = results.badBinHeader!;
    expect(r.code).toBe(CODE.UNAVAILABLE);
    expect(JSON.parse(r.details).error).toBe("undecodable_response");
    expect("x-echo-bin" in r.headers).toBe(false);
  });

  test("a -bin trailer that is not base64: dropped, and the call fails INTERNAL", () => {
    const r = results.badBinTrailer!;
    expect(r.code).toBe(CODE.INTERNAL);
    expect(r.details).toContain("undecodable_response");
    expect("x-echo-bin" in r.trailers).toBe(false); // a boolean: a failure prints no encoded value
    expect(r.trailers["x-broker-error"]).toEqual(["undecodable_response"]);
    expectEchoed(h2, "bad-bin-trailer");
  });

  test("the polyglot body: the call fails UNAVAILABLE with undecodable_response", () => {
    const r = results.polyglot!;
    expect(r.code).toBe(CODE.UNAVAILABLE);
    expect(JSON.parse(r.details).error).toBe("undecodable_response");
    expect(r.replies).toEqual([]);
  });

  test("nothing any call returned holds the value, raw or decoded", () => {
    for (const r of Object.values(results)) {
      const text = JSON.stringify(r);
      expect(text).not.toContain(env.secret);
      for (const md of [r.headers, r.trailers]) for (const [k, v] of Object.entries(md)) if (k.endsWith("-bin")) expectNoValueIn(decoded(v));
    }
  });
});
