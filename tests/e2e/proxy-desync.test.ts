// A pooled upstream connection never carries one answer into the next request: bytes beyond a
// response's framing (a longer body than its Content-Length, a body after HEAD) end the connection
// instead of being read as the next caller's response, which might be another vault's.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { createTestPki } from "../helpers/pki.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

let broker: Broker;
let upstream: Bun.TCPSocketListener<{ buf: string }>;
const secret = `sk-desync-${crypto.randomUUID()}`;
const smuggled = (auth: string) => `HTTP/1.1 200 OK\r\nContent-Length: ${9 + auth.length}\r\n\r\nSMUGGLED ${auth}`;

beforeAll(async () => {
  const pki = await createTestPki();
  // A raw HTTP/1.1 server, so it can send bytes no well-behaved server library would.
  upstream = Bun.listen<{ buf: string }>({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: pki.certPem, key: pki.keyPem },
    socket: {
      open(s) {
        s.data = { buf: "" };
      },
      data(s, chunk) {
        s.data.buf += chunk.toString("latin1");
        for (let end = s.data.buf.indexOf("\r\n\r\n"); end >= 0; end = s.data.buf.indexOf("\r\n\r\n")) {
          const head = s.data.buf.slice(0, end);
          s.data.buf = s.data.buf.slice(end + 4);
          const [method, path] = head.split(" ");
          const auth = /\r\nauthorization: ([^\r]*)/i.exec(head)?.[1] ?? "";
          if (path === "/long") s.write(`HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello${smuggled(auth)}`);
          else if (method === "HEAD") s.write(`HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody${smuggled(auth)}`);
          else s.write("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nreal");
        }
      },
    },
  });
  broker = await startBroker({ caPem: pki.caPem });
  broker.dns.set("upstream.test", ["127.0.0.1"]);
  await broker.setCredential("KEY", secret);
  await broker.addService(`upstream.test:${upstream.port}`, { type: "bearer", token: "KEY" });
});

afterAll(async () => {
  await broker.stop();
  upstream.stop(true);
});

test("surplus bytes after a Content-Length body are never read as the next response", async () => {
  const seen: string[] = [];
  for (let i = 0; i < 3; i++) {
    const first = await broker.proxy(`upstream.test:${upstream.port}`, "/long");
    seen.push(await first.text());
    const next = await broker.proxy(`upstream.test:${upstream.port}`, "/next");
    seen.push(await next.text());
    expect(seen.slice(-2)).toEqual(["hello", "real"]);
  }
  await expectNoLeak(broker, secret, seen);
});

test("a body sent after a HEAD answer is never read as the next response", async () => {
  const seen: string[] = [];
  for (let i = 0; i < 3; i++) {
    const head = await broker.proxy(`upstream.test:${upstream.port}`, "/head", { method: "HEAD" });
    seen.push(await head.text());
    await Bun.sleep(20); // the surplus arrives while the connection sits in the pool
    const next = await broker.proxy(`upstream.test:${upstream.port}`, "/next");
    expect(next.status).toBe(200);
    seen.push(await next.text());
    expect(seen.at(-1)).toBe("real");
  }
  await expectNoLeak(broker, secret, seen);
});
