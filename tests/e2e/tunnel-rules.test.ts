// Service rules through the transparent proxy (CONNECT + TLS with the broker CA, raw HTTP/1.1 inside):
// allowed and refused methods and paths, every ambiguous path form refused with 400 before anything
// reaches the upstream (the tunnel parses raw bytes, so nothing resolves them first), the forwarded
// path byte-identical to the matched one, WebSocket upgrades outside the rules refused without an
// upstream connection, curl as a real client, and the audit records. The credential never shows.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import type { TCPSocketListener } from "bun";
import { expectNoLeak } from "./proxy-fixture.ts";
import {
  basicProxyAuth,
  Conn,
  dialProxy,
  openTunnel,
  requireBinary,
  startTunnelEnv,
  UPSTREAM_NAME,
  type RawResponse,
  type TunnelEnv,
} from "./tunnel-fixture.ts";

const RULES = [
  { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] },
  { methods: ["POST"], paths: ["/repos/*/issues"] },
];
const WS_RULES = [{ methods: ["GET"], paths: ["/socket/allowed"] }];
const DESCRIBED = "GET and HEAD on /repos/*/issues/**; POST on /repos/*/issues";

let env: TunnelEnv;
/** A raw TLS WebSocket upstream: counts connections, records request heads, answers 101 + one text frame. */
let ws: TCPSocketListener<{ buf: string }>;
let wsAuthority: string;
const wsConnections: number[] = [];
const wsHeads: string[] = [];
/** Everything an agent read, for the leak check at the end. */
const seen: string[] = [];

const servicePath = (host: string) => `/v1/vaults/${env.broker.vault}/services/${encodeURIComponent(host)}`;

beforeAll(async () => {
  env = await startTunnelEnv();
  const set = await env.broker.api("PATCH", servicePath(env.authority), { rules: RULES }, env.broker.userToken);
  if (set.status !== 200) throw new Error(`PATCH rules: ${set.status} ${JSON.stringify(set.body)}`);
  ws = Bun.listen<{ buf: string }>({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: env.upstream.pki.certPem, key: env.upstream.pki.keyPem },
    socket: {
      open(s) {
        s.data = { buf: "" };
        wsConnections.push(Date.now());
      },
      data(s, chunk) {
        if (s.data.buf.includes("\r\n\r\n")) return; // frames from the client are not needed
        s.data.buf += chunk.toString("latin1");
        const end = s.data.buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = s.data.buf.slice(0, end);
        wsHeads.push(head);
        const key = /^sec-websocket-key: (.*)$/im.exec(head)?.[1] ?? "";
        const accept = createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
        s.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
        s.write(Buffer.from([0x81, 5, ...Buffer.from("hello")])); // one unmasked text frame
      },
    },
  });
  wsAuthority = `${UPSTREAM_NAME}:${ws.port}`;
  await env.broker.addService(wsAuthority, { type: "bearer", token: "API_KEY" }, { rules: WS_RULES });
});
afterAll(async () => {
  ws?.stop(true);
  await env?.stop();
});

const json = (b: Buffer) => JSON.parse(b.toString("utf8"));

async function tunnel(authority = env.authority): Promise<Conn> {
  return (await openTunnel(env.proxyPort, authority, env.proxyAuth, { ca: env.caPem })).conn;
}

/** Sends one raw request line (plus Host) and reads the answer; `body` gets a Content-Length. */
async function send(conn: Conn, method: string, target: string, body?: string): Promise<RawResponse> {
  const framing = body === undefined ? "" : `Content-Length: ${Buffer.byteLength(body)}\r\n`;
  conn.write(Buffer.from(`${method} ${target} HTTP/1.1\r\nHost: ${env.authority}\r\n${framing}\r\n${body ?? ""}`, "latin1"));
  const res = await conn.readResponse({ noBody: method === "HEAD" });
  seen.push(res.head, res.body.toString("latin1"));
  return res;
}

