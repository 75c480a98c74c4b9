// A local HTTPS upstream on 127.0.0.1 that records exactly what reached it (raw header lines
// included), for end-to-end proxy tests.

import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { createTestPki, type TestPki } from "./pki.ts";

export interface Received {
  method: string;
  url: string;
  /** Raw header pairs in arrival order, names as sent. */
  rawHeaders: [string, string][];
  body: Buffer;
}

export interface TestUpstream {
  readonly port: number;
  readonly pki: TestPki;
  readonly received: Received[];
  [Symbol.asyncDispose](): Promise<void>;
  close(): Promise<void>;
}

export type UpstreamHandler = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

const echo: UpstreamHandler = (req, res, body) => {
  res.setHeader("content-type", "application/json");
  // Lets a test end the broker's pooled keep-alive connection after this response.
  if (req.headers["x-test-close"]) res.setHeader("connection", "close");
  const payload = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: body.toString("utf8") });
  // As real servers do, a HEAD answer states the length a GET would get (node:http leaves it out).
  res.setHeader("content-length", Buffer.byteLength(payload));
  res.end(payload);
};

/** Starts the upstream; `handler` answers (default: JSON echo). `stream` handlers can skip body buffering. */
export async function startUpstream(
  handler: UpstreamHandler = echo,
  opts: {
    bufferBody?: boolean;
    /** listen address (default 127.0.0.1) */ host?: string;
    /** listen port (default: any free one); 443 stands in for a real API's host on its own loopback address */ port?: number;
    /** certificate names */ names?: { dns?: string[]; ips?: string[] };
    /** how long the upstream keeps an idle keep-alive connection (Node's default: 5 s) */ keepAliveTimeoutMs?: number;
  } = {},
): Promise<TestUpstream> {
  const pki = await createTestPki(opts.names);
  const received: Received[] = [];
  const server = createServer({ cert: pki.certPem, key: pki.keyPem }, (req, res) => {
    const pairs: [string, string][] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) pairs.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
    if (opts.bufferBody === false) {
      received.push({ method: req.method ?? "", url: req.url ?? "", rawHeaders: pairs, body: Buffer.alloc(0) });
      return handler(req, res, Buffer.alloc(0));
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      received.push({ method: req.method ?? "", url: req.url ?? "", rawHeaders: pairs, body });
      handler(req, res, body);
    });
  });
  if (opts.keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = opts.keepAliveTimeoutMs;
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(opts.port ?? 0, opts.host ?? "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return { port, pki, received, close, [Symbol.asyncDispose]: close };
}
