// Ranges cannot reassemble a value (issue 31, architecture.md D21): an upstream that honestly supports
// Range over a body echoing the Authorization it received, a bearer service, and an agent asking for
// the value in pieces: two halves, one multi-range request, one byte at a time. On /proxy, through
// the tunnel over HTTP/1.1 and over HTTP/2, the broker drops Range and If-Range, the agent gets the
// whole body (200) with the value redacted, and nothing it received can be joined into any 4 characters
// of the value. A partial answer to a request sent without Range fails closed (502).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ClientHttp2Session } from "node:http2";
import { expectNoLeak } from "./proxy-fixture.ts";
import { ECHO_AT, piecesOf, rangeEchoBody, rangeEchoHandler, reassemble, type AgentAnswer } from "./range-echo-upstream.ts";
import { startTunnelEnv, type TunnelEnv } from "./tunnel-fixture.ts";
import { h2SessionThrough } from "./tunnel-h2-fixture.ts";

/** 40 characters, none of its pieces likely in a header (a Date, a length), so any piece found is the leak. */
const VALUE = "Zq8Vw3Xj-Rk5Pm2Ty7Ln4Hb9Gd6Fc1Sx0WqNvMu";
const AT = ECHO_AT + "Bearer ".length; // 81: where the value starts in the body
const REDACTED_BODY = rangeEchoBody(`Bearer ${VALUE}`).toString("latin1").replace(VALUE, "[redacted]");

let env: TunnelEnv;
let h2: ClientHttp2Session;
/** Everything an agent received (status lines, headers, bodies), for the leak checks. */
const seen: string[] = [];

beforeAll(async () => {
  env = await startTunnelEnv({ handler: (req, res) => rangeEchoHandler(req, res) });
  await env.broker.setCredential("API_KEY", VALUE); // the fixture's service injects `Bearer <API_KEY>`
  h2 = await h2SessionThrough(env, env.authority);
}, 60_000);

afterAll(async () => {
  h2?.close();
  await expectNoLeak(env.broker, VALUE, seen);
  await env.stop();
});

type Get = (path: string, headers?: Record<string, string>) => Promise<AgentAnswer>;

function recorded(status: number, headers: Record<string, string>, body: Buffer): AgentAnswer {
  seen.push(
    `${status}\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}`)
      .join("\n")}\n\n${body.toString("latin1")}`,
  );
  return { status, headers, body };
}

async function fromResponse(res: Response): Promise<AgentAnswer> {
  const headers: Record<string, string> = {};
  res.headers.forEach((v, k) => (headers[k] = v));
  return recorded(res.status, headers, Buffer.from(await res.arrayBuffer()));
}

const ingresses: Record<string, Get> = {
  "/proxy": async (path, headers = {}) => fromResponse(await env.broker.proxy(env.authority, path, { headers })),
  "the tunnel (HTTP/1.1)": async (path, headers = {}) =>
    fromResponse(await fetch(`https://${env.authority}${path}`, { headers, proxy: env.proxyUrl, tls: { ca: env.caPem } } as RequestInit)),
  "the tunnel (HTTP/2)": (path, headers = {}) =>
    new Promise<AgentAnswer>((resolve, reject) => {
      const req = h2.request({ ":method": "GET", ":path": path, ...headers }, { endStream: true });
      let status = 0;
      const head: Record<string, string> = {};
      const chunks: Buffer[] = [];
      req.on("response", (h) => {
        status = Number(h[":status"]);
        for (const [k, v] of Object.entries(h)) if (!k.startsWith(":")) head[k] = String(v);
      });
      req.on("data", (d: Buffer) => chunks.push(d));
      req.on("end", () => resolve(recorded(status, head, Buffer.concat(chunks))));
      req.on("error", reject);
    }),
};

/** The Range-ish headers the upstream received on its last `n` requests. */
function rangesReceived(n: number): string[] {
  return env.upstream.received
    .slice(-n)
    .flatMap((r) => r.rawHeaders.filter(([k]) => /^(range|if-range|request-range)$/i.test(k)).map(([k, v]) => `${k}: ${v}`));
}

/** A whole, redacted 200: what every ranged request on an injected service gets. */
function expectWhole(a: AgentAnswer): void {
  // Compared as a flag: a failure must not print a body that holds the value.
  expect({ status: a.status, contentRange: a.headers["content-range"], redactedWhole: a.body.toString("latin1") === REDACTED_BODY }).toEqual({
    status: 200,
    contentRange: undefined,
    redactedWhole: true,
  });
}

