// What the tunnel needs from the rest of the broker, passed in one object.

import type { Duplex } from "node:stream";
import type { EgressDeps } from "../egress/index.ts";
import type { Logger } from "../log.ts";
import type { Domain, Principal } from "../identity/index.ts";
import type { LeafCache } from "../crypto/index.ts";
import type { OpenVault } from "../identity/index.ts";

export interface TunnelDeps {
  readonly domain: Domain;
  readonly egress: EgressDeps;
  readonly leaves: LeafCache;
  /** Certificate for the listener itself when clients speak TLS to the proxy (--proxy-tls). */
  readonly listenerContext: () => Promise<import("node:tls").SecureContext>;
  readonly log: Logger;
  readonly maxHeadBytes: number;
  /** Idle limit on a client connection: silent clients are closed. */
  readonly idleTimeoutMs: number;
  /** Time allowed for a request head (from its first byte) or a TLS handshake: slow clients are closed (slowloris). */
  readonly headerTimeoutMs?: number;
  /** How long a kept-alive connection may wait for its next request (default 60 s). */
  readonly keepAliveTimeoutMs?: number;
  /** Open tunnels one principal may hold at once (default 2,000). */
  readonly maxTunnelsPerPrincipal?: number;
  /** Set by the listener: connections waiting for their next request, closed at once when a shutdown drains. */
  readonly drain?: { draining: boolean; readonly idle: Set<Duplex> };
}

/** Who is on the other end of a tunnel: re-checked on every request inside it. */
export interface TunnelSession {
  /** hashToken of the session token from Proxy-Authorization. */
  readonly tokenHash: string;
  readonly vaultName: string | undefined;
  principal: Principal;
  open: OpenVault;
}

/** Where a tunnel goes: the CONNECT's host (canonical, lower-case or an IP literal) and port. */
export interface Authority {
  readonly host: string;
  readonly port: number;
}

/** The listener's limits a caller may set (the composition has production defaults for each). */
export type TunnelLimits = Partial<Pick<TunnelDeps, "maxHeadBytes" | "idleTimeoutMs" | "headerTimeoutMs" | "maxTunnelsPerPrincipal">>;
