// The agents of the echo-forms tests: what an agent receives through /proxy (raw HTTP/1.1 to the API
// port), through the CONNECT tunnel over HTTP/1.1 (raw, trailers kept) and over HTTP/2 (node:http2).
// Each returns the status line, every header and trailer line as it came, and the body as framed and
// decoded. Nothing here prints a value.

import * as http2 from "node:http2";
import { connect as netConnect, type Socket } from "node:net";
import zlib from "node:zlib";
import { h2Tls } from "../helpers/h2-frames.ts";
import { decodeCp037 } from "./echo-forms-check.ts";
import { Conn, dialProxy, openTunnel, sendConnect } from "./tunnel-fixture.ts";

/** What an agent received: status line, header and trailer lines as they came; the body as framed and as decoded. */
export interface Got {
  status: number;
  head: string;
  body: Buffer;
  plain: Buffer;
  contentType: string;
}

export interface Agent {
  get(path: string): Promise<Got>;
  close(): void;
}

export interface AgentEnv {
  apiUrl: string;
  sessionToken: string;
  proxyPort: number;
  proxyAuth: string;
  brokerCa: string;
  /** The HTTP/1.1 upstream's port (/proxy and the HTTP/1.1 tunnel) and the HTTP/2-only one's. */
  h1Port: number;
  h2Port: number;
}

export type OpenAgent = (env: AgentEnv, host: string) => Promise<Agent>;

export function decodeBody(contentEncoding: string | undefined, body: Buffer): Buffer {
  const names = (contentEncoding ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s && s !== "identity");
  return names.reduceRight((b, n) => {
    if (n === "gzip" || n === "x-gzip") return zlib.gunzipSync(b);
    if (n === "br") return zlib.brotliDecompressSync(b);
    if (n === "zstd") return zlib.zstdDecompressSync(b);
    if (n === "deflate") return b[0] === 0x78 ? zlib.inflateSync(b) : zlib.inflateRawSync(b);
    return b;
  }, body);
}

/** The body as text, by the charset its Content-Type names (as a browser or requests would read it). */
export function bodyText(plain: Buffer, contentType: string): string {
  const charset = /charset=([^;\s]+)/i.exec(contentType)?.[1]?.toLowerCase() ?? "utf-8";
  if (charset === "cp037") return decodeCp037(plain);
  if (charset === "utf-32le")
    return [...plain.subarray(0, plain.length & ~3)]
      .filter((_, i) => i % 4 === 0)
      .map((b) => String.fromCharCode(b))
      .join("");
  if (!charset.startsWith("utf-16")) return plain.toString("utf8");
  let bytes = plain.subarray(0, plain.length & ~1);
  let be = charset === "utf-16be" || charset === "utf-16";
  if (charset === "utf-16" && bytes[0] === 0xff && bytes[1] === 0xfe) be = false;
  if (be) bytes = Buffer.from(bytes).swap16();
  return bytes.toString("utf16le").replace(/^\ufeff/, "");
}

/** Debug output with every run of 4 or more characters of the value (and its UTF-16 spelling) masked: never print it. */
export function mask(text: string, value: string): string {
  let out = text;
  for (let len = value.length; len >= 4; len--) {
    for (let i = 0; i + len <= value.length; i++) {
      const run = value.slice(i, i + len);
      out = out.split(run).join("<V>").split(Buffer.from(run, "utf16le").toString("latin1")).join("<V16>");
    }
  }
  return out;
}

