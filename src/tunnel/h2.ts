// HTTP/2 inside an intercepted tunnel (the agent picked h2 in ALPN). Each stream is one request
// through the egress core, exactly like an HTTP/1.1 request in the same tunnel: routed to the
// CONNECT authority (never :authority), rules, injection, guard, audit, redaction. Response
// trailers pass (gRPC's status lives there); a broker error on a gRPC call is answered the gRPC way,
// so the agent's client reports it instead of failing on a JSON body. Bun's node:http2 does the
// framing, HPACK, flow control and SETTINGS; the frame guard (http/h2-frame-guard.ts) stands in front of it.

import { constants, createServer, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { Duplex } from "node:stream";
import { answerOf, isGrpcContentType, type Answer } from "../egress/index.ts";
import { drained, fieldLines, FRAME_LIMITS, guardFrames, linesToFields } from "../http/index.ts";
import { InvalidRequest, MethodNotAllowed, toErrorResponse, UpstreamUnreachable } from "../errors.ts";
import type { Authority, TunnelDeps, TunnelSession } from "./context.ts";
import { tunnelEgressInput } from "./egress-input.ts";
import { grpcErrorAnswer } from "./h2-grpc.ts";
import { egressForSession } from "./intercept.ts";
import { createH2Body } from "./h2-body.ts";
import { errorResponse } from "./respond.ts";

/** Streams one agent connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
export const MAX_CONCURRENT_STREAMS = 100;
/** Response headers HTTP/2 forbids (RFC 9113 §8.2.2); an HTTP/1.1 upstream may send them. */
const CONNECTION_SPECIFIC = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]);

/** `once`: the connection closes after its first answer (a tunnel to a host the vault refuses). */
export function serveHttp2(socket: Duplex, target: Authority, session: TunnelSession, deps: TunnelDeps, opts: { once?: boolean } = {}): void {
  let h2: Http2Session | undefined;
  const guarded = guardFrames(socket, FRAME_LIMITS, (reason) => {
    deps.log.warn("http2_abuse", { reason, principal: session.principal.id, host: target.host });
    h2?.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM);
    // The GOAWAY is queued first; then the connection goes, whatever the agent does next.
    setImmediate(() => h2?.destroy());
  });
  const server = createServer({
    maxSessionMemory: 16,
    settings: {
      maxConcurrentStreams: MAX_CONCURRENT_STREAMS,
      maxHeaderListSize: deps.maxHeadBytes,
      enablePush: false,
      enableConnectProtocol: false,
    },
  });
  let active = 0;
  const drain = deps.drain;
  const idle = (yes: boolean) => (yes ? drain?.idle.add(socket) : drain?.idle.delete(socket));
  server.on("session", (s: Http2Session) => {
    h2 = s;
    s.on("error", () => {}); // a protocol error: the session sends its GOAWAY and closes the guarded stream
  });
  server.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => {
    stream.on("error", () => {});
    if (drain?.draining) return void stream.close(constants.NGHTTP2_REFUSED_STREAM); // safe for the agent to retry elsewhere
    active++;
    idle(false);
    stream.once("close", () => {
      if (--active === 0) idle(true);
    });
    void serveStream(stream, headers, (flags & constants.NGHTTP2_FLAG_END_STREAM) !== 0, target, session, deps)
      .catch((err) => {
        deps.log.debug("http2_stream_failed", { err });
        stream.close(constants.NGHTTP2_INTERNAL_ERROR);
      })
      .finally(() => {
        if (opts.once) h2?.close();
      });
  });
  idle(true);
  server.emit("connection", guarded);
}

async function serveStream(
  stream: ServerHttp2Stream,
  headers: IncomingHttpHeaders,
  ended: boolean,
  target: Authority,
  session: TunnelSession,
  deps: TunnelDeps,
): Promise<void> {
  const method = String(headers[":method"] ?? "");
  const grpc = isGrpcContentType(headers["content-type"]);
  const list = fieldLines(headers); // the egress core works on header lines
  const body = ended ? null : createH2Body(stream, list);
  // The agent resetting the stream (or dropping the connection) cancels the upstream exchange too.
  const gone = new AbortController();
  stream.once("close", () => gone.abort());
  let reply: Answer | Response;
  if (method === "CONNECT") {
    // Extended CONNECT (WebSockets over HTTP/2) is not offered; a plain CONNECT inside a tunnel is refused too.
    body?.stream.cancel().catch(() => {});
    reply = errorResponse(new MethodNotAllowed("CONNECT is not allowed inside a tunnel"), deps.log);
  } else {
    const path = String(headers[":path"] ?? "");
    reply = await egressForSession(
      () => {
        // A stream the agent already reset (rapid reset) is not sent upstream at all.
        if (stream.destroyed) throw new InvalidRequest("the agent reset the stream");
        if (!path.startsWith("/")) throw new InvalidRequest("the :path must start with /", "path");
        return {
          ...tunnelEgressInput({ method, target: path, headers: list }, target, session, body?.stream ?? null, body?.length ?? null, true),
          signal: gone.signal,
        };
      },
      session,
      deps,
    );
  }
  if (stream.destroyed || stream.closed) {
    if (!(reply instanceof Response) && reply.body && !(reply.body instanceof Uint8Array)) await reply.body.cancel().catch(() => {});
    return;
  }
  const answer = reply instanceof Response ? (grpc ? await grpcErrorAnswer(reply) : answerOf(reply)) : reply;
  await respond(stream, answer, method === "HEAD");
}

/** Writes an answer on the stream: head, body with backpressure, then trailers when the upstream sent any. */
async function respond(stream: ServerHttp2Stream, a: Answer, headOnly: boolean): Promise<void> {
  const head = linesToFields(a.headers, CONNECTION_SPECIFIC, { ":status": a.status });
  const body = a.body;
  const bodyless = headOnly || a.status === 204 || a.status === 304 || body === null;
  if (bodyless && body && !(body instanceof Uint8Array)) await body.cancel().catch(() => {});
  try {
    stream.respond(head, { endStream: bodyless && !a.trailers, waitForTrailers: a.trailers !== undefined });
  } catch {
    // A field HTTP/2 cannot carry (an HTTP/1.1 upstream's duplicate single-value header, say).
    if (body && !(body instanceof Uint8Array)) await body.cancel().catch(() => {});
    return respond(stream, answerOf(toErrorResponse(new UpstreamUnreachable("the upstream's response cannot be carried over HTTP/2"))), headOnly);
  }
  if (bodyless && !a.trailers) return;
  if (!bodyless) {
    const sent = await writeBody(stream, body);
    if (!sent) return;
  }
  const trailers = a.trailers ? await a.trailers : [];
  if (a.trailers) stream.once("wantTrailers", () => stream.sendTrailers(linesToFields(trailers, CONNECTION_SPECIFIC)));
  stream.end();
}

/** False when the body broke or the agent went away: the stream was reset, never ended as if complete. */
async function writeBody(stream: ServerHttp2Stream, body: Uint8Array | ReadableStream<Uint8Array>): Promise<boolean> {
  if (body instanceof Uint8Array) {
    if (body.byteLength) stream.write(body);
    return true;
  }
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return true;
      if (stream.destroyed) throw new Error("the agent reset the stream");
      if (!stream.write(value)) await drained(stream);
    }
  } catch {
    await reader.cancel().catch(() => {});
    if (!stream.destroyed) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
    return false;
  }
}
