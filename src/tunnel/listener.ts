// The transparent proxy listener (HTTPS_PROXY). One port takes plain and TLS-wrapped connections
// (the first byte tells: 0x16 starts a TLS handshake). A client then sends CONNECT host:port with
// Proxy-Authorization; matched hosts are intercepted under a leaf certificate for the CONNECT
// authority, unmatched ones follow the vault's unmatched_hosts setting. Plain http:// requests get
// 405; absolute-form https:// requests (axios) go through the egress core like /proxy.
// Built on node:net/node:tls streams: TLS inside TLS (the --proxy-tls form) needs a stream to
// wrap, and sniffing must be able to push the first bytes back (architecture.md D6).

import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { TLSSocket, type SecureContext } from "node:tls";
import type { Duplex } from "node:stream";
import { InvalidRequest, MethodNotAllowed, RateLimited } from "../errors.ts";
import { findHeadEnd, headerValues, parseRequestHead, requestFraming, WireError, type RequestHead } from "../http/index.ts";
import { decideConnect, type Answer, type ConnectDecision } from "../egress/index.ts";
import { parseHostPattern } from "../policy/index.ts";
import { openBlindTunnel } from "./blind.ts";
import type { TunnelDeps, TunnelSession } from "./context.ts";
import { serveHttp2 } from "./h2.ts";
import { forwardRequest, headErrorResponse, readIdleHead, serveIntercepted, type Authority } from "./intercept.ts";
import { createChunkReader, HeadError, withDeadline, type ChunkReader } from "./reader.ts";
import { errorResponse, ProxyAuthRequired, writeResponse } from "./respond.ts";
import { authenticateProxy, proxySession } from "./session.ts";

/** The listener's own state travels with the deps: no module-level singletons. */
interface ListenerDeps extends TunnelDeps {
  readonly openTunnels: Map<string, number>;
}

export interface TunnelListener {
  readonly port: number;
  /**
   * Stops accepting at once; open connections get up to graceMs (default 0) to finish, those idle
   * between requests are closed at once. Resolves to how many were open and how many were cut.
   */
  stop(graceMs?: number): Promise<{ open: number; cut: number }>;
  /** Client connections held and CONNECT tunnels open (metrics). */
  stats(): { connections: number; tunnels: number };
}

/** Inside a tunnel the agent may speak HTTP/2 (h2.ts); to the proxy itself, only HTTP/1.1 (CONNECT). */
const AGENT_ALPN = ["h2", "http/1.1"];

/** Connections the listener holds at once (idle tunnels cost ~23 KiB each); beyond it new ones are refused. */
export const MAX_CONNECTIONS = 20_000;
/** Open tunnels one principal may hold at once, so one agent cannot take every connection. */
export const MAX_TUNNELS_PER_PRINCIPAL = 2_000;

/** Counts an open tunnel against its principal until the connection closes; 429 beyond the cap. */
function holdTunnelSlot(openTunnels: Map<string, number>, max: number, principal: string, stream: Duplex): void {
  const held = openTunnels.get(principal) ?? 0;
  if (held >= max) throw new RateLimited(1, `at most ${max} open tunnels per principal; close some first`);
  openTunnels.set(principal, held + 1);
  stream.once("close", () => {
    const left = (openTunnels.get(principal) ?? 1) - 1;
    if (left > 0) openTunnels.set(principal, left);
    else openTunnels.delete(principal);
  });
}

/** A bound port that accepts no connection until serve() gives it its deps (they need the port first). */
export interface BoundTunnelListener {
  readonly port: number;
  /** Connections accepted since the bind are served from here on; call once. */
  serve(base: TunnelDeps): TunnelListener;
  /** Closes the port and every held connection (a start that fails before serve()). */
  close(): Promise<void>;
}

export async function startTunnelListener(base: TunnelDeps, host: string, port: number): Promise<TunnelListener> {
  return (await bindTunnelListener(host, port)).serve(base);
}

