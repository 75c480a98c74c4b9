// HTTP/2 attacks from an agent, sent frame by frame (tests/helpers/h2-frames.ts) through a real CONNECT
// tunnel: rapid reset, abandoned streams, CONTINUATION floods, an HPACK bomb, oversized header lists,
// window overflows, no-work frame floods, streams past the concurrency limit, HTTP/2-to-HTTP/1.1
// smuggling and :authority fronting. Each asserts what the agent observes (GOAWAY, reset, close), how
// little reached the upstream, and that a fresh HTTP/2 request through a new tunnel still works.
// Where the runtime's parser decides, any of GOAWAY or close is accepted; no timing is asserted.

import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createServer as createTlsServer, type Server } from "node:tls";
import {
  FLAG,
  FRAME,
  frame,
  goawayCode,
  hpackIndexed,
  hpackIndexedLiteral,
  hpackLiterals,
  requestBlock,
  rstFrame,
  settingsFrame,
  windowUpdateFrame,
  type RawH2,
} from "../helpers/h2-frames.ts";
import { headerValues } from "../helpers/h2-upstream.ts";
import { expectHealthy, openRawTunnel, startH2TunnelEnv, statusOf, until, type H2TunnelEnv } from "./tunnel-h2-fixture.ts";
import { UPSTREAM_NAME } from "./tunnel-fixture.ts";

const ENHANCE_YOUR_CALM = 11;
const FLOW_CONTROL_ERROR = 3;
const REFUSED_STREAM = 7;

let env: H2TunnelEnv;
const open: RawH2[] = [];

beforeAll(async () => {
  env = await startH2TunnelEnv();
}, 60_000);
afterEach(async () => {
  for (const c of open.splice(0)) c.close();
  await expectHealthy(env);
});
afterAll(async () => {
  await env?.stop();
});

/** A raw frame client on a new tunnel (to the h2 upstream unless told), closed after the test. */
async function attacker(authority = env.authority): Promise<RawH2> {
  const h2 = await openRawTunnel(env, authority);
  open.push(h2);
  return h2;
}

/**
 * Writes batch after batch (`make(i)` for the i-th) with backpressure until the connection closes or
 * `maxBatches` are written; returns how many batches went out.
 */
async function flood(h2: RawH2, make: (i: number) => Buffer, maxBatches: number): Promise<number> {
  let i = 0;
  for (; i < maxBatches; i++) {
    if (h2.socket.destroyed || !h2.socket.writable) break;
    if (!h2.write(make(i))) {
      await new Promise<void>((resolve) => {
        const done = () => (h2.socket.off("drain", done), h2.socket.off("close", done), resolve());
        h2.socket.once("drain", done);
        h2.socket.once("close", done);
      });
    }
  }
  return i;
}

const goaways = (h2: RawH2) => h2.frames.map(goawayCode).filter((c): c is number => c !== undefined);

/** The broker's frame guard ended the connection: GOAWAY ENHANCE_YOUR_CALM (its own decision), then close. */
async function expectCalmedDown(h2: RawH2): Promise<void> {
  expect(await h2.closed(20_000)).toBe(true);
  expect(goaways(h2)).toEqual([ENHANCE_YOUR_CALM]);
}

const upstreamSaw = (prefix: string) => env.h2.received.filter((r) => r.path.startsWith(prefix)).length;
const abuseLogged = () => env.broker.logLines.filter((l) => l.includes("http2_abuse")).length;

describe("rapid reset (CVE-2023-44487)", () => {
  test("thousands of HEADERS + RST_STREAM pairs: GOAWAY and close; the upstream gets far fewer requests", async () => {
    const h2 = await attacker();
    const before = abuseLogged();
    const PAIRS = 50;
    const batches = await flood(
      h2,
      (b) => {
        const out: Buffer[] = [];
        for (let k = 0; k < PAIRS; k++) {
          const id = 1 + 2 * (b * PAIRS + k);
          out.push(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, requestBlock(env.authority, `/rapid/${id}`)), rstFrame(id));
        }
        return Buffer.concat(out);
      },
      200,
    );
    await expectCalmedDown(h2);
    // More streams went out than the upstream bound below, or the bound would prove nothing.
    expect(batches * PAIRS).toBeGreaterThan(300);
    expect(abuseLogged()).toBeGreaterThan(before);
    // A request through a new tunnel first, so any stream already on its way upstream has landed before counting.
    await expectHealthy(env);
    expect(upstreamSaw("/rapid/")).toBeLessThan(300);
  });
});

