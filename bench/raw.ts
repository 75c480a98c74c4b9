// Raw-socket clients for what fetch cannot show: cold connections (a new TCP connection, CONNECT and
// a full TLS handshake every time, no session reuse) and many idle tunnels held open at once.
// node:net + node:tls, verifying certificates against the given CA.

import { connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";

export interface Hop {
  /** where to dial: the broker's proxy port, or the upstream itself (direct) */
  readonly port: number;
  /** CONNECT authority when going through the proxy (proxyAuth "" sends no Proxy-Authorization) */
  readonly connect?: { authority: string; proxyAuth: string };
  readonly servername: string;
  readonly ca: string;
  /** ALPN protocols offered in the TLS handshake (default: http/1.1 only) */
  readonly alpn?: string[];
}

export function basicAuth(token: string, vault: string): string {
  return `Basic ${Buffer.from(`${token}:${vault}`).toString("base64")}`;
}

function dial(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = netConnect({ host: "127.0.0.1", port, noDelay: true }, () => resolve(s));
    s.once("error", reject);
  });
}

function readHead(s: Socket | TLSSocket): Promise<{ status: number; rest: Buffer; head: string }> {
  return new Promise((resolve, reject) => {
    let buf: Buffer = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      s.off("data", onData);
      s.off("close", onClose);
      const head = buf.subarray(0, end).toString("latin1");
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]), rest: buf.subarray(end + 4), head });
    };
    const onClose = () => reject(new Error(`closed before a response head: ${buf.toString("latin1").slice(0, 200)}`));
    s.on("data", onData);
    s.once("close", onClose);
  });
}

/** Dials, CONNECTs when going through the proxy, and completes a TLS handshake. */
export async function openTls(hop: Hop): Promise<{ tls: TLSSocket; localPort: number }> {
  const sock = await dial(hop.port);
  const localPort = sock.localPort ?? 0;
  if (hop.connect) {
    const auth = hop.connect.proxyAuth ? `Proxy-Authorization: ${hop.connect.proxyAuth}\r\n` : "";
    sock.write(`CONNECT ${hop.connect.authority} HTTP/1.1\r\nHost: ${hop.connect.authority}\r\n${auth}\r\n`);
    const r = await readHead(sock);
    if (r.status !== 200) {
      sock.destroy();
      throw new Error(`CONNECT ${hop.connect.authority}: ${r.head.split("\r\n")[0]}`);
    }
    sock.pause();
    if (r.rest.length) sock.unshift(r.rest);
  }
  const tls = await new Promise<TLSSocket>((resolve, reject) => {
    const t = tlsConnect({ socket: sock, ca: hop.ca, servername: hop.servername, ALPNProtocols: hop.alpn ?? ["http/1.1"] }, () => resolve(t));
    t.once("error", reject);
  });
  return { tls, localPort };
}

/** One GET on a fresh connection, read to the end, then closed. Returns the status. */
export async function coldGet(hop: Hop, host: string, path: string): Promise<{ status: number; localPort: number }> {
  const { tls, localPort } = await openTls(hop);
  try {
    tls.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    const r = await readHead(tls);
    const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(`\r\n${r.head}`)?.[1] ?? -1);
    let got = r.rest.length;
    if (len >= 0 && got < len) {
      await new Promise<void>((resolve, reject) => {
        tls.on("data", (d: Buffer) => {
          got += d.length;
          if (got >= len) resolve();
        });
        tls.once("close", () => (got >= len ? resolve() : reject(new Error("truncated body"))));
      });
    }
    return { status: r.status, localPort };
  } finally {
    tls.destroy();
  }
}

/** Opens `count` tunnels (CONNECT + TLS handshake), `parallel` at a time, and keeps them open. */
export async function openIdle(hop: Hop, count: number, parallel = 32): Promise<{ sockets: TLSSocket[]; errors: number; firstError?: string }> {
  const sockets: TLSSocket[] = [];
  let errors = 0;
  let firstError: string | undefined;
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      try {
        const { tls } = await openTls(hop);
        tls.on("error", () => {});
        sockets.push(tls);
      } catch (err) {
        errors++;
        firstError ??= String(err);
      }
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return { sockets, errors, firstError };
}