function expectEnvelope(res: RawResponse, status: number, code: string) {
  expect({ status: res.status, header: res.headers["x-broker-error"] }).toEqual({ status, header: code });
  const body = json(res.body);
  expect(body.error).toBe(code);
  expect(typeof body.message).toBe("string");
  return body;
}

async function auditRecords(match: (r: any) => boolean): Promise<any[]> {
  for (let i = 0; i < 60; i++) {
    await Bun.sleep(50); // records are written in batches, a few times a second
    const found = (await env.broker.auditLogs()).filter(match);
    if (found.length) return found;
  }
  return [];
}

describe("rules inside an intercepted tunnel", () => {
  test("allowed methods and paths pass (nested ** and single *); the upstream gets exactly the matched, canonical path", async () => {
    const conn = await tunnel();
    const absolute = `https://${env.authority}`;
    for (const [method, target, forwarded] of [
      ["GET", "/repos/acme/issues", "/repos/acme/issues"],
      ["GET", "/repos/acme/issues/12/comments/3", "/repos/acme/issues/12/comments/3"],
      ["HEAD", "/repos/acme/issues/", "/repos/acme/issues/"],
      ["POST", "/repos/acme/issues", "/repos/acme/issues"],
      ["GET", "/repos/caf%C3%A9/issues?state=open&x=%2F&y=../%2e%2e", "/repos/caf%C3%A9/issues?state=open&x=%2F&y=../%2e%2e"],
      // Decoded, checked and re-encoded one way: what was matched is what is sent, byte for byte.
      ["GET", "/repos/%61cme/issues/%7e1", "/repos/acme/issues/~1"],
      ["GET", "/repos/caf%c3%a9/issues", "/repos/caf%C3%A9/issues"],
      ["GET", "/repos/a%20b/issues/%22x%22", "/repos/a%20b/issues/%22x%22"],
      ["GET", '/repos/a"b/issues/{x}', "/repos/a%22b/issues/%7Bx%7D"],
      ["GET", `${absolute}/repos/acme/issues/7`, "/repos/acme/issues/7"],
    ] as const) {
      const before = env.upstream.received.length;
      const res = await send(conn, method, target, method === "POST" ? '{"title":"t"}' : undefined);
      expect({ target, status: res.status }).toEqual({ target, status: 200 });
      expect(env.upstream.received.length).toBe(before + 1);
      const got = env.upstream.received.at(-1)!;
      expect({ method: got.method, url: got.url }).toEqual({ method, url: forwarded });
    }
    conn.close();
  });

  test("a method or path outside the rules is 403 request_not_allowed with the allowed rules and a widening hint; the tunnel stays usable", async () => {
    const conn = await tunnel();
    const before = env.upstream.received.length;
    for (const [method, path] of [
      ["DELETE", "/repos/acme/issues/1"],
      ["POST", "/repos/acme/issues/1"],
      ["PUT", "/repos/acme/issues"],
      ["GET", "/repos/acme"],
      ["GET", "/repos/issues"],
      ["GET", "/"],
      ["OPTIONS", "/repos/acme/issues"],
    ] as const) {
      const body = expectEnvelope(await send(conn, method, path, method === "GET" || method === "OPTIONS" ? undefined : ""), 403, "request_not_allowed");
      expect(body.allowed).toEqual(RULES);
      expect(body.message).toContain(DESCRIBED);
      const hinted = body.proposal_hint.proposal.services[0];
      expect(hinted).toMatchObject({ action: "set", host: env.authority, auth: { type: "bearer", token: "API_KEY" } });
      expect(hinted.rules).toEqual([...RULES, { methods: [method], paths: [path] }]);
      expect(body.proposal_hint.endpoint).toEndWith("/v1/proposals");
    }
    expect(env.upstream.received.length).toBe(before);
    // Refusals are ordinary responses: the same tunnel carries the next allowed request.
    expect((await send(conn, "GET", "/repos/acme/issues/after-403")).status).toBe(200);
    conn.close();
  });

  // Inside the tunnel the broker reads the request line as raw bytes: no HTTP server resolves dot
  // segments or backslashes first, so every ambiguous form reaches the rules as sent and is refused.
  const absolute = () => `https://${env.authority}`;
  const AMBIGUOUS: [string, () => string][] = [
    ["dot-dot segments", () => "/repos/acme/issues/../../admin"],
    ["a trailing ..", () => "/repos/acme/issues/.."],
    ["a single dot segment", () => "/repos/acme/issues/./1"],
    ["%2e%2e", () => "/repos/acme/issues/%2e%2e/%2e%2e/admin"],
    ["%2E", () => "/repos/acme/issues/%2E/1"],
    ["half-encoded .%2e", () => "/repos/acme/issues/.%2e/x"],
    ["encoded / (%2F)", () => "/repos/acme%2Fother/issues"],
    ["encoded / (%2f)", () => "/repos/acme%2fother/issues"],
    ["encoded \\ (%5C)", () => "/repos/acme%5Cother/issues"],
    ["a raw backslash", () => "/repos/acme\\other/issues"],
    ["backslash dot segments", () => "/repos/acme/issues/..\\..\\admin"],
    ["%00", () => "/repos/acme/issues/%00"],
    ["an encoded control character (%0A)", () => "/repos/acme/issues/a%0Ab"],
    ["a ; parameter", () => "/repos/acme;x=1/issues"],
    ["a ; parameter on the last segment", () => "/repos/acme/issues;jsessionid=1"],
    ["an encoded ; (%3B)", () => "/repos/acme%3Bx/issues"],
    ["a truncated UTF-8 escape (%C3)", () => "/repos/acme/issues/%C3"],
    ["escapes that are not UTF-8 (%FF%FE)", () => "/repos/acme/issues/%FF%FE"],
    ["an overlong UTF-8 dot (%C0%AE)", () => "/repos/acme/issues/%C0%AE%C0%AE/x"],
    ["an empty inner segment (//)", () => "/repos//issues"],
    ["a leading //", () => "//repos/acme/issues"],
    ["a malformed escape (%zz)", () => "/repos/acme/issues/%zz"],
    ["a cut-off escape (%2)", () => "/repos/acme/issues/%2"],
    ["a raw non-ASCII byte", () => "/repos/caf\xe9/issues"],
    ["a # fragment", () => "/repos/acme/issues#/../../admin"],
    ["dot segments in an absolute-form target", () => `${absolute()}/repos/acme/issues/../../admin`],
    ["a backslash right after an absolute-form authority", () => `${absolute()}\\..\\admin`],
    ["a # right after an absolute-form authority", () => `${absolute()}#/repos/acme/issues`],
    ["a target without a leading /", () => "repos/acme/issues"],
    ["an asterisk-form target", () => "*"],
  ];

  test.each(AMBIGUOUS)("%s → 400 invalid_request inside the tunnel, nothing sent upstream", async (_name, target) => {
    const before = env.upstream.received.length;
    const conn = await tunnel();
    const res = await send(conn, "GET", target());
    const body = expectEnvelope(res, 400, "invalid_request");
    expect(body.message).not.toContain(env.secret);
    // An answer from the broker (envelope above), and the upstream saw nothing at all.
    await Bun.sleep(50);
    expect(env.upstream.received.length).toBe(before);
    conn.close();
  });

  test("without rules too, a target that is not a path is refused, never rewritten to / (it used to be)", async () => {
    env.broker.dns.set("localhost", ["127.0.0.1"]);
    const open = `localhost:${env.upstream.port}`;
    await env.broker.addService(open, { type: "bearer", token: "API_KEY" });
    const before = env.upstream.received.length;
    for (const [method, target] of [
      ["GET", "repos/acme"],
      ["OPTIONS", "*"],
      ["GET", `https://${open}\\..\\x`],
    ] as const) {
      const conn = await tunnel(open);
      expectEnvelope(await send(conn, method, target), 400, "invalid_request");
      conn.close();
    }
    expect(env.upstream.received.length).toBe(before);
    const conn = await tunnel(open);
    expect((await send(conn, "GET", "/any/../thing;x")).status).toBe(200); // no rules: sent as it came
    expect(env.upstream.received.at(-1)!.url).toBe("/any/../thing;x");
    expect((await send(conn, "GET", `https://${open}?q=1`)).status).toBe(200); // an empty absolute-form path is /
    expect(env.upstream.received.at(-1)!.url).toBe("/?q=1");
    conn.close();
  });

  test("an absolute-form https:// request straight to the listener (no CONNECT) gets the same checks", async () => {
    const before = env.upstream.received.length;
    const ask = async (path: string) => {
      const conn = new Conn(await dialProxy(env.proxyPort));
      conn.write(
        `GET https://${env.authority}${path} HTTP/1.1\r\nHost: ${env.authority}\r\nProxy-Authorization: ${env.proxyAuth}\r\nConnection: close\r\n\r\n`,
      );
      const res = await conn.readResponse();
      seen.push(res.head, res.body.toString("latin1"));
      conn.close();
      return res;
    };
    expectEnvelope(await ask("/repos/acme/issues/%2e%2e/%2e%2e/admin"), 400, "invalid_request");
    expectEnvelope(await ask("/repos/acme/issues/..%5C..%5Cadmin"), 400, "invalid_request");
    expectEnvelope(await ask("/repos/acme"), 403, "request_not_allowed");
    expect(env.upstream.received.length).toBe(before);
    expect((await ask("/repos/acme/issues/%61bs")).status).toBe(200);
    expect(env.upstream.received.at(-1)!.url).toBe("/repos/acme/issues/abs");
  });
});

