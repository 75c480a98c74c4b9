// More attacks on human approval of single requests ("approve": "each"), after those in
// request-approval-attacks.test.ts (not repeated here). A hostile agent holding only a scoped session
// tries to (a) get a held request to the upstream without a human approving that exact request,
// (b) get more than one upstream request out of one approval, (c) make the human approve something
// other than what the upstream acts on, or (d) read the stored credential in a description.
//
// Each test asserts the safe behaviour. The comments marked `Attack:` describe attacks that got
// through when this suite was written (each was a `test.failing` until fixed), saying what happened
// and why it mattered, so that the reason for each lenient reading in the broker stays on record.
//
// Some upstream behaviours are played for real: an Express 5 app (express.json() with body-parser's
// charset decoding, and method-override's documented `req.body._method` getter) runs as one of the
// upstreams. Others (Rack, PHP, ASP.NET) are described in the comments and the test asserts on what
// the broker forwards.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
// @ts-expect-error Express ships without types here (it comes with @modelcontextprotocol/sdk); typed below.
import expressUntyped from "express";
import type { IncomingMessage, ServerResponse } from "node:http";
import * as http2 from "node:http2";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { TestUpstream } from "../helpers/upstream.ts";
import { dumpResponse, expectEnvelope, expectNoLeak, rawRequest, startRuledUpstream, type Broker } from "./proxy-fixture.ts";
import { ATTACK_RULES, uid } from "./held-attack-rules.ts";
import { openTunnel, startTunnelEnv, type Conn, type RawResponse, type TunnelEnv } from "./tunnel-fixture.ts";
import { h2Exchange, h2SessionThrough } from "./tunnel-h2-fixture.ts";

const SECRET = `sk-attack2-${crypto.randomUUID()}`;
const RULES = ATTACK_RULES;
const outputs: string[] = [];
const FORM = { "content-type": "application/x-www-form-urlencoded" };

/** An HTTPS server on 127.0.0.1 with the given certificate, answering with `app`. */
async function listenTls(
  pki: { certPem: string; keyPem: string },
  app: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; port: number }> {
  const server = createServer({ cert: pki.certPem, key: pki.keyPem }, app);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as AddressInfo).port };
}
const closeServer = (s: Server | undefined) => new Promise<void>((resolve) => (s ? (s.closeAllConnections(), s.close(() => resolve())) : resolve()));

/** The little of Express 5 these tests use. */
type ExpressReq = IncomingMessage & { method: string; body?: unknown; params: Record<string, string> };
type ExpressRes = ServerResponse & { json(value: unknown): void };
interface ExpressApp {
  (req: IncomingMessage, res: ServerResponse): void;
  use(handler: unknown): void;
  post(path: string, handler: (req: ExpressReq, res: ExpressRes) => void): void;
  delete(path: string, handler: (req: ExpressReq, res: ExpressRes) => void): void;
}
const express = expressUntyped as { (): ExpressApp; json(): unknown };

/** `text` in UTF-7 (RFC 2152): "+", base64 of its UTF-16BE code units without padding, "-". */
const utf7 = (text: string) => "+" + Buffer.from(text, "utf16le").swap16().toString("base64").replace(/=+$/, "") + "-";

// ---------------------------------------------------------------------------------------------------
// The explicit proxy (/proxy)
// ---------------------------------------------------------------------------------------------------

