// The local HTTPS upstream the bench drives, directly (baseline) and through the broker:
// GET /small (small JSON), GET /1mib (1 MiB), GET /stream (8 chunks, streamed),
// GET /download?bytes=N (N bytes streamed, never held), POST /upload (counts the body as it streams).

import type { BenchPki } from "./pki.ts";

export interface Upstream {
  readonly port: number;
  stop(): void;
}

const SMALL = JSON.stringify({ ok: true, service: "bench-upstream", items: [1, 2, 3], note: "small JSON response" });
const ONE_MIB = new Uint8Array(1 << 20).fill(0x61);
const CHUNK = new Uint8Array(256 * 1024).fill(0x62);
const STREAM_PART = new Uint8Array(16 * 1024).fill(0x63);

function streamOf(total: number, part: Uint8Array): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(ctrl) {
      if (sent >= total) return ctrl.close();
      const n = Math.min(part.length, total - sent);
      ctrl.enqueue(n === part.length ? part : part.subarray(0, n));
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

export function startUpstream(pki: BenchPki): Upstream {
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: pki.certPem, key: pki.keyPem },
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    idleTimeout: 120,
    async fetch(req) {
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
        case "/upload":
          if (req.method !== "POST") return new Response("method", { status: 405 });
          return Response.json({ bytes: await countBody(req) });
        default:
          return new Response("not found", { status: 404 });
      }
    },
  });
  return { port: Number(server.port), stop: () => void server.stop(true) };
}
