// A local HTTPS upstream on 127.0.0.1 speaking HTTP/2 (optionally HTTP/1.1 too, by ALPN) that records
// every request it gets (pseudo-headers, header fields, body, protocol), for tests of HTTP/2 through
// the tunnel. It answers by path; no route ever answers with anything a test did not send it.
//
//   /big?bytes=N         N bytes of patternBytes(), streamed in 64 KiB pieces with backpressure
//   /digest              {bytes, sha256} of the request body
//   /trailers            a body, then trailers x-upstream-trailer and grpc-status (h2 only)
//   /echo-header?name=H  request header H echoed into response header x-echo, trailer x-echo-trailer, body
//   /echo-split?name=H   request header H echoed in the body one byte per DATA frame
//   /hold/...            answers only once release() is called (or the stream goes away)
//   anything else        JSON echo {protocol, method, path, authority, headers, body}

import { createHash } from "node:crypto";
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import type { AddressInfo } from "node:net";
import { createTestPki, type TestPki } from "./pki.ts";

export type H2Protocol = "h2" | "http/1.1";

export interface H2Received {
  readonly protocol: H2Protocol;
  readonly method: string;
  readonly path: string;
  /** :authority for h2, Host for HTTP/1.1. */
  readonly authority: string;
  /** Pseudo-header fields (h2 only), e.g. {":scheme": "https"}. */
  readonly pseudo: Record<string, string>;
  /** Regular header fields in arrival order, names lower-cased. */
  readonly headers: [string, string][];
  readonly body: Buffer;
  /** The request ended by a reset, not END_STREAM (Bun's compat request emits "end" either way). */
  readonly aborted: boolean;
}

/** Resolves when the request is known reset, or 100 ms after its end without a reset. */
function settled(req: Http2ServerRequest): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 100);
    const done = () => (clearTimeout(timer), resolve());
    req.once("aborted", done);
    req.stream?.once?.("aborted", done);
  });
}

export interface H2Upstream {
  readonly port: number;
  readonly pki: TestPki;
  readonly received: H2Received[];
  /** Paths whose request head arrived (the body may still be on its way). */
  readonly started: string[];
  /** TLS connections accepted so far. */
  connections(): number;
  /** Requests on /hold/... waiting for release(). */
  held(): number;
  /** The most /hold/... requests waiting at once. */
  maxHeld(): number;
  /** Answers every waiting /hold/... request with 200. */
  release(): void;
  close(): Promise<void>;
}

/** Deterministic bytes for `/big`: byte i is i % 251 (no run repeats at a power of two). */
export function patternBytes(total: number): Buffer {
  const out = Buffer.alloc(total);
  for (let i = 0; i < total; i++) out[i] = i % 251;
  return out;
}

export function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** The values of header `name` (lower-case) in a recorded request. */
export function headerValues(r: H2Received, name: string): string[] {
  return r.headers.filter(([k]) => k === name).map(([, v]) => v);
}

