// Blind tunnels for hosts that are not among the vault's services (unmatched_hosts = tunnel): the
// agent reaches the host "directly" through a plain TCP relay. No interception and no credential;
// the egress core checks the destination (network guard), dials it and writes the audit record.
// This file only moves bytes between the agent's stream and that connection; it opens no socket.

import type { Duplex } from "node:stream";
import { egressBlind } from "../egress/index.ts";
import { isContained, withWorkload } from "../identity/index.ts";
import type { Authority, TunnelDeps, TunnelSession } from "./context.ts";
import { createChunkReader, writeAll } from "./reader.ts";

/**
 * Dials through the egress core, answers 200, and relays bytes both ways until either side ends. `wouldRefuse`: the
 * refusal report mode lets through (the vault's unmatched_hosts is deny), for the record.
 */
export async function openBlindTunnel(
  client: Duplex,
  leftover: Uint8Array[],
  target: Authority,
  session: TunnelSession,
  deps: TunnelDeps,
  wouldRefuse?: string,
): Promise<void> {
  const vault = { id: session.open.vault.id, name: session.open.vault.name };
  const { conn, finish } = await egressBlind(
    {
      principal: session.principal.id,
      contained: isContained(session.principal),
      ...withWorkload(session.principal),
      vault,
      host: target.host,
      port: target.port,
    },
    deps.egress,
    wouldRefuse,
  );
  let bytesIn = 0;
  let bytesOut = 0;
  const toUpstream = async () => {
    for (const chunk of leftover) {
      bytesIn += chunk.byteLength; // sent with the CONNECT (a client that did not wait for the 200)
      await conn.write(chunk);
    }
    const reader = createChunkReader(client);
    for (let chunk = await reader.read(); chunk !== null; chunk = await reader.read()) {
      bytesIn += chunk.byteLength;
      await conn.write(chunk);
    }
  };
  const toClient = async () => {
    for (let chunk = await conn.read(); chunk !== null; chunk = await conn.read()) {
      bytesOut += chunk.byteLength;
      await writeAll(client, chunk);
    }
  };
  await writeAll(client, "HTTP/1.1 200 Connection Established\r\n\r\n").catch(() => {});
  // Either side ending (or failing) ends the tunnel, as before: a relay of two TCP streams.
  const up = toUpstream();
  const down = toClient();
  await Promise.race([up, down]).catch(() => {});
  client.destroy();
  conn.close();
  await Promise.allSettled([up, down]);
  finish(bytesIn, bytesOut);
}
