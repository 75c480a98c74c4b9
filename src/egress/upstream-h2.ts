// The upstream HTTP/2 client, used when the agent itself speaks HTTP/2 (tunnel streams, gRPC): one
// multiplexed session per origin, dialled to a checked IP and verified against the host name,
// offering h2 and http/1.1 in ALPN. An origin that picks http/1.1 is remembered for a while and
// answered by the HTTP/1.1 client instead (upstream.ts). Sends exactly the headers it is given (the
// injected one never enters the HPACK table), streams both bodies with backpressure, and hands
// the response trailers on (gRPC's status travels there).

import { connect as http2Connect, constants, sensitiveHeaders, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from "node:http2";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { ClientClosedRequest, UpstreamTimeout, UpstreamUnreachable } from "../errors.ts";
import type { Answer } from "./answer.ts";
import { drained } from "../http/index.ts";
import { fieldLines, linesToFields } from "../http/index.ts";
import { FRAME_LIMITS, guardFrames } from "../http/index.ts";
import { ConnectError, ConnectionTimeout } from "./connection.ts";
import { hostHeader, type HeaderList } from "../http/index.ts";
import { createPullQueue } from "../http/index.ts";
import type { HeldRequest } from "./upstream-body.ts";

/** An origin that answered ALPN with http/1.1 is not asked again for this long. */
const HTTP1_REMEMBERED_MS = 10 * 60_000;
/** A session without streams closes after this (shorter than the 5 s many servers use). */
const IDLE_SESSION_MS = 4_000;
/** An upstream resetting our streams costs us little (a busy server refuses streams), so only floods count there. */
const UPSTREAM_FRAME_LIMITS = { ...FRAME_LIMITS, resetBurst: 10_000, resetsPerSecond: 1_000 };
/** Headers RFC 9113 §8.2.2 forbids in HTTP/2 (the TE exception is added per request). */
const CONNECTION_SPECIFIC = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host", "te"]);

export interface H2Dial {
  readonly ip: string;
  readonly port: number;
  readonly serverName: string | undefined;
  readonly ca: string[] | undefined;
  readonly connectTimeoutMs: number;
}

/** TLS to a checked address offering h2 and http/1.1; resolves once verified (ALPN decided). */
export function dialAlpn(opts: H2Dial): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({
      host: opts.ip,
      port: opts.port,
      servername: opts.serverName,
      // Verified against servername (the host the agent asked for), or the IP literal when there is none.
      ca: opts.ca,
      rejectUnauthorized: true,
      ALPNProtocols: ["h2", "http/1.1"],
    });
    const timer = setTimeout(() => fail(new ConnectionTimeout(`connect to ${opts.ip}:${opts.port} timed out`)), opts.connectTimeoutMs);
    function fail(err: Error) {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    }
    socket.once("secureConnect", () => {
      clearTimeout(timer);
      socket.setNoDelay(true);
      resolve(socket);
    });
    socket.once("error", (err: NodeJS.ErrnoException) => {
      const tls = /CERT|SSL|TLS|ALTNAME|self.signed|verify/i.test(`${err.code ?? ""} ${err.message}`);
      fail(new ConnectError(tls ? `TLS verification failed: ${err.message}` : err.message, tls));
    });
  });
}

export interface H2PoolOptions {
  /** Tries the destination's checked addresses in turn (upstream.ts owns that loop). */
  readonly dial: (dest: { host: string; port: number; addresses: () => Promise<readonly string[]> }) => Promise<TLSSocket>;
  readonly maxHeaderListSize: number;
}

/** A reserved stream slot on a pooled session. */
export interface Lease {
  readonly session: ClientHttp2Session;
  /** Binds the slot to the stream opened with it: freed when the stream closes. */
  bind(stream: ClientHttp2Stream): void;
  /** Gives the slot back unused (the stream could not be opened). */
  release(): void;
}

