// The local HTTPS upstream the bench drives, directly (baseline) and through the broker:
// GET /small (small JSON), GET /1mib (1 MiB), GET /stream (8 chunks, streamed),
// GET /download?bytes=N (N bytes streamed, never held), POST /upload (counts the body as it streams),
// GET /gzip-json (4 KiB of JSON, gzip, with Content-Length) and GET /gzip-stream (256 KiB of JSON,
// gzip, chunked): what an API answers to an agent that sends Accept-Encoding.

import { gzipSync } from "node:zlib";
import type { BenchPki } from "./pki.ts";

export interface Upstream {
  readonly port: number;
  /** Requests seen with this exact Authorization value (counted only with `countAuth`). */
  authCount(value: string): number;
  stop(): void;
}

export const SMALL = JSON.stringify({ ok: true, service: "bench-upstream", items: [1, 2, 3], note: "small JSON response" });
const ONE_MIB = new Uint8Array(1 << 20).fill(0x61);
const CHUNK = new Uint8Array(256 * 1024).fill(0x62);
const STREAM_PART = new Uint8Array(16 * 1024).fill(0x63);

function jsonOfSize(bytes: number): string {
  const items = [];
  for (let i = 0; JSON.stringify(items).length < bytes; i++)
    items.push({
      id: i,
      name: `item-${i}`,
      created_at: new Date(1_700_000_000_000 + i * 60_000).toISOString(),
      tags: ["alpha", "beta", `t${i % 7}`],
      score: (i * 37) % 101,
    });
  return JSON.stringify({ items });
}
const GZIP_JSON = gzipSync(jsonOfSize(4 * 1024));
const GZIP_STREAM = gzipSync(jsonOfSize(256 * 1024));

/** `total` bytes in pieces of `step`: repeating `part` (or walking through it when it is the whole body). */
function streamOf(total: number, part: Uint8Array, step = part.length): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(ctrl) {
      if (sent >= total) return ctrl.close();
      const n = Math.min(step, total - sent);
      const at = step === part.length ? 0 : sent;
      ctrl.enqueue(at === 0 && n === part.length ? part : part.subarray(at, at + n));
      sent += n;
    },
  });
}

async function countBody(req: Request): Promise<number> {
  let n = 0;
  if (!req.body) return 0;
  for await (const chunk of req.body) n += chunk.byteLength;
  return n;
}

/** `countAuth` (the --peers run): count the Authorization values received, to prove a peer proxy injected its header. */
export function startUpstream(pki: BenchPki, o: { countAuth?: boolean } = {}): Upstream {
  const seen = new Map<string, number>();
  const count = (req: Request) => {
    const v = req.headers.get("authorization") ?? "";
    seen.set(v, (seen.get(v) ?? 0) + 1);
  };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: pki.certPem, key: pki.keyPem },
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    idleTimeout: 120,
    async fetch(req) {
      if (o.countAuth) count(req);
      const url = new URL(req.url);
      switch (url.pathname) {
        case "/small":
          return new Response(SMALL, { headers: { "content-type": "application/json" } });
        case "/1mib":
          return new Response(ONE_MIB, { headers: { "content-type": "application/octet-stream" } });
        case "/stream":
          return new Response(streamOf(8 * STREAM_PART.length, STREAM_PART), { headers: { "content-type": "application/octet-stream" } });
        case "/download": {
          const bytes = Number(url.searchParams.get("bytes") ?? 0);
          return new Response(streamOf(bytes, CHUNK), { headers: { "content-type": "application/octet-stream", "content-length": String(bytes) } });
        }
        case "/gzip-json":
          return new Response(GZIP_JSON, { headers: { "content-type": "application/json", "content-encoding": "gzip" } });
        case "/gzip-stream":
          return new Response(streamOf(GZIP_STREAM.length, GZIP_STREAM, 16 * 1024), {
            headers: { "content-type": "application/json", "content-encoding": "gzip" },
          });
        case "/upload":
          if (req.method !== "POST") return new Response("method", { status: 405 });
          return Response.json({ bytes: await countBody(req) });
        default:
          return new Response("not found", { status: 404 });
      }
    },
  });
  return { port: Number(server.port), authCount: (v) => seen.get(v) ?? 0, stop: () => void server.stop(true) };
}
