// `vault run --contain`, transparent redirection inside the namespace: clients that ignore
// HTTPS_PROXY still reach the broker. Every IPv4 (and IPv6) address is made local to the namespace's
// loopback (`ip route add local 0.0.0.0/0 dev lo`, no firewall rules, no root), so a connection to
// any address on a watched port lands on a listener here. The listener reads the TLS ClientHello's
// server name (or, without one, the address the client dialled) and opens a CONNECT to that host and
// port through the broker's proxy, exactly as a proxy-aware client would; then bytes pass both ways.

import { spawnSync } from "node:child_process";
import { connect, createServer, type Server, type Socket } from "node:net";
import { relay } from "./contain.ts";

/** Makes every address local to the namespace; false (with the reason on stderr) where the kernel refuses. */
export function routeEverythingLocally(): boolean {
  const v4 = spawnSync("ip", ["route", "add", "local", "0.0.0.0/0", "dev", "lo"], { encoding: "utf8" });
  if (v4.status !== 0) {
    process.stderr.write(
      `broker: --contain cannot redirect connections that ignore HTTPS_PROXY (${(v4.stderr || "").trim()}); only proxied traffic gets through\n`,
    );
    return false;
  }
  spawnSync("ip", ["-6", "route", "add", "local", "::/0", "dev", "lo"]); // where IPv6 exists at all
  return true;
}

export interface RedirectTarget {
  /** The proxy inside the namespace, and the Proxy-Authorization the agent's own clients would send. */
  readonly proxyPort: number;
  readonly proxyAuth: string;
}

/** Listens on `port` on every address and sends each TLS connection through a CONNECT. */
export async function listenRedirect(port: number, target: RedirectTarget): Promise<Server> {
  const server = createServer((client) => void redirect(client, port, target));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port, host: "::", ipv6Only: false }, () => resolve());
  });
  return server;
}