describe("attacks through /proxy (2)", () => {
  let upstream: TestUpstream;
  let broker: Broker;
  let hp: string;
  // An Express 5 upstream: what it did (refunds with their parsed amount, deleted customers).
  let expressServer: Server;
  let ep: string;
  const expressDid: { refund?: unknown; deleted?: string; updated?: string }[] = [];
  // An upstream whose service puts the credential in the query (?key=).
  let queryServer: Server;
  let qp: string;
  const queryUrls: string[] = [];

  beforeAll(async () => {
    ({ upstream, broker, hp } = await startRuledUpstream(SECRET, RULES));

    const app = express();
    app.use(express.json());
    // method-override's documented getter for a method in the body (README, "override using a custom logic").
    app.use((req: ExpressReq, _res: ServerResponse, next: () => void) => {
      const b = req.body as Record<string, unknown> | undefined;
      if (b && typeof b === "object" && "_method" in b) {
        req.method = String(b._method).toUpperCase();
        delete b._method;
      }
      next();
    });
    app.post("/v1/refunds", (req, res) => (expressDid.push({ refund: req.body }), res.json({ ok: true })));
    app.delete("/v1/customers/:id", (req, res) => (expressDid.push({ deleted: req.params.id }), res.json({ ok: true })));
    app.post("/v1/customers/:id", (req, res) => (expressDid.push({ updated: req.params.id }), res.json({ ok: true })));
    const e = await listenTls(upstream.pki, app);
    expressServer = e.server;
    ep = `127.0.0.1:${e.port}`;
    await broker.addService(ep, { type: "bearer", token: "STRIPE_KEY" }, { rules: RULES });
    // The quirks the Express tests rely on, checked against the app directly (not through the broker).
    const direct = (path: string, body: Uint8Array | string, type: string) =>
      fetch(`https://${ep}${path}`, { method: "POST", body, headers: { "content-type": type }, tls: { ca: upstream.pki.caPem } } as RequestInit);
    await direct("/v1/refunds", `{"amount":1,"memo":"${utf7('","amount":7,"x":"')}"}`, "application/json; charset=utf-7");
    await direct("/v1/customers/cus_sanity", Buffer.from(`{"_method":"DELETE"}`, "utf16le"), "application/json; charset=utf-16le");
    if (JSON.stringify(expressDid) !== JSON.stringify([{ refund: { amount: 7, memo: "", x: "" } }, { deleted: "cus_sanity" }]))
      throw new Error(`Express quirks not as expected: ${JSON.stringify(expressDid)}`);
    expressDid.length = 0;

    const q = await listenTls(upstream.pki, (req, res) => {
      queryUrls.push(req.url ?? "");
      res.setHeader("content-type", "application/json");
      res.end(`{"ok":true}`);
    });
    queryServer = q.server;
    qp = `127.0.0.1:${q.port}`;
    await broker.addService(qp, { type: "query", param: "key", token: "STRIPE_KEY" }, { rules: RULES });
  });
  afterAll(async () => {
    await expectNoLeak(broker, SECRET, outputs);
    await broker?.stop();
    await upstream?.close();
    await closeServer(expressServer);
    await closeServer(queryServer);
  });

  const approvals = (vault = broker.vault) => `/v1/vaults/${vault}/request-approvals`;
  const view = async (id: string) => {
    const v = (await broker.api("GET", `${approvals()}/${id}`, undefined, broker.userToken)).body;
    outputs.push(JSON.stringify(v));
    return v;
  };
  const decide = (id: string, decision: "approve" | "deny") => broker.api("POST", `${approvals()}/${id}/${decision}`, undefined, broker.userToken);
  const seenWith = (needle: string) => upstream.received.filter((r) => r.url.includes(needle) || r.body.toString().includes(needle));

  /** `untyped`: no Content-Type at all (pass the body as bytes, or fetch adds text/plain). */
  async function send(
    path: string,
    init: { method?: string; body?: string | Uint8Array; headers?: Record<string, string>; to?: string; signal?: AbortSignal; untyped?: boolean } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = { ...(init.untyped ? {} : { "content-type": "application/json" }), ...init.headers };
    const res = await broker.proxy(init.to ?? hp, path, { method: init.method ?? "POST", body: init.body as BodyInit, headers, signal: init.signal });
    outputs.push(await dumpResponse(res.clone()));
    return res;
  }
  async function heldId(res: Response): Promise<string> {
    return (await expectEnvelope(res, 428, "approval_required")).approval_id;
  }
  async function page(id: string): Promise<string> {
    const html = await (await fetch(`${broker.apiUrl}/approve/requests/${id}`, { headers: { cookie: `broker_session=${broker.userToken}` } })).text();
    outputs.push(html);
    return html;
  }

  // ---- (a) a held method claimed in ways the broker does not read ----------------------------------

  // Attack: PHP turns dots (and inner spaces) in parameter names into underscores: `.method` arrives
  // in $_GET/$_POST as `_method`, and Symfony/Laravel (which enable method override) read `_method`
  // from the body or the query. `POST /v1/customers/cus_x?.method=DELETE`, or a form body
  // `.method=DELETE`, deletes the customer there. claimedMethods (egress/method-override.ts) parses a
  // query only when it holds `_` or `%5F`, and it and claimedInBody look `_method` up literally, so
  // the POST passes on the broad POST rule and the DELETE a human must approve runs unapproved.
  test("a _method name PHP mangles (.method) claims a held DELETE", async () => {
    const id = `cus_php_${uid()}`;
    const viaQuery = await send(`/v1/customers/${id}?.method=DELETE`, { body: "{}" });
    const viaForm = await send(`/v1/customers/${id}`, { body: ".method=DELETE", headers: FORM });
    expect([viaQuery.status, viaForm.status]).toEqual([428, 428]);
    expect(seenWith(id)).toHaveLength(0);
  });

  // Attack: the override header spelt with underscores. CGI-style stacks map header names to
  // HTTP_X_HTTP_METHOD_OVERRIDE by upper-casing and turning `-` into `_`, so `X_HTTP_Method_Override`
  // and `X-HTTP-Method-Override` arrive as the same variable (PHP under Caddy/php-fpm, Puma before
  // 6.4.3, WSGI servers that do not drop such names), where Symfony and Rack::MethodOverride read it.
  // OVERRIDE_HEADERS (egress/method-override.ts) compares the name with hyphens only, so this POST
  // passes on the broad rule and is forwarded as is.
  test("an override header spelt with underscores (X_HTTP_Method_Override) claims a held DELETE", async () => {
    const id = `cus_us_${uid()}`;
    const res = await send(`/v1/customers/${id}`, { body: "{}", headers: { X_HTTP_Method_Override: "DELETE" } });
    expect(res.status).toBe(428);
    expect(seenWith(id)).toHaveLength(0);
  });

  // Attack: claimedInBody compares the media type exactly ("application/x-www-form-urlencoded",
  // "application/json" or "+json") and reads nothing without one. Rack (Rails' default
  // Rack::MethodOverride takes `_method` from req.POST) treats a POST with no Content-Type as a form,
  // and splits the type on `;` OR `,` (`application/x-www-form-urlencoded, text/plain` is a form);
  // PHP's SAPI cuts the type at `;`, `,` or a space; Laravel's isJson() takes any type containing
  // "/json" (`text/json`) and reads `_method` from the JSON. The broker reads none of these bodies for
  // `_method`: the POST is forwarded unheld and Rails/Laravel run the DELETE.
  test("bodies Rack, PHP and Laravel read as a form or JSON (no type, `form, text/plain`, text/json) are not read for _method", async () => {
    const id = `cus_ct_${uid()}`;
    const untyped = await send(`/v1/customers/${id}a`, { body: new TextEncoder().encode("_method=DELETE"), untyped: true });
    const rackForm = await send(`/v1/customers/${id}b`, {
      body: "_method=DELETE",
      headers: { "content-type": "application/x-www-form-urlencoded, text/plain" },
    });
    const laravelJson = await send(`/v1/customers/${id}c`, { body: `{"_method":"DELETE"}`, headers: { "content-type": "text/json" } });
    expect([untyped.status, rackForm.status, laravelJson.status]).toEqual([428, 428, 428]);
    expect(seenWith(id)).toHaveLength(0);
  });

  // Attack (played on the Express upstream): express.json() decodes the body in the charset its
  // Content-Type names (body-parser accepts any "utf-*", via iconv-lite). A UTF-16LE body
  // `{"_method":"DELETE"}` is read by the method-override getter and the customer is deleted.
  // claimedInBody decodes every body as UTF-8, JSON.parse fails, and a failed parse claims nothing:
  // the POST passes on the broad rule. Nobody approved the DELETE.
  test("a JSON body in UTF-16 (charset=utf-16le) claims a held DELETE on Express", async () => {
    const id = `cus_u16_${uid()}`;
    const res = await send(`/v1/customers/${id}`, {
      to: ep,
      body: Buffer.from(`{"_method":"DELETE"}`, "utf16le"),
      headers: { "content-type": "application/json; charset=utf-16le" },
    });
    expect(res.status).toBe(428);
    expect(expressDid.filter((d) => d.deleted === id)).toHaveLength(0);
  });

  // Attack: claimedInBody fails open on multipart. Bun's formData() throws on a body without the
  // closing `--boundary--` and finds no part in one with bare LF line ends; either way the body
  // claims nothing and the POST is forwarded. PHP's multipart parser (Symfony/Laravel's $_POST) is
  // lenient: it takes the `_method` part from both, and the customer is deleted unapproved. A body
  // the broker cannot parse should be held, not passed.
  test("multipart bodies Bun cannot parse (no final boundary, bare LF) claim nothing and pass", async () => {
    const id = `cus_mp_${uid()}`;
    const type = { "content-type": "multipart/form-data; boundary=XyZ" };
    const noEnd = await send(`/v1/customers/${id}a`, {
      body: `--XyZ\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--XyZ\r\n`,
      headers: type,
    });
    const bareLf = await send(`/v1/customers/${id}b`, { body: `--XyZ\nContent-Disposition: form-data; name="_method"\n\nDELETE\n--XyZ--\n`, headers: type });
    expect([noEnd.status, bareLf.status]).toEqual([428, 428]);
    expect(seenWith(id)).toHaveLength(0);
  });

  // Attack: the loose matching in needsApproval (policy/path-rules.ts looseShapes) strips trailing
  // spaces, then dots, then one format suffix, then spaces, in one pass. It holds `/v1/refunds.%20`
  // and `/v1/refunds%20.` (the IIS/Win32 rule it models: trailing dots and spaces are dropped from a
  // name), but not `/v1/refunds.%20.` nor `/v1/refunds.json%20.`, which the same rule reduces to
  // `refunds` too. The broad rule allows them and the refund is sent without a human.
  test("trailing dots and spaces mixed (/v1/refunds.%20.) skip the human", async () => {
    const n = uid();
    const statuses: number[] = [];
    for (const path of ["/v1/refunds.%20", "/v1/refunds.%20.", "/v1/refunds.json%20."])
      statuses.push((await send(path, { body: `{"charge":"ch_dots","n":"${n}"}` })).status);
    expect(statuses).toEqual([428, 428, 428]);
    expect(seenWith(n)).toHaveLength(0);
  });

  // ---- (c) what the person reads is not what the upstream acts on --------------------------------

  // Attack (played on the Express upstream): `Content-Type: application/json; charset=utf-7`. The body
  // is plain ASCII, valid UTF-8 and valid JSON, so the view and page show it laid out: a refund of
  // `"amount": 100` with a memo of base64-looking text. Express decodes it as UTF-7 (body-parser
  // accepts any "utf-*" charset), where `+ACIALAAi...-` is `","amount":1000000,"x":"`: the upstream
  // refunds 1000000. previewOf (egress/held-request.ts) ignores the declared charset. It should show a
  // body whose charset is not UTF-8 (or US-ASCII) as not text, or decoded as the upstream will read it.
  test("a charset=utf-7 JSON body is shown as one refund and read by the upstream as another", async () => {
    const body = `{"charge":"ch_utf7_${uid()}","amount":100,"memo":"thanks ${utf7('","amount":1000000,"x":"')}"}`;
    const headers = { "content-type": "application/json; charset=utf-7" };
    const id = await heldId(await send("/v1/refunds", { to: ep, body, headers }));
    const v = await view(id);
    expect((await decide(id, "approve")).status).toBe(200);
    expect((await send("/v1/refunds", { to: ep, body, headers })).status).toBe(200);
    const refunded = expressDid
      .map((d) => d.refund as { amount?: number } | undefined)
      .filter((r) => r?.amount !== undefined)
      .at(-1);
    // What the person was shown must contain the amount the upstream acted on (or not be shown as text).
    expect(v.body === null || v.body.includes(String(refunded!.amount))).toBe(true);
  });

  // Attack: the duplicate-key warning compares keys exactly. ASP.NET Core's JSON input (System.Text.Json
  // with JsonSerializerDefaults.Web) and Go's encoding/json match member names case-insensitively and
  // keep the last: `{"amount":1,...,"Amount":100000}` refunds 100000 there, while the page shows
  // "amount": 1 with no warning (json-layout.ts keys the Set on the exact string). The same
  // reasoning that warns on `"amount"` twice applies to a case variant.
  test("keys that differ only in case are not warned about as duplicates", async () => {
    const body = `{"charge":"ch_casekey","amount":1,"currency":"usd","reason":"duplicate charge","metadata":{"n":"${uid()}"},"Amount":100000}`;
    const id = await heldId(await send("/v1/refunds", { body }));
    expect(await page(id)).toContain('id="duplicate-keys"');
  });

  // Attack: layoutJson (workflows/json-layout.ts) indents by depth with no bound, so its output grows with
  // the square of the nesting: a 12 KB body of 6000 nested arrays renders as a ~72 MB page; the
  // 64 KiB a preview may hold (32000 levels) renders as ~2 GB (2.1 GB RSS measured for one render,
  // seconds of CPU), per view of the page or of the console's Requests page. The person cannot
  // review it, and a few open tabs can take the broker down. The layout should cap its depth (or
  // fall back to the raw text) and stay within a small multiple of the body.
  test("deeply nested JSON does not blow the approval page up quadratically", async () => {
    const depth = 6000;
    const body = `{"charge":"ch_deep","n":"${uid()}","x":${"[".repeat(depth)}${"]".repeat(depth)}}`;
    const id = await heldId(await send("/v1/refunds", { body }));
    const res = await fetch(`${broker.apiUrl}/approve/requests/${id}`, { headers: { cookie: `broker_session=${broker.userToken}` } });
    const html = await res.text();
    expect(res.status).toBe(200);
    expect(html.length).toBeLessThan(20 * body.length + 100_000);
  });

  // Attack: an agent-supplied Cookie is forwarded and bound, but the view, page and CLI show it as
  // "[value not shown]" (HIDDEN in egress/held-request.ts). It is the agent's own header, not the
  // broker's credential, and it can decide what the request does (a session or account cookie picks
  // whose money is refunded). The person approves a request part of which they cannot read. (The same
  // holds for an agent's own Authorization inside the tunnel when the service injects another header.)
  test("a cookie the agent adds is sent but hidden from the person approving", async () => {
    const body = `{"charge":"ch_cookie","n":"${uid()}"}`;
    const headers = { cookie: "account=acct_B" };
    const id = await heldId(await send("/v1/refunds", { body, headers }));
    const shown = JSON.stringify((await view(id)).headers);
    expect((await decide(id, "approve")).status).toBe(200);
    expect((await send("/v1/refunds", { body, headers })).status).toBe(200);
    const sentCookie = seenWith(body).some((r) => r.rawHeaders.some(([k, v]) => k.toLowerCase() === "cookie" && v.includes("acct_B")));
    expect(!sentCookie || shown.includes("acct_B")).toBe(true);
  });

  // ---- (b) one approval, several requests; races --------------------------------------------------

  // Attack: two identical requests wait on one pending approval (Prefer: wait) when the person
  // approves: both see "approved" on their next poll. The store spends an approval with a guarded
  // UPDATE, so exactly one goes; the other is told to ask again.
  test("two requests waiting on one approval (Prefer: wait): exactly one is sent", async () => {
    const body = `{"charge":"ch_waiters","n":"${uid()}"}`;
    const headers = { prefer: "wait=20" };
    const first = send("/v1/refunds", { body, headers });
    await Bun.sleep(300);
    const second = send("/v1/refunds", { body, headers });
    await Bun.sleep(300);
    const list = (await broker.api("GET", approvals(), undefined, broker.userToken)).body.request_approvals as { id: string; body: string; state: string }[];
    const held = list.filter((a) => a.body === body);
    expect(held).toHaveLength(1);
    expect((await decide(held[0]!.id, "approve")).status).toBe(200);
    const statuses = (await Promise.all([first, second])).map((r) => r.status).sort();
    expect(statuses).toEqual([200, 428]);
    expect(seenWith(body)).toHaveLength(1);
  });

  // Attack: the person's Allow and a Deny (a second tab, a colleague) race. One decision wins, the
  // other gets 409, and the agent's retry follows the winner: sent once if approved, 403 if denied.
  test("approve and deny racing: one decision wins and the retry follows it", async () => {
    for (let i = 0; i < 4; i++) {
      const body = `{"charge":"ch_race_decide","i":${i},"n":"${uid()}"}`;
      const id = await heldId(await send("/v1/refunds", { body }));
      const [a, d] = await Promise.all([decide(id, "approve"), decide(id, "deny")]);
      expect([a.status, d.status].sort()).toEqual([200, 409]);
      const approved = a.status === 200;
      const retry = await send("/v1/refunds", { body });
      expect(retry.status).toBe(approved ? 200 : 403);
      expect(seenWith(body)).toHaveLength(approved ? 1 : 0);
    }
  });

  // Attack: the agent asks with Prefer: wait and goes away; the person approves meanwhile. The
  // abandoned wait must not spend the approval (a request nobody reads, the page saying "sent"); the
  // agent's retry uses it, once.
  test("a waiting request whose agent disconnected does not spend the approval", async () => {
    const body = `{"charge":"ch_gone","n":"${uid()}"}`;
    const ac = new AbortController();
    const waiting = send("/v1/refunds", { body, headers: { prefer: "wait=20" }, signal: ac.signal }).catch(() => undefined);
    await Bun.sleep(400);
    ac.abort();
    await waiting;
    const list = (await broker.api("GET", approvals(), undefined, broker.userToken)).body.request_approvals as { id: string; body: string }[];
    const id = list.find((a) => a.body === body)!.id;
    expect((await decide(id, "approve")).status).toBe(200);
    await Bun.sleep(1200); // the abandoned wait would have polled twice by now
    expect((await view(id)).state).toBe("approved");
    expect(seenWith(body)).toHaveLength(0);
    expect((await send("/v1/refunds", { body })).status).toBe(200);
    expect((await send("/v1/refunds", { body })).status).toBe(428);
    expect(seenWith(body)).toHaveLength(1);
  });

  // ---- (d) the credential in a description --------------------------------------------------------

  // Attack: a held request to a service whose credential goes in the query (?key=). The agent names
  // the parameter itself, hoping the description is taken after the credential is placed. The view,
  // the page and the agent's poll show the agent's own value only; the upstream gets the credential
  // (the agent's value replaced), once.
  test("a query-placed credential never shows in the held request's view, page or poll", async () => {
    const body = `{"charge":"ch_query","n":"${uid()}"}`;
    const id = await heldId(await send("/v1/refunds?key=guess&x=1", { to: qp, body }));
    const v = await view(id);
    expect(v.url).toBe(`https://${qp}/v1/refunds?key=guess&x=1`);
    const polled = await broker.api("GET", `${approvals()}/${id}`, undefined, broker.sessionToken);
    outputs.push(JSON.stringify(polled.body), await page(id));
    expect((await decide(id, "approve")).status).toBe(200);
    expect((await send("/v1/refunds?key=guess&x=1", { to: qp, body })).status).toBe(200);
    expect(queryUrls.filter((u) => u.startsWith("/v1/refunds"))).toEqual([`/v1/refunds?x=1&key=${SECRET}`]);
    expect(JSON.stringify(await view(id))).not.toContain(SECRET);
  });
});

