// Serving requests inside an intercepted tunnel: HTTP/1.1 with keep-alive, strict framing (no
// ambiguous Content-Length / Transfer-Encoding), chunked bodies, Expect: 100-continue, each request
// sent through the egress core. Routing is bound to the CONNECT authority, never the inner Host.

import type { Duplex } from "node:stream";
import { egress, isWebSocketUpgrade, type Answer, type EgressInput } from "../egress/index.ts";
import {
  createChunkedDecoder,
  findHeadEnd,
  headerValues,
  parseRequestHead,
  requestFraming,
  WireError,
  type BodyFraming,
  type RequestHead,
} from "../http/index.ts";
import { HeadRejected, InvalidRequest, toErrorResponse } from "../errors.ts";
import { refusal } from "../ratelimit/index.ts";
import type { Authority, TunnelDeps, TunnelSession } from "./context.ts";
import { tunnelEgressInput } from "./egress-input.ts";
import { createChunkReader, HeadError, readNextHead, writeAll, type ChunkReader } from "./reader.ts";
import { errorResponse, writeResponse } from "./respond.ts";
import { refreshSession } from "./session.ts";
import { relayWebSocket } from "./websocket.ts";

export type { Authority } from "./context.ts";

/** `once`: the connection closes after its first response (a tunnel to a host the vault refuses). */
export async function serveIntercepted(
  stream: Duplex,
  target: Authority,
  session: TunnelSession,
  deps: TunnelDeps,
  opts: { once?: boolean } = {},
): Promise<void> {
  const reader = createChunkReader(stream);
  const inFlight = watchInFlight(stream);
  for (;;) {
    let head: RequestHead;
    let framing: BodyFraming;
    try {
      const bytes = await readIdleHead(stream, reader, deps);
      if (!bytes) return void stream.end();
      head = parseRequestHead(bytes);
      framing = requestFraming(head);
    } catch (err) {
      const status = err instanceof HeadError ? err.status : 400;
      const message = err instanceof WireError || err instanceof HeadError ? err.message : "malformed request";
      await writeResponse(stream, headErrorResponse(status, message), { close: true }).catch(() => {});
      return void stream.end();
    }
    if (isWebSocketUpgrade(head.method, head.headers)) return relayWebSocket(stream, reader, head, target, session, deps);
    const keepAlive = !opts.once && head.version === "1.1" && !headerValues(head.headers, "connection").some((v) => /\bclose\b/i.test(v));
    const { response, complete } = await forwardRequest(stream, reader, head, framing, target, session, deps, inFlight);
    try {
      await writeResponse(stream, response, { headOnly: head.method === "HEAD", close: !keepAlive || !complete });
    } catch {
      return void stream.destroy();
    }
    if (!keepAlive || !complete) return void stream.end();
  }
}

/**
 * Waits for the next request head (null: the connection is done). While the listener drains for a
 * shutdown, a connection between requests is closed instead of waiting; one mid-request finishes.
 */
export async function readIdleHead(stream: Duplex, reader: ChunkReader, deps: TunnelDeps): Promise<Uint8Array | null> {
  const drain = deps.drain;
  if (drain?.draining) return null;
  drain?.idle.add(stream);
  try {
    return await readNextHead(stream, reader, headLimits(deps), findHeadEnd);
  } finally {
    drain?.idle.delete(stream);
  }
}

/** Idle keep-alive connections wait up to a minute for their next request; a started head gets the head deadline. */
export function headLimits(deps: TunnelDeps) {
  return { idleMs: deps.keepAliveTimeoutMs ?? 60_000, headMs: deps.headerTimeoutMs ?? 10_000, maxBytes: deps.maxHeadBytes };
}

/** The request in flight on a connection: its controller is aborted when the connection closes. */
interface InFlight {
  gone?: AbortController;
  /** Removes the listener of a watch kept for one request. */
  readonly release?: () => void;
}

/** One close listener for the connection's life, instead of one added and removed per request. */
function watchInFlight(stream: Duplex): InFlight {
  const inFlight: InFlight = {};
  stream.once("close", () => inFlight.gone?.abort());
  return inFlight;
}

/**
 * Sends one request (head already parsed, body still on the reader) through the egress core.
 * `complete` says whether the body was read to its end, so the next request can be parsed.
 * `inFlight`: the connection's watch (serveIntercepted); without it, one is kept for this request alone.
 */