/** One HTTP/1.1 response off a Conn: head, body by its framing, chunked trailers kept as header lines. */
async function readH1(conn: Conn, timeoutMs = 10_000): Promise<Got> {
  if (!(await conn.until(() => conn.buf.includes("\r\n\r\n"), timeoutMs))) throw new Error(`no response head (closed=${conn.closed})`);
  const end = conn.buf.indexOf("\r\n\r\n");
  let head = conn.buf.subarray(0, end).toString("latin1");
  conn.buf = conn.buf.subarray(end + 4);
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]);
  const header = (name: string) =>
    head
      .split("\r\n")
      .filter((l) => l.toLowerCase().startsWith(`${name}:`))
      .map((l) => l.slice(name.length + 1).trim())
      .join(", ");
  let body: Buffer;
  if (header("content-length")) {
    const n = Number(header("content-length"));
    if (!(await conn.until(() => conn.buf.length >= n, timeoutMs))) throw new Error("truncated body");
    body = conn.buf.subarray(0, n);
    conn.buf = conn.buf.subarray(n);
  } else if (/chunked/i.test(header("transfer-encoding"))) {
    const parts: Buffer[] = [];
    for (;;) {
      if (!(await conn.until(() => conn.buf.includes("\r\n"), timeoutMs))) throw new Error("truncated chunk size");
      const lineEnd = conn.buf.indexOf("\r\n");
      const sizeLine = conn.buf.subarray(0, lineEnd).toString("latin1");
      const size = parseInt(sizeLine, 16);
      if (sizeLine.includes(";")) head += `\r\nchunk-extension: ${sizeLine.slice(sizeLine.indexOf(";") + 1)}`; // what a raw reader sees
      if (size === 0) {
        conn.buf = conn.buf.subarray(lineEnd + 2);
        // Trailer lines up to an empty line.
        if (!(await conn.until(() => conn.buf.subarray(0, 2).toString() === "\r\n" || conn.buf.includes("\r\n\r\n"), timeoutMs)))
          throw new Error("truncated trailers");
        const tEnd = conn.buf.subarray(0, 2).toString() === "\r\n" ? 0 : conn.buf.indexOf("\r\n\r\n") + 2;
        if (tEnd > 0) head += `\r\n${conn.buf.subarray(0, tEnd - 2).toString("latin1")}`;
        conn.buf = conn.buf.subarray(tEnd + 2);
        break;
      }
      if (!(await conn.until(() => conn.buf.length >= lineEnd + 2 + size + 2, timeoutMs))) throw new Error("truncated chunk");
      parts.push(conn.buf.subarray(lineEnd + 2, lineEnd + 2 + size));
      conn.buf = conn.buf.subarray(lineEnd + 2 + size + 2);
    }
    body = Buffer.concat(parts);
  } else {
    await conn.until(() => conn.closed, timeoutMs);
    body = conn.buf;
    conn.buf = Buffer.alloc(0);
  }
  return { status, head, body, plain: decodeBody(header("content-encoding"), body), contentType: header("content-type") };
}

/**
 * /proxy: raw HTTP/1.1 to the API port (no client-side folding of header lines), one keep-alive
 * connection per agent, its cases sent one after another; a new connection when the broker closed it.
 */
export const proxyAgent: OpenAgent = async (env, host) => {
  const { hostname, port } = new URL(env.apiUrl);
  let conn: Conn | undefined;
  const dial = async () => {
    const sock = await new Promise<Socket>((resolve, reject) => {
      const s = netConnect({ host: hostname, port: Number(port) }, () => resolve(s));
      s.once("error", reject);
    });
    return new Conn(sock);
  };
  return {
    async get(path) {
      for (let attempt = 0; ; attempt++) {
        const reused = conn !== undefined && !conn.closed;
        if (!reused) conn = await dial();
        const c = conn!;
        c.write(
          `GET /proxy/${host}:${env.h1Port}${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${env.sessionToken}\r\nAccept-Encoding: gzip\r\nTE: trailers\r\n\r\n`,
        );
        try {
          const got = await readH1(c);
          if (/^connection:\s*close\s*$/im.test(got.head)) c.close();
          return got;
        } catch (err) {
          c.close();
          conn = undefined;
          // A kept-alive connection the broker had already closed: the request never reached it; once more on a new one.
          if (reused && attempt === 0 && c.buf.length === 0 && /no response head/.test(String(err))) continue;
          throw err;
        }
      }
    },
    close: () => conn?.close(),
  };
};

/** The tunnel, HTTP/1.1: one CONNECT + TLS per agent, its cases sent one after another on it. */
export const tunnelH1Agent: OpenAgent = async (env, host) => {
  const authority = `${host}:${env.h1Port}`;
  const { conn } = await openTunnel(env.proxyPort, authority, env.proxyAuth, { ca: env.brokerCa });
  return {
    async get(path) {
      conn.write(`GET ${path} HTTP/1.1\r\nHost: ${authority}\r\nAccept-Encoding: gzip\r\nTE: trailers\r\n\r\n`);
      return readH1(conn);
    },
    close: () => conn.close(),
  };
};

