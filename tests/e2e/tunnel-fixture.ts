// Shared set-up for the transparent proxy (CONNECT listener) end-to-end tests: an in-process broker
// started with the tunnel listener, a local HTTPS upstream reached as "upstream.test" through the
// fixture's DNS table, a bearer service on it, plus raw-socket helpers (an HTTP/1.1 response reader,
// CONNECT + TLS) for protocol tests.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect as netConnect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import type { TunnelDeps } from "../../src/tunnel/index.ts";
import { startUpstream, type TestUpstream, type UpstreamHandler } from "../helpers/upstream.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

export const UPSTREAM_NAME = "upstream.test";

export interface TunnelEnv {
  readonly broker: Broker;
  readonly upstream: TestUpstream;
  /** "upstream.test:<port>": the service's host and the CONNECT authority. */
  readonly authority: string;
  readonly proxyPort: number;
  /** The broker root CA (GET /v1/ca.pem), and a file holding it. */
  readonly caPem: string;
  readonly caFile: string;
  readonly dir: string;
  /** The credential injected as `Authorization: Bearer <secret>`. */
  readonly secret: string;
  /** Proxy-Authorization for the scoped session: Basic base64(token:vault). */
  readonly proxyAuth: string;
  /** http://<token>:<vault>@127.0.0.1:<port> */
  readonly proxyUrl: string;
  stop(): Promise<void>;
}

export interface TunnelEnvOptions {
  handler?: UpstreamHandler;
  env?: Record<string, string>;
  /** The server's clock (default Date.now). */
  now?: () => number;
  /** Listener limits replacing the production ones (maxHeadBytes 64 KiB, idle 120 s, head/handshake 10 s). */
  tunnel?: Partial<Pick<TunnelDeps, "maxHeadBytes" | "idleTimeoutMs" | "headerTimeoutMs" | "maxTunnelsPerPrincipal">>;
}

export async function startTunnelEnv(opts: TunnelEnvOptions = {}): Promise<TunnelEnv> {
  const upstream = await startUpstream(opts.handler);
  const limits = opts.tunnel;
  const broker = await startBroker({ caPem: upstream.pki.caPem, tunnel: limits ? { idleTimeoutMs: 120_000, ...limits } : true, env: opts.env, now: opts.now });
  if (!broker.proxyAddress) throw new Error("the tunnel listener did not start");
  broker.dns.set(UPSTREAM_NAME, ["127.0.0.1"]);
  const authority = `${UPSTREAM_NAME}:${upstream.port}`;
  const secret = `sk-tunnel-${crypto.randomUUID()}`;
  await broker.setCredential("API_KEY", secret);
  await broker.addService(authority, { type: "bearer", token: "API_KEY" });
  const caRes = await fetch(`${broker.apiUrl}/v1/ca.pem`);
  if (!caRes.ok) throw new Error(`GET /v1/ca.pem: ${caRes.status}`);
  const caPem = await caRes.text();
  const dir = mkdtempSync(join(tmpdir(), "broker-tunnel-e2e-"));
  const caFile = join(dir, "broker-ca.pem");
  writeFileSync(caFile, caPem);
  const proxyPort = Number(broker.proxyAddress.split(":").at(-1));
  return {
    broker,
    upstream,
    authority,
    proxyPort,
    caPem,
    caFile,
    dir,
    secret,
    proxyAuth: basicProxyAuth(broker.sessionToken, broker.vault),
    proxyUrl: `http://${broker.sessionToken}:${broker.vault}@127.0.0.1:${proxyPort}`,
    async stop() {
      await broker.stop();
      await upstream.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function basicProxyAuth(token: string, vault: string): string {
  return `Basic ${Buffer.from(`${token}:${vault}`).toString("base64")}`;
}

/** Whether a binary is on PATH. Under CI=true a missing one fails the run with the package to install. */
export function requireBinary(name: string, aptPackage: string): boolean {
  if (Bun.which(name)) return true;
  if (process.env.CI === "true") throw new Error(`${name} is missing: apt-get install ${aptPackage} (listed in .ci/run)`);
  return false;
}

export interface RawResponse {
  status: number;
  head: string;
  /** Lower-cased names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: Buffer;
}

/** Buffers everything a stream delivers and parses HTTP/1.1 responses off it, one at a time. */
export class Conn {
  buf = Buffer.alloc(0);
  closed = false;
  private wake: (() => void) | undefined;

  private readonly onData = (d: Buffer) => {
    this.buf = Buffer.concat([this.buf, d]);
    this.wake?.();
  };

  constructor(readonly stream: Duplex) {
    stream.on("data", this.onData);
    const end = () => {
      this.closed = true;
      this.wake?.();
    };
    stream.on("end", end);
    stream.on("close", end);
    stream.on("error", end);
  }

  write(data: string | Uint8Array): void {
    this.stream.write(data);
  }

  /** Waits until `pred()` holds; false if the stream closed first or the time ran out. */
  async until(pred: () => boolean, timeoutMs = 10_000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!pred()) {
      if (this.closed || Date.now() > deadline) return pred();
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 50);
      });
    }
    return true;
  }

  /** Resolves true when the peer closes within `ms`. */
  async closesWithin(ms = 3000): Promise<boolean> {
    await this.until(() => this.closed, ms);
    return this.closed;
  }

  async readResponse(opts: { noBody?: boolean; timeoutMs?: number } = {}): Promise<RawResponse> {
    const timeoutMs = opts.timeoutMs ?? 10_000;
    if (!(await this.until(() => this.buf.includes("\r\n\r\n"), timeoutMs))) {
      throw new Error(`no response head (closed=${this.closed}): ${JSON.stringify(this.buf.toString("latin1").slice(0, 300))}`);
    }
    const end = this.buf.indexOf("\r\n\r\n");
    const head = this.buf.subarray(0, end).toString("latin1");
    this.buf = this.buf.subarray(end + 4);
    const [statusLine, ...lines] = head.split("\r\n");
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine!)?.[1]);
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const i = l.indexOf(":");
      const k = l.slice(0, i).trim().toLowerCase();
      const v = l.slice(i + 1).trim();
      headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
    }
    if (opts.noBody || (status >= 100 && status < 200) || status === 204 || status === 304) return { status, head, headers, body: Buffer.alloc(0) };
    let body: Buffer;
    if (headers["content-length"] !== undefined) {
      const n = Number(headers["content-length"]);
      if (!(await this.until(() => this.buf.length >= n, timeoutMs))) throw new Error("truncated body");
      body = this.buf.subarray(0, n);
      this.buf = this.buf.subarray(n);
    } else if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
      const parts: Buffer[] = [];
      for (;;) {
        if (!(await this.until(() => this.buf.includes("\r\n"), timeoutMs))) throw new Error("truncated chunk size");
        const lineEnd = this.buf.indexOf("\r\n");
        const size = parseInt(this.buf.subarray(0, lineEnd).toString("latin1"), 16);
        if (!(await this.until(() => this.buf.length >= lineEnd + 2 + size + 2, timeoutMs))) throw new Error("truncated chunk");
        parts.push(this.buf.subarray(lineEnd + 2, lineEnd + 2 + size));
        this.buf = this.buf.subarray(lineEnd + 2 + size + 2);
        if (size === 0) break;
      }
      body = Buffer.concat(parts);
    } else {
      await this.until(() => this.closed, timeoutMs);
      body = this.buf;
      this.buf = Buffer.alloc(0);
    }
    return { status, head, headers, body };
  }

  /** Stops buffering (e.g. before a TLS handshake over the same socket); unread bytes go back to the stream. */
  detach(): void {
    this.stream.off("data", this.onData);
    this.stream.pause();
    if (this.buf.length) this.stream.unshift(this.buf);
    this.buf = Buffer.alloc(0);
  }

  close(): void {
    this.stream.destroy();
  }
}