describe("streams the agent abandons after they reached the upstream", () => {
  // The broker once kept the upstream's stream open until the upstream answered or
  // BROKER_UPSTREAM_TIMEOUT_MS (5 min by default) passed, so an agent opening 100 streams to a slow
  // endpoint and resetting them, or dropping the connection and reconnecting, piled up upstream work
  // (the CVE-2023-44487 shape, past the frame guard). Now the upstream stream is cancelled with it.
  test("streams reset by the agent are cancelled at the upstream", async () => {
    try {
      const h2 = await attacker();
      const ids = [1, 3, 5, 7, 9];
      for (const id of ids) h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, requestBlock(env.authority, `/hold/reset-${id}`)));
      expect(await until(() => env.h2.held() === ids.length, 10_000)).toBe(true);
      h2.write(Buffer.concat(ids.map((id) => rstFrame(id))));
      // Bounded well under the fixture's upstream timeout (15 s), which would cancel them anyway.
      expect(await until(() => env.h2.held() === 0, 5_000)).toBe(true);
    } finally {
      env.h2.release();
    }
  });

  test("streams of an agent whose connection drops are cancelled at the upstream", async () => {
    try {
      const h2 = await attacker();
      for (const id of [1, 3, 5]) h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, requestBlock(env.authority, `/hold/dropped-${id}`)));
      expect(await until(() => env.h2.held() === 3, 10_000)).toBe(true);
      h2.close();
      expect(await until(() => env.h2.held() === 0, 5_000)).toBe(true);
    } finally {
      env.h2.release();
    }
  });
});

describe("CONTINUATION floods (CVE-2024-27316 family)", () => {
  const startBlock = (h2: RawH2, path: string) => h2.write(frame(FRAME.HEADERS, FLAG.END_STREAM, 1, requestBlock(env.authority, path)));

  test("endless empty CONTINUATION frames: GOAWAY and close", async () => {
    const h2 = await attacker();
    startBlock(h2, "/cont-empty");
    const empty = Buffer.concat(Array.from({ length: 1000 }, () => frame(FRAME.CONTINUATION, 0, 1)));
    await flood(h2, () => empty, 10_000);
    await expectCalmedDown(h2);
    expect(upstreamSaw("/cont-empty")).toBe(0);
  });

  test("many small non-empty CONTINUATION frames: GOAWAY and close", async () => {
    const h2 = await attacker();
    startBlock(h2, "/cont-small");
    await flood(h2, (i) => frame(FRAME.CONTINUATION, 0, 1, hpackLiterals([[`x-c${i}`, "v"]])), 100_000);
    await expectCalmedDown(h2);
    expect(upstreamSaw("/cont-small")).toBe(0);
  });

  test("a header block past 80 KiB in few large frames: GOAWAY and close", async () => {
    const h2 = await attacker();
    const piece = (i: number) => hpackLiterals([[`x-big-${i}`, "b".repeat(16_000)]]);
    h2.write(frame(FRAME.HEADERS, FLAG.END_STREAM, 1, Buffer.concat([requestBlock(env.authority, "/cont-big"), piece(0)])));
    await flood(h2, (i) => frame(FRAME.CONTINUATION, 0, 1, piece(i + 1)), 64);
    await expectCalmedDown(h2);
    expect(upstreamSaw("/cont-big")).toBe(0);
  });
});

