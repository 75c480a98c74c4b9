// A recording upstream for URL credentials (query parameter and path): it echoes the full URL it
// received (as sent, decoded, and as parsed query parameters) in a header, in a Location on
// /redirect, and in the body: plain, gzip, or streamed chunked in pieces that split the value
// (gzip too). Plus a broker with a 'query' service on maps.test, a 'path' service on bot.test and
// a ruled 'path' service on ruled.test, all on this one upstream, and WebSockets on ws.test.

import type { IncomingMessage, ServerResponse } from "node:http";
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import type { Socket, TCPSocketListener } from "bun";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { filler } from "./echo-upstream.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

/** Values chosen so their URL-encoded forms differ from them (/, +, =, space, non-ASCII, :, @). */
export const QUERY_SECRET = `AIza/${crypto.randomUUID()}+= ü`;
export const PATH_SECRET = `123456:${crypto.randomUUID()}@x y`;
/** How each travels: the query value with RFC 3986 unreserved kept, the path value keeping : and @ too. */
export const QUERY_ON_WIRE = QUERY_SECRET.replace("/", "%2F").replace("+", "%2B").replace("=", "%3D").replace(" ", "%20").replace("ü", "%C3%BC");
export const PATH_ON_WIRE = PATH_SECRET.replace(" ", "%20");

export const RULES = [{ methods: ["GET"], paths: ["/getMe", "/files/**"] }];

export interface UrlCredentialEnv {
  readonly broker: Broker;
  readonly upstream: TestUpstream;
  /** "<name>:<port>" of the three services. */
  readonly maps: string;
  readonly bot: string;
  readonly ruled: string;
  /** "ws.test:<port>": a raw TLS upstream answering WebSocket upgrades ('path' auth). */
  readonly ws: string;
  /** Request heads the WebSocket upstream received. */
  readonly wsReceived: string[];
  readonly caPem: string;
  /** Everything an agent read, for the leak check. */
  readonly seen: string[];
  /** Every form of both values: in no response, log line or audit record. */
  expectNoLeaks(): Promise<void>;
  stop(): Promise<void>;
}

/** Poorly compressible, so a gzip body stays large enough to stream in pieces. */
const FILLER = filler(70_000);

function respond(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? "/";
  const full = `https://${req.headers.host}${url}`;
  let decoded = url;
  try {
    decoded = decodeURIComponent(url);
  } catch {}
  const parsed = new URL(full);
  const echo = JSON.stringify({ url, full, decoded, query: [...parsed.searchParams] });
  res.setHeader("x-echo-url", full);
  res.setHeader("content-type", "application/json");
  if (parsed.pathname.endsWith("/redirect")) {
    res.statusCode = 302;
    res.setHeader("location", full);
  }
  const mode = parsed.searchParams.get("mode");
  if (mode === "gzip") {
    res.setHeader("content-encoding", "gzip");
    return void res.end(gzipSync(echo));
  }
  if (mode === "stream" || mode === "gzip-stream") {
    // Chunked, in pieces that cut the echoed URL (and so the value) at several places.
    const body = Buffer.from(`${FILLER}${echo}${FILLER}${echo}`);
    const bytes = mode === "gzip-stream" ? gzipSync(body) : body;
    if (mode === "gzip-stream") res.setHeader("content-encoding", "gzip");
    // Plain: cuts inside the first echo. Compressed: eight even pieces (the decoder's output splits where it will).
    const cuts =
      mode === "stream"
        ? [0, 1000, FILLER.length + 20, FILLER.length + 37, FILLER.length + 61, bytes.length - 500, bytes.length]
        : Array.from({ length: 9 }, (_, k) => Math.round((bytes.length * k) / 8));
    let i = 0;
    const next = () => {
      if (i >= cuts.length - 1) return void res.end();
      const piece = bytes.subarray(cuts[i]!, cuts[i + 1]!);
      i++;
      res.write(piece, () => setTimeout(next, 5));
    };
    return next();
  }
  res.end(echo);
}

function accept(key: string): string {
  return createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
}

function textFrame(text: string): Buffer {
  const data = Buffer.from(text);
  const head = data.length < 126 ? Buffer.from([0x81, data.length]) : Buffer.from([0x81, 126, data.length >> 8, data.length & 255]);
  return Buffer.concat([head, data]);
}

/** A WebSocket upstream that echoes the request target in its 101 head and in a text frame, then closes. */
function startWsUpstream(pki: TestUpstream["pki"], received: string[]): TCPSocketListener<{ buf: string }> {
  return Bun.listen<{ buf: string }>({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: pki.certPem, key: pki.keyPem },
    socket: {
      open(s) {
        s.data = { buf: "" };
      },
      data(s, chunk) {
        if (s.data.buf.includes("\r\n\r\n")) return;
        s.data.buf += chunk.toString("latin1");
        const end = s.data.buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = s.data.buf.slice(0, end);
        received.push(head);
        const target = head.split(" ")[1] ?? "/";
        const key = /^sec-websocket-key: (.*)$/im.exec(head)?.[1] ?? "";
        s.write(
          `HTTP/1.1 101 Switching ${target}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(key)}\r\nX-Echo-Url: ${target}\r\n\r\n`,
        );
        s.write(textFrame(`you asked for ${target} (${decodeURIComponent(target)})`));
        (s as Socket<unknown>).end(Buffer.from([0x88, 2, 0x03, 0xe8]));
      },
    },
  });
}

export async function startUrlCredentialEnv(): Promise<UrlCredentialEnv> {
  const upstream = await startUpstream(respond, { names: { dns: ["maps.test", "bot.test", "ruled.test", "ws.test", "new.test"] } });
  const wsReceived: string[] = [];
  const wsUpstream = startWsUpstream(upstream.pki, wsReceived);
  const broker = await startBroker({ caPem: upstream.pki.caPem, tunnel: true });
  for (const name of ["maps.test", "bot.test", "ruled.test", "ws.test", "new.test"]) broker.dns.set(name, ["127.0.0.1"]);
  const [maps, bot, ruled, ws] = [`maps.test:${upstream.port}`, `bot.test:${upstream.port}`, `ruled.test:${upstream.port}`, `ws.test:${wsUpstream.port}`];
  await broker.setCredential("GOOGLE_API_KEY", QUERY_SECRET);
  await broker.setCredential("TELEGRAM_TOKEN", PATH_SECRET);
  await broker.addService(maps, { type: "query", param: "key", token: "GOOGLE_API_KEY" });
  await broker.addService(bot, { type: "path", template: "/bot{value}", token: "TELEGRAM_TOKEN" });
  await broker.addService(ruled, { type: "path", template: "/v1/{value}/api", token: "TELEGRAM_TOKEN" }, { rules: RULES });
  await broker.addService(ws, { type: "path", template: "/bot{value}", token: "TELEGRAM_TOKEN" });
  const caPem = await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text();
  const seen: string[] = [];
  return {
    broker,
    upstream,
    maps,
    bot,
    ruled,
    ws,
    wsReceived,
    caPem,
    seen,
    async expectNoLeaks() {
      const forms = new Set([QUERY_SECRET, PATH_SECRET, QUERY_ON_WIRE, PATH_ON_WIRE, encodeURIComponent(QUERY_SECRET), encodeURIComponent(PATH_SECRET)]);
      for (const form of forms) await expectNoLeak(broker, form, seen);
    },
    async stop() {
      await broker.stop();
      await upstream.close();
      wsUpstream.stop(true);
    },
  };
}