/** The tunnel, HTTP/2 end to end (node:http2 client, HTTP/2-only upstream): one session per agent, cases as concurrent streams. */
export const tunnelH2Agent: OpenAgent = async (env, host) => {
  const authority = `${host}:${env.h2Port}`;
  const sock = await dialProxy(env.proxyPort);
  const connected = await sendConnect(sock, authority, env.proxyAuth);
  if (connected.status !== 200) throw new Error(`CONNECT ${authority}: ${connected.head}`);
  const tls = await h2Tls({ socket: sock, host, ca: env.brokerCa });
  const session = http2.connect(`https://${authority}`, { createConnection: () => tls });
  session.on("error", () => {});
  return {
    get(path) {
      return new Promise<Got>((resolve, reject) => {
        const req = session.request({ ":method": "GET", ":path": path, "accept-encoding": "gzip", te: "trailers" }, { endStream: true });
        const lines: string[] = [];
        const add = (h: http2.IncomingHttpHeaders) => {
          for (const [k, v] of Object.entries(h)) for (const one of [v ?? ""].flat()) lines.push(`${k}: ${one}`);
        };
        let status = 0;
        let headers: http2.IncomingHttpHeaders = {};
        const chunks: Buffer[] = [];
        req.on("response", (h) => ((status = Number(h[":status"])), (headers = h), add(h)));
        req.on("trailers", add);
        req.on("data", (d: Buffer) => chunks.push(d));
        req.on("end", () => {
          const body = Buffer.concat(chunks);
          const ce = [headers["content-encoding"] ?? ""].flat().join(", ");
          try {
            resolve({ status, head: lines.join("\r\n"), body, plain: decodeBody(ce, body), contentType: String(headers["content-type"] ?? "") });
          } catch (err) {
            reject(err);
          }
        });
        req.on("error", reject);
      });
    },
    close: () => session.destroy(),
  };
};

export interface Ingress {
  readonly name: "/proxy" | "tunnel HTTP/1.1" | "tunnel HTTP/2";
  readonly open: OpenAgent;
  /** One agent carries several cases at once (HTTP/2 streams); else one case at a time per agent. */
  readonly multiplexed: boolean;
}

export const PROXY: Ingress = { name: "/proxy", open: proxyAgent, multiplexed: false };
export const TUNNEL_H1: Ingress = { name: "tunnel HTTP/1.1", open: tunnelH1Agent, multiplexed: false };
export const TUNNEL_H2: Ingress = { name: "tunnel HTTP/2", open: tunnelH2Agent, multiplexed: true };
export const INGRESS: readonly Ingress[] = [PROXY, TUNNEL_H1, TUNNEL_H2];

/** A WebSocket through the tunnel (HTTP/1.1 upgrade): the 101 head and each message's payload as text, to the close. */
export async function wsExchange(env: AgentEnv, host: string, path: string): Promise<{ status: number; head: string; messages: string[] }> {
  const authority = `${host}:${env.h1Port}`;
  const { conn } = await openTunnel(env.proxyPort, authority, env.proxyAuth, { ca: env.brokerCa });
  try {
    conn.write(
      `GET ${path} HTTP/1.1\r\nHost: ${authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
    );
    if (!(await conn.until(() => conn.buf.includes("\r\n\r\n")))) throw new Error("no 101 head");
    const end = conn.buf.indexOf("\r\n\r\n");
    const head = conn.buf.subarray(0, end).toString("latin1");
    conn.buf = conn.buf.subarray(end + 4);
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
    const messages: string[] = [];
    let current: Buffer[] = [];
    for (;;) {
      // A frame head, then its payload (server frames are not masked).
      if (!(await conn.until(() => conn.buf.length >= 2))) break;
      let len = conn.buf[1]! & 0x7f;
      let at = 2;
      if (len === 126) {
        if (!(await conn.until(() => conn.buf.length >= 4))) break;
        len = conn.buf.readUInt16BE(2);
        at = 4;
      }
      if (!(await conn.until(() => conn.buf.length >= at + len))) break;
      const fin = (conn.buf[0]! & 0x80) !== 0;
      const opcode = conn.buf[0]! & 0x0f;
      const payload = conn.buf.subarray(at, at + len);
      conn.buf = conn.buf.subarray(at + len);
      if (opcode === 8) {
        messages.push(payload.subarray(2).toString("utf8"));
        break;
      }
      if (opcode >= 8) continue;
      current.push(payload);
      if (fin) {
        messages.push(Buffer.concat(current).toString("utf8"));
        current = [];
      }
    }
    return { status, head, messages };
  } finally {
    conn.close();
  }
}