export async function forwardRequest(
  stream: Duplex,
  reader: ChunkReader,
  head: RequestHead,
  framing: BodyFraming,
  target: Authority,
  session: TunnelSession,
  deps: TunnelDeps,
  inFlight?: InFlight,
): Promise<{ response: Answer | Response; complete: boolean }> {
  const body = bodyStream(reader, framing);
  // The body is asked for only once the request is admitted: a refused one never uploads it.
  const expectsContinue = body !== null && headerValues(head.headers, "expect").some((v) => v.toLowerCase() === "100-continue");
  // An agent that drops the connection while the upstream thinks cancels the upstream exchange too.
  const gone = new AbortController();
  const watch = inFlight ?? watchInFlightOnce(stream);
  watch.gone = gone;
  try {
    const input = () => ({
      ...tunnelEgressInput(head, target, session, body?.stream ?? null, framing.kind === "length" ? framing.length : null),
      signal: gone.signal,
    });
    const admitted = expectsContinue ? () => writeAll(stream, "HTTP/1.1 100 Continue\r\n\r\n") : undefined;
    const response = await egressForSession(input, session, deps, admitted);
    return { response, complete: body ? await body.drained() : true };
  } finally {
    watch.gone = undefined;
    watch.release?.();
  }
}

/** A watch for one request: its listener is removed once the request is answered. */
function watchInFlightOnce(stream: Duplex): InFlight {
  const abort = () => watch.gone?.abort();
  const watch: InFlight = { release: () => void stream.off("close", abort) };
  stream.once("close", abort);
  return watch;
}

/**
 * One request from a tunnel through the egress core, under the rate limits and with the session
 * re-checked (a revoked token stops working at its next request). Every failure becomes the
 * broker's error envelope. Shared by HTTP/1.1 requests and HTTP/2 streams.
 */
export async function egressForSession(
  input: () => EgressInput,
  session: TunnelSession,
  deps: TunnelDeps,
  admitted?: () => Promise<void>,
): Promise<Answer | Response> {
  const limiter = deps.domain.rateLimiter;
  const entry = limiter?.enterGlobal();
  try {
    if (entry && !entry.ok) throw refusal(entry);
    const refreshing = refreshSession(deps, session); // admission: the session re-checked, the PROXY tier charged
    if (refreshing) await refreshing;
    await admitted?.();
    return await egress(input(), deps.egress);
  } catch (err) {
    return errorResponse(err, deps.log);
  } finally {
    if (entry?.ok) entry.release();
  }
}

/** The egress core's view of a request read from a tunnel: routed to the CONNECT authority. */
export function headErrorResponse(status: number, message: string): Response {
  return toErrorResponse(new HeadRejected(status === 414 || status === 431 ? status : 400, message));
}

/**
 * The request body as a stream over the connection's reader. `drained()` resolves true once the
 * body was read to its end (so the next request can be parsed), false if it was abandoned.
 */
function bodyStream(reader: ChunkReader, framing: BodyFraming): { stream: ReadableStream<Uint8Array>; drained(): Promise<boolean> } | undefined {
  if (framing.kind === "none" || framing.kind === "close") return undefined;
  let remaining = framing.kind === "length" ? framing.length : 0;
  const decoder = framing.kind === "chunked" ? createChunkedDecoder() : undefined;
  let finished = false;
  let failed = false;
  const stream = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        for (;;) {
          const chunk = await reader.read();
          if (chunk === null) throw new WireError("client closed the connection mid-body");
          if (decoder) {
            const { data, rest } = decoder.push(chunk);
            for (const d of data) ctrl.enqueue(d.slice());
            if (decoder.done) {
              reader.unread(rest);
              finished = true;
              return ctrl.close();
            }
            if (data.length) return;
            continue;
          }
          const take = Math.min(remaining, chunk.byteLength);
          ctrl.enqueue(chunk.slice(0, take));
          remaining -= take;
          if (take < chunk.byteLength) reader.unread(chunk.subarray(take));
          if (remaining === 0) {
            finished = true;
            ctrl.close();
          }
          return;
        }
      } catch (err) {
        failed = true;
        // Malformed framing is the client's error (400), whatever the upstream made of the cut-off body.
        ctrl.error(err instanceof WireError ? new InvalidRequest(err.message) : err);
      }
    },
  });
  return {
    stream,
    async drained() {
      if (finished) return true;
      if (failed) return false;
      // The egress core did not read the body (an early error): we cannot find the next request's
      // start without consuming it, so the connection is closed after this response.
      return false;
    },
  };
}
