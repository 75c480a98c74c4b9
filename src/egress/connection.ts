// One upstream TCP+TLS connection to an already-checked IP, dialled with Bun.connect and verified
// against the host name (SNI), or plain TCP for a blind tunnel (the agent's own TLS runs inside).
// Exposes pull-style reads with backpressure (the socket pauses while unread data piles up) and
// writes that wait for drain. Knows nothing about HTTP.

import type { Socket } from "bun";
import { createPullQueue } from "../http/index.ts";

export interface DialOptions {
  readonly ip: string;
  readonly port: number;
  /** Host name the certificate must match (also sent as SNI); undefined for IP-literal hosts. */
  readonly serverName: string | undefined;
  /** Trusted roots; undefined means the runtime's default roots. */
  readonly ca: string[] | undefined;
  readonly connectTimeoutMs: number;
  /** Plain TCP, no TLS: only for blind tunnels, where the agent speaks TLS to the host end to end. */
  readonly plain?: boolean;
}

export interface Connection {
  read(): Promise<Uint8Array | null>;
  unread(chunk: Uint8Array): void;
  write(bytes: Uint8Array): Promise<void>;
  /** Arms an inactivity timeout (seconds; 0 disarms): the connection fails when nothing moves for that long. */
  idleTimeout(seconds: number): void;
  close(): void;
  readonly closed: boolean;
  /** Bytes received but not read yet. */
  readonly buffered: number;
  readonly key: string;
}

export class ConnectError extends Error {
  /** `alpnRefused`: the server's TLS refused HTTP/1.1 in ALPN (an HTTP/2-only server). */
  constructor(
    message: string,
    readonly tls: boolean,
    readonly alpnRefused = false,
  ) {
    super(message);
  }
}

/** ALPN in wire format: HTTP/1.1 only. An HTTP/2-only server refuses it in the handshake, which says so. */
const ALPN_HTTP1 = Buffer.from("\x08http/1.1", "latin1");

export class ConnectionTimeout extends Error {}

export function dial(opts: DialOptions, key: string): Promise<Connection> {
  let socket: Socket<undefined> | undefined;
  const incoming = createPullQueue({ pause: () => socket?.pause(), resume: () => socket?.resume() });
  let drained: (() => void) | undefined;
  let armedTimeout = -1;

  /** Wakes a write waiting for drain: it retries, or throws if the connection ended meanwhile. */
  const wakeWriter = () => {
    const d = drained;
    drained = undefined;
    d?.();
  };

  const conn: Connection = {
    key,
    get closed() {
      return incoming.ended || incoming.failure !== undefined;
    },
    get buffered() {
      return incoming.buffered;
    },
    read: () => incoming.read(),
    unread: (chunk) => incoming.unread(chunk),
    async write(bytes) {
      let rest = bytes;
      while (rest.byteLength > 0) {
        if (incoming.failure) throw incoming.failure;
        if (incoming.ended || !socket) throw new Error("connection closed");
        const n = socket.write(rest);
        rest = rest.subarray(Math.max(0, n));
        if (rest.byteLength > 0) await new Promise<void>((r) => (drained = r));
      }
    },
    idleTimeout(seconds) {
      if (seconds === armedTimeout) return; // a native call per request otherwise
      armedTimeout = seconds;
      socket?.timeout(seconds);
    },
    close() {
      incoming.end();
      socket?.end();
      wakeWriter();
    },
  };

  return new Promise<Connection>((resolve, reject) => {
    let settled = false;
    const settle = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) {
        socket?.terminate();
        reject(err);
      } else resolve(conn);
    };
    const timer = setTimeout(() => settle(new ConnectionTimeout(`connect to ${opts.ip}:${opts.port} timed out`)), opts.connectTimeoutMs);
    Bun.connect({
      hostname: opts.ip,
      port: opts.port,
      tls: opts.plain ? undefined : { serverName: opts.serverName, ca: opts.ca, rejectUnauthorized: true, ALPNProtocols: ALPN_HTTP1 },
      socket: {
        open(s) {
          socket = s;
          s.setNoDelay(true); // request heads are small: do not let Nagle hold them back
          if (opts.plain) settle(); // no handshake to wait for
        },
        handshake(_s, success, authError) {
          // Bytes written before the handshake completes can be lost: resolve only now.
          if (success && !authError) settle();
          else
            settle(
              new ConnectError(
                `TLS verification failed: ${authError?.message ?? "handshake failed"}`,
                true,
                /NO_APPLICATION_PROTOCOL/i.test(authError?.message ?? ""),
              ),
            );
        },
        data(_s, chunk) {
          incoming.push(chunk);
        },
        drain() {
          wakeWriter();
        },
        timeout() {
          incoming.fail(new ConnectionTimeout("upstream connection idle for too long"));
          socket?.terminate();
          wakeWriter();
        },
        end() {
          incoming.end();
          wakeWriter();
        },
        close(_s, err) {
          if (err) incoming.fail(err);
          incoming.end();
          settle(new ConnectError(err?.message ?? "connection closed during handshake", false));
          wakeWriter();
        },
        error(_s, err) {
          incoming.fail(err);
          settle(new ConnectError(err.message, false));
          wakeWriter();
        },
        connectError(_s, err) {
          settle(new ConnectError(err.message, false));
        },
      },
    }).catch((err: Error) => settle(new ConnectError(err.message, false)));
  });
}
