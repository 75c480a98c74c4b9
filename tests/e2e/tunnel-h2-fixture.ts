// Set-up for the HTTP/2 tunnel tests (issue 19): startTunnelEnv's broker and tunnel listener, with an
// HTTP/2 upstream (tests/helpers/h2-upstream.ts) and an HTTP/1.1-only one (tests/helpers/upstream.ts)
// under one test CA, both bearer services on the same credential; plus CONNECT + TLS (ALPN h2)
// helpers and one ordinary HTTP/2 request for "the broker is still healthy" checks.

import * as http2 from "node:http2";
import type { TLSSocket } from "node:tls";
import type { TunnelDeps } from "../../src/tunnel/index.ts";
import { FLAG, FRAME, frame, h2Tls, openRawH2, type RawH2, type ReadFrame } from "../helpers/h2-frames.ts";
import { startH2Upstream, type H2Upstream } from "../helpers/h2-upstream.ts";
import type { TestUpstream } from "../helpers/upstream.ts";
import { dialProxy, sendConnect, startTunnelEnv, UPSTREAM_NAME, type TunnelEnv } from "./tunnel-fixture.ts";

/** startTunnelEnv's environment, its HTTP/1.1 upstream renamed h1, with an HTTP/2 upstream beside it. */
export interface H2TunnelEnv extends Omit<TunnelEnv, "upstream" | "authority"> {
  /** The HTTP/2 upstream; `authority` names it ("upstream.test:<port>"). */
  readonly h2: H2Upstream;
  readonly authority: string;
  /** The HTTP/1.1-only upstream; `h1Authority` names it. */
  readonly h1: TestUpstream;
  readonly h1Authority: string;
}

export interface H2TunnelEnvOptions {
  /** The h2 upstream also speaks HTTP/1.1 (by ALPN). */
  allowHTTP1?: boolean;
  /** Listener limits replacing the production ones, as in tunnel-fixture.ts. */
  tunnel?: Partial<Pick<TunnelDeps, "maxHeadBytes" | "idleTimeoutMs" | "headerTimeoutMs" | "maxTunnelsPerPrincipal">>;
}

export async function startH2TunnelEnv(opts: H2TunnelEnvOptions = {}): Promise<H2TunnelEnv> {
  // startTunnelEnv's HTTP/1.1 upstream stays as the HTTP/1.1-only one; the HTTP/2 one joins it.
  const base = await startTunnelEnv({ tunnel: opts.tunnel });
  const h2 = await startH2Upstream({ pki: base.upstream.pki, allowHTTP1: opts.allowHTTP1 });
  const authority = `${UPSTREAM_NAME}:${h2.port}`;
  await base.broker.addService(authority, { type: "bearer", token: "API_KEY" });
  return {
    ...base,
    h2,
    authority,
    h1: base.upstream,
    h1Authority: base.authority,
    async stop() {
      await base.stop();
      await h2.close();
    },
  };
}

/** CONNECT to `authority` through the broker, then TLS offering only h2 (fails unless the broker picks h2). */
export async function openH2Tunnel(env: Pick<TunnelEnv, "proxyPort" | "proxyAuth" | "caPem">, authority: string): Promise<TLSSocket> {
  const sock = await dialProxy(env.proxyPort);
  const res = await sendConnect(sock, authority, env.proxyAuth);
  if (res.status !== 200) throw new Error(`CONNECT ${authority}: ${res.head}`);
  return h2Tls({ socket: sock, host: UPSTREAM_NAME, ca: env.caPem });
}

/** A raw frame client on a new tunnel: preface sent, the broker's SETTINGS awaited and acknowledged. */
/** An HTTP/2 client session through a new tunnel of any tunnel environment (errors left to each request). */
export async function h2SessionThrough(env: Pick<TunnelEnv, "proxyPort" | "proxyAuth" | "caPem">, authority: string): Promise<http2.ClientHttp2Session> {
  const tls = await openH2Tunnel(env, authority);
  const session = http2.connect(`https://${authority}`, { createConnection: () => tls });
  session.on("error", () => {});
  return session;
}