export async function startH2Upstream(opts: { allowHTTP1?: boolean; pki?: TestPki } = {}): Promise<H2Upstream> {
  const pki = opts.pki ?? (await createTestPki());
  const received: H2Received[] = [];
  const started: string[] = [];
  const waiting = new Set<() => void>();
  let connections = 0;
  let maxHeld = 0;
  const server = createSecureServer({ cert: pki.certPem, key: pki.keyPem, allowHTTP1: opts.allowHTTP1 ?? false });
  server.on("secureConnection", () => connections++);
  server.on("session", (s) => s.on("error", () => {}));
  server.on("request", (req: Http2ServerRequest, res: Http2ServerResponse) => {
    started.push(req.url);
    req.on("error", () => {});
    res.on("error", () => {});
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    // Bun ends a reset request's body too, and says it was reset only later: judge it once the
    // stream says so, or after a short grace when nothing more comes.
    req.on("end", () =>
      settled(req).then(() => {
        const r = record(req, Buffer.concat(chunks));
        received.push(r);
        if (r.aborted) return;
        answer(r, res, () => {
          return new Promise<void>((resolve) => {
            const done = () => (waiting.delete(done), res.off("close", done), resolve());
            waiting.add(done);
            maxHeld = Math.max(maxHeld, waiting.size);
            res.once("close", done);
          });
        });
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    pki,
    received,
    started,
    connections: () => connections,
    held: () => waiting.size,
    maxHeld: () => maxHeld,
    release() {
      for (const done of [...waiting]) done();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const done of [...waiting]) done();
        server.close(() => resolve());
      }),
  };
}

function record(req: Http2ServerRequest, body: Buffer): H2Received {
  const h2 = req.httpVersion === "2.0";
  const pseudo: Record<string, string> = {};
  const headers: [string, string][] = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!.toLowerCase();
    const value = req.rawHeaders[i + 1]!;
    if (name.startsWith(":")) pseudo[name] = value;
    else headers.push([name, value]);
  }
  const host = headers.find(([k]) => k === "host")?.[1] ?? "";
  const aborted = req.aborted || (h2 && (req.stream.rstCode ?? 0) !== 0);
  return {
    protocol: h2 ? "h2" : "http/1.1",
    method: req.method,
    path: req.url,
    authority: h2 ? (pseudo[":authority"] ?? "") : host,
    pseudo,
    headers,
    body,
    aborted,
  };
}

async function answer(r: H2Received, res: Http2ServerResponse, hold: () => Promise<void>): Promise<void> {
  const url = new URL(r.path, "https://upstream.invalid");
  if (url.pathname === "/big") return sendBig(res, Number(url.searchParams.get("bytes") ?? 0));
  if (url.pathname === "/digest") return sendJson(res, { bytes: r.body.byteLength, sha256: sha256(r.body) });
  if (url.pathname === "/trailers") {
    res.writeHead(200, { "content-type": "text/plain", trailer: "x-upstream-trailer, grpc-status" });
    res.write("body before trailers");
    res.addTrailers({ "x-upstream-trailer": "done", "grpc-status": "0" });
    return void res.end();
  }
  if (url.pathname === "/echo-header") {
    const value = r.headers.find(([k]) => k === (url.searchParams.get("name") ?? "").toLowerCase())?.[1] ?? "";
    res.writeHead(200, { "content-type": "text/plain", "x-echo": value, trailer: "x-echo-trailer" });
    res.write(`echo: ${value}`);
    res.addTrailers({ "x-echo-trailer": value });
    return void res.end();
  }
  if (url.pathname === "/echo-split") {
    const value = r.headers.find(([k]) => k === (url.searchParams.get("name") ?? "").toLowerCase())?.[1] ?? "";
    res.writeHead(200, { "content-type": "text/plain" });
    // One write per byte, each after the last left: the value crosses every frame boundary it can.
    for (const ch of `echo: ${value} end`) {
      res.write(ch);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    return void res.end();
  }
  if (url.pathname.startsWith("/hold/")) {
    await hold();
    if (!res.writableEnded && !res.destroyed) sendJson(res, { path: r.path, held: true });
    return;
  }
  sendJson(
    res,
    { protocol: r.protocol, method: r.method, path: r.path, authority: r.authority, headers: r.headers, body: r.body.toString("utf8") },
    r.method === "HEAD",
  );
}

function sendJson(res: Http2ServerResponse, value: unknown, headOnly = false): void {
  const payload = Buffer.from(JSON.stringify(value));
  // As real servers do, a HEAD answer states the length a GET would get.
  res.writeHead(200, { "content-type": "application/json", "content-length": String(payload.byteLength) });
  if (headOnly) res.end();
  else res.end(payload);
}

async function sendBig(res: Http2ServerResponse, total: number): Promise<void> {
  res.writeHead(200, { "content-type": "application/octet-stream" });
  const all = patternBytes(total);
  for (let at = 0; at < total && !res.destroyed; at += 64 * 1024) {
    if (!res.write(all.subarray(at, Math.min(total, at + 64 * 1024)))) {
      await new Promise<void>((resolve) => {
        const done = () => (res.off("drain", done), res.off("close", done), resolve());
        res.once("drain", done);
        res.once("close", done);
      });
    }
  }
  if (!res.destroyed) res.end();
}
