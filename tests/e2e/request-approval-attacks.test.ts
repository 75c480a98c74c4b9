// Attacks on human approval of single requests ("approve": "each"), played by a hostile agent that holds
// only a scoped session: getting a held request to the upstream without a human approving that exact
// request, getting more than one request out of one approval, making a human approve something other
// than what is sent, or deciding its own request. Attacks the broker resists are ordinary tests
// (the upstream received nothing, or exactly once). Each comment names the attack and, where it is
// not plain, what stops it.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as http2 from "node:http2";
import { gzipSync } from "node:zlib";
import type { Received, TestUpstream } from "../helpers/upstream.ts";
import { callApi, dumpResponse, expectEnvelope, expectNoLeak, rawRequest, startRuledUpstream, type Broker } from "./proxy-fixture.ts";
import { ATTACK_RULES, uid } from "./held-attack-rules.ts";
import { openTunnel, startTunnelEnv, UPSTREAM_NAME, type Conn, type RawResponse, type TunnelEnv } from "./tunnel-fixture.ts";
import { h2Exchange, h2SessionThrough } from "./tunnel-h2-fixture.ts";

const SECRET = `sk-attack-${crypto.randomUUID()}`;
const RULES = ATTACK_RULES;
const outputs: string[] = [];

// ---------------------------------------------------------------------------------------------------
// The explicit proxy (/proxy)
// ---------------------------------------------------------------------------------------------------