describe("HPACK and header list limits", () => {
  test("an HPACK bomb (a 4 KB table entry referenced 12,000 times): the stream is refused, nothing reaches the upstream", async () => {
    const h2 = await attacker();
    const refs = Buffer.alloc(12_000, hpackIndexed(62));
    const block = Buffer.concat([requestBlock(env.authority, "/bomb"), hpackIndexedLiteral("x-bomb", "a".repeat(4000)), refs]);
    h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, block));
    const refused = await h2.waitFor((f) => (f.streamId === 1 && (f.type === FRAME.RST_STREAM || f.type === FRAME.HEADERS)) || f.type === FRAME.GOAWAY, 20_000);
    expect(refused !== undefined || (await h2.closed(0))).toBe(true);
    if (refused?.type === FRAME.HEADERS) expect(statusOf(refused)).not.toBe(200);
    if (refused?.type === FRAME.RST_STREAM) {
      // Only the stream was refused: the same connection still carries a normal request.
      h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 3, requestBlock(env.authority, "/after-bomb")));
      const answer = await h2.waitFor((f) => f.type === FRAME.HEADERS && f.streamId === 3, 20_000);
      expect(answer && statusOf(answer)).toBe(200);
    }
    expect(upstreamSaw("/bomb")).toBe(0);
  });

  test("a header list over 64 KiB in legal frames: refused, nothing reaches the upstream", async () => {
    const h2 = await attacker();
    const piece = (i: number) => hpackLiterals([[`x-big-${i}`, "b".repeat(15_000)]]);
    h2.write(frame(FRAME.HEADERS, FLAG.END_STREAM, 1, Buffer.concat([requestBlock(env.authority, "/list-big"), piece(0)])));
    for (let i = 1; i <= 4; i++) h2.write(frame(FRAME.CONTINUATION, i === 4 ? FLAG.END_HEADERS : 0, 1, piece(i)));
    const refused = await h2.waitFor(
      (f) => (f.type === FRAME.RST_STREAM && f.streamId === 1) || f.type === FRAME.GOAWAY || (f.type === FRAME.HEADERS && f.streamId === 1),
      20_000,
    );
    expect(refused !== undefined || (await h2.closed(0))).toBe(true);
    if (refused?.type === FRAME.HEADERS) expect(statusOf(refused)).not.toBe(200);
    expect(upstreamSaw("/list-big")).toBe(0);
  });
});

describe("flow control", () => {
  // FAILING (Bun 1.4.5): on a protocol error Bun's server writes its GOAWAY natively when its socket
  // is a native TLSSocket, but never hands it to a JS stream socket (the frame guard's): the write
  // never reaches http/coalescing-socket.ts, only end() does. The agent sees a bare close.
  test.failing("a connection WINDOW_UPDATE past 2^31-1: GOAWAY FLOW_CONTROL_ERROR", async () => {
    const h2 = await attacker();
    h2.write(windowUpdateFrame(0, 0x7fffffff));
    const g = await h2.waitFor((f) => f.type === FRAME.GOAWAY, 5_000);
    expect(g && goawayCode(g)).toBe(FLOW_CONTROL_ERROR);
    expect(await h2.closed(20_000)).toBe(true);
  });

  test("a stream WINDOW_UPDATE past 2^31-1: that stream (or the connection) ends with FLOW_CONTROL_ERROR", async () => {
    const h2 = await attacker();
    h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, requestBlock(env.authority, "/hold/window")));
    h2.write(windowUpdateFrame(1, 0x7fffffff));
    const f = await h2.waitFor((x) => (x.type === FRAME.RST_STREAM && x.streamId === 1) || x.type === FRAME.GOAWAY, 20_000);
    expect(f).toBeDefined();
    const code = f!.type === FRAME.GOAWAY ? goawayCode(f!) : f!.payload.readUInt32BE(0);
    expect(code).toBe(FLOW_CONTROL_ERROR);
    env.h2.release();
  });
});

