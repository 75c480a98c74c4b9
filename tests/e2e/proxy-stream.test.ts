// Explicit proxy streaming: compressed bodies pass untouched, SSE events arrive as they are sent,
// and large bodies stream both ways in bounded memory.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";
import { BIG } from "./proxy-stream-rss.ts";

const SECRET = `sk-stream-${crypto.randomUUID()}`;
const GZ = gzipSync(Buffer.from(`{"msg":"${"compressible ".repeat(2000)}"}`));

let upstream: TestUpstream;
let broker: Broker;
let bearerHost: string; // with a credential: redaction applies to identity bodies
let passHost: string; // passthrough: nothing injected, scanned for the bearer service's value
const sse = { sentAt: [] as number[] };

function route(req: IncomingMessage, res: ServerResponse) {
  const url = req.url ?? "";
  req.resume();
  if (url.startsWith("/gzip")) {
    res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip", "content-length": GZ.length });
    return res.end(GZ);
  }
  if (url.startsWith("/sse")) {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    sse.sentAt = [];
    let i = 0;
    const tick = () => {
      sse.sentAt.push(performance.now());
      res.write(`id: ${i}\ndata: event-${i}\n\n`);
      if (++i < 4) setTimeout(tick, 300);
      else res.end();
    };
    return tick();
  }
  res.end("ok");
}

beforeAll(async () => {
  upstream = await startUpstream(route, { bufferBody: false });
  broker = await startBroker({ caPem: upstream.pki.caPem });
  bearerHost = `127.0.0.1:${upstream.port}`;
  passHost = `localhost:${upstream.port}`;
  broker.dns.set("localhost", ["127.0.0.1"]);
  await broker.setCredential("API_KEY", SECRET);
  await broker.addService(bearerHost, { type: "bearer", token: "API_KEY" });
  await broker.addService(passHost, { type: "passthrough" });
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

describe("compressed bodies", () => {
  test("gzip stays gzip (re-encoded after the scan, a passthrough service's too: it is scanned for other services' values), Accept-Encoding forwarded unchanged", async () => {
    for (const host of [bearerHost, passHost]) {
      const res = await broker.proxy(host, "/gzip", { headers: { "accept-encoding": "gzip" }, decompress: false } as RequestInit);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-encoding")).toBe("gzip");
      const got = Buffer.from(await res.arrayBuffer());
      expect(gunzipSync(got).equals(gunzipSync(GZ))).toBe(true); // byte for byte with no value stored: proxy-echo.test.ts
      const ae = upstream.received.at(-1)!.rawHeaders.filter(([k]) => k.toLowerCase() === "accept-encoding");
      expect(ae.map(([, v]) => v)).toEqual(["gzip"]);
    }
  });
});

describe("server-sent events", () => {
  async function firstEventTiming(host: string) {
    const res = await broker.proxy(host, "/sse", { headers: { accept: "text/event-stream" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const reader = res.body!.getReader();
    let text = "";
    let firstAt = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
      if (!firstAt && text.includes("data: event-0\n\n")) firstAt = performance.now();
    }
    expect(text).toBe([0, 1, 2, 3].map((i) => `id: ${i}\ndata: event-${i}\n\n`).join(""));
    return { firstAt, sentAt: [...sse.sentAt] };
  }

  test("passthrough: the first event arrives before the second is sent", async () => {
    const { firstAt, sentAt } = await firstEventTiming(passHost);
    expect(firstAt).toBeGreaterThan(0);
    expect(firstAt).toBeLessThan(sentAt[1]!);
  });

  test("with an injected credential (redaction on): the first event arrives before the last is sent", async () => {
    const { firstAt, sentAt } = await firstEventTiming(bearerHost);
    expect(firstAt).toBeLessThan(sentAt.at(-1)!);
  });

  test("with an injected credential: each event arrives before the next is sent (no hold-back of whole events)", async () => {
    // The redactor holds back needle-length - 1 bytes at every chunk end; an SSE event shorter than
    // that is delayed until the next event arrives. See report.
    const { firstAt, sentAt } = await firstEventTiming(bearerHost);
    expect(firstAt).toBeLessThan(sentAt[1]!);
  });
});

describe("large bodies in bounded memory", () => {
  const LIMIT = 150 * 1024 * 1024;

  /** Streams 256 MiB one way in a process of its own (proxy-stream-rss.ts) and returns what it saw. */
  async function streamAlone(direction: "download" | "upload"): Promise<Record<string, any>> {
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "proxy-stream-rss.ts"), direction], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`proxy-stream-rss.ts ${direction} exited ${code}: ${err}`);
    return JSON.parse(out.trim().split("\n").at(-1)!);
  }

  test("256 MiB download streams through with bounded RSS growth", async () => {
    const r = await streamAlone("download");
    expect(r.status).toBe(200);
    expect(r.contentLength).toBeNull(); // re-framed: redaction may change length
    expect(r.total).toBe(BIG);
    expect(r.ok).toBe(true);
    console.log(`download: RSS growth ${(r.growth / 1048576).toFixed(1)} MiB`);
    expect(r.growth).toBeLessThan(LIMIT);
    expect(r.leak).toBeNull();
  });

  test("256 MiB streamed upload reaches the upstream whole with bounded RSS growth", async () => {
    const r = await streamAlone("upload");
    expect(r.status).toBe(200);
    expect(r.answer).toBe(String(BIG));
    console.log(`upload: RSS growth ${(r.growth / 1048576).toFixed(1)} MiB`);
    expect(r.received).toBe(BIG);
    expect(r.growth).toBeLessThan(LIMIT);
    expect(r.leak).toBeNull();
  });

  test("no credential in responses, logs or audit after streaming", async () => {
    await expectNoLeak(broker, SECRET);
  });
});