describe("WebSocket upgrades inside the tunnel", () => {
  const upgrade = (path: string) =>
    `GET ${path} HTTP/1.1\r\nHost: ${wsAuthority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`;

  test("an upgrade to a path outside the rules gets 403 request_not_allowed and opens no upstream connection", async () => {
    const connections = wsConnections.length;
    const heads = wsHeads.length;
    for (const path of ["/socket/other", "/socket/allowed/more", "/"]) {
      const conn = await tunnel(wsAuthority);
      conn.write(upgrade(path));
      const res = await conn.readResponse();
      seen.push(res.head, res.body.toString("latin1"));
      const body = expectEnvelope(res, 403, "request_not_allowed");
      expect(body.allowed).toEqual(WS_RULES);
      expect(body.proposal_hint.proposal.services[0].rules.at(-1)).toEqual({ methods: ["GET"], paths: [path] });
      expect(await conn.closesWithin()).toBe(true);
    }
    // Ambiguous upgrade paths are 400, also before any connection.
    for (const path of ["/socket/allowed/../other", "/socket%2Fallowed", "/socket/allowed;x"]) {
      const conn = await tunnel(wsAuthority);
      conn.write(upgrade(path));
      expectEnvelope(await conn.readResponse(), 400, "invalid_request");
      conn.close();
    }
    await Bun.sleep(100);
    expect({ connections: wsConnections.length, heads: wsHeads.length }).toEqual({ connections, heads });
  });

  test("an upgrade inside the rules switches protocols; the upstream gets the matched path", async () => {
    const conn = await tunnel(wsAuthority);
    conn.write(upgrade("/socket/%61llowed"));
    const res = await conn.readResponse({ noBody: true });
    expect(res.status).toBe(101);
    expect(await conn.until(() => conn.buf.includes("hello"))).toBe(true);
    expect(wsHeads.at(-1)!.split("\r\n")[0]).toBe("GET /socket/allowed HTTP/1.1");
    conn.close();
  });

  test("a real WebSocket client: the allowed path opens, the refused one fails without reaching the upstream", async () => {
    const proxy = `http://${env.broker.sessionToken}:${env.broker.vault}@${env.broker.proxyAddress}`;
    const open = (path: string) =>
      new Promise<string>((resolve, reject) => {
        // Bun's WebSocket accepts proxy and tls options (not in the DOM typings).
        const sock = new WebSocket(`wss://${wsAuthority}${path}`, { proxy, tls: { ca: env.caPem } } as unknown as string[]);
        sock.onmessage = (e) => (resolve(String(e.data)), sock.close());
        sock.onerror = () => reject(new Error("websocket error"));
        setTimeout(() => reject(new Error("websocket timed out")), 10_000);
      });
    expect(await open("/socket/allowed")).toBe("hello");
    const heads = wsHeads.length;
    await expect(open("/socket/denied")).rejects.toThrow();
    expect(wsHeads.length).toBe(heads);
  });

  test("the refused upgrade is audited as request_not_allowed with its service", async () => {
    const records = await auditRecords((r) => r.path === "/socket/other");
    expect(records.at(-1)).toMatchObject({ method: "GET", status: 403, error: "request_not_allowed", service: wsAuthority, ingress: "transparent" });
  });
});

