// An agent using Node's own node:http2 client (run with `node`, not Bun) through the broker's CONNECT
// listener, for tunnel-h2.test.ts. argv[2] is a JSON config {proxyPort, proxyAuth, caFile, h2, h1};
// it runs every scenario and prints one JSON object with what came back (digests for large bodies).

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import { connect as netConnect } from "node:net";
import { connect as tlsConnect } from "node:tls";

const cfg = JSON.parse(process.argv[2]);
const ca = readFileSync(cfg.caFile, "utf8");
const MiB = 1024 * 1024;

/** CONNECT through the broker; resolves with the raw socket once the proxy said 200. */
function connectTunnel(authority) {
  return new Promise((resolve, reject) => {
    const sock = netConnect(cfg.proxyPort, "127.0.0.1", () => {
      sock.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${cfg.proxyAuth}\r\n\r\n`);
    });
    let buf = Buffer.alloc(0);
    const onData = (d) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      sock.off("data", onData);
      sock.pause();
      const head = buf.subarray(0, end).toString("latin1");
      if (!/^HTTP\/1\.1 200/.test(head)) return reject(new Error(`CONNECT ${authority}: ${head}`));
      if (buf.byteLength > end + 4) sock.unshift(buf.subarray(end + 4));
      resolve(sock);
    };
    sock.on("data", onData);
    sock.once("error", reject);
  });
}

async function openSession(authority, options = {}) {
  const sock = await connectTunnel(authority);
  const servername = authority.slice(0, authority.lastIndexOf(":"));
  const session = http2.connect(`https://${authority}`, {
    ...options,
    createConnection: () => tlsConnect({ socket: sock, servername, ca, ALPNProtocols: ["h2"] }),
  });
  session.on("error", () => {});
  await new Promise((resolve, reject) => {
    session.once("remoteSettings", resolve);
    session.once("error", reject);
  });
  return session;
}

/** One request; `body` is a Buffer (sent whole), an array of Buffers (written piece by piece) or null. */
function request(session, headers, body = null) {
  return new Promise((resolve, reject) => {
    const req = session.request(headers, { endStream: body === null });
    const out = { status: 0, headers: {}, trailers: {}, bytes: 0, sha256: "", text: "" };
    const hash = createHash("sha256");
    const chunks = [];
    req.on("response", (h) => ((out.status = h[":status"]), (out.headers = { ...h })));
    req.on("trailers", (t) => (out.trailers = { ...t }));
    req.on("data", (d) => {
      out.bytes += d.byteLength;
      hash.update(d);
      if (out.bytes <= 4 * MiB) chunks.push(d);
    });
    req.on("end", () => {
      out.sha256 = hash.digest("hex");
      out.text = out.bytes <= 4 * MiB ? Buffer.concat(chunks).toString("utf8") : "";
      resolve(out);
    });
    req.on("error", (err) => reject(new Error(`${headers[":method"] ?? "GET"} ${headers[":path"]}: ${err.message}`)));
    if (Array.isArray(body)) writePieces(req, body);
    else if (body !== null) req.end(body);
  });
}

async function writePieces(req, pieces) {
  for (const p of pieces) if (!req.write(p)) await new Promise((r) => req.once("drain", r));
  req.end();
}

function pattern(total) {
  const out = Buffer.alloc(total);
  for (let i = 0; i < total; i++) out[i] = i % 251;
  return out;
}

const sha = (b) => createHash("sha256").update(b).digest("hex");

async function againstH2() {
  const s = await openSession(cfg.h2);
  const out = { maxConcurrentStreams: s.remoteSettings.maxConcurrentStreams, alpn: s.alpnProtocol };
  // 200 streams at once on this one connection (the client queues past the broker's limit of 100).
  const many = await Promise.all(Array.from({ length: 200 }, (_, i) => request(s, { ":path": `/concurrent/${i}` })));
  out.concurrent = many.map((r) => ({ status: r.status, path: JSON.parse(r.text).path }));
  const big = pattern(5 * MiB + 7);
  out.postSmall = await request(s, { ":method": "POST", ":path": "/post-small", "content-type": "text/plain", "content-length": "8" }, Buffer.from("hello h2"));
  out.post5MiB = await request(s, { ":method": "POST", ":path": "/digest?case=5mib", "content-length": String(big.byteLength) }, big);
  out.postUnsized = await request(s, { ":method": "POST", ":path": "/digest?case=unsized" }, chunksOf(big.subarray(0, MiB + 3), 10_000));
  out.sent = { big: sha(big), unsized: sha(big.subarray(0, MiB + 3)) };
  out.head = await request(s, { ":method": "HEAD", ":path": "/head" });
  out.trailers = await request(s, { ":path": "/trailers", te: "trailers" });
  out.download = await request(s, { ":path": `/big?bytes=${5 * MiB + 11}` });
  out.echoAuth = await request(s, { ":path": "/echo-header?name=authorization", te: "trailers" });
  s.close();
  return out;
}

async function againstH1() {
  const s = await openSession(cfg.h1);
  const ascii = Buffer.alloc(2 * MiB + 5, "a");
  const out = { alpn: s.alpnProtocol };
  out.get = await request(s, { ":path": "/h1/get?q=1" });
  out.post = await request(s, { ":method": "POST", ":path": "/h1/post", "content-length": String(ascii.byteLength) }, ascii);
  out.postUnsized = await request(s, { ":method": "POST", ":path": "/h1/unsized" }, chunksOf(ascii.subarray(0, MiB), 7_000));
  out.head = await request(s, { ":method": "HEAD", ":path": "/h1/head" });
  out.many = (await Promise.all(Array.from({ length: 20 }, (_, i) => request(s, { ":path": `/h1/many/${i}` })))).map((r) => r.status);
  for (const k of ["get", "post", "postUnsized"]) out[k] = { ...out[k], echo: JSON.parse(out[k].text), text: undefined };
  s.close();
  return out;
}

/** 20 uploads and 20 downloads of 2 MiB at once on one connection: flow control both ways, every stream. */
async function parallelBodies() {
  // Node counts the bodies it has queued against the session's memory (10 MB by default) and resets
  // answers past it with ENHANCE_YOUR_CALM itself; 40 MiB in flight needs more.
  const s = await openSession(cfg.h2, { maxSessionMemory: 256 });
  const body = pattern(2 * MiB);
  const ups = Array.from({ length: 20 }, (_, i) =>
    request(s, { ":method": "POST", ":path": `/digest?parallel=${i}`, "content-length": String(body.byteLength) }, body),
  );
  const downs = Array.from({ length: 20 }, (_, i) => request(s, { ":path": `/big?bytes=${2 * MiB}&parallel=${i}` }));
  const [up, down] = await Promise.all([Promise.all(ups), Promise.all(downs)]);
  s.close();
  return { sent: sha(body), uploads: up.map((r) => JSON.parse(r.text)), downloads: down.map((r) => r.sha256) };
}

function chunksOf(buf, size) {
  const out = [];
  for (let i = 0; i < buf.byteLength; i += size) out.push(buf.subarray(i, i + size));
  return out;
}

const result = { h2: await againstH2(), h1: await againstH1(), parallel: await parallelBodies() };
process.stdout.write(JSON.stringify(result));