export interface H2Pool {
  /** A stream slot on a session to the origin (`fresh`: on a new session), or null when it speaks only HTTP/1.1. */
  lease(dest: { host: string; port: number; addresses: () => Promise<readonly string[]> }, fresh?: boolean): Promise<Lease | null>;
  close(): void;
}

/** Sessions one origin may get; past that, streams share the least busy one. */
const MAX_SESSIONS_PER_ORIGIN = 16;
/** Streams per session even where the upstream allows more (it spreads load, and bounds one session's loss). */
const MAX_STREAMS_PER_SESSION = 256;
/** Assumed before the upstream's SETTINGS say otherwise. */
const DEFAULT_STREAM_LIMIT = 100;
/** How long a new session waits for the upstream's SETTINGS before its first stream. */
const SETTINGS_WAIT_MS = 2_000;

interface Pooled {
  readonly session: ClientHttp2Session;
  active: number;
  timer?: ReturnType<typeof setTimeout>;
}

export function createH2Pool(opts: H2PoolOptions): H2Pool {
  const sessions = new Map<string, Pooled[]>();
  const http1Until = new Map<string, number>();
  // Requests that find every session full share one dial instead of each opening a connection.
  const dialling = new Map<string, Promise<Pooled | null>>();

  const usable = (p: Pooled) => !p.session.closed && !p.session.destroyed;
  // Bun's client does not queue streams past the upstream's limit (they are refused), so the pool counts them.
  const limit = (p: Pooled) => Math.min(p.session.remoteSettings?.maxConcurrentStreams ?? DEFAULT_STREAM_LIMIT, MAX_STREAMS_PER_SESSION);

  /** A session with no stream closes after IDLE_SESSION_MS. */
  const armIdle = (p: Pooled) => {
    clearTimeout(p.timer);
    p.timer = setTimeout(() => p.active === 0 && p.session.close(), IDLE_SESSION_MS);
    p.timer.unref?.();
  };

  const reserve = (p: Pooled): Lease => {
    p.active++;
    clearTimeout(p.timer);
    let freed = false;
    const free = () => {
      if (freed) return;
      freed = true;
      if (--p.active === 0 && usable(p)) armIdle(p);
    };
    return { session: p.session, bind: (stream) => void stream.once("close", free), release: free };
  };

  async function open(dest: Parameters<H2Pool["lease"]>[0], key: string): Promise<Pooled | null> {
    const socket = await opts.dial(dest);
    if (socket.alpnProtocol !== "h2") {
      socket.destroy();
      http1Until.set(key, Date.now() + HTTP1_REMEMBERED_MS);
      return null;
    }
    const session = http2Connect(`https://${hostHeader(dest.host, dest.port)}`, {
      // A hostile upstream meets the same frame guard as an agent: on abuse the session (and its streams) fail.
      createConnection: () => guardFrames(socket, UPSTREAM_FRAME_LIMITS, () => session.destroy(new Error("the upstream flooded the connection")), "client"),
      settings: { enablePush: false, maxHeaderListSize: opts.maxHeaderListSize },
    });
    const pooled: Pooled = { session, active: 0 };
    const forget = () => {
      clearTimeout(pooled.timer);
      const left = (sessions.get(key) ?? []).filter((p) => p !== pooled);
      if (left.length) sessions.set(key, left);
      else sessions.delete(key);
    };
    session.on("error", forget); // each stream reports its own failure
    session.on("goaway", forget);
    session.on("close", forget);
    // The upstream's stream limit comes with its first SETTINGS, sent right after the handshake.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, SETTINGS_WAIT_MS);
      const done = () => (clearTimeout(timer), resolve());
      session.once("remoteSettings", done);
      session.once("close", done);
    });
    if (!usable(pooled)) throw new UpstreamUnreachable(`${dest.host} closed the HTTP/2 connection at once`);
    sessions.set(key, [...(sessions.get(key) ?? []), pooled]);
    armIdle(pooled);
    return pooled;
  }

  return {
    async lease(dest, fresh = false) {
      const key = `${dest.port}|${dest.host}`;
      for (;;) {
        if ((http1Until.get(key) ?? 0) > Date.now()) return null;
        const list = (sessions.get(key) ?? []).filter(usable);
        if (!fresh) {
          const room = list.find((p) => p.active < limit(p));
          if (room) return reserve(room);
          if (list.length >= MAX_SESSIONS_PER_ORIGIN) return reserve(list.reduce((a, b) => (b.active < a.active ? b : a)));
          const pending = dialling.get(key);
          if (pending) {
            await pending.catch(() => {});
            continue; // the new session may be full again already: look once more
          }
        }
        const dial = open(dest, key).finally(() => {
          if (dialling.get(key) === dial) dialling.delete(key);
        });
        dialling.set(key, dial);
        const opened = await dial;
        return opened && reserve(opened);
      }
    },
    close() {
      for (const list of sessions.values()) for (const p of list) p.session.destroy();
      sessions.clear();
    },
  };
}

