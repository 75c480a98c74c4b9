// Blind tunnels for hosts that are not among the vault's services (unmatched_hosts = tunnel): the
// agent reaches the host "directly" through a plain TCP relay. No interception and no credential,
// but the network guard still checks the destination and one audit record is written.

import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { UpstreamUnreachable } from "../errors.ts";
import { resolveChecked } from "../egress/index.ts";
import type { TunnelDeps, TunnelSession } from "./context.ts";
import type { Authority } from "./intercept.ts";

/** Resolves and checks the destination, connects, and relays bytes both ways until either side ends. */
export async function openBlindTunnel(client: Duplex, leftover: Uint8Array[], target: Authority, session: TunnelSession, deps: TunnelDeps): Promise<void> {
  const started = deps.egress.now();
  const addresses = await resolveChecked(target.host, target.port, deps.egress.policy, deps.egress.resolver);
  const upstream = await dialFirst(addresses, target.port, 10_000).catch(() => {
    throw new UpstreamUnreachable(`cannot connect to ${target.host}:${target.port}`);
  });
  let bytesIn = 0;
  let bytesOut = 0;
  client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
  for (const chunk of leftover) upstream.write(chunk);
  client.on("data", (c: Buffer) => void (bytesIn += c.byteLength));
  upstream.on("data", (c: Buffer) => void (bytesOut += c.byteLength));
  client.pipe(upstream);
  upstream.pipe(client);
  client.resume();
  const done = new Promise<void>((resolve) => {
    let closed = false;
    const finish = () => {
      if (closed) return;
      closed = true;
      client.destroy();
      upstream.destroy();
      deps.egress.audit.record({
        at: started,
        principal: session.principal.id,
        vaultId: session.open.vault.id,
        vault: session.open.vault.name,
        ingress: "blind",
        method: "CONNECT",
        host: target.port === 443 ? target.host : `${target.host}:${target.port}`,
        path: "",
        service: null,
        credentialKeys: "",
        status: 200,
        bytesIn,
        bytesOut,
        durationMs: deps.egress.now() - started,
        error: null,
      });
      resolve();
    };
    client.on("close", finish);
    upstream.on("close", finish);
    client.on("error", finish);
    upstream.on("error", finish);
  });
  return done;
}

function dialFirst(addresses: readonly string[], port: number, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const tryAt = (i: number) => {
      if (i >= addresses.length) return reject(new Error("no address answered"));
      const sock = connect({ host: addresses[i]!, port, timeout: timeoutMs });
      sock.once("connect", () => {
        sock.setTimeout(0);
        resolve(sock);
      });
      sock.once("timeout", () => (sock.destroy(), tryAt(i + 1)));
      sock.once("error", () => tryAt(i + 1));
    };
    tryAt(0);
  });
}