describe("attacks through /proxy", () => {
  let upstream: TestUpstream;
  let broker: Broker;
  let hp: string;

  beforeAll(async () => {
    ({ upstream, broker, hp } = await startRuledUpstream(SECRET, RULES));
  });
  afterAll(async () => {
    await expectNoLeak(broker, SECRET, outputs);
    await broker?.stop();
    await upstream?.close();
  });

  const approvals = (vault = broker.vault) => `/v1/vaults/${vault}/request-approvals`;
  const view = async (id: string, vault = broker.vault) => (await broker.api("GET", `${approvals(vault)}/${id}`, undefined, broker.userToken)).body;
  const decide = (id: string, decision: "approve" | "deny", token = broker.userToken, vault = broker.vault) =>
    broker.api("POST", `${approvals(vault)}/${id}/${decision}`, undefined, token);
  /** Requests the upstream saw whose path an Express/Rails-style router would route to the refunds action. */
  const refundsSeen = (): Received[] => upstream.received.filter((r) => /^\/v1\/refunds(\/|\.json)?(\?|$)/i.test(r.url));
  const seenWith = (needle: string) => upstream.received.filter((r) => r.body.toString().includes(needle));

  async function send(
    path: string,
    init: { method?: string; body?: string | Uint8Array; headers?: Record<string, string>; token?: string } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = { "content-type": "application/json", ...init.headers };
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    const res = await broker.proxy(hp, path, { method: init.method ?? "POST", body: init.body as BodyInit, headers });
    outputs.push(await dumpResponse(res.clone()));
    return res;
  }
  async function heldId(res: Response): Promise<string> {
    return (await expectEnvelope(res, 428, "approval_required")).approval_id;
  }

  /** One raw HTTP/1.1 request to /proxy (for what fetch will not send); the status and body parsed. */
  async function raw(method: string, pathAndQuery: string, headers: [string, string][], body = ""): Promise<{ status: number; text: string }> {
    const u = new URL(broker.apiUrl);
    const lines = [
      `${method} /proxy/${hp}${pathAndQuery} HTTP/1.1`,
      `Host: ${u.host}`,
      `Authorization: Bearer ${broker.sessionToken}`,
      ...headers.map(([k, v]) => `${k}: ${v}`),
    ];
    if (body || method.toUpperCase() === "POST") lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
    if (!headers.some(([k]) => k.toLowerCase() === "connection")) lines.push("Connection: close");
    const out = (await rawRequest(broker.apiUrl, Buffer.from(`${lines.join("\r\n")}\r\n\r\n${body}`, "latin1"))).toString("latin1");
    outputs.push(out);
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(out)?.[1] ?? 0);
    return { status, text: out.slice(out.indexOf("\r\n\r\n") + 4) };
  }
  const approvalIdIn = (text: string) => /"approval_id":"(apr_[A-Za-z0-9_-]{16})"/.exec(text)?.[1];

  test("spellings the rules canonicalise are still held or refused, never forwarded unapproved", async () => {
    const before = refundsSeen().length;
    // Through fetch: percent-encoded unreserved characters decode to the held path.
    for (const path of ["/v1/%72efunds", "/v1/refund%73", "/v1/%72%65%66%75%6e%64%73?", "/v1/refunds?amount=1&amount=2"]) {
      const res = await send(path, { body: `{"spelling":"${path}","n":"${uid()}"}` });
      expect({ path, status: res.status }).toEqual({ path, status: 428 });
    }
    // Raw, as fetch would not send them: dot segments, empty segments, ; parameters, encoded slashes,
    // backslashes, NUL, over-long UTF-8.
    for (const path of [
      "/v1/./refunds",
      "/v1/%2e/refunds",
      "/v1/x/../refunds",
      "/v1/x/%2e%2e/refunds",
      "/v1//refunds",
      "//v1/refunds",
      "/v1/refunds;x=1",
      "/v1/refunds%3bx",
      "/v1%2frefunds",
      "/v1\\refunds",
      "/v1/refunds%00",
      "/v1/%C0%AEfunds",
    ]) {
      const r = await raw("POST", path, [["Content-Type", "application/json"]], `{"raw":"${uid()}"}`);
      expect({ path, held: [400, 403, 404, 428].includes(r.status) }).toEqual({ path, held: true });
    }
    expect(refundsSeen().length).toBe(before);
  });

  // Attack: `/v1/refunds/` past an approval rule for `/v1/refunds`, the broad rule `/v1/**` allowing
  // it. Express (strict routing off, its default), Rails, Django with APPEND_SLASH, Spring before 6
  // and most API gateways route it to the same refund action, so approval rules match it too.
  test("a trailing slash does not skip the human (/v1/refunds/)", async () => {
    const before = refundsSeen().length;
    const res = await send("/v1/refunds/", { body: `{"charge":"ch_slash","n":"${uid()}"}` });
    expect([400, 403, 428]).toContain(res.status);
    expect(refundsSeen().length).toBe(before);
  });

  // Attack: another case. Express (caseSensitive off by default), ASP.NET and IIS route /v1/Refunds
  // to /v1/refunds, so approval rules compare literal segments case-insensitively.
  test("a change of case does not skip the human (/v1/Refunds)", async () => {
    const before = refundsSeen().length;
    const res = await send("/v1/Refunds", { body: `{"charge":"ch_case","n":"${uid()}"}` });
    expect([400, 403, 428]).toContain(res.status);
    expect(refundsSeen().length).toBe(before);
  });

  // Attack: Rails (and Rails-style routers) take `.json` as the response format of the same route, so
  // approval rules ignore a format suffix on the last segment.
  test("a format suffix does not skip the human (/v1/refunds.json)", async () => {
    const before = refundsSeen().length;
    const res = await send("/v1/refunds.json", { body: `{"charge":"ch_fmt","n":"${uid()}"}` });
    expect([400, 403, 428]).toContain(res.status);
    expect(refundsSeen().length).toBe(before);
  });

  test("method override headers naming a held method are held, whatever their spelling", async () => {
    const before = upstream.received.length;
    for (const [name, value] of [
      ["X-HTTP-Method-Override", "DELETE"],
      ["x-http-method", "delete"],
      ["X-Method-Override", " Delete "],
    ] as const) {
      const res = await send(`/v1/customers/cus_${uid()}`, { body: "{}", headers: { [name]: value } });
      expect({ name, status: res.status }).toEqual({ name, status: 428 });
    }
    // A GET claiming to be a POST on the refunds path.
    expect((await send("/v1/refunds", { method: "GET", body: undefined, headers: { "x-http-method-override": "POST" } })).status).toBe(428);
    expect(upstream.received.length).toBe(before);
  });

  // Attack: Rails, Laravel, Symfony and Express's method-override (with a getter) also take the method
  // from a `_method` query or form parameter on a POST: POST /v1/customers/x?_method=DELETE, matched
  // as a POST (broad rule), would delete the customer. The broker reads `_method` from the query, and
  // from the body of a POST to a path where a rule holds another method.
  test("a _method parameter naming a held method is held", async () => {
    const viaQuery = await send(`/v1/customers/cus_${uid()}?_method=DELETE`, { body: "{}" });
    const viaForm = await send(`/v1/customers/cus_${uid()}`, { body: "_method=delete", headers: { "content-type": "application/x-www-form-urlencoded" } });
    expect(viaQuery.status).toBe(428);
    expect(viaForm.status).toBe(428);
    const viaJson = await send(`/v1/customers/cus_${uid()}`, { body: `{"_method":"DELETE"}` });
    expect(viaJson.status).toBe(428);
    const formId = await heldId(viaForm);
    expect((await view(formId)).body).toBe("_method=delete"); // the person sees what the upstream will act on
    // A POST whose body claims nothing more is forwarded as before (read first, then sent whole).
    const plain = `{"name":"${uid()}"}`;
    expect((await send(`/v1/customers/cus_${uid()}`, { body: plain })).status).toBe(200);
    expect(seenWith(plain)).toHaveLength(1);
    // A claim no rule allows is refused outright, as the same override header is.
    await expectEnvelope(
      await send(`/v1/customers/cus_${uid()}`, { body: "_method=PUT", headers: { "content-type": "application/x-www-form-urlencoded" } }),
      403,
      "request_not_allowed",
    );
  });

  test("a lower-case or odd method is not forwarded unheld", async () => {
    const before = upstream.received.length;
    for (const method of ["post", "Post", "DELETE"]) {
      const r = await raw(
        method,
        method === "DELETE" ? `/v1/customers/cus_${uid()}` : "/v1/refunds",
        [["Content-Type", "application/json"]],
        `{"m":"${uid()}"}`,
      );
      // 0: Bun's server closes the connection on a method that is not upper case, answering nothing.
      expect({ method, ok: [0, 400, 403, 405, 428].includes(r.status) }).toEqual({ method, ok: true });
    }
    expect(upstream.received.length).toBe(before);
  });

  test("a different query, body or meaningful header is another request; headers in any case or order are the same one", async () => {
    const body = `{"charge":"ch_q","n":"${uid()}"}`;
    const id = await heldId(await send("/v1/refunds?a=1", { body, headers: { "Stripe-Account": "acct_A", "Idempotency-Key": "k" } }));
    expect((await decide(id, "approve")).status).toBe(200);
    const before = seenWith(body).length;
    for (const [path, b, headers] of [
      ["/v1/refunds?a=1&a=2", body, { "Stripe-Account": "acct_A", "Idempotency-Key": "k" }],
      ["/v1/refunds?a=1", body + " ", { "Stripe-Account": "acct_A", "Idempotency-Key": "k" }],
      ["/v1/refunds?a=1", body, { "Stripe-Account": "acct_A" }],
      ["/v1/refunds?a=1", body, { "Stripe-Account": "acct_A", "Idempotency-Key": "k", "Stripe-Version": "2020-08-27" }],
      ["/v1/refunds?a=1", body, { "Stripe-Account": "acct_A, acct_B", "Idempotency-Key": "k" }],
    ] as const) {
      expect((await send(path, { body: b, headers })).status).toBe(428);
    }
    expect(seenWith(body).length).toBe(before);
    // Same request, header names re-cased: still the approved one, and sent exactly once.
    expect((await send("/v1/refunds?a=1", { body, headers: { "stripe-account": "acct_A", "IDEMPOTENCY-KEY": "k" } })).status).toBe(200);
    expect((await send("/v1/refunds?a=1", { body, headers: { "stripe-account": "acct_A", "idempotency-key": "k" } })).status).toBe(428);
    expect(seenWith(body).length).toBe(before + 1);
  });

  // Attack: `Connection` removes the headers it names before forwarding. The human approves a refund
  // on connected account acct_A (Stripe-Account shown and bound); the replay adds `Connection: close,
  // Stripe-Account` to reach the upstream without Stripe-Account (a refund on the platform account),
  // or without Idempotency-Key (a double refund). The fingerprint binds headers as forwarded.
  test("a Connection header cannot strip a bound header from the approved request", async () => {
    const body = `{"charge":"ch_conn","n":"${uid()}"}`;
    const headers: [string, string][] = [
      ["Content-Type", "application/json"],
      ["Stripe-Account", "acct_A"],
    ];
    const first = await raw("POST", "/v1/refunds", [...headers, ["Connection", "close"]], body);
    expect(first.status).toBe(428);
    expect((await decide(approvalIdIn(first.text)!, "approve")).status).toBe(200);
    const replay = await raw("POST", "/v1/refunds", [...headers, ["Connection", "close, Stripe-Account"]], body);
    expect(replay.status).toBe(428);
    expect(seenWith(body)).toHaveLength(0);
    // The approved request itself still goes, once, with its account.
    expect((await raw("POST", "/v1/refunds", [...headers, ["Connection", "close"]], body)).status).toBe(200);
    expect(seenWith(body).map((r) => r.rawHeaders.filter(([k]) => k.toLowerCase() === "stripe-account").map(([, v]) => v))).toEqual([["acct_A"]]);
  });

  // Attack: `Prefer` carries the broker's own `wait=`, but it is forwarded and changes what some
  // upstreams do: PostgREST/Supabase `Prefer: tx=rollback` is a dry run, `tx=commit` commits;
  // `resolution=merge-duplicates` turns an insert into an upsert. The human approves a request shown
  // with `prefer: tx=rollback`; the agent replays it with `tx=commit`. Prefer is bound, less `wait=`.
  test("Prefer (other than wait=) is bound: an approved dry run cannot be replayed as a commit", async () => {
    const body = `{"charge":"ch_prefer","n":"${uid()}"}`;
    const id = await heldId(await send("/v1/refunds", { body, headers: { prefer: "tx=rollback" } }));
    expect((await view(id)).headers).toContainEqual(["prefer", "tx=rollback"]);
    expect((await decide(id, "approve")).status).toBe(200);
    expect((await send("/v1/refunds", { body, headers: { prefer: "tx=commit" } })).status).toBe(428);
    expect(seenWith(body)).toHaveLength(0);
    expect((await send("/v1/refunds", { body, headers: { prefer: "tx=rollback, wait=2" } })).status).toBe(200);
    expect(seenWith(body)).toHaveLength(1);
  });

  test("Prefer: wait does not change the fingerprint (the broker's own parameter)", async () => {
    const body = `{"charge":"ch_wait","n":"${uid()}"}`;
    const id = await heldId(await send("/v1/refunds", { body }));
    expect((await decide(id, "approve")).status).toBe(200);
    expect((await send("/v1/refunds", { body, headers: { prefer: "wait=5" } })).status).toBe(200);
    expect((await send("/v1/refunds", { body, headers: { prefer: "wait=1" } })).status).toBe(428);
    expect(seenWith(body)).toHaveLength(1);
  });

  test("20 parallel replays with header variations the fingerprint ignores: exactly one reaches the upstream", async () => {
    const body = `{"charge":"ch_race","n":"${uid()}"}`;
    const id = await heldId(await send("/v1/refunds", { body }));
    expect((await decide(id, "approve")).status).toBe(200);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        send("/v1/refunds", { body, headers: { "user-agent": `agent/${i}`, traceparent: `00-${i}-1-01`, "x-stainless-retry-count": String(i) } }),
      ),
    );
    expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
    expect(answers.filter((r) => r.status === 428)).toHaveLength(19);
    expect(seenWith(body)).toHaveLength(1);
  });

  test("a body that differs only past the 1 MiB cap cannot share an approval: both are refused unsent", async () => {
    const before = upstream.received.length;
    const base = "x".repeat(1_048_576);
    for (const tail of ["A", "B"]) await expectEnvelope(await send("/v1/refunds", { body: base + tail }), 413, "payload_too_large");
    // Without Content-Length (a stream): read up to the cap, then refused.
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 17; i++) c.enqueue(new Uint8Array(65_536).fill(0x61));
        c.close();
      },
    });
    const streamed = await fetch(`${broker.apiUrl}/proxy/${hp}/v1/refunds`, {
      method: "POST",
      body: stream,
      headers: { authorization: `Bearer ${broker.sessionToken}` },
    });
    expect(streamed.status).toBe(413);
    expect(upstream.received.length).toBe(before);
  });

  test("a gzip body is bound by its bytes and described as not text; approved, it goes once", async () => {
    const plain = `{"charge":"ch_gzip","amount":999999,"n":"${uid()}"}`;
    const gz = gzipSync(plain);
    const headers = { "content-encoding": "gzip" };
    const id = await heldId(await send("/v1/refunds", { body: gz, headers }));
    const v = await view(id);
    expect(v.body).toBeNull(); // the person is told it is not text, never shown a false text
    expect(v.body_bytes).toBe(gz.byteLength);
    expect(v.headers).toContainEqual(["content-encoding", "gzip"]);
    expect((await decide(id, "approve")).status).toBe(200);
    // Same bytes compressed differently (another level) are another request.
    expect((await send("/v1/refunds", { body: gzipSync(plain, { level: 1 }), headers })).status).toBe(428);
    expect((await send("/v1/refunds", { body: gz, headers })).status).toBe(200);
    expect(upstream.received.filter((r) => r.body.equals(Buffer.from(gz)))).toHaveLength(1);
  });

  test("a body whose dangerous part lies past the 64 KiB preview is marked truncated, on the API and the page", async () => {
    const body = `{"note":"${" ".repeat(70_000)}","amount":99999999,"n":"${uid()}"}`;
    const id = await heldId(await send("/v1/refunds", { body }));
    const v = await view(id);
    expect(v.body_truncated).toBe(true);
    expect(v.body).not.toContain("99999999");
    expect(v.body_bytes).toBe(Buffer.byteLength(body));
    const html = await page(id);
    expect(html).toContain('id="body-truncated"');
    // Redaction that lengthens (a C1 control written out as <U+0085>) does not hide the cut either.
    const c1 = `{"note":"${"\u0085".repeat(20_000)}","amount":1,"n":"${uid()}"}`;
    const v2 = await view(await heldId(await send("/v1/refunds", { body: c1 })));
    expect(v2.body_truncated).toBe(true);
    expect(v2.body).not.toContain("\u0085");
  });

  async function page(id: string, cookie = `broker_session=${broker.userToken}`): Promise<string> {
    const res = await fetch(`${broker.apiUrl}/approve/requests/${id}`, { headers: { cookie } });
    return await res.text();
  }

  // Attack: duplicate keys. Pretty-printing by JSON.parse + JSON.stringify keeps only the last one,
  // while the upstream may read the first: the person would see `"amount": 1` and approve a body that
  // also says 100000. The page lays the text out without parsing it and warns of the repeated key.
  test("the approval page shows every duplicate JSON key, not just the last", async () => {
    const body = `{"charge":"ch_dup","amount":100000,"amount":1,"n":"${uid()}"}`;
    const id = await heldId(await send("/v1/refunds", { body }));
    expect((await view(id)).body).toBe(body); // the API shows it raw
    const html = await page(id);
    expect(html).toContain("100000");
    expect(html).toContain('id="duplicate-keys"');
  });

  // Attack: re-serialised numbers differ from those sent: 100000000000000000001 (which a bignum or
  // int64/decimal parser reads exactly) would show as 100000000000000000000, and 1e400 as null.
  test("the approval page shows numbers as sent", async () => {
    const body = `{"charge":"ch_num","amount":100000000000000000001,"fee":1e400,"n":"${uid()}"}`;
    const id = await heldId(await send("/v1/refunds", { body }));
    const html = await page(id);
    expect(html).toContain("100000000000000000001");
    expect(html).toContain("1e400");
  });

  // Attack: `\u202e` written as a JSON escape is plain ASCII in the body (the description's visible()
  // has nothing to spell out); parsed for display it would become a real RIGHT-TO-LEFT OVERRIDE and
  // render the rest of the line reversed. The page shows the escape as written.
  test("a JSON-escaped bidi override is not rendered as a real one on the approval page", async () => {
    const body = `{"charge":"ch_bidi","note":"\\u202e0001 = tnuoma","amount":1000000,"n":"${uid()}"}`;
    const id = await heldId(await send("/v1/refunds", { body }));
    const html = await page(id);
    expect(html).toContain("amount");
    expect(html).toContain("\\u202e0001 = tnuoma");
    expect(/[\u0080-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/.test(html)).toBe(false);
  });

  test("bidi overrides and C1 controls sent as characters are written out in the URL, headers and body", async () => {
    const body = `{"note":"\u202eevil\u0085","n":"${uid()}"}`;
    const id = await heldId(await send("/v1/refunds?memo=%E2%80%AE", { body, headers: { "x-memo": "a\u0085b" } }));
    const v = await view(id);
    expect(v.body).toContain("<U+202E>");
    expect(v.body).toContain("<U+0085>");
    expect(JSON.stringify(v)).not.toMatch(/[\u0080-\u009f\u202a-\u202e]/);
    expect(/[\u0080-\u009f\u202a-\u202e]/.test(await page(id))).toBe(false);
  });

  test("the credential never shows in a description, even in headers and query the agent wrote", async () => {
    // The agent cannot learn the credential from its own approval: what it polls is what it sent, less
    // the credential the broker adds; an Authorization the agent sends is neither shown nor forwarded.
    const id = await heldId(await send("/v1/refunds?k=v", { body: `{"n":"${uid()}"}`, headers: { "x-api-key": "mine" } }));
    const polled = await broker.api("GET", `${approvals()}/${id}`, undefined, broker.sessionToken);
    expect(polled.status).toBe(200);
    outputs.push(JSON.stringify(polled.body));
    expect(JSON.stringify(polled.body)).not.toContain(SECRET);
    expect(polled.body.headers.map(([n]: [string, string]) => n)).not.toContain("authorization");
  });

  test("the agent cannot decide its own request: API, forged page cookie, poll_url", async () => {
    const id = await heldId(await send("/v1/refunds", { body: `{"self":"${uid()}"}` }));
    for (const decision of ["approve", "deny"] as const) {
      const r = await decide(id, decision, broker.sessionToken);
      expect(r.status).toBe(403);
    }
    // The scoped session token planted as the page's session cookie, with a matching CSRF pair.
    const csrf = "A".repeat(43);
    const cookie = `broker_session=${broker.sessionToken}; broker_csrf=${csrf}`;
    const shown = await page(id, cookie);
    expect(shown).not.toContain('id="decide"');
    const posted = await fetch(`${broker.apiUrl}/approve/requests/${id}/decide`, {
      method: "POST",
      redirect: "manual",
      headers: { cookie, origin: broker.apiUrl, "sec-fetch-site": "same-origin", "content-type": "application/x-www-form-urlencoded" },
      body: `csrf=${csrf}&decision=allow`,
    });
    expect(posted.status).toBe(403);
    // The poll_url is read-only; X-Vault with the scoped session changes nothing.
    for (const method of ["POST", "PUT", "PATCH"]) {
      const r = await callApi(broker.apiUrl, method, `${approvals()}/${id}`, { state: "approved" }, broker.sessionToken);
      expect([403, 404, 405]).toContain(r.status);
    }
    const viaHeader = await fetch(`${broker.apiUrl}${approvals()}/${id}/approve`, {
      method: "POST",
      headers: { authorization: `Bearer ${broker.sessionToken}`, "x-vault": broker.vault },
    });
    expect(viaHeader.status).toBe(403);
    expect((await view(id)).state).toBe("pending");
  });

  describe("other principals and vaults", () => {
    const MEMBER = { email: "member@example.com", password: "member horse battery staple" };
    let memberSession: string;
    let otherVault: string;
    let otherSession: string;
    /** The member's session in the other vault: a second principal there. */
    let memberOtherSession: string;

    beforeAll(async () => {
      expect((await callApi(broker.apiUrl, "POST", "/v1/auth/register", MEMBER)).status).toBe(201);
      const memberUser = (await callApi(broker.apiUrl, "POST", "/v1/auth/login", MEMBER)).body.token as string;
      const invite = await broker.api("POST", `/v1/vaults/${broker.vault}/invites`, { email: MEMBER.email, role: "proxy" }, broker.userToken);
      expect(invite.status).toBe(201);
      expect((await callApi(broker.apiUrl, "POST", `/v1/vault-invites/${invite.body.token}/accept`, undefined, memberUser)).status).toBe(200);
      const s = await callApi(broker.apiUrl, "POST", "/v1/sessions", { vault: broker.vault, role: "proxy" }, memberUser);
      expect(s.status).toBe(201);
      memberSession = s.body.token;
      // A second vault with the same service (same host, same rules).
      otherVault = "attack-other";
      expect((await broker.api("POST", "/v1/vaults", { name: otherVault }, broker.userToken)).status).toBe(201);
      expect((await broker.api("PUT", `/v1/vaults/${otherVault}/credentials/STRIPE_KEY`, { value: SECRET }, broker.userToken)).status).toBe(200);
      expect(
        (
          await broker.api(
            "POST",
            `/v1/vaults/${otherVault}/services`,
            { host: hp, auth: { type: "bearer", token: "STRIPE_KEY" }, rules: RULES },
            broker.userToken,
          )
        ).status,
      ).toBe(201);
      const o = await broker.api("POST", "/v1/sessions", { vault: otherVault, role: "proxy" }, broker.userToken);
      expect(o.status).toBe(201);
      otherSession = o.body.token;
      const invite2 = await broker.api("POST", `/v1/vaults/${otherVault}/invites`, { email: MEMBER.email, role: "proxy" }, broker.userToken);
      expect((await callApi(broker.apiUrl, "POST", `/v1/vault-invites/${invite2.body.token}/accept`, undefined, memberUser)).status).toBe(200);
      memberOtherSession = (await callApi(broker.apiUrl, "POST", "/v1/sessions", { vault: otherVault, role: "proxy" }, memberUser)).body.token;
    });

    const other = (path: string, body: string, session = otherSession) =>
      fetch(`${broker.apiUrl}/proxy/${hp}${path}`, {
        method: "POST",
        body,
        headers: { authorization: `Bearer ${session}`, "content-type": "application/json" },
      });

    test("an approval of one principal's request is not spent by another principal's identical request", async () => {
      const body = `{"charge":"ch_principal","n":"${uid()}"}`;
      const id = await heldId(await send("/v1/refunds", { body }));
      expect((await decide(id, "approve")).status).toBe(200);
      const byMember = await send("/v1/refunds", { body, token: memberSession });
      expect(await heldId(byMember)).not.toBe(id);
      expect((await view(id)).state).toBe("approved"); // unspent
      // Nor may the member's session read the owner's held request.
      expect((await broker.api("GET", `${approvals()}/${id}`, undefined, memberSession)).status).toBe(403);
      expect(seenWith(body)).toHaveLength(0);
      expect((await send("/v1/refunds", { body })).status).toBe(200);
      expect(seenWith(body)).toHaveLength(1);
    });

    test("an approval in one vault is not spent by the identical request in another vault, nor decided there", async () => {
      const body = `{"charge":"ch_vault","n":"${uid()}"}`;
      const id = await heldId(await send("/v1/refunds", { body }));
      expect((await decide(id, "approve")).status).toBe(200);
      const there = await other("/v1/refunds", body);
      outputs.push(await dumpResponse(there.clone()));
      expect(await heldId(there)).not.toBe(id);
      expect(seenWith(body)).toHaveLength(0);
      // The id of one vault's approval is unknown under another vault's path.
      expect((await decide(id, "approve", broker.userToken, otherVault)).status).toBe(404);
      expect((await broker.api("GET", `${approvals(otherVault)}/${id}`, undefined, otherSession)).status).toBe(404);
    });

    test("flooding: past 50 pending requests one principal gets 409 with a clear message, others in the vault still file theirs", async () => {
      const pendingNow = async () =>
        (await broker.api("GET", approvals(otherVault), undefined, broker.userToken)).body.request_approvals.filter(
          (a: { state: string }) => a.state === "pending",
        ).length;
      const already = await pendingNow(); // left by the tests above, all this principal's
      const first = await heldId(await other("/v1/refunds", `{"flood":"first-${uid()}"}`));
      let refused: Response | undefined;
      let filed = already + 1;
      for (let i = 0; i < 60 && !refused; i++) {
        const r = await other("/v1/refunds", `{"flood":${i},"n":"${uid()}"}`);
        if (r.status === 428) filed++;
        else refused = r;
      }
      expect(filed).toBe(50);
      const body = await expectEnvelope(refused!, 409, "conflict");
      expect(body.message).toMatch(/50 of your requests already await a human in vault attack-other/);
      expect(await pendingNow()).toBe(50);
      expect((await view(first, otherVault)).state).toBe("pending");
      // A retry of an already pending request still finds its approval (not 409).
      const again = await other("/v1/refunds", (await view(first, otherVault)).body);
      expect(await heldId(again)).toBe(first);
      // Another principal of the vault is not crowded out.
      expect((await other("/v1/refunds", `{"flood":"member-${uid()}"}`, memberOtherSession)).status).toBe(428);
      // The human can still decide, and the freed slot takes a new request.
      expect((await decide(first, "deny", broker.userToken, otherVault)).status).toBe(200);
      expect((await other("/v1/refunds", `{"flood":"after-${uid()}"}`)).status).toBe(428);
      expect(upstream.received.filter((r) => r.body.toString().includes('"flood"'))).toHaveLength(0);
    });
  });
});