export interface H2Exchange {
  readonly host: string;
  readonly port: number;
  /** Inactivity allowed while waiting for the head or while a body moves. */
  readonly idleTimeoutMs: number;
  /** The header the broker injected: sent never-indexed, so it stays out of the HPACK tables. */
  readonly sensitive: readonly string[];
  /** Whether the agent accepts trailers (TE: trailers), which gRPC servers expect to see. */
  readonly trailers: boolean;
  /** Aborted when the agent goes away: the stream is cancelled (RST_STREAM CANCEL) at the upstream. */
  readonly signal?: AbortSignal;
}

/** A stream the upstream refused before doing any work (REFUSED_STREAM, or a session going away). */
export class StreamRefused extends Error {}

export function exchangeH2(lease: Lease, req: HeldRequest, x: H2Exchange): Promise<Answer> {
  const headers = linesToFields(req.headers, CONNECTION_SPECIFIC, {
    ":method": req.method,
    ":path": req.target,
    ":authority": hostHeader(x.host, x.port),
    ":scheme": "https",
  });
  if (req.bodyLength !== null) headers["content-length"] = String(req.bodyLength);
  if (x.trailers) headers.te = "trailers";
  (headers as Record<symbol, unknown>)[sensitiveHeaders] = x.sensitive.map((n) => n.toLowerCase());
  const bodyless = req.body === null && req.bodyBytes === undefined;
  let stream: ClientHttp2Stream;
  try {
    stream = lease.session.request(headers, { endStream: bodyless });
    lease.bind(stream);
  } catch {
    lease.release();
    return Promise.reject(new StreamRefused("the upstream session is closing"));
  }
  // The agent gone (its stream reset, its connection closed): the upstream's stream goes too.
  const cancel = () => stream.close(constants.NGHTTP2_CANCEL);
  x.signal?.addEventListener("abort", cancel);
  stream.once("close", () => x.signal?.removeEventListener("abort", cancel));
  if (x.signal?.aborted) cancel();
  // Inactivity, not total time: a long stream (gRPC server streaming) lives as long as it moves.
  let timedOut = false;
  const timer = setTimeout(() => ((timedOut = true), stream.close(constants.NGHTTP2_CANCEL)), x.idleTimeoutMs);
  stream.on("data", () => timer.refresh());
  stream.once("close", () => clearTimeout(timer));
  if (!bodyless) void sendBody(stream, req, () => timer.refresh());
  return new Promise<Answer>((resolve, reject) => {
    let answered = false;
    stream.on("error", () => {}); // surfaced through close and the body below
    stream.once("response", (head: IncomingHttpHeaders, flags: number) => {
      answered = true;
      // A final status is three digits from 200 to 599 (1xx are interim, and come as "headers"): any
      // other would make /proxy throw building its Response, and the tunnel write a bad status line.
      const status = Number(head[":status"]);
      if (!Number.isInteger(status) || status < 200 || status > 599) {
        stream.close(constants.NGHTTP2_PROTOCOL_ERROR);
        return reject(new UpstreamUnreachable(`${x.host} sent an invalid response`));
      }
      // A head with END_STREAM is the whole answer (gRPC's trailers-only status): passed on as one.
      // (A content-length above 0 there describes no body only for a HEAD, a 204 or a 304: otherwise
      // the agent would be told of bytes that never come, and read its next answer as them.)
      if ((flags & constants.NGHTTP2_FLAG_END_STREAM) !== 0) {
        if (Number(head["content-length"] ?? 0) !== 0 && req.method !== "HEAD" && status !== 204 && status !== 304)
          return reject(new UpstreamUnreachable(`${x.host} sent a body shorter than its content-length`));
        return resolve({ status, statusText: "", headers: fieldLines(head), body: null });
      }
      resolve(answerFrom(stream, head, req.method));
    });
    stream.once("close", () => {
      if (answered) return;
      if (timedOut) return reject(new UpstreamTimeout(`${x.host} did not answer in time`));
      if (x.signal?.aborted) return reject(new ClientClosedRequest("the agent went away before the answer"));
      if (stream.rstCode === constants.NGHTTP2_REFUSED_STREAM) return reject(new StreamRefused(`${x.host} refused the stream`));
      reject(new UpstreamUnreachable(`${x.host} reset the stream before answering`));
    });
  });
}