describe("no-work frame floods", () => {
  const cases: [string, (i: number) => Buffer, ((h2: RawH2) => void)?][] = [
    ["PING", (i) => frame(FRAME.PING, 0, 0, Buffer.alloc(8, i % 256))],
    ["SETTINGS", () => settingsFrame()],
    ["PRIORITY", (i) => frame(FRAME.PRIORITY, 0, 1 + 2 * i, Buffer.from([0, 0, 0, 0, 15]))],
    ["WINDOW_UPDATE of 1 byte", () => windowUpdateFrame(0, 1)],
    [
      "empty DATA without END_STREAM",
      () => frame(FRAME.DATA, 0, 1),
      (h2) => h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, requestBlock(env.authority, "/empty-data", "POST"))),
    ],
  ];
  for (const [name, make, prepare] of cases) {
    test(`a ${name} flood: GOAWAY and close`, async () => {
      const h2 = await attacker();
      prepare?.(h2);
      const batch = (i: number) => Buffer.concat(Array.from({ length: 100 }, (_, k) => make(i * 100 + k)));
      await flood(h2, batch, 2_000);
      await expectCalmedDown(h2);
    });
  }
});

describe("concurrent streams", () => {
  test("150 streams at once: those past 100 are refused (REFUSED_STREAM), the first 100 complete", async () => {
    const h2 = await attacker();
    const ids = Array.from({ length: 150 }, (_, i) => 1 + 2 * i);
    h2.write(Buffer.concat(ids.map((id) => frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, requestBlock(env.authority, `/hold/c${id}`)))));
    const resets = () => h2.frames.filter((f) => f.type === FRAME.RST_STREAM);
    await until(() => env.h2.held() >= 100 && resets().length >= 50, 20_000);
    expect(env.h2.held()).toBe(100);
    expect(
      resets()
        .map((f) => f.streamId)
        .sort((a, b) => a - b),
    ).toEqual(ids.slice(100));
    for (const f of resets()) expect(f.payload.readUInt32BE(0)).toBe(REFUSED_STREAM);
    env.h2.release();
    const answers = () => h2.frames.filter((f) => f.type === FRAME.HEADERS);
    await until(() => answers().length >= 100, 20_000);
    expect(
      answers()
        .map((f) => f.streamId)
        .sort((a, b) => a - b),
    ).toEqual(ids.slice(0, 100));
    expect(answers().map(statusOf)).toEqual(Array(100).fill(200));
    expect(upstreamSaw("/hold/c")).toBe(100);
    expect(await h2.closed(0)).toBe(false);
  });
});

