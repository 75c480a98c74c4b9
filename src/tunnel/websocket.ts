// WebSocket upgrades inside an intercepted tunnel (wss:// for realtime APIs): the upgrade request
// goes through the egress core (injection, guard, audit); after the upstream's 101 the two
// connections are joined. Client bytes pass as they are; upstream bytes reach the agent only
// through the core's frame scanner when a credential was injected (no reveal by echo).

import type { Duplex } from "node:stream";
import { egressUpgrade, encodeCloseFrame, WebSocketProtocolError, type Switched } from "../egress/index.ts";
import { serializeHead, type RequestHead } from "../http/index.ts";
import type { Authority, TunnelDeps, TunnelSession } from "./context.ts";
import { tunnelEgressInput } from "./egress-input.ts";
import { writeAll, type ChunkReader } from "./reader.ts";
import { errorResponse, writeResponse } from "./respond.ts";
import { refreshSession } from "./session.ts";

/** RFC 6455 §7.4.1: the server hit a condition that prevents it from fulfilling the request. */
const CLOSE_INTERNAL_ERROR = 1011;

export async function relayWebSocket(
  stream: Duplex,
  reader: ChunkReader,
  head: RequestHead,
  target: Authority,
  session: TunnelSession,
  deps: TunnelDeps,
): Promise<void> {
  let upgraded;
  try {
    await refreshSession(deps, session);
    upgraded = await egressUpgrade(tunnelEgressInput(head, target, session, null, null), deps.egress);
  } catch (err) {
    await writeResponse(stream, errorResponse(err, deps.log), { close: true }).catch(() => {});
    return void stream.end();
  }
  if (upgraded.kind === "refused") {
    await writeResponse(stream, upgraded.response, { close: true }).catch(() => {});
    return void stream.end();
  }
  const { head: res, conn, finish } = upgraded;
  // Inside the tunnel the agent talks to the origin, so cookies pass (architecture.md D19); X-Broker-Error is only ever the broker's.
  const headers = res.headers.filter(([name]) => name.toLowerCase() !== "x-broker-error");
  await writeAll(stream, serializeHead(`HTTP/1.1 101 ${res.statusText || "Switching Protocols"}`, headers));

  let bytesIn = 0;
  let bytesOut = 0;
  let error: string | null = null;
  const leftover = reader.detach();
  for (const chunk of leftover) {
    bytesIn += chunk.byteLength;
    await conn.write(chunk);
  }
  const clientToUpstream = (async () => {
    stream.resume();
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      bytesIn += chunk.byteLength;
      await conn.write(chunk);
    }
  })().catch(() => {});
  const upstreamToClient = relayDownstream(stream, upgraded, (n) => (bytesOut += n)).then(
    (failure) => void (error = failure),
    () => {},
  );
  await Promise.race([clientToUpstream, upstreamToClient]);
  conn.close();
  stream.end();
  finish(bytesIn, bytesOut, error);
}

/**
 * Upstream to agent, through the scanner when there is one. A frame it cannot scan ends the relay
 * with a close frame to the agent instead of the bytes; the audit error code is returned.
 */
async function relayDownstream(stream: Duplex, up: Switched, count: (n: number) => void): Promise<string | null> {
  for (let chunk = await up.conn.read(); chunk !== null; chunk = await up.conn.read()) {
    count(chunk.byteLength);
    let out: Uint8Array;
    try {
      out = up.scanner ? up.scanner.push(chunk) : chunk;
    } catch (err) {
      if (!(err instanceof WebSocketProtocolError)) throw err;
      await writeAll(stream, encodeCloseFrame(CLOSE_INTERNAL_ERROR, "upstream frame the broker cannot scan")).catch(() => {});
      return "websocket_protocol_error";
    }
    if (out.byteLength) await writeAll(stream, out);
  }
  return null;
}