async function sendBody(stream: ClientHttp2Stream, req: HeldRequest, moved: () => void): Promise<void> {
  if (req.bodyBytes) return void stream.end(req.bodyBytes);
  const reader = req.body!.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (stream.destroyed) throw new Error("stream closed");
      moved();
      if (!stream.write(value)) await drained(stream);
    }
    stream.end();
  } catch {
    // A body that failed on the agent's side must not look complete to the upstream.
    await reader.cancel().catch(() => {});
    stream.close(constants.NGHTTP2_CANCEL);
  }
}

function answerFrom(stream: ClientHttp2Stream, head: IncomingHttpHeaders, method: string): Answer {
  const status = Number(head[":status"]);
  const headers = fieldLines(head);
  let trailers: HeaderList = [];
  stream.once("trailers", (t: IncomingHttpHeaders) => (trailers = fieldLines(t)));
  const length = Number(head["content-length"] ?? NaN);
  const bodyless = method === "HEAD" || status === 204 || status === 304 || length === 0;
  const queue = createPullQueue({ pause: () => stream.pause(), resume: () => stream.resume() });
  let ended = false;
  // Bun's client does not hold DATA to the Content-Length (RFC 9113 §8.1.1: a mismatch is malformed):
  // no byte past it is passed on, and a body ending short of it breaks instead of looking complete.
  let left = !bodyless && Number.isSafeInteger(length) && length >= 0 ? length : Infinity;
  const malformed = (why: string) => queue.fail(new UpstreamUnreachable(`the upstream sent a body ${why} its content-length`));
  stream.on("data", (chunk: Buffer) => {
    if (queue.failure) return;
    if (chunk.byteLength > left) {
      malformed("longer than");
      return void stream.close(constants.NGHTTP2_PROTOCOL_ERROR);
    }
    left -= chunk.byteLength;
    queue.push(chunk);
  });
  stream.once("end", () => {
    if (left !== Infinity && left > 0) return malformed("shorter than");
    ended = true;
    queue.end();
  });
  // A reset after the head (or a lost connection) must break the body, never end it as if complete.
  stream.once("close", () => (ended ? queue.end() : queue.fail(new UpstreamUnreachable("the upstream reset the stream mid-body"))));
  const finished = new Promise<HeaderList>((resolve) => stream.once("close", () => resolve(ended ? trailers : [])));
  const answer = { status, statusText: "", headers, trailers: finished };
  if (bodyless) {
    stream.resume();
    return { ...answer, body: null };
  }
  const body = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      const chunk = await queue.read();
      if (chunk === null) ctrl.close();
      else ctrl.enqueue(chunk);
    },
    cancel() {
      stream.close(constants.NGHTTP2_CANCEL);
    },
  });
  return { ...answer, body };
}