for (const [name, get] of Object.entries(ingresses)) {
  describe(`through ${name}`, () => {
    const answers: AgentAnswer[] = [];

    test("two ranged requests, each holding half of the value: Range dropped, two whole redacted bodies", async () => {
      const got: AgentAnswer[] = [];
      for (const range of [`bytes=${AT}-${AT + 19}`, `bytes=${AT + 20}-${AT + 39}`])
        got.push(await get("/file", { range, "if-range": '"v1"', "request-range": range }));
      answers.push(...got);
      got.forEach(expectWhole);
      expect(rangesReceived(2)).toEqual([]);
    });

    test("one multi-range request splitting the value: a whole redacted body, not multipart/byteranges", async () => {
      const a = await get("/file", { range: `bytes=0-${AT + 9},${AT + 10}-${AT + 29},${AT + 30}-` });
      answers.push(a);
      expectWhole(a);
      expect(rangesReceived(1)).toEqual([]);
    });

    test("one byte at a time over every offset of the value", async () => {
      const got: AgentAnswer[] = [];
      for (let i = AT - 2; i < AT + VALUE.length + 2; i++) got.push(await get("/file", { range: `bytes=${i}-${i}` }));
      answers.push(...got);
      got.forEach(expectWhole);
      expect(rangesReceived(VALUE.length + 4)).toEqual([]);
    });

    test("nothing the agent received joins into any piece of the value, raw or base64", () => {
      expect(answers.length).toBe(3 + VALUE.length + 4);
      expect(piecesOf(VALUE, reassemble(answers))).toEqual([]);
      expect(piecesOf(VALUE, seen.join("\n"))).toEqual([]);
    });

    for (const kind of ["206", "multipart", "content-range"]) {
      test(`a hostile upstream's partial answer (${kind}) to a request sent without Range: 502, nothing of the value`, async () => {
        const a = await get(`/hostile?kind=${kind}`);
        expect(a.status).toBe(502);
        expect(a.headers["x-broker-error"]).toBe("undecodable_response");
        const body = JSON.parse(a.body.toString("utf8"));
        expect(body).toMatchObject({ error: "undecodable_response" });
        expect(typeof body.message).toBe("string");
        expect(piecesOf(VALUE, a.body.toString("latin1"))).toEqual([]);
      });
    }
  });
}

describe("another vault's value, served back by a request bin (architecture.md D22)", () => {
  test("an agent of a vault with a passthrough service on the host gets no piece of it through ranges (widened and masked)", async () => {
    const { broker } = env;
    await broker.api("POST", "/v1/vaults", { name: "bin-reader" }, broker.userToken);
    const session = await broker.api("POST", "/v1/sessions", { vault: "bin-reader", role: "proxy" }, broker.userToken);
    expect((await broker.api("POST", "/v1/vaults/bin-reader/services", { host: env.authority, auth: { type: "passthrough" } }, broker.userToken)).status).toBe(
      201,
    );
    await ingresses["/proxy"]!("/file"); // vault A's request: the bin logs its Authorization
    const replay = async (range: string) =>
      fromResponse(await fetch(`${broker.apiUrl}/proxy/${env.authority}/replay`, { headers: { authorization: `Bearer ${session.body.token}`, range } }));
    const got: AgentAnswer[] = [];
    for (const range of [`bytes=${AT}-${AT + 19}`, `bytes=${AT + 20}-${AT + 39}`, `bytes=${AT}-${AT + 9},${AT + 10}-${AT + 39}`]) got.push(await replay(range));
    for (let i = AT; i < AT + VALUE.length; i++) got.push(await replay(`bytes=${i}-${i}`));
    expect(piecesOf(VALUE, reassemble(got))).toEqual([]);
    // A passthrough service's ranges are widened, masked and cut back (ranges.ts): the two single
    // ranges and every 1-byte one are 206 answers of exactly the bytes asked; the multi-range one whole.
    const single = got.filter((_, i) => i !== 2);
    expect(single.map((a) => a.status)).toEqual(single.map(() => 206));
    expect(single.map((a) => a.body.length)).toEqual([20, 20, ...Array.from({ length: VALUE.length }, () => 1)]);
    expectWhole(got[2]!);
    const sent = rangesReceived(got.length);
    expect(sent.length).toBe(got.length - 1);
    expect(sent.every((r) => /^range: bytes=\d+-\d+$/i.test(r))).toBe(true);
  });
});

test("the upstream saw the value injected each time (the pieces were there to ask for)", () => {
  const injected = env.upstream.received.filter((r) => !r.url.startsWith("/replay"));
  const auth = injected.map((r) => r.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")?.[1]);
  expect(auth.length).toBe(3 * (3 + VALUE.length + 4 + 3) + 1);
  expect(auth.every((a) => a === `Bearer ${VALUE}`)).toBe(true);
});
