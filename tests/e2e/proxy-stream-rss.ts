// Run by proxy-stream.test.ts in a process of its own: 256 MiB through /proxy one way (`download` or
// `upload`), measuring how much the process's resident memory grows. A fresh process, because the test
// suite shares one process whose earlier files leave the collector further behind (it grew the figure
// from about 100 MiB alone to over 150 in the whole suite). Prints one JSON line with what it saw.

import type { IncomingMessage, ServerResponse } from "node:http";
import { startUpstream } from "../helpers/upstream.ts";
import { expectNoLeak, startBroker } from "./proxy-fixture.ts";

export const BIG = 256 * 1024 * 1024;
const CHUNK = 256 * 1024;
const SECRET = `sk-stream-${crypto.randomUUID()}`;
const pattern = (i: number) => new Uint8Array(CHUNK).fill(i & 0xff);
let uploadReceived = 0;

async function route(req: IncomingMessage, res: ServerResponse) {
  if ((req.url ?? "").startsWith("/upload")) {
    uploadReceived = 0;
    req.on("data", (c: Buffer) => (uploadReceived += c.length));
    req.on("end", () => res.end(String(uploadReceived)));
    return;
  }
  req.resume();
  res.writeHead(200, { "content-type": "application/octet-stream", "content-length": BIG });
  for (let sent = 0, i = 0; sent < BIG; sent += CHUNK, i++) if (!res.write(pattern(i))) await new Promise((r) => res.once("drain", r));
  res.end();
}

function sampleRss() {
  Bun.gc(true);
  const base = process.memoryUsage().rss;
  let peak = base;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  return () => (clearInterval(timer), peak - base);
}

if (import.meta.main) {
  const upstream = await startUpstream(route, { bufferBody: false });
  const broker = await startBroker({ caPem: upstream.pki.caPem });
  const bearerHost = `127.0.0.1:${upstream.port}`;
  const passHost = `localhost:${upstream.port}`;
  broker.dns.set("localhost", ["127.0.0.1"]);
  await broker.setCredential("API_KEY", SECRET);
  await broker.addService(bearerHost, { type: "bearer", token: "API_KEY" });
  await broker.addService(passHost, { type: "passthrough" });
  const out: Record<string, unknown> = {};
  if (process.argv[2] === "download") {
    const stop = sampleRss();
    const res = await broker.proxy(bearerHost, "/download");
    out.status = res.status;
    out.contentLength = res.headers.get("content-length");
    const reader = res.body!.getReader();
    let total = 0;
    let ok = true;
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      // Byte k of the stream is floor(k / CHUNK) & 0xff.
      if (r.value.length && r.value[0] !== (Math.floor(total / CHUNK) & 0xff)) ok = false;
      total += r.value.length;
    }
    Object.assign(out, { growth: stop(), total, ok });
  } else {
    const stop = sampleRss();
    let sent = 0;
    let i = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(ctrl) {
        if (sent >= BIG) return ctrl.close();
        ctrl.enqueue(pattern(i++));
        sent += CHUNK;
      },
    });
    const res = await broker.proxy(passHost, "/upload", { method: "POST", body, duplex: "half" } as RequestInit);
    Object.assign(out, { status: res.status, answer: await res.text(), growth: stop(), received: uploadReceived });
  }
  out.leak = await expectNoLeak(broker, SECRET).then(
    () => null,
    (e: Error) => e.message,
  );
  await broker.stop();
  await upstream.close();
  console.log(JSON.stringify(out));
}
