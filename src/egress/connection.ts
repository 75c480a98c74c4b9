// One upstream TCP+TLS connection to an already-checked IP, dialled with Bun.connect and verified
// against the host name (SNI), or plain TCP for a blind tunnel (the agent's own TLS runs inside).
// Exposes pull-style reads with backpressure (the socket pauses while unread data piles up) and
// writes that wait for drain. Knows nothing about HTTP.

import type { Socket } from "bun";

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

const HIGH_WATER = 256 << 10;
const LOW_WATER = 64 << 10;

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
  constructor(message: string, readonly tls: boolean) {
    super(message);
  }
}

export class ConnectionTimeout extends Error {}

export function dial(opts: DialOptions, key: string): Promise<Connection> {
  const queue: Uint8Array[] = [];
  let queued = 0;
  let paused = false;
  let ended = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  let drained: (() => void) | undefined;
  let socket: Socket<undefined> | undefined;
  let armedTimeout = -1;

  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
    const d = drained;
    drained = undefined;
    d?.();
  };

  const conn: Connection = {
    key,
    get closed() {
      return ended || failure !== undefined;
    },
    get buffered() {
      return queued;
    },
    async read() {
      while (queue.length === 0) {
        if (failure) throw failure;
        if (ended) return null;
        await new Promise<void>((r) => (wake = r));
      }
      const chunk = queue.shift()!;
      queued -= chunk.byteLength;
      if (paused && queued < LOW_WATER) {
        paused = false;
        socket?.resume();
      }
      return chunk;
    },
    unread(chunk) {
      if (chunk.byteLength === 0) return;
      queue.unshift(chunk);
      queued += chunk.byteLength;
    },
    async write(bytes) {
      let rest = bytes;
      while (rest.byteLength > 0) {
        if (failure) throw failure;
        if (ended || !socket) throw new Error("connection closed");
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
      ended = true;
      socket?.end();
      notify();
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
      tls: opts.plain ? undefined : { serverName: opts.serverName, ca: opts.ca, rejectUnauthorized: true },
      socket: {
        open(s) {
          socket = s;
          s.setNoDelay(true); // request heads are small: do not let Nagle hold them back
          if (opts.plain) settle(); // no handshake to wait for
        },
        handshake(_s, success, authError) {
          // Bytes written before the handshake completes can be lost: resolve only now.
          if (success && !authError) settle();
          else settle(new ConnectError(`TLS verification failed: ${authError?.message ?? "handshake failed"}`, true));
        },
        data(s, chunk) {
          queue.push(chunk);
          queued += chunk.byteLength;
          if (!paused && queued > HIGH_WATER) {
            paused = true;
            s.pause();
          }
          notify();
        },
        drain() {
          notify();
        },
        timeout() {
          failure ??= new ConnectionTimeout("upstream connection idle for too long");
          socket?.terminate();
          notify();
        },
        end() {
          ended = true;
          notify();
        },
        close(_s, err) {
          ended = true;
          if (err) failure ??= err;
          settle(new ConnectError(err?.message ?? "connection closed during handshake", false));
          notify();
        },
        error(_s, err) {
          failure ??= err;
          settle(new ConnectError(err.message, false));
          notify();
        },
        connectError(_s, err) {
          settle(new ConnectError(err.message, false));
        },
      },
    }).catch((err: Error) => settle(new ConnectError(err.message, false)));
  });
}