/** `reusePort`: other worker processes listen on the same port (SO_REUSEPORT), the kernel spreading connections among them. */
export async function bindTunnelListener(host: string, port: number, opts: { reusePort?: boolean } = {}): Promise<BoundTunnelListener> {
  const drain = { draining: false, idle: new Set<Duplex>() };
  const sockets = new Set<Socket>();
  // Held until serve(): a paused socket keeps its first bytes buffered for acceptConnection.
  const waiting: Socket[] = [];
  let deps: ListenerDeps | undefined;
  const accept = (socket: Socket, d: ListenerDeps) => {
    socket.setTimeout(d.idleTimeoutMs, () => socket.destroy());
    void acceptConnection(socket, d).catch((err) => {
      d.log.debug("tunnel_connection_failed", { err });
      socket.destroy();
    });
  };
  const server: Server = createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    if (deps) accept(socket, deps);
    else waiting.push(socket);
  });
  server.maxConnections = MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port, host, ...(opts.reusePort && { reusePort: true }) }, () => resolve());
  });
  const boundPort = (server.address() as AddressInfo).port;
  const closeNow = async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of sockets) s.destroy();
    await closed;
  };
  return {
    port: boundPort,
    close: closeNow,
    serve(base) {
      if (deps) throw new Error("the tunnel listener is already serving");
      const served: ListenerDeps = { ...base, openTunnels: new Map(), drain };
      deps = served;
      for (const s of waiting.splice(0)) if (!s.destroyed) accept(s, served);
      return {
        port: boundPort,
        async stop(graceMs = 0) {
          const open = sockets.size;
          const closed = new Promise<void>((resolve) => server.close(() => resolve()));
          drain.draining = true;
          for (const s of drain.idle) s.destroy();
          let timer: ReturnType<typeof setTimeout> | undefined;
          if (graceMs > 0) await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
          clearTimeout(timer);
          const cut = sockets.size;
          for (const s of sockets) s.destroy();
          await closed;
          return { open, cut };
        },
        stats() {
          let tunnels = 0;
          for (const n of served.openTunnels.values()) tunnels += n;
          return { connections: sockets.size, tunnels };
        },
      };
    },
  };
}

async function acceptConnection(socket: Socket, deps: ListenerDeps): Promise<void> {
  // A client that connects and stays silent is closed at the head deadline, not the idle one.
  const first = await withDeadline(firstBytes(socket), deps.headerTimeoutMs ?? 10_000, socket);
  if (!first) return void socket.destroy();
  socket.pause();
  socket.unshift(first);
  // 0x16: the client speaks TLS to the proxy itself (https:// proxy URL).
  if (first[0] === 0x16) return serveProxyRequests(serverTls(socket, await deps.listenerContext(), deps), deps);
  return serveProxyRequests(socket, deps);
}

/** The first bytes a client sends, or null if it leaves first; no listener stays behind either way. */
function firstBytes(socket: Socket): Promise<Buffer | null> {
  return new Promise<Buffer | null>((resolve) => {
    const settle = (chunk: Buffer | null) => {
      socket.off("data", settle);
      socket.off("end", ended);
      socket.off("close", ended);
      resolve(chunk);
    };
    const ended = () => settle(null);
    socket.on("data", settle);
    socket.on("end", ended);
    socket.on("close", ended);
  });
}

/**
 * Server-side TLS over a client connection. Built in a function of its own on purpose: the listeners
 * it leaves on the sockets live as long as the tunnel, and a closure keeps its whole enclosing scope;
 * created inline, they kept the CONNECT head (with the Proxy-Authorization token) and its reader alive
 * for every idle tunnel (~40% of an idle tunnel's JavaScript heap).
 */
function serverTls(outer: Duplex, context: SecureContext, deps: TunnelDeps, alpn: string[] = ["http/1.1"]): TLSSocket {
  const tls = new TLSSocket(outer as Socket, { isServer: true, secureContext: context, ALPNProtocols: alpn });
  tls.on("error", () => outer.destroy());
  armHandshakeDeadline(tls, outer, deps);
  return tls;
}

/** Reads proxy-level requests (CONNECT, absolute-form) until one turns the connection into a tunnel. */
async function serveProxyRequests(stream: Duplex, deps: ListenerDeps): Promise<void> {
  const reader = createChunkReader(stream);
  for (;;) {
    let head: RequestHead;
    try {
      const bytes = await readIdleHead(stream, reader, deps);
      if (!bytes) return void stream.end();
      head = parseRequestHead(bytes);
    } catch (err) {
      const status = err instanceof HeadError ? err.status : 400;
      const message = err instanceof WireError || err instanceof HeadError ? err.message : "malformed request";
      await writeResponse(stream, headErrorResponse(status, message), { close: true }).catch(() => {});
      return void stream.end();
    }
    const proxyAuth = headerValues(head.headers, "proxy-authorization")[0];
    if (head.method === "CONNECT") return handleConnect(stream, reader, head, proxyAuth, deps);
    if (/^http:\/\//i.test(head.target)) {
      // Contract: the listener handles only HTTPS; a plain http:// request gets 405.
      await writeResponse(stream, errorResponse(new MethodNotAllowed("this proxy handles only HTTPS; use an https:// URL"), deps.log), { close: true });
      return void stream.end();
    }
    if (/^https:\/\//i.test(head.target)) {
      const keep = await handleAbsoluteHttps(stream, reader, head, proxyAuth, deps);
      if (!keep) return void stream.end();
      continue;
    }
    await writeResponse(stream, errorResponse(new InvalidRequest("send CONNECT host:port (this is an HTTPS proxy)"), deps.log), { close: true });
    return void stream.end();
  }
}

function parseAuthority(text: string, field: string): Authority {
  const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(text);
  if (!m) throw new InvalidRequest(`${field} must be host:port`, field);
  const pattern = parseHostPattern(`${m[1]}:${m[2]}`, { allowIp: true }, field);
  if (pattern.wildcard) throw new InvalidRequest(`${field} must be a concrete host`, field);
  return { host: pattern.name, port: pattern.port };
}

