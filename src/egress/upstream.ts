// The upstream client: HTTP/1.1 here, HTTP/2 for agents that speak it (upstream-h2.ts). Sends exactly the headers it is given (nothing added but Host
// and body framing) over a pooled, keep-alive connection to a checked IP, streams both bodies,
// never decompresses, never follows redirects, and fails loudly on timeouts or bad framing.

import type { Answer } from "./answer.ts";
import { ClientClosedRequest, UpstreamTimeout, UpstreamUnreachable } from "../errors.ts";
import { ConnectError, ConnectionTimeout, dial, type Connection } from "./connection.ts";
import { MAX_HEAD_BYTES, readResponseHead } from "./upstream-head.ts";
import { createH2Pool, dialAlpn, exchangeH2, StreamRefused } from "./upstream-h2.ts";
import { bodyStream, holdSmallBody, pumpBody, readExactly, SMALL_BODY_BYTES, type HeldRequest, type OutboundRequest } from "./upstream-body.ts";

export type { Connection } from "./connection.ts";
export { SMALL_BODY_BYTES } from "./upstream-body.ts";
export type { OutboundRequest } from "./upstream-body.ts";
import { headerValues, hostHeader, responseFraming, serializeHead, WireError, type BodyFraming, type HeaderList, type ResponseHead } from "../http/index.ts";

export interface UpstreamOptions {
  /** Trusted roots for upstream TLS; undefined means the runtime defaults (system/Mozilla roots). */
  readonly ca?: string[];
  readonly connectTimeoutMs?: number;
  /** Longest silence tolerated while waiting for the response head or while a body streams. */
  readonly idleTimeoutSeconds?: number;
  readonly maxIdlePerOrigin?: number;
  readonly maxHeadBytes?: number;
  /** Told of every failed dial (metrics): a refused or unreachable address, a TLS failure, a timeout. */
  readonly onConnectError?: (kind: ConnectFailure) => void;
}

export type ConnectFailure = "connect" | "tls" | "timeout";

export interface Destination {
  /** Host name for SNI, certificate verification and the Host header. */
  readonly host: string;
  readonly port: number;
  /**
   * Resolves and checks the addresses (the network guard), tried in order. Called only when a new
   * connection is needed: a pooled keep-alive connection already goes to a checked address.
   */
  readonly addresses: () => Promise<readonly string[]>;
}

/**
 * How to reach the origin: HTTP/1.1 unless the agent itself speaks HTTP/2, then HTTP/2 where the
 * origin offers it ("prefer"), or only HTTP/2 ("require": gRPC cannot be bridged to HTTP/1.1).
 */
export interface SendOptions {
  readonly http2?: "prefer" | "require";
  /** Header names the broker injected (HTTP/2: sent never-indexed). */
  readonly sensitive?: readonly string[];
  /** The agent accepts trailers (TE: trailers), forwarded to an HTTP/2 origin. */
  readonly trailers?: boolean;
  /** Aborted when the agent goes away: a request still waiting for its answer is cancelled. */
  readonly signal?: AbortSignal;
}

export interface Upstream {
  send(dest: Destination, req: OutboundRequest, how?: SendOptions): Promise<Answer>;
  /** A fresh, unpooled, verified connection (WebSocket upgrades take it over). */
  open(dest: Destination): Promise<Connection>;
  /** A fresh plain TCP connection (blind tunnels: the agent's TLS runs inside it, end to end). */
  openPlain(dest: Destination): Promise<Connection>;
  close(): void;
}

const POOL_IDLE_SECONDS = 4;
const IDEMPOTENT_METHODS = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);
const NO_BODY_METHODS = new Set(["GET", "HEAD", "DELETE", "OPTIONS"]);