export function dialProxy(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = netConnect({ host: "127.0.0.1", port }, () => resolve(s));
    s.once("error", reject);
  });
}

/** Sends CONNECT and reads the proxy's answer head (raw socket, before any TLS). */
export async function sendConnect(sock: Socket, authority: string, proxyAuth: string | undefined): Promise<RawResponse> {
  const auth = proxyAuth ? `Proxy-Authorization: ${proxyAuth}\r\n` : "";
  sock.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`);
  let buf = Buffer.alloc(0);
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.includes("\r\n\r\n")) {
        sock.off("data", onData);
        sock.pause();
        resolve();
      }
    };
    sock.on("data", onData);
    sock.once("close", () => reject(new Error(`proxy closed during CONNECT: ${buf.toString("latin1")}`)));
  });
  const end = buf.indexOf("\r\n\r\n");
  const head = buf.subarray(0, end).toString("latin1");
  const rest = buf.subarray(end + 4);
  if (rest.length) sock.unshift(rest);
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]);
  const headers: Record<string, string> = {};
  for (const l of head.split("\r\n").slice(1)) headers[l.slice(0, l.indexOf(":")).trim().toLowerCase()] = l.slice(l.indexOf(":") + 1).trim();
  return { status, head, headers, body: Buffer.alloc(0) };
}

/** CONNECT + TLS handshake trusting `ca`; returns the TLS stream wrapped in a Conn. */
export async function openTunnel(
  proxyPort: number,
  authority: string,
  proxyAuth: string,
  opts: { ca: string; servername?: string; anyName?: boolean },
): Promise<{ conn: Conn; tls: TLSSocket; sock: Socket }> {
  const sock = await dialProxy(proxyPort);
  const res = await sendConnect(sock, authority, proxyAuth);
  if (res.status !== 200) throw new Error(`CONNECT ${authority}: ${res.head}`);
  const host = authority.slice(0, authority.lastIndexOf(":"));
  const tls = await startTls(sock, { ca: opts.ca, servername: opts.servername ?? host, anyName: opts.anyName });
  return { conn: new Conn(tls), tls, sock };
}

/** TLS client handshake over an established socket; `anyName` skips the host name check (chain still verified). */
export function startTls(sock: Socket, opts: { ca: string; servername: string; anyName?: boolean }): Promise<TLSSocket> {
  return new Promise<TLSSocket>((resolve, reject) => {
    const t = tlsConnect(
      {
        socket: sock,
        ca: opts.ca,
        servername: opts.servername,
        ALPNProtocols: ["http/1.1"],
        ...(opts.anyName ? { checkServerIdentity: () => undefined } : {}),
      },
      () => resolve(t),
    );
    t.once("error", reject);
  });
}