/** An HTTP/1.1 upstream that records the raw bytes of each connection and answers once, then closes. */
async function startRawH1(): Promise<{ authority: string; connections: string[]; server: Server }> {
  const connections: string[] = [];
  const server = createTlsServer({ cert: env.h1.pki.certPem, key: env.h1.pki.keyPem }, (sock) => {
    const i = connections.push("") - 1;
    sock.on("data", (d: Buffer) => {
      connections[i] += d.toString("latin1");
      if (connections[i]!.includes("\r\n\r\n")) sock.end("HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
    });
    sock.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const authority = `${UPSTREAM_NAME}:${(server.address() as { port: number }).port}`;
  await env.broker.addService(authority, { type: "bearer", token: "API_KEY" });
  return { authority, connections, server };
}

describe("HTTP/2 to HTTP/1.1 downgrade (request smuggling)", () => {
  const cases: [string, (authority: string) => [string, string][], string | null][] = [
    [
      "transfer-encoding: chunked with a smuggled request in the body",
      (a) => [...pseudo("POST", a, "/te"), ["transfer-encoding", "chunked"]],
      "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    ],
    ["CRLF in a header value", (a) => [...pseudo("GET", a, "/crlf"), ["x-a", "b\r\nx-injected: 1"]], null],
    ["CRLF in :path", (a) => pseudo("GET", a, "/p HTTP/1.1\r\nx-injected: 1\r\nx:"), null],
    ["CRLF in :method", (a) => pseudo("GET /smuggled HTTP/1.1\r\nx-injected:", a, "/m"), null],
    ["a connection-specific header", (a) => [...pseudo("GET", a, "/conn"), ["connection", "close, x-injected"], ["x-injected", "1"]], null],
    ["a colon in a header name", (a) => [...pseudo("GET", a, "/colon"), ["x-injected:y", "1"]], null],
    ["an upper-case header name", (a) => [...pseudo("GET", a, "/upper"), ["X-Injected", "1"]], null],
  ];
  for (const [name, fields, body] of cases) {
    test(`${name}: refused, nothing of it reaches the upstream`, async () => {
      const up = await startRawH1();
      try {
        const h2 = await attacker(up.authority);
        h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | (body === null ? FLAG.END_STREAM : 0), 1, hpackLiterals(fields(up.authority))));
        if (body !== null) h2.write(frame(FRAME.DATA, FLAG.END_STREAM, 1, Buffer.from(body, "latin1")));
        const reply = await h2.waitFor(
          (f) => (f.streamId === 1 && (f.type === FRAME.RST_STREAM || f.type === FRAME.HEADERS)) || f.type === FRAME.GOAWAY,
          20_000,
        );
        expect(reply !== undefined || (await h2.closed(0))).toBe(true);
        if (reply?.type === FRAME.HEADERS) expect(statusOf(reply)).not.toBe(200);
        const seen = up.connections.join("\n");
        expect(seen).not.toContain("x-injected");
        expect(seen).not.toContain("smuggled");
      } finally {
        up.server.close();
      }
    });
  }

  test("Host, Proxy-Authorization and Authorization from the agent: replaced or dropped on the way to HTTP/1.1", async () => {
    const up = await startRawH1();
    try {
      const h2 = await attacker(up.authority);
      const extra: [string, string][] = [
        ["host", "evil.example"],
        ["proxy-authorization", "Basic c2Vzc2lvbg=="],
        ["authorization", "Bearer from-the-agent"],
      ];
      h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, hpackLiterals([...pseudo("GET", up.authority, "/replaced"), ...extra])));
      const reply = await h2.waitFor((f) => f.streamId === 1 && f.type === FRAME.HEADERS, 20_000);
      expect(reply && statusOf(reply)).toBe(200);
      const lines = up.connections
        .join("")
        .split("\r\n")
        .map((l) => l.toLowerCase());
      expect(lines.filter((l) => l.startsWith("host:"))).toEqual([`host: ${up.authority}`]);
      expect(lines.filter((l) => l.startsWith("authorization:"))).toEqual([`authorization: bearer ${env.secret.toLowerCase()}`]);
      expect(lines.filter((l) => l.startsWith("proxy-authorization:") || l.includes("evil.example"))).toEqual([]);
    } finally {
      up.server.close();
    }
  });
});

describe("idle connections", () => {
  let idleEnv: H2TunnelEnv;
  beforeAll(async () => {
    idleEnv = await startH2TunnelEnv({ tunnel: { idleTimeoutMs: 300 } });
  }, 60_000);
  afterAll(async () => {
    await idleEnv?.stop();
  });

  test("an HTTP/2 connection that opens no stream is closed after the tunnel's idle timeout", async () => {
    const h2 = await openRawTunnel(idleEnv);
    open.push(h2);
    expect(await h2.closed(20_000)).toBe(true);
    expect(h2.frames.filter((f) => f.type === FRAME.HEADERS || f.type === FRAME.DATA)).toEqual([]);
  });
});

describe("routing", () => {
  test("an :authority naming another service: the stream still goes to the CONNECT authority", async () => {
    const h2 = await attacker();
    const before = env.h1.received.length;
    h2.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, hpackLiterals(pseudo("GET", env.h1Authority, "/fronted"))));
    const reply = await h2.waitFor((f) => f.streamId === 1 && (f.type === FRAME.HEADERS || f.type === FRAME.RST_STREAM), 20_000);
    expect(reply).toBeDefined();
    expect(env.h1.received.length).toBe(before);
    const seen = env.h2.received.filter((r) => r.path === "/fronted");
    // Either answered by the CONNECT authority's upstream, or refused; never sent to the other service.
    if (reply?.type === FRAME.HEADERS && statusOf(reply) === 200) {
      expect(seen.length).toBe(1);
      expect(headerValues(seen[0]!, "authorization")).toEqual([`Bearer ${env.secret}`]);
    }
  });
});

function pseudo(method: string, authority: string, path: string): [string, string][] {
  return [
    [":method", method],
    [":scheme", "https"],
    [":authority", authority],
    [":path", path],
  ];
}