// ---------------------------------------------------------------------------------------------------
// Inside the tunnel (CONNECT + TLS with the broker CA): HTTP/1.1 and HTTP/2
// ---------------------------------------------------------------------------------------------------

describe("attacks inside the tunnel (2)", () => {
  let env: TunnelEnv;
  /** Trailer fields each upstream request carried (after its body), raw. */
  const trailersSeen: { body: string; trailers: string[] }[] = [];

  beforeAll(async () => {
    env = await startTunnelEnv({
      handler: (req, res, body) => {
        trailersSeen.push({ body: body.toString(), trailers: req.rawTrailers });
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ done: req.url, bytes: body.length }));
      },
    });
    const set = await env.broker.api(
      "PATCH",
      `/v1/vaults/${env.broker.vault}/services/${encodeURIComponent(env.authority)}`,
      { rules: RULES },
      env.broker.userToken,
    );
    if (set.status !== 200) throw new Error(`PATCH rules: ${set.status} ${JSON.stringify(set.body)}`);
  });
  afterAll(async () => {
    await expectNoLeak(env.broker, env.secret, outputs);
    await env?.stop();
  });

  const approvals = () => `/v1/vaults/${env.broker.vault}/request-approvals`;
  const decide = (id: string, decision: "approve" | "deny") => env.broker.api("POST", `${approvals()}/${id}/${decision}`, undefined, env.broker.userToken);
  const stateOf = async (id: string) => (await env.broker.api("GET", `${approvals()}/${id}`, undefined, env.broker.userToken)).body.state;
  const seenWith = (needle: string) => env.upstream.received.filter((r) => r.body.toString().includes(needle));

  async function tunnel(): Promise<Conn> {
    return (await openTunnel(env.proxyPort, env.authority, env.proxyAuth, { ca: env.caPem })).conn;
  }
  async function exchange(conn: Conn, bytes: string): Promise<RawResponse> {
    conn.write(Buffer.from(bytes, "latin1"));
    for (;;) {
      const res = await conn.readResponse();
      outputs.push(res.head, res.body.toString("latin1"));
      if (res.status >= 200) return res;
    }
  }
  const idOf = (res: RawResponse) => {
    expect(res.status).toBe(428);
    return JSON.parse(res.body.toString()).approval_id as string;
  };
  const head = (lines: string[]) =>
    `POST /v1/refunds HTTP/1.1\r\nHost: ${env.authority}\r\nContent-Type: application/json\r\n${lines.map((l) => `${l}\r\n`).join("")}\r\n`;
  const chunked = (b: string, trailer = "") => `${b.length.toString(16)}\r\n${b}\r\n0\r\n${trailer}\r\n`;

  // Attack: chunked trailer fields. The person approves a chunked refund without Stripe-Account; the
  // replay carries `Stripe-Account: acct_B` as a trailer after the last chunk (trailers are not in the
  // fingerprint). The broker drops request trailers, so the upstream never reads the account.
  test("HTTP/1.1: a trailer field on the approved chunked request never reaches the upstream", async () => {
    const body = `{"charge":"ch_trailer","n":"${uid()}"}`;
    const conn = await tunnel();
    try {
      const id = idOf(await exchange(conn, head(["Transfer-Encoding: chunked", "Trailer: Stripe-Account"]) + chunked(body)));
      expect((await decide(id, "approve")).status).toBe(200);
      const replay = await exchange(conn, head(["Transfer-Encoding: chunked", "Trailer: Stripe-Account"]) + chunked(body, "Stripe-Account: acct_B\r\n"));
      expect([200, 428]).toContain(replay.status);
    } finally {
      conn.close();
    }
    const sent = trailersSeen.filter((t) => t.body === body);
    expect(sent.length).toBeLessThanOrEqual(1);
    expect(sent.flatMap((t) => t.trailers).join(",")).not.toContain("acct_B");
  });

  // Attack: framing the broker and an upstream might read differently, on an approved request: a
  // folded (obs-fold) header continuing Stripe-Account, two different Content-Lengths, Content-Length
  // with chunked. Each is refused before the gate; the approval stays unspent and nothing is sent;
  // the clean request then goes once.
  test("HTTP/1.1: obs-fold, conflicting Content-Length and CL+TE on an approved request are refused unsent", async () => {
    const body = `{"charge":"ch_framing","n":"${uid()}"}`;
    const len = `Content-Length: ${body.length}`;
    let conn = await tunnel();
    const id = idOf(await exchange(conn, head(["Stripe-Account: acct_A", len]) + body));
    conn.close();
    expect((await decide(id, "approve")).status).toBe(200);
    for (const lines of [
      ["Stripe-Account: acct_A", " acct_B", len],
      ["Stripe-Account: acct_A", len, `Content-Length: ${body.length + 1}`],
      ["Stripe-Account: acct_A", len, "Transfer-Encoding: chunked"],
    ]) {
      conn = await tunnel();
      try {
        const r = await exchange(conn, head(lines) + body + " ").catch(() => ({ status: 0 }) as RawResponse);
        expect({ lines, status: [0, 400].includes(r.status) }).toEqual({ lines, status: true });
      } finally {
        conn.close();
      }
    }
    expect(seenWith(body)).toHaveLength(0);
    expect(await stateOf(id)).toBe("approved");
    conn = await tunnel();
    try {
      expect((await exchange(conn, head(["Stripe-Account: acct_A", len]) + body)).status).toBe(200);
    } finally {
      conn.close();
    }
    expect(seenWith(body)).toHaveLength(1);
  });

  const h2Session = () => h2SessionThrough(env, env.authority);
  const h2Send = (session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: string, trailers?: http2.OutgoingHttpHeaders) =>
    h2Exchange(session, headers, body, { trailers, record: outputs });

  // Attack: HTTP/2 request trailers (a HEADERS frame after the body) on the approved request, naming
  // Stripe-Account and an override method. They are neither bound nor shown; the broker must not pass
  // them on. The upstream sees the approved request once, without them.
  test("HTTP/2: request trailers on the approved request never reach the upstream", async () => {
    const session = await h2Session();
    const body = `{"charge":"ch_h2trailer","n":"${uid()}"}`;
    const h = { ":method": "POST", ":path": "/v1/refunds", "content-type": "application/json" };
    try {
      const first = await h2Send(session, h, body);
      expect(first.status).toBe(428);
      expect((await decide(JSON.parse(first.body).approval_id, "approve")).status).toBe(200);
      const replay = await h2Send(session, h, body, { "stripe-account": "acct_B", "x-http-method-override": "DELETE" });
      expect([200, 428]).toContain(replay.status);
    } finally {
      session.destroy();
    }
    const sent = trailersSeen.filter((t) => t.body === body);
    expect(sent.length).toBeLessThanOrEqual(1);
    expect(sent.flatMap((t) => t.trailers).join(",")).not.toMatch(/acct_B|DELETE/);
    expect(seenWith(body).flatMap((r) => r.rawHeaders.map(([, v]) => v))).not.toContain("acct_B");
  });
});