async function handleConnect(stream: Duplex, reader: ChunkReader, head: RequestHead, proxyAuth: string | undefined, deps: ListenerDeps): Promise<void> {
  let target: Authority;
  let session: TunnelSession;
  try {
    target = parseAuthority(head.target, "connect_target");
    // Admission charges each CONNECT to the same PROXY budget as the requests (blind tunnels included).
    session = await authenticateProxy(deps, proxyAuth);
    holdTunnelSlot(deps.openTunnels, deps.maxTunnelsPerPrincipal ?? MAX_TUNNELS_PER_PRINCIPAL, session.principal.id, stream);
  } catch (err) {
    // 407 keeps the connection open: git and curl --proxy-anyauth retry on the same connection.
    const keep = err instanceof ProxyAuthRequired;
    await writeResponse(stream, errorResponse(err, deps.log), { close: !keep });
    if (!keep) return void stream.end();
    return serveProxyRequests(reattach(stream, reader), deps);
  }
  let decision: ConnectDecision;
  try {
    decision = await decideConnect(deps.egress.plans, session.open.vault, target.host, target.port);
  } catch (err) {
    // The vault's services cannot be read (the database is away and nothing usable is cached): say so.
    await writeResponse(stream, errorResponse(err, deps.log), { close: true }).catch(() => {});
    return void stream.end();
  }
  deps.egress.activity?.note(session.principal.sessionPublicId, target, decision);
  if (decision === "blind" || decision === "report") {
    try {
      // "report": unmatched_hosts is deny, but the vault is in report mode: the tunnel `tunnel` would open, marked.
      return await openBlindTunnel(stream, reader.detach(), target, session, deps, decision === "report" ? "forbidden" : undefined);
    } catch (err) {
      await writeResponse(stream, errorResponse(err, deps.log), { close: true }).catch(() => {});
      return void stream.end();
    }
  }
  // "refuse" is intercepted too, for one request: the pipeline refuses it at the match stage, before
  // any body byte is read or any upstream dialled, with the 403 envelope and its proposal_hint.
  const refuse = decision === "refuse";
  const leaf = await deps.leaves.get(target.host);
  const leftover = reader.detach();
  stream.write("HTTP/1.1 200 Connection Established\r\n\r\n");
  for (const chunk of leftover.reverse()) stream.unshift(Buffer.from(chunk));
  // The certificate is always for the CONNECT authority, whatever SNI the client sends.
  const tls = serverTls(stream, leaf.context, deps, AGENT_ALPN);
  if (!(await handshaken(tls))) return;
  if (tls.alpnProtocol === "h2") return serveHttp2(tls, target, session, deps, { once: refuse });
  return serveIntercepted(tls, target, session, deps, { once: refuse });
}

/** Resolves once the TLS handshake is done (true) or the connection failed first (false). */
function handshaken(tls: TLSSocket): Promise<boolean> {
  return new Promise((resolve) => {
    const settle = (ok: boolean) => {
      tls.off("secure", secured);
      tls.off("close", closed);
      resolve(ok);
    };
    const secured = () => settle(true);
    const closed = () => settle(false);
    tls.on("secure", secured);
    tls.on("close", closed);
  });
}

/** A client that stalls its TLS handshake is closed without hurting anyone else. */
function armHandshakeDeadline(tls: TLSSocket, outer: Duplex, deps: TunnelDeps): void {
  const timer = setTimeout(() => (tls.destroy(), outer.destroy()), deps.headerTimeoutMs ?? 10_000);
  tls.once("secure", () => clearTimeout(timer));
  tls.once("close", () => clearTimeout(timer));
}

/** After a 407 the same connection carries the retry: continue reading it. */
function reattach(stream: Duplex, reader: ChunkReader): Duplex {
  const left = reader.detach();
  for (const chunk of left.reverse()) stream.unshift(Buffer.from(chunk));
  stream.resume();
  return stream;
}

/** `GET https://host/path HTTP/1.1` sent to the proxy (how axios uses one): served like /proxy. */
async function handleAbsoluteHttps(
  stream: Duplex,
  reader: ChunkReader,
  head: RequestHead,
  proxyAuth: string | undefined,
  deps: ListenerDeps,
): Promise<boolean> {
  let res: Answer | Response;
  let complete = false;
  try {
    const framing = requestFraming(head);
    const url = new URL(head.target);
    const target = parseAuthority(`${url.hostname}:${url.port || "443"}`, "target");
    const session = proxySession(proxyAuth); // admitted with the request, like any in a tunnel
    ({ response: res, complete } = await forwardRequest(stream, reader, head, framing, target, session, deps));
  } catch (err) {
    res = errorResponse(err, deps.log);
  }
  const keepAlive = complete && head.version === "1.1" && !headerValues(head.headers, "connection").some((v) => /\bclose\b/i.test(v));
  await writeResponse(stream, res, { headOnly: head.method === "HEAD", close: !keepAlive });
  return keepAlive;
}