async function redirect(client: Socket, port: number, target: RedirectTarget): Promise<void> {
  client.on("error", () => client.destroy());
  const hello = await readClientHello(client);
  if (!hello) return void client.destroy();
  // The certificate the broker presents is for this name: the one the client asked for.
  const dialled = (client.localAddress ?? "").replace(/^::ffff:/, "");
  const host = hello.serverName ?? (dialled.includes(":") ? `[${dialled}]` : dialled);
  const upstream = connect(target.proxyPort, "127.0.0.1");
  upstream.on("error", () => (client.destroy(), upstream.destroy()));
  upstream.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\nProxy-Authorization: ${target.proxyAuth}\r\n\r\n`);
  const head = await readHead(upstream);
  if (!head || !/^HTTP\/1\.[01] 200 /.test(head.text)) {
    // Refused (a blocked host, a rate limit…): the client can only show a failed TLS handshake, so
    // the broker's reason goes to the terminal the command writes to.
    process.stderr.write(refusalText(`${host}:${port}`, head && { status: head.text.split(" ")[1] ?? "", body: await readRest(upstream, head.rest) }));
    upstream.destroy();
    return void client.destroy();
  }
  if (head.rest.byteLength) client.write(head.rest);
  upstream.write(hello.bytes);
  relay(client, upstream);
}

/** The first TLS record(s) up to a whole ClientHello, and its server name; null when it is not TLS. */
function readClientHello(s: Socket): Promise<{ bytes: Buffer; serverName?: string } | null> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    const done = (v: { bytes: Buffer; serverName?: string } | null) => {
      s.off("data", onData);
      s.off("end", onEnd);
      s.pause();
      resolve(v);
    };
    const onEnd = () => done(null);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const parsed = parseClientHello(buf);
      if (parsed === "more" && buf.byteLength < 64 * 1024) return;
      done(parsed === "more" || parsed === null ? null : { bytes: buf, serverName: parsed.serverName });
    };
    s.on("data", onData);
    s.on("end", onEnd);
  });
}

/** RFC 8446 §4.1.2 / RFC 6066 §3: the server_name of a ClientHello in the first record. */
export function parseClientHello(b: Buffer): { serverName?: string } | "more" | null {
  if (b.byteLength < 5) return "more";
  if (b[0] !== 0x16) return null; // not a TLS handshake
  const recordEnd = 5 + b.readUInt16BE(3);
  if (b.byteLength < recordEnd) return "more";
  if (b[5] !== 0x01) return null; // not a ClientHello
  let at = 5 + 4 + 2 + 32; // handshake header, version, random
  const skip = (lenBytes: 1 | 2) => {
    if (at + lenBytes > recordEnd) throw new RangeError();
    at += lenBytes + (lenBytes === 1 ? b[at]! : b.readUInt16BE(at));
  };
  try {
    skip(1); // session id
    skip(2); // cipher suites
    skip(1); // compression methods
    if (at + 2 > recordEnd) return {};
    const extEnd = Math.min(recordEnd, at + 2 + b.readUInt16BE(at));
    at += 2;
    while (at + 4 <= extEnd) {
      const type = b.readUInt16BE(at);
      const len = b.readUInt16BE(at + 2);
      at += 4;
      if (type === 0 && b[at + 2] === 0) {
        const nameLen = b.readUInt16BE(at + 3);
        const name = b.subarray(at + 5, at + 5 + nameLen).toString("latin1");
        return /^[a-z0-9.-]{1,253}$/i.test(name) ? { serverName: name.toLowerCase() } : null;
      }
      at += len;
    }
    return {};
  } catch {
    return null;
  }
}

/** One line naming the refused destination and the broker's reason (the error envelope's code and message). */
export function refusalText(target: string, answer: { status: string; body: string } | null): string {
  let reason = answer ? `HTTP ${answer.status}` : "no answer";
  try {
    // The envelope is one JSON object, whether the body came sized or as a chunk.
    const body = answer?.body ?? "";
    const e = JSON.parse(body.slice(body.indexOf("{"), body.lastIndexOf("}") + 1)) as {
      error?: unknown;
      message?: unknown;
      proposal_hint?: { endpoint?: unknown };
    };
    if (typeof e.error === "string") reason += ` ${e.error}`;
    if (typeof e.message === "string") reason += `: ${e.message}`;
    if (typeof e.proposal_hint?.endpoint === "string") reason += ` (to ask for access, file a proposal: POST ${e.proposal_hint.endpoint})`;
  } catch {}
  return `broker: --contain: the broker refused a connection to ${target} that did not use HTTPS_PROXY (${reason.replace(/[\x00-\x1f\x7f]/g, " ")})\n`;
}

/** What follows a refused CONNECT's head: the error envelope, up to 16 KiB, until the proxy closes (2 s at most). */
function readRest(s: Socket, first: Buffer): Promise<string> {
  return new Promise((resolve) => {
    let buf = first;
    const done = () => (clearTimeout(timer), s.off("data", onData), s.off("close", done), resolve(buf.subarray(0, 16 * 1024).toString("utf8")));
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (buf.byteLength >= 16 * 1024) done();
    };
    const timer = setTimeout(done, 2000);
    s.on("data", onData);
    s.on("close", done);
    s.resume();
  });
}

function readHead(s: Socket): Promise<{ text: string; rest: Buffer } | null> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    const finish = (v: { text: string; rest: Buffer } | null) => {
      s.pause(); // the relay resumes it; nothing is read meanwhile
      s.off("data", onData);
      s.off("close", onClose);
      resolve(v);
    };
    const onClose = () => finish(null);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf("\r\n\r\n");
      if (end >= 0) finish({ text: buf.subarray(0, end).toString("latin1"), rest: buf.subarray(end + 4) });
      else if (buf.byteLength > 16 * 1024) finish(null);
    };
    s.on("data", onData);
    s.on("close", onClose);
  });
}