export function createUpstream(opts: UpstreamOptions = {}): Upstream {
  const idle = new Map<string, Connection[]>();
  const maxIdle = opts.maxIdlePerOrigin ?? 32;
  const isIp = (h: string) => /^[\d.]+$/.test(h) || h.includes(":");

  /** Tries each checked address in turn; a certificate problem stops at the first (it will not improve). */
  async function reach<T>(dest: Destination, attempt: (ip: string, serverName: string | undefined) => Promise<T>): Promise<T> {
    let last: Error | undefined;
    for (const ip of await dest.addresses()) {
      try {
        return await attempt(ip, isIp(dest.host) ? undefined : dest.host);
      } catch (err) {
        last = err as Error;
        opts.onConnectError?.(err instanceof ConnectionTimeout ? "timeout" : err instanceof ConnectError && err.tls ? "tls" : "connect");
        if (err instanceof ConnectError && err.alpnRefused) throw new Http1Refused();
        if (err instanceof ConnectError && err.tls) break;
      }
    }
    if (last instanceof ConnectionTimeout) throw new UpstreamTimeout(`connecting to ${dest.host} timed out`);
    if (last instanceof ConnectError && last.tls) throw new UpstreamUnreachable(`TLS verification of ${dest.host} failed`);
    throw new UpstreamUnreachable(`cannot connect to ${dest.host}:${dest.port}`);
  }

  const connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
  const http2Only = new Map<string, number>();
  const h2 = createH2Pool({
    maxHeaderListSize: opts.maxHeadBytes ?? MAX_HEAD_BYTES,
    dial: (dest) => reach(dest as Destination, (ip, serverName) => dialAlpn({ ip, port: dest.port, serverName, ca: opts.ca, connectTimeoutMs })),
  });

  async function connect(dest: Destination, fresh: boolean, plain = false): Promise<{ conn: Connection; reused: boolean }> {
    // Pooled by host name and port: every pooled connection went to an address the guard checked.
    const key = `${dest.port}|${dest.host}`;
    if (!fresh) {
      const list = idle.get(key);
      while (list?.length) {
        const conn = list.pop()!;
        // Bytes that arrived while it sat idle were sent for no request: reading them as the next
        // response would hand one caller's answer (maybe another vault's echo) to the next.
        if (!conn.closed && conn.buffered === 0) return { conn, reused: true };
        conn.close();
      }
    }
    const conn = await reach(dest, (ip, serverName) => dial({ ip, port: dest.port, serverName, ca: opts.ca, connectTimeoutMs, plain }, key));
    return { conn, reused: false };
  }

  function release(conn: Connection) {
    if (conn.closed) return;
    // Bytes beyond the response's framing are a broken (or hostile) upstream: never reuse the connection.
    if (conn.buffered > 0) return conn.close();
    // Shorter than the 5 s keep-alive many servers use (Node's default), so we close an idle
    // connection before the upstream does and a request with a body never lands on a dead one.
    conn.idleTimeout(POOL_IDLE_SECONDS);
    const list = idle.get(conn.key) ?? [];
    if (list.length >= maxIdle) return conn.close();
    list.push(conn);
    idle.set(conn.key, list);
  }

  async function send(dest: Destination, original: OutboundRequest, how: SendOptions = {}): Promise<Answer> {
    if (how.signal?.aborted) throw new ClientClosedRequest("the agent went away before the request was sent");
    const key = `${dest.port}|${dest.host}`;
    const onlyHttp2 = (http2Only.get(key) ?? 0) > Date.now();
    if (how.http2 || onlyHttp2) {
      const answer = await sendHttp2(dest, original, onlyHttp2 ? { ...how, http2: "require" } : how);
      if (answer) return answer;
    }
    // A reused keep-alive connection may have been closed by the upstream meanwhile. A request is
    // replayed once on a fresh connection when nothing came back, its body can be sent again (none,
    // or a small one held in memory) and replaying cannot double an effect: an idempotent method, or
    // one the agent marked with an Idempotency-Key (a lost POST to a payment API must not run twice).
    const req = await holdSmallBody(original);
    const safe = IDEMPOTENT_METHODS.has(req.method) || req.headers.some(([name]) => name.toLowerCase() === "idempotency-key");
    const replayable = safe && (req.body === null || req.bodyBytes !== undefined);
    let first: { conn: Connection; reused: boolean };
    try {
      first = await connect(dest, false);
    } catch (err) {
      if (!(err instanceof Http1Refused)) throw err;
      // An HTTP/2-only origin: the HTTP/1.1 agent's request is translated, and the origin remembered.
      http2Only.set(key, Date.now() + HTTP2_ONLY_REMEMBERED_MS);
      return (await sendHttp2(dest, req, { ...how, http2: "require" }))!;
    }
    try {
      return await exchange(first.conn, dest, req, how.signal);
    } catch (err) {
      if (!(err instanceof StaleConnection)) throw err;
      if (!(first.reused && replayable)) throw new UpstreamUnreachable(`${dest.host} closed the connection before answering`);
      const second = await connect(dest, true);
      return exchange(second.conn, dest, req, how.signal).catch((again) => {
        throw again instanceof StaleConnection ? new UpstreamUnreachable(`${dest.host} closed the connection before answering`) : again;
      });
    }
  }

  /** Over HTTP/2 when the origin speaks it; null when it chose HTTP/1.1 and that is allowed. */
  async function sendHttp2(dest: Destination, original: OutboundRequest, how: SendOptions): Promise<Answer | null> {
    const lease = await h2.lease(dest);
    if (!lease) {
      if (how.http2 === "require") throw new UpstreamUnreachable(`${dest.host} does not speak HTTP/2, and gRPC needs HTTP/2 end to end`);
      return null;
    }
    const req = await holdSmallBody(original);
    const x = {
      host: dest.host,
      port: dest.port,
      idleTimeoutMs: (opts.idleTimeoutSeconds ?? 120) * 1000,
      sensitive: how.sensitive ?? [],
      trailers: how.trailers ?? false,
      signal: how.signal,
    };
    try {
      return await exchangeH2(lease, req, x);
    } catch (err) {
      // A refused stream was never processed: it is safe to send again on a new session if its body can be.
      if (!(err instanceof StreamRefused) || (req.body !== null && req.bodyBytes === undefined)) throw err;
      const again = await h2.lease(dest, true);
      if (!again) throw new UpstreamUnreachable(`${dest.host} stopped offering HTTP/2`);
      return exchangeH2(again, req, x).catch((e) => {
        throw e instanceof StreamRefused ? new UpstreamUnreachable(`${dest.host} refused the stream`) : e;
      });
    }
  }

  async function exchange(conn: Connection, dest: Destination, req: HeldRequest, signal: AbortSignal | undefined): Promise<Answer> {
    const framing: HeaderList = [];
    const chunked = req.body !== null && req.bodyLength === null;
    if (chunked) framing.push(["Transfer-Encoding", "chunked"]);
    else if (req.bodyLength !== null) framing.push(["Content-Length", String(req.bodyLength)]);
    else if (!NO_BODY_METHODS.has(req.method)) framing.push(["Content-Length", "0"]);
    const head = serializeHead(`${req.method} ${req.target} HTTP/1.1`, [["Host", hostHeader(dest.host, dest.port)], ...req.headers, ...framing]);

    conn.idleTimeout(opts.idleTimeoutSeconds ?? 120);
    let gotBytes = false;
    const sending = (async () => {
      // A held body goes out with the head: one write, one TLS record for a small API call.
      if (req.bodyBytes) return conn.write(Buffer.concat([head, req.bodyBytes]));
      await conn.write(head);
      if (req.body) await pumpBody(conn, req.body, chunked);
    })();
    sending.catch(() => conn.close());
    let response: { head: ResponseHead; framing: BodyFraming };
    // An agent gone before the answer came: the connection is closed, so the upstream stops too.
    const cancel = () => conn.close();
    signal?.addEventListener("abort", cancel);
    if (signal?.aborted) cancel();
    try {
      response = await readHead(conn, req.method, () => (gotBytes = true));
    } catch (err) {
      conn.close();
      if (signal?.aborted) throw new ClientClosedRequest("the agent went away before the answer");
      if (!gotBytes && !(err instanceof WireError) && !(err instanceof ConnectionTimeout)) throw new StaleConnection();
      if (err instanceof ConnectionTimeout) throw new UpstreamTimeout(`${dest.host} did not answer in time`);
      throw new UpstreamUnreachable(`${dest.host} sent an invalid response`);
    } finally {
      signal?.removeEventListener("abort", cancel);
    }
    const keepAlive = response.head.version === "1.1" && !headerValues(response.head.headers, "connection").some((v) => /\bclose\b/i.test(v));
    const reusable = keepAlive && response.framing.kind !== "close";
    const finish = async (complete: boolean) => {
      const sent = await sending.then(
        () => true,
        () => false,
      );
      if (complete && reusable && sent) release(conn);
      else conn.close();
    };
    const answer = {
      status: response.head.status,
      statusText: response.head.statusText,
      headers: answerHeaders(response.head.headers, response.framing, req.method === "HEAD" || response.head.status === 304),
    };
    if (response.framing.kind === "length" && response.framing.length > 0 && response.framing.length <= SMALL_BODY_BYTES) {
      // Small bodies (most API answers) are read whole: no stream machinery per request.
      const bytes = await readExactly(conn, response.framing.length).catch(async (err) => {
        await finish(false);
        throw new UpstreamUnreachable(`${dest.host} closed the connection mid-body`, { cause: err });
      });
      await finish(true);
      return { ...answer, body: bytes };
    }
    return { ...answer, body: bodyStream(conn, response.framing, finish) };
  }

  async function readHead(conn: Connection, method: string, onBytes: () => void): Promise<{ head: ResponseHead; framing: BodyFraming }> {
    const head = await readResponseHead(conn, { maxBytes: opts.maxHeadBytes, onBytes });
    return { head, framing: responseFraming(head, method) };
  }

  return {
    send,
    open: async (dest) => {
      try {
        return (await connect(dest, true)).conn;
      } catch (err) {
        if (err instanceof Http1Refused) throw new UpstreamUnreachable(`${dest.host} speaks only HTTP/2, and a WebSocket upgrade needs HTTP/1.1`);
        throw err;
      }
    },
    openPlain: async (dest) => (await connect(dest, true, true)).conn,
    close() {
      for (const list of idle.values()) for (const c of list) c.close();
      idle.clear();
      h2.close();
    },
  };
}

class StaleConnection extends Error {}

/** The origin's TLS refused HTTP/1.1 in ALPN: it speaks only HTTP/2. */
class Http1Refused extends Error {}

/** An origin found to speak only HTTP/2 is reached over HTTP/2 for this long without asking again. */
const HTTP2_ONLY_REMEMBERED_MS = 10 * 60_000;

/**
 * Lower-case names; framing is re-done by whoever writes the answer to the agent. A HEAD answer (or a
 * 304) keeps a well-formed Content-Length: it describes the body a GET would get (S3's HeadObject and
 * download tools read sizes from it), and no body follows it here.
 */
function answerHeaders(list: HeaderList, framing: BodyFraming, describesAbsentBody: boolean): HeaderList {
  const out: HeaderList = [];
  for (const [name, value] of list) {
    const lower = name.toLowerCase();
    if (lower === "transfer-encoding") continue;
    if (lower === "content-length" && framing.kind !== "length" && !(describesAbsentBody && /^\d{1,15}$/.test(value.trim()))) continue;
    out.push([lower, value]);
  }
  return out;
}