// ---------------------------------------------------------------------------------------------------
// The transparent proxy (CONNECT + TLS with the broker CA): HTTP/1.1 and HTTP/2
// ---------------------------------------------------------------------------------------------------

describe("attacks inside the tunnel", () => {
  let env: TunnelEnv;
  let wsUpstream: ReturnType<typeof Bun.serve>;
  let wsAuthority: string;
  const upgrades: string[] = [];

  beforeAll(async () => {
    env = await startTunnelEnv({
      handler: (req, res, body) => {
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
    // A WebSocket upstream under the same test CA, whose /v1/stream needs a human's approval.
    wsUpstream = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      tls: { cert: env.upstream.pki.certPem, key: env.upstream.pki.keyPem },
      fetch(req, srv) {
        const url = new URL(req.url);
        if (req.headers.get("upgrade")) upgrades.push(url.pathname);
        if (req.headers.get("upgrade") && srv.upgrade(req, { data: undefined })) return undefined;
        return Response.json({ plain: url.pathname });
      },
      websocket: {
        message(ws, m) {
          ws.send(`echo:${m}`);
        },
      },
    });
    wsAuthority = `${UPSTREAM_NAME}:${wsUpstream.port}`;
    await env.broker.addService(
      wsAuthority,
      { type: "bearer", token: "API_KEY" },
      {
        rules: [
          { methods: ["GET"], paths: ["/v1/**"] },
          { methods: ["GET"], paths: ["/v1/stream"], approve: "each" },
        ],
      },
    );
  });
  afterAll(async () => {
    await expectNoLeak(env.broker, env.secret, outputs);
    wsUpstream?.stop(true);
    await env?.stop();
  });

  const approvals = () => `/v1/vaults/${env.broker.vault}/request-approvals`;
  const decide = (id: string, decision: "approve" | "deny") => env.broker.api("POST", `${approvals()}/${id}/${decision}`, undefined, env.broker.userToken);
  const seenWith = (needle: string) => env.upstream.received.filter((r) => r.body.toString().includes(needle));

  async function tunnel(authority = env.authority): Promise<Conn> {
    return (await openTunnel(env.proxyPort, authority, env.proxyAuth, { ca: env.caPem })).conn;
  }
  /** Writes one HTTP/1.1 request head (+ body) and reads the final answer (1xx skipped). */
  async function exchange(conn: Conn, head: string, body: string | Buffer = ""): Promise<RawResponse> {
    conn.write(Buffer.concat([Buffer.from(head, "latin1"), Buffer.isBuffer(body) ? body : Buffer.from(body)]));
    for (;;) {
      const res = await conn.readResponse();
      outputs.push(res.head, res.body.toString("latin1"));
      if (res.status >= 200) return res;
    }
  }
  const post = (target: string, headers: string[], body: string) =>
    `POST ${target} HTTP/1.1\r\nHost: ${env.authority}\r\nContent-Type: application/json\r\n${headers.map((h) => `${h}\r\n`).join("")}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
  const idOf = (res: RawResponse) => {
    expect(res.status).toBe(428);
    return JSON.parse(res.body.toString()).approval_id as string;
  };

  test("absolute-form targets inside the tunnel are held (the authority is the CONNECT's)", async () => {
    const conn = await tunnel();
    try {
      for (const target of [`https://${env.authority}/v1/refunds`, `https://elsewhere.example/v1/refunds`, `https://${env.authority}/v1/%72efunds?x=1`]) {
        const body = `{"abs":"${uid()}"}`;
        const res = await exchange(conn, post(target, [], body), body);
        expect({ target, status: res.status }).toEqual({ target, status: 428 });
      }
      // Forms that are not a path or an https URL are refused outright.
      const body = `{"abs":"${uid()}"}`;
      expect([400, 403]).toContain((await exchange(conn, post("v1/refunds", [], body), body)).status);
    } finally {
      conn.close();
    }
    expect(env.upstream.received.filter((r) => r.body.toString().includes('"abs"'))).toHaveLength(0);
  });

  test("chunked and Expect: 100-continue bodies are read whole, bound by their bytes, and sent once", async () => {
    const body = `{"charge":"ch_chunked","n":"${uid()}"}`;
    const chunked = (b: string) => {
      const half = Math.floor(b.length / 2);
      return `${half.toString(16)}\r\n${b.slice(0, half)}\r\n${(b.length - half).toString(16)}\r\n${b.slice(half)}\r\n0\r\n\r\n`;
    };
    const head = (extra = "") =>
      `POST /v1/refunds HTTP/1.1\r\nHost: ${env.authority}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n${extra}\r\n`;
    const conn = await tunnel();
    try {
      const id = idOf(await exchange(conn, head(), chunked(body)));
      const v = (await env.broker.api("GET", `${approvals()}/${id}`, undefined, env.broker.userToken)).body;
      expect(v.body).toBe(body);
      expect((await decide(id, "approve")).status).toBe(200);
      // The same bytes with a trailer field after the last chunk (not forwarded) or more data: not sent on this approval.
      expect((await exchange(conn, head(), chunked(body + " "))).status).toBe(428);
      // Identical bytes with Content-Length instead of chunking: the same request, sent once.
      expect((await exchange(conn, post("/v1/refunds", [], body), body)).status).toBe(200);
      expect((await exchange(conn, head(), chunked(body))).status).toBe(428);
      // Expect: 100-continue is held like any other (Expect is bound: it is another request).
      const e = `{"charge":"ch_expect","n":"${uid()}"}`;
      expect((await exchange(conn, post("/v1/refunds", ["Expect: 100-continue"], e), e)).status).toBe(428);
    } finally {
      conn.close();
    }
    expect(seenWith(body)).toHaveLength(1);
    expect(seenWith("ch_expect")).toHaveLength(0);
  });

  test("a chunked body over the 1 MiB cap is refused with 413 and not sent", async () => {
    const conn = await tunnel();
    try {
      conn.write(`POST /v1/refunds HTTP/1.1\r\nHost: ${env.authority}\r\nTransfer-Encoding: chunked\r\n\r\n`);
      const piece = "y".repeat(65_536);
      for (let i = 0; i < 17; i++) conn.write(`${piece.length.toString(16)}\r\n${piece}\r\n`);
      conn.write("0\r\n\r\n");
      const res = await conn.readResponse();
      expect(res.status).toBe(413);
    } finally {
      conn.close();
    }
    expect(env.upstream.received.filter((r) => r.body.length > 1_000_000)).toHaveLength(0);
  });

  test("a lower-case method inside the tunnel is not forwarded unheld", async () => {
    const conn = await tunnel();
    const body = `{"lower":"${uid()}"}`;
    try {
      const res = await exchange(conn, post("/v1/refunds", [], body).replace(/^POST/, "post"), body);
      expect([400, 403, 405, 428]).toContain(res.status);
    } catch {
      // the broker closed the connection: refused
    } finally {
      conn.close();
    }
    expect(seenWith(body)).toHaveLength(0);
  });

  // Inside the tunnel (HTTP/1.1), as on /proxy: `Connection: Stripe-Account` would strip the bound
  // header from the approved request; it makes another request.
  test("a Connection header inside the tunnel cannot strip a bound header from the approved request", async () => {
    const body = `{"charge":"ch_tconn","n":"${uid()}"}`;
    const conn = await tunnel();
    try {
      const id = idOf(await exchange(conn, post("/v1/refunds", ["Stripe-Account: acct_A"], body), body));
      expect((await decide(id, "approve")).status).toBe(200);
      const replay = await exchange(conn, post("/v1/refunds", ["Stripe-Account: acct_A", "Connection: keep-alive, Stripe-Account"], body), body);
      expect(replay.status).toBe(428);
      expect(seenWith(body)).toHaveLength(0);
    } finally {
      conn.close();
    }
  });

  const h2Session = () => h2SessionThrough(env, env.authority);
  const h2Send = (session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: string, trailers?: http2.OutgoingHttpHeaders) =>
    h2Exchange(session, headers, body, { trailers, record: outputs });

  test("HTTP/2: an encoded :path is held; 20 parallel streams after one approval reach the upstream exactly once", async () => {
    const session = await h2Session();
    try {
      const enc = `{"h2":"enc-${uid()}"}`;
      const h = { ":method": "POST", ":path": "/v1/%72efunds", "content-type": "application/json" };
      const held = await h2Send(session, h, enc);
      expect(held.status).toBe(428);
      const body = `{"h2":"race-${uid()}"}`;
      const head = { ":method": "POST", ":path": "/v1/refunds", "content-type": "application/json" };
      const first = await h2Send(session, head, body);
      expect(first.status).toBe(428);
      expect((await decide(JSON.parse(first.body).approval_id, "approve")).status).toBe(200);
      const answers = await Promise.all(Array.from({ length: 20 }, () => h2Send(session, head, body)));
      expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
      expect(answers.filter((a) => a.status === 428)).toHaveLength(19);
      expect(seenWith(body)).toHaveLength(1);
      expect(seenWith(enc)).toHaveLength(0);
    } finally {
      session.destroy();
    }
  });

  test("HTTP/2: a lower-case :method is not forwarded unheld", async () => {
    const session = await h2Session();
    const body = `{"h2":"lower-${uid()}"}`;
    try {
      const r = await h2Send(session, { ":method": "post", ":path": "/v1/refunds", "content-type": "application/json" }, body).catch(() => ({
        status: 0,
        body: "",
      }));
      expect([0, 400, 403, 405, 428]).toContain(r.status);
    } finally {
      session.destroy();
    }
    expect(seenWith(body)).toHaveLength(0);
  });

  test("a WebSocket upgrade to a held path is held until approved", async () => {
    const conn = await tunnel(wsAuthority);
    try {
      const key = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64");
      conn.write(
        `GET /v1/stream HTTP/1.1\r\nHost: ${wsAuthority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
      const res = await conn.readResponse();
      outputs.push(res.head, res.body.toString());
      expect(res.status).toBe(428);
    } finally {
      conn.close();
    }
    expect(upgrades).toHaveLength(0);
  });

  // Attack: an agent gets a plain `GET /v1/stream` (with a Sec-WebSocket-Version header) approved,
  // then sends the same GET as a WebSocket upgrade, hoping the one approval opens a two-way socket
  // that may carry any number of messages for hours, while the person was shown a single GET. An
  // upgrade is bound as one, and described as one (`upgrade: websocket`, a warning on the page).
  test("an approval of a plain GET cannot be spent on a WebSocket upgrade", async () => {
    const conn = await tunnel(wsAuthority);
    try {
      conn.write(`GET /v1/stream HTTP/1.1\r\nHost: ${wsAuthority}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
      const first = await conn.readResponse();
      outputs.push(first.head, first.body.toString());
      expect(first.status).toBe(428);
      const id = JSON.parse(first.body.toString()).approval_id;
      expect((await decide(id, "approve")).status).toBe(200);
      const key = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64");
      conn.write(
        `GET /v1/stream HTTP/1.1\r\nHost: ${wsAuthority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
      const res = await conn.readResponse();
      outputs.push(res.head, res.body.toString());
      expect(res.status).toBe(428);
      expect(upgrades).toHaveLength(0);
      const upgradeId = JSON.parse(res.body.toString()).approval_id;
      const described = await env.broker.api("GET", `${approvals()}/${upgradeId}`, undefined, env.broker.userToken);
      expect(described.body.headers[0]).toEqual(["upgrade", "websocket"]);
      const html = await (
        await fetch(`${env.broker.apiUrl}/approve/requests/${upgradeId}`, { headers: { cookie: `broker_session=${env.broker.userToken}` } })
      ).text();
      expect(html).toContain('id="websocket"');
    } finally {
      conn.close();
    }
  });
});
