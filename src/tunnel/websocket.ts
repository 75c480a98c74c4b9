// WebSocket upgrades inside an intercepted tunnel (wss:// for realtime APIs): the upgrade request
// goes through the egress core (injection, guard, audit); after the upstream's 101 the two
// connections are joined and bytes relayed both ways until either side closes.

import type { Duplex } from "node:stream";
import { egressUpgrade } from "../egress/index.ts";
import { serializeHead, type RequestHead } from "../egress/index.ts";
import type { TunnelDeps, TunnelSession } from "./context.ts";
import { tunnelEgressInput, type Authority } from "./intercept.ts";
import { writeAll, type ChunkReader } from "./reader.ts";
import { errorResponse, writeResponse } from "./respond.ts";
import { refreshSession } from "./session.ts";

export async function relayWebSocket(stream: Duplex, reader: ChunkReader, head: RequestHead, target: Authority, session: TunnelSession, deps: TunnelDeps): Promise<void> {
  let upgraded;
  try {
    await refreshSession(deps, session);
    upgraded = await egressUpgrade(tunnelEgressInput(head, target, session, null, null), deps.egress);
  } catch (err) {
    await writeResponse(stream, errorResponse(err, deps.log), { close: true }).catch(() => {});
    return void stream.end();
  }
  const { head: res, conn, finish } = upgraded;
  const headers = res.headers.filter(([name]) => !/^set-cookie2?$/i.test(name));
  await writeAll(stream, serializeHead(`HTTP/1.1 ${res.status} ${res.statusText || "Switching Protocols"}`, headers));

  let bytesIn = 0;
  let bytesOut = 0;
  const leftover = reader.detach();
  for (const chunk of leftover) {
    bytesIn += chunk.byteLength;
    await conn.write(chunk);
  }
  // A non-101 answer still carries a body; relaying until close keeps its framing intact.
  const clientToUpstream = (async () => {
    if (res.status !== 101) return;
    stream.resume();
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      bytesIn += chunk.byteLength;
      await conn.write(chunk);
    }
  })().catch(() => {});
  const upstreamToClient = (async () => {
    for (let chunk = await conn.read(); chunk !== null; chunk = await conn.read()) {
      bytesOut += chunk.byteLength;
      await writeAll(stream, chunk);
    }
  })().catch(() => {});
  await Promise.race([clientToUpstream, upstreamToClient]);
  conn.close();
  stream.end();
  finish(bytesIn, bytesOut);
}