/**
 * One request on a session: its status and body as text. `body` undefined ends the stream with the
 * headers; `trailers` follow the body; the answer's body is added to `record` (for leak checks).
 */
export function h2Exchange(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body?: string,
  opts: { trailers?: http2.OutgoingHttpHeaders; record?: string[] } = {},
): Promise<{ status: number; body: string }> {
  const trailers = opts.trailers;
  return new Promise((resolve, reject) => {
    const req = session.request(headers, { endStream: body === undefined, waitForTrailers: trailers !== undefined });
    if (trailers) req.on("wantTrailers", () => req.sendTrailers(trailers));
    let status = 0;
    const chunks: Buffer[] = [];
    req.on("response", (h) => (status = Number(h[":status"])));
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString();
      opts.record?.push(text);
      resolve({ status, body: text });
    });
    req.on("error", reject);
    if (body !== undefined) req.end(body);
  });
}

export async function openRawTunnel(env: H2TunnelEnv, authority = env.authority): Promise<RawH2> {
  const h2 = await openRawH2(await openH2Tunnel(env, authority));
  const settings = await h2.waitFor((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0, 10_000);
  if (!settings) throw new Error("the broker sent no SETTINGS");
  h2.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
  return h2;
}

/** Polls `pred` until it holds or `ms` pass (a bound for failing, never a timing assertion). */
export async function until(pred: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!pred() && Date.now() < deadline) await Bun.sleep(20);
  return pred();
}

/** :status of a response HEADERS frame when its first field is an indexed static :status (RFC 7541 Appendix A). */
export function statusOf(f: ReadFrame): number | undefined {
  let at = 0;
  if (f.flags & 0x8) at += 1; // PADDED: pad length
  if (f.flags & 0x20) at += 5; // PRIORITY
  const STATIC: Record<number, number> = { 0x88: 200, 0x89: 204, 0x8a: 206, 0x8b: 304, 0x8c: 400, 0x8d: 404, 0x8e: 500 };
  return STATIC[f.payload[at]!];
}

export interface H2Answer {
  status: number;
  headers: Record<string, unknown>;
  trailers: Record<string, unknown>;
  body: Buffer;
}

/** One HTTP/2 request on a fresh tunnel (Bun's node:http2 client); the session is closed afterwards. */
export async function h2Request(
  env: H2TunnelEnv,
  path: string,
  opts: { authority?: string; method?: string; headers?: Record<string, string> } = {},
): Promise<H2Answer> {
  const tls = await openH2Tunnel(env, opts.authority ?? env.authority);
  const session = http2.connect(`https://${opts.authority ?? env.authority}`, { createConnection: () => tls });
  session.on("error", () => {});
  try {
    return await new Promise<H2Answer>((resolve, reject) => {
      const req = session.request({ ":method": opts.method ?? "GET", ":path": path, ...opts.headers }, { endStream: true });
      const out: H2Answer = { status: 0, headers: {}, trailers: {}, body: Buffer.alloc(0) };
      const chunks: Buffer[] = [];
      req.on("response", (h) => ((out.status = Number(h[":status"])), (out.headers = { ...h })));
      req.on("trailers", (t) => (out.trailers = { ...t }));
      req.on("data", (d: Buffer) => chunks.push(d));
      req.on("end", () => resolve({ ...out, body: Buffer.concat(chunks) }));
      req.on("error", reject);
    });
  } finally {
    session.destroy();
  }
}

/** The broker still serves a normal HTTP/2 request through a new tunnel, credential injected. */
export async function expectHealthy(env: H2TunnelEnv): Promise<void> {
  const path = `/healthy/${crypto.randomUUID()}`;
  const r = await h2Request(env, path);
  if (r.status !== 200) throw new Error(`health check: ${r.status} ${r.body.toString().slice(0, 300)}`);
  const seen = env.h2.received.find((x) => x.path === path);
  if (!seen) throw new Error("health check: the upstream never saw the request");
  const auth = seen.headers.filter(([k]) => k === "authorization").map(([, v]) => v);
  if (auth.length !== 1 || auth[0] !== `Bearer ${env.secret}`) throw new Error("health check: the credential was not injected");
}