describe("curl through HTTPS_PROXY", () => {
  async function curlAs(path: string, extra: string[] = []) {
    const proc = Bun.spawn(["curl", "-sS", "-i", ...extra, "--proxy", env.proxyUrl, "--cacert", env.caFile, `https://${env.authority}${path}`], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: env.dir },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    seen.push(stdout, stderr);
    // After "HTTP/1.1 200 Connection Established" and its blank line comes the origin's (here the broker's) answer.
    const inner = stdout.slice(stdout.indexOf("\r\n\r\n") + 4);
    const [head = "", body = ""] = inner.split("\r\n\r\n");
    // The inner status line says which protocol the tunnel spoke: HTTP/1.1 or HTTP/2 (curl offers both).
    const version = extra.includes("--http1.1") ? "1\\.1" : "2";
    return { code, stderr, status: Number(new RegExp(`^HTTP/${version} (\\d{3})`).exec(head)?.[1]), head, body };
  }

  test.each(["--http1.1", "--http2"])("%s: a refused path gets 403 with the envelope; an allowed one 200; a dot path sent as-is 400", async (protocol) => {
    if (!requireBinary("curl", "curl")) return;
    const curl = (path: string, extra: string[] = []) => curlAs(path, [protocol, ...extra]);
    const before = env.upstream.received.length;
    const refused = await curl("/repos/acme/pulls");
    expect({ code: refused.code, stderr: refused.stderr, status: refused.status }).toEqual({ code: 0, stderr: "", status: 403 });
    expect(refused.head.toLowerCase()).toContain("x-broker-error: request_not_allowed");
    const body = JSON.parse(refused.body);
    expect(body).toMatchObject({ error: "request_not_allowed", allowed: RULES });
    expect(body.proposal_hint.proposal.services[0].rules.at(-1)).toEqual({ methods: ["GET"], paths: ["/repos/acme/pulls"] });
    // curl resolves dot segments itself unless told --path-as-is; then the broker sees them and refuses.
    const dotted = await curl("/repos/acme/issues/../../admin", ["--path-as-is"]);
    expect(dotted.status).toBe(400);
    expect(JSON.parse(dotted.body).error).toBe("invalid_request");
    expect(env.upstream.received.length).toBe(before);
    const allowed = await curl("/repos/acme/issues/curl?x=1");
    expect(allowed.status).toBe(200);
    expect(env.upstream.received.at(-1)!.url).toBe("/repos/acme/issues/curl?x=1");
  });

  test("the audit records say request_not_allowed and name the service", async () => {
    const refused = await auditRecords((r) => r.path === "/repos/acme/pulls");
    expect(refused.at(-1)).toMatchObject({ method: "GET", status: 403, error: "request_not_allowed", service: env.authority, ingress: "transparent" });
    const ambiguous = await auditRecords((r) => r.path === "/repos/acme/issues/../../admin" && r.status === 400);
    expect(ambiguous.at(-1)).toMatchObject({ error: "invalid_request", service: env.authority });
  });
});

test("nothing an agent read, nor any log or audit record, holds the credential", async () => {
  await expectNoLeak(env.broker, env.secret, seen);
  expect(basicProxyAuth(env.broker.sessionToken, env.broker.vault)).toBe(env.proxyAuth);
});
