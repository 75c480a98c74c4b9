// Attacks on the HUMAN side of single-request approval ("approve": "each"), and on the resources a
// held request uses, after those in request-approval-attacks.test.ts and -2 (not repeated here).
// A hostile agent (holding only an agent token or a scoped session) or a hostile web page tries to
// (a) get a request approved without a person meaning to (cross-site posts, framing, GET, method
// override, login CSRF, redirects), (b) mislead the person (what the page, console or Slack shows),
// (c) exhaust the broker (held connections, floods, huge pages) and (d) read what it should not (the
// sealed description of another principal's request, the credential).
//
// Each test asserts the safe behaviour. The comments marked `Attack:` describe the five attacks that
// got through when this suite was written (each a `test.failing` until fixed), so that the reason
// for each limit and check stays on record.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, type Socket } from "node:net";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { callApi, dumpResponse, expectEnvelope, expectNoLeak, rawRequest, startBroker, startRuledUpstream, type Broker } from "./proxy-fixture.ts";
import { ATTACK_RULES, uid } from "./held-attack-rules.ts";

const SECRET = `sk-attack3-${crypto.randomUUID()}`;
const RULES = ATTACK_RULES;
const outputs: string[] = [];
const READER = { email: "reader@example.com", password: "reader horse battery staple" };
const EVIL = "https://evil.example";
const SIBLING = "http://evil.127.0.0.1.nip.test";

/** The `name=value` of a Set-Cookie header for `name`, if set. */
function setCookieValue(res: Response, name: string): string | undefined {
  for (const c of res.headers.getSetCookie()) {
    const m = new RegExp(`^${name}=([^;]*)`).exec(c);
    if (m) return m[1];
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------------
// The person's pages, the API, webhooks
// ---------------------------------------------------------------------------------------------------

describe("the human side", () => {
  let upstream: TestUpstream;
  let broker: Broker;
  let hp: string;
  let readerToken: string;
  let receiver: ReturnType<typeof Bun.serve>;
  const hooks: { path: string; body: string }[] = [];

  beforeAll(async () => {
    ({ upstream, broker, hp } = await startRuledUpstream(SECRET, RULES));
    // A second person: a member of the vault with the proxy role only.
    expect((await callApi(broker.apiUrl, "POST", "/v1/auth/register", READER)).status).toBe(201);
    readerToken = (await callApi(broker.apiUrl, "POST", "/v1/auth/login", READER)).body.token;
    const invite = await broker.api("POST", `/v1/vaults/${broker.vault}/invites`, { email: READER.email, role: "proxy" }, broker.userToken);
    expect(invite.status).toBe(201);
    expect((await callApi(broker.apiUrl, "POST", `/v1/vault-invites/${invite.body.token}/accept`, undefined, readerToken)).status).toBe(200);
    // A webhook receiver on loopback, in both formats.
    receiver = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => {
        hooks.push({ path: new URL(req.url).pathname, body: await req.text() });
        return new Response("ok");
      },
    });
    for (const [path, format] of [
      ["/json", "json"],
      ["/slack", "slack"],
    ] as const) {
      const added = await broker.api(
        "POST",
        `/v1/vaults/${broker.vault}/webhooks`,
        { url: `http://127.0.0.1:${receiver.port}${path}`, format },
        broker.userToken,
      );
      expect(added.status).toBe(201);
    }
  });
  afterAll(async () => {
    for (const h of hooks) outputs.push(h.body);
    await expectNoLeak(broker, SECRET, outputs);
    await broker?.stop();
    await upstream?.close();
    receiver?.stop(true);
  });

  const approvals = () => `/v1/vaults/${broker.vault}/request-approvals`;
  const view = async (id: string, token = broker.userToken) => {
    const r = await broker.api("GET", `${approvals()}/${id}`, undefined, token);
    outputs.push(JSON.stringify(r.body));
    return r;
  };
  const stateOf = async (id: string) => (await view(id)).body.state as string;

  async function send(path: string, init: { method?: string; body?: string; headers?: Record<string, string>; token?: string } = {}): Promise<Response> {
    const headers: Record<string, string> = { "content-type": "application/json", ...init.headers };
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    const res = await broker.proxy(hp, path, { method: init.method ?? "POST", body: init.body, headers });
    outputs.push(await dumpResponse(res.clone()));
    return res;
  }
  async function held(path = "/v1/refunds", init: Parameters<typeof send>[1] = {}): Promise<string> {
    return (await expectEnvelope(await send(path, { body: `{"charge":"ch_${uid()}"}`, ...init }), 428, "approval_required")).approval_id;
  }
  /** GET of a page (approval page or console) as `token`'s browser; the text and the response. */
  async function page(path: string, cookie = `broker_session=${broker.userToken}`): Promise<{ res: Response; html: string }> {
    const res = await fetch(`${broker.apiUrl}${path}`, { redirect: "manual", headers: cookie ? { cookie } : {} });
    const html = await res.text();
    outputs.push(html);
    return { res, html };
  }
  /** A browser session of the owner with its real CSRF cookie (as the approval page sets it). */
  async function ownerBrowser(id: string): Promise<{ cookie: string; csrf: string }> {
    const { res } = await page(`/approve/requests/${id}`);
    const csrf = setCookieValue(res, "broker_csrf")!;
    expect(csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    return { cookie: `broker_session=${broker.userToken}; broker_csrf=${csrf}`, csrf };
  }
  async function post(path: string, body: string, headers: Record<string, string>): Promise<Response> {
    const res = await fetch(`${broker.apiUrl}${path}`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body,
    });
    outputs.push(await dumpResponse(res.clone()));
    return res;
  }
  async function waitFor<T>(probe: () => T | undefined | Promise<T | undefined>, what: string): Promise<T> {
    for (let i = 0; i < 200; i++) {
      const v = await probe();
      if (v !== undefined) return v;
      await Bun.sleep(25);
    }
    throw new Error(`timed out waiting for ${what}`);
  }

  // ---- (a) a decision the person did not mean to make ----------------------------------------------

  // Attack: clickjacking. A hostile page frames the approval page (or the console's Requests page) under
  // a decoy and gets the person to click where Allow is. Every answer of those pages, error pages
  // included, forbids framing twice (X-Frame-Options and CSP frame-ancestors).
  test("the approval page (signed out, signed in, refused post) and the console's Requests page cannot be framed", async () => {
    const id = await held();
    const answers = [
      (await page(`/approve/requests/${id}`, "")).res,
      (await page(`/approve/requests/${id}`)).res,
      (await page(`/approve/requests/${id}`, `broker_session=${readerToken}`)).res,
      (await page(`/approve/requests/apr_${"x".repeat(16)}`)).res,
      await post(`/approve/requests/${id}/decide`, "decision=allow", { cookie: `broker_session=${broker.userToken}`, origin: EVIL }),
      (await page(`/vaults/${broker.vault}/requests`)).res,
    ];
    for (const res of answers) {
      expect({ status: res.status, xfo: res.headers.get("x-frame-options") }).toEqual({ status: res.status, xfo: "DENY" });
      expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
      expect(res.headers.get("content-security-policy")).toContain("form-action 'self'");
    }
    expect(await stateOf(id)).toBe("pending");
  });

  // Attack: cross-site request forgery on Allow, by a hostile page the person visits while signed in:
  // a plain cross-site form (no token), a sibling sub-domain that plants its own well-formed
  // `broker_csrf` cookie (the cookie has no __Host- prefix over http) and sends the matching field
  // (SameSite=Strict does not stop a same-site sibling), a sandboxed frame (Origin: null), and a post
  // whose browser says cross-site though it carries the real pair. On the approval page and on both
  // console forms. Origin and Sec-Fetch-Site are checked as well as the token pair.
  test("cross-site posts to Allow are refused on the approval page and the console, whatever CSRF cookie a sibling plants", async () => {
    const id = await held();
    const real = await ownerBrowser(id);
    const planted = "P".repeat(43);
    const plantedCookie = `broker_session=${broker.userToken}; broker_csrf=${planted}`;
    const forged: [string, Record<string, string>][] = [
      ["decision=allow", { cookie: `broker_session=${broker.userToken}`, origin: EVIL, "sec-fetch-site": "cross-site" }],
      [`csrf=${planted}&decision=allow`, { cookie: plantedCookie, origin: SIBLING, "sec-fetch-site": "same-site" }],
      [`csrf=${planted}&decision=allow`, { cookie: plantedCookie, origin: "null", "sec-fetch-site": "cross-site" }],
      [`csrf=${planted}&decision=allow`, { cookie: plantedCookie, origin: "null" }],
      [`csrf=${real.csrf}&decision=allow`, { cookie: real.cookie, "sec-fetch-site": "cross-site" }],
      [`csrf=${real.csrf}&decision=allow`, { cookie: real.cookie, origin: SIBLING }],
    ];
    const targets = [`/approve/requests/${id}/decide`, `/vaults/${broker.vault}/requests/${id}/approve`];
    for (const target of targets) {
      for (const [body, headers] of forged) {
        const res = await post(target, body, headers);
        expect({ target, headers, status: res.status }).toEqual({ target, headers, status: 403 });
      }
    }
    expect(await stateOf(id)).toBe("pending");
    // The same post from the page itself decides (so the refusals above are the checks, not a broken route).
    const ok = await post(`/approve/requests/${id}/decide`, `csrf=${real.csrf}&decision=deny`, {
      cookie: real.cookie,
      origin: broker.apiUrl,
      "sec-fetch-site": "same-origin",
    });
    expect(ok.status).toBe(303);
    expect(await stateOf(id)).toBe("denied");
  });

  // Attack: deciding without a post a page must forge: a link or <img> (GET, HEAD) to the decide
  // routes with the decision in the query, the page route itself posted to, a method-override header
  // or `_method` on the page and console routes, the API's approve as a GET with a user token.
  test("no GET, HEAD, override header or _method decides a held request", async () => {
    const id = await held();
    const { cookie, csrf } = await ownerBrowser(id);
    const q = `csrf=${csrf}&decision=allow`;
    for (const method of ["GET", "HEAD"]) {
      for (const path of [
        `/approve/requests/${id}/decide?${q}`,
        `/approve/requests/${id}?${q}`,
        `/vaults/${broker.vault}/requests/${id}/approve?csrf=${csrf}`,
      ]) {
        const res = await fetch(`${broker.apiUrl}${path}`, { method, redirect: "manual", headers: { cookie, "x-http-method-override": "POST" } });
        outputs.push(await dumpResponse(res));
        expect({ method, path, decided: res.status === 303 }).toEqual({ method, path, decided: false });
      }
    }
    const same = { cookie, origin: broker.apiUrl, "sec-fetch-site": "same-origin" };
    await post(`/approve/requests/${id}?_method=POST`, q, same);
    await post(`/approve/requests/${id}`, `${q}&_method=POST`, { ...same, "x-http-method-override": "POST" });
    const api = await fetch(`${broker.apiUrl}${approvals()}/${id}/approve`, {
      headers: { authorization: `Bearer ${broker.userToken}`, "x-http-method-override": "POST" },
    });
    expect(api.status).not.toBe(200);
    expect(await stateOf(id)).toBe("pending");
  });

  // Attack: login CSRF. A hostile page posts the attacker's email and password to the approval page's
  // sign-in (so the person, signed in as the attacker without noticing, acts under that account), and a
  // `return_to`/`returnTo` on a real sign-in tries to send the person on to another site.
  test("a cross-site sign-in on the approval page signs nobody in, and a real one lands only on that page", async () => {
    const id = await held();
    const creds = new URLSearchParams({ email: READER.email, password: READER.password }).toString();
    const crossSite: Record<string, string>[] = [
      { origin: EVIL },
      { origin: EVIL, cookie: `broker_csrf=${"Q".repeat(43)}` },
      { "sec-fetch-site": "cross-site" },
    ];
    for (const headers of crossSite) {
      const res = await post(`/approve/requests/${id}/login`, `${creds}&csrf=${"Q".repeat(43)}`, headers);
      expect(res.status).toBe(403);
      expect(setCookieValue(res, "broker_session")).toBeUndefined();
    }
    const { res } = await page(`/approve/requests/${id}`, "");
    const csrf = setCookieValue(res, "broker_csrf")!;
    const signed = await post(
      `/approve/requests/${id}/login?return_to=${encodeURIComponent("//evil.example/x")}&returnTo=${encodeURIComponent(EVIL)}`,
      `${creds}&csrf=${csrf}&return_to=${encodeURIComponent(EVIL)}`,
      {
        cookie: `broker_csrf=${csrf}`,
        origin: broker.apiUrl,
        "sec-fetch-site": "same-origin",
      },
    );
    expect(signed.status).toBe(303);
    expect(signed.headers.get("location")).toBe(`/approve/requests/${id}`);
    expect(setCookieValue(signed, "broker_session")).toBeTruthy();
  });

  // ---- (b) misleading the person ------------------------------------------------------------------

  // Attack: Slack mrkdwn injection. The Slack text carries the request's URL, and an agent chooses the
  // customer id segment of `DELETE /v1/customers/*`: `<!channel>` would ping everyone, `<https://evil|Allow
  // here>` would show a link named "Allow here" to the attacker's page. The path reaches the text only
  // in its canonical form, where <, > and | are percent-encoded (and the query, sealed, is left out).
  test("Slack notifications carry no mrkdwn control sequence from the agent's path or query", async () => {
    const before = hooks.length;
    const ids = [
      await held(`/v1/customers/${encodeURIComponent("<!channel>")}`, { method: "DELETE", body: undefined }),
      await held(`/v1/customers/${encodeURIComponent("<https:evil.example|Allow here>")}?x=${encodeURIComponent("<!here>")}`, {
        method: "DELETE",
        body: undefined,
      }),
    ];
    // Raw, as fetch would not send it: literal <, > and | in the request target.
    const raw = (
      await rawRequest(
        broker.apiUrl,
        Buffer.from(
          `DELETE /proxy/${hp}/v1/customers/<!everyone>|x HTTP/1.1\r\nHost: ${new URL(broker.apiUrl).host}\r\nAuthorization: Bearer ${broker.sessionToken}\r\nConnection: close\r\n\r\n`,
        ),
      )
    ).toString();
    outputs.push(raw);
    const rawId = /"approval_id":"(apr_[A-Za-z0-9_-]{16})"/.exec(raw)?.[1];
    if (rawId) ids.push(rawId);
    const texts = await waitFor(() => {
      const slack = hooks
        .slice(before)
        .filter((h) => h.path === "/slack")
        .map((h) => JSON.parse(h.body).text as string);
      return ids.every((id) => slack.some((t) => t.includes(id))) ? slack : undefined;
    }, "the Slack notifications");
    for (const t of texts) {
      expect(t).not.toMatch(/[<>]/);
      expect(t).not.toContain("!channel>");
    }
    expect(texts.join("\n")).toContain("%3C!channel%3E");
  });

  // Attack: visible() (src/egress/held-request.ts) writes out bidi overrides, LRM/RLM and C1 controls as
  // `<U+…>` because they make what the person reads differ from what is sent, but not the invisible
  // format characters: zero-width space/joiner/non-joiner (U+200B-D), word joiner (U+2060), BOM
  // (U+FEFF) in the body, nor a soft hyphen (byte 0xAD, U+00AD) in a header value. The page, the
  // console and the CLI (whose clean() leaves them too) show `acct_1Legit` and `refunds@example.com`
  // exactly like the real ones while the upstream gets other strings: the person compares an account,
  // IBAN or recipient with the one they know and sees a match that is not one.
  test("invisible characters in header values and the body are written out, as bidi controls are", async () => {
    const id = await held("/v1/refunds", {
      body: `{"destination":"acct_1Legit\u200b","notify":"refunds@exam\u2060ple.com\ufeff","memo":"o\u200dk"}`,
      headers: { "stripe-account": "acct_1Le\u00adgit" },
    });
    const v = (await view(id)).body;
    const { html } = await page(`/approve/requests/${id}`);
    const invisible = /[\u00ad\u200b-\u200d\u2060\ufeff]/;
    expect(JSON.stringify(v.headers)).not.toMatch(invisible);
    expect(v.body).not.toMatch(invisible);
    expect(html).not.toMatch(invisible);
  });

  // Attack: a scoped session (`broker vault run`, the token a sandboxed agent holds) is named after the
  // person who minted it (src/identity/sessions.ts toPrincipal: id `user:<minter>`), so its held request
  // is shown on the approval page, the console, the CLI and webhooks as "Asked by owner@example.com"
  // with requested_by_kind "user": the person reads a request the agent in their sandbox wrote as one
  // they made themselves, and is likelier to allow it.
  test("a request from a scoped session is not presented as the person's own", async () => {
    const id = await held();
    const v = (await view(id)).body;
    const { html } = await page(`/approve/requests/${id}`);
    const requester = /<dd id="requester">([\s\S]*?)<\/dd>/.exec(html)?.[1] ?? "";
    expect(requester).toContain("owner@example.com");
    expect(v.requested_by_kind).not.toBe("user");
    expect(requester).toMatch(/session|vault run|agent/i);
  });

  // Attack: two tabs. The person opens request A's page, and in another tab Allows request B; or the
  // agent hopes the page's form decides "whatever is pending now". The form names its own request, and
  // the result page names what that request became, not another one.
  test("the decide form is bound to the request its page showed; a second tab decides only its own", async () => {
    const a = await held();
    const b = await held();
    const { cookie, csrf } = await ownerBrowser(a);
    const pageA = (await page(`/approve/requests/${a}`, cookie)).html;
    expect(pageA).toContain(`action="/approve/requests/${a}/decide"`);
    expect(pageA).not.toContain(b);
    const same = { cookie, origin: broker.apiUrl, "sec-fetch-site": "same-origin" };
    expect((await post(`/approve/requests/${b}/decide`, `csrf=${csrf}&decision=deny`, same)).status).toBe(303);
    // Tab A's Allow (posted after B was denied elsewhere) approves A only; B stays denied.
    const allowA = await post(`/approve/requests/${a}/decide`, `csrf=${csrf}&decision=allow`, same);
    expect(allowA.headers.get("location")).toBe(`/approve/requests/${a}?decided=1`);
    expect([await stateOf(a), await stateOf(b)]).toEqual(["approved", "denied"]);
    // A stale Allow on B's page (it was denied) changes nothing and says so.
    const stale = await post(`/approve/requests/${b}/decide`, `csrf=${csrf}&decision=allow`, same);
    expect(stale.status).toBe(409);
    expect(await stale.text()).toContain("no longer awaiting a decision (it is denied)");
    expect(await stateOf(b)).toBe("denied");
  });

  // ---- (d) reading what one should not ----------------------------------------------------------------

  // Attack: a person who is a member with the proxy role (may use the proxy, not read logs or decide)
  // reads another principal's held request: the API's list and one request by id, the console's
  // Requests page, the approval page.
  test("a proxy-role member reads nothing of another principal's held request (API, console, page)", async () => {
    const marker = `private-${uid()}`;
    const id = await held("/v1/refunds", { body: `{"customer":"${marker}"}` });
    const list = await broker.api("GET", approvals(), undefined, readerToken);
    const one = await view(id, readerToken);
    const consolePage = await page(`/vaults/${broker.vault}/requests`, `broker_session=${readerToken}`);
    const approvalPage = await page(`/approve/requests/${id}`, `broker_session=${readerToken}`);
    outputs.push(JSON.stringify(list.body));
    expect([list.status, one.status]).toEqual([403, 403]);
    expect(consolePage.res.status).toBe(403);
    expect(approvalPage.res.status).toBe(404);
    for (const text of [JSON.stringify(list.body), JSON.stringify(one.body), consolePage.html, approvalPage.html]) expect(text).not.toContain(marker);
  });

  // Attack: mayInVault grants read_logs to any principal with role member, agents included, and
  // listRequestApprovals / readRequestApproval (src/workflows/request-approvals.ts) open every sealed
  // description for it. An agent invited as member (to read the audit log, which holds no bodies) lists
  // every other principal's held requests in full: the query, the body (a customer's details) and the
  // headers that principal sent itself (its own Cookie or X-Api-Key, forwarded and shown). The
  // description is sealed at rest precisely so that it is not readable this way.
  test("an agent with the member role cannot read another principal's held request body or headers", async () => {
    const inv = await broker.api("POST", `/v1/vaults/${broker.vault}/agent-invites`, { name: `reader-${uid()}`, role: "member" }, broker.userToken);
    expect(inv.status).toBe(201);
    const agentToken = (await broker.api("POST", new URL(inv.body.invite_url).pathname)).body.token as string;
    expect(agentToken).toBeTruthy();
    const marker = `pii-${uid()}`;
    const id = await held(`/v1/refunds?email=${marker}`, {
      body: `{"customer":"${marker}","card_last4":"4242"}`,
      headers: { "x-own-session": `cookie-${marker}` },
    });
    const asAgent = async (path: string) => {
      const res = await fetch(`${broker.apiUrl}${path}`, { headers: { authorization: `Bearer ${agentToken}`, "x-vault": broker.vault } });
      const text = await res.text();
      outputs.push(text);
      return { status: res.status, text };
    };
    // The agent's token works here (its own audit log is open to it, as the member role says).
    expect((await asAgent(`/v1/vaults/${broker.vault}/logs?limit=1`)).status).toBe(200);
    const list = await asAgent(approvals());
    const one = await asAgent(`${approvals()}/${id}`);
    expect([200, 403]).toContain(list.status);
    expect([200, 403, 404]).toContain(one.status);
    expect(list.text).not.toContain(marker);
    expect(one.text).not.toContain(marker);
  });

  // Attack: the sealed description (query, headers, body) leaking out in the clear: a webhook (JSON or
  // Slack), a log line of the decision, the 428 answer's links. Only method, host and path go out.
  test("webhooks and log lines carry none of the sealed description (query, headers, body)", async () => {
    const marker = `sealed-${uid()}`;
    const before = hooks.length;
    const id = await held(`/v1/refunds?q=${marker}`, { body: `{"customer":"${marker}"}`, headers: { "x-note": marker } });
    const { cookie, csrf } = await ownerBrowser(id);
    expect(
      (await post(`/approve/requests/${id}/decide`, `csrf=${csrf}&decision=allow`, { cookie, origin: broker.apiUrl, "sec-fetch-site": "same-origin" })).status,
    ).toBe(303);
    const json = await waitFor(() => {
      const got = hooks.slice(before).filter((h) => h.path === "/json" && h.body.includes(id));
      return got.length >= 2 ? got.map((h) => JSON.parse(h.body)) : undefined; // created and approved
    }, "the webhook deliveries");
    expect(json.map((e) => [e.event, e.request_approval.url])).toEqual([
      ["request_approval.created", `https://${hp}/v1/refunds`],
      ["request_approval.approved", `https://${hp}/v1/refunds`],
    ]);
    await waitFor(() => (hooks.slice(before).filter((h) => h.path === "/slack").length >= 2 ? true : undefined), "the Slack deliveries");
    for (const h of hooks.slice(before)) expect(h.body).not.toContain(marker);
    for (const l of broker.logLines) expect(l).not.toContain(marker);
  });

  // ---- (c) a flood of notifications (last: it fills this principal's 50 places) ----------------------

  // Attack: a webhook flood. Each held request pings the people (Slack, a pager); an agent sends many
  // distinct ones, and many parallel copies of one. Copies share one approval (one event), and past 50
  // pending requests a principal's new ones are refused before anything is announced.
  test("a flood of held requests announces at most one event per pending request, 50 per principal", async () => {
    const pendingNow = (await broker.api("GET", approvals(), undefined, broker.userToken)).body.request_approvals.filter(
      (a: { state: string; requested_by: string }) => a.state === "pending" && a.requested_by === "user:1",
    ).length;
    const before = hooks.length;
    const copies = await Promise.all(Array.from({ length: 20 }, () => send("/v1/refunds", { body: `{"flood":"copy"}` })));
    const copyIds = new Set(await Promise.all(copies.map(async (r) => (await r.json()).approval_id as string)));
    expect(copyIds.size).toBe(1);
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) statuses.push((await send("/v1/refunds", { body: `{"flood":${i}}` })).status);
    const filed = 1 + statuses.filter((s) => s === 428).length;
    expect(pendingNow + filed).toBe(50);
    expect(statuses.filter((s) => s === 409).length).toBe(60 - (filed - 1));
    await Bun.sleep(500);
    const created = await waitFor(() => {
      const got = hooks
        .slice(before)
        .filter((h) => h.path === "/json")
        .map((h) => JSON.parse(h.body))
        .filter((e) => e.event === "request_approval.created");
      return got.length >= filed ? got : undefined;
    }, "the created events");
    expect(created.length).toBe(filed);
    expect(new Set(created.map((e) => e.request_approval.id)).size).toBe(filed);
  });
});

// ---------------------------------------------------------------------------------------------------
// Resources, with the default rate limits on
// ---------------------------------------------------------------------------------------------------

describe("resources (rate limits on)", () => {
  let upstream: TestUpstream;
  let broker: Broker;
  let hp: string;
  const sockets: Socket[] = [];
  const INFLIGHT = 32;

  beforeAll(async () => {
    // The default profile, with the GLOBAL in-flight ceiling lowered from 512 so the test stays small;
    // the attack is the same at 512 (the PROXY tier's burst of 200 and 50/s reach it in seconds).
    ({ upstream, broker, hp } = await startRuledUpstreamWith({ BROKER_RATELIMIT_PROFILE: "default", BROKER_RATELIMIT_GLOBAL_INFLIGHT: String(INFLIGHT) }));
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await Bun.sleep(200);
    await expectNoLeak(broker, SECRET, outputs);
    await broker?.stop();
    await upstream?.close();
  });

  async function startRuledUpstreamWith(env: Record<string, string>) {
    const up = await startUpstream((req, res, body) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ done: req.url, bytes: body.length }));
    });
    const b = await startBroker({ caPem: up.pki.caPem, env });
    const h = `127.0.0.1:${up.port}`;
    await b.setCredential("STRIPE_KEY", SECRET);
    await b.addService(h, { type: "bearer", token: "STRIPE_KEY" }, { rules: RULES });
    return { upstream: up, broker: b, hp: h };
  }

  /** One raw request to /proxy on its own socket, left open; resolves with what came back once closed. */
  function rawOpen(token: string, path: string, headers: [string, string][], body: string): { socket: Socket; answer: Promise<string> } {
    const u = new URL(broker.apiUrl);
    const lines = [
      `POST /proxy/${hp}${path} HTTP/1.1`,
      `Host: ${u.host}`,
      `Authorization: Bearer ${token}`,
      `X-Vault: ${broker.vault}`,
      `Content-Length: ${Buffer.byteLength(body)}`,
      ...headers.map(([k, v]) => `${k}: ${v}`),
    ];
    const chunks: Buffer[] = [];
    const socket = connect({ host: u.hostname, port: Number(u.port) }, () => socket.write(`${lines.join("\r\n")}\r\n\r\n${body}`));
    sockets.push(socket);
    const answer = new Promise<string>((resolve) => {
      socket.on("data", (d: Buffer) => {
        chunks.push(d);
        const text = Buffer.concat(chunks).toString();
        if (/\r\n\r\n[\s\S]*\}$/.test(text)) resolve(text);
      });
      socket.on("error", () => resolve(Buffer.concat(chunks).toString()));
      socket.on("close", () => resolve(Buffer.concat(chunks).toString()));
    });
    return { socket, answer };
  }

  // Attack: the console's Requests page (src/server/console/vault-held.tsx, Pending/BodyOf) renders every
  // pending request of the vault with its whole 64 KiB body preview and every header, HTML-escaped (`<`
  // becomes 4 bytes). One agent's 50 pending requests with 64 KiB of `<` make each load of the page
  // about 13 MB of HTML, and the vault's 200 about 50 MB: every person who opens the page to decide
  // pays it (and the server opens 200 sealed descriptions per load). The approval page shows one
  // request; the list should show a short preview and link to it.
  test("the console's Requests page stays small when an agent files its 50 largest held requests", async () => {
    const body = "<".repeat(64 * 1024);
    let filed = 0;
    for (let i = 0; i < 50; i++) {
      const res = await broker.proxy(hp, `/v1/refunds?n=${i}`, { method: "POST", body, headers: { "content-type": "text/plain" } });
      await res.text();
      if (res.status === 428) filed++;
    }
    expect(filed).toBe(50);
    const res = await fetch(`${broker.apiUrl}/vaults/${broker.vault}/requests`, { headers: { cookie: `broker_session=${broker.userToken}` } });
    const html = await res.text();
    expect(res.status).toBe(200);
    expect(html).toContain("Waiting for a decision (50)");
    expect(html.length).toBeLessThan(4 * 1024 * 1024);
  });

  // Attack: `Prefer: wait=120` keeps a held request's connection open, polling the database every 500 ms
  // (src/workflows/request-approvals.ts pass()), for up to two minutes. Identical requests share one pending
  // approval, so the 50-per-principal cap never applies to them, and nothing bounds how many one
  // principal keeps waiting: only the PROXY rate (burst 200, then 50/s). Each one holds a slot of the
  // GLOBAL in-flight ceiling (src/server/kit/limits.ts globalGate covers every route), so one agent soon
  // holds them all, and every other request of the broker gets 429 "too many requests in flight":
  // other agents, and the very person trying to Allow or Deny (API, approval page, console) — for as
  // long as the agent renews its waits. Waits should be capped per principal (e.g. a few, beyond which
  // the 428 comes at once) and not count against the global ceiling.
  test("one agent's waiting held requests do not lock the person out of deciding", async () => {
    // An agent of the vault (role proxy), with nothing but its own token.
    const inv = await broker.api("POST", `/v1/vaults/${broker.vault}/agent-invites`, { name: "waiter", role: "proxy" }, broker.userToken);
    expect(inv.status).toBe(201);
    const agentToken = (await broker.api("POST", new URL(inv.body.invite_url).pathname)).body.token as string;
    const body = `{"charge":"ch_wait_flood"}`;
    const headers: [string, string][] = [["Content-Type", "application/json"]];
    const first = rawOpen(agentToken, "/v1/refunds", [...headers, ["Connection", "close"]], body);
    const firstAnswer = await first.answer;
    outputs.push(firstAnswer);
    const id = /"approval_id":"(apr_[A-Za-z0-9_-]{16})"/.exec(firstAnswer)?.[1];
    expect(id).toBeTruthy();
    const waits = Array.from({ length: INFLIGHT + 8 }, () => rawOpen(agentToken, "/v1/refunds", [...headers, ["Prefer", "wait=120"]], body));
    // Until the broker is saturated (or, were waits bounded, for a while).
    let saturated = false;
    for (let i = 0; i < 80 && !saturated; i++) {
      await Bun.sleep(50);
      saturated = (await fetch(`${broker.apiUrl}/health`)).status === 429;
    }
    const list = await broker.api("GET", `/v1/vaults/${broker.vault}/request-approvals`, undefined, broker.userToken);
    const decided = await broker.api("POST", `/v1/vaults/${broker.vault}/request-approvals/${id}/approve`, undefined, broker.userToken);
    const pageRes = await fetch(`${broker.apiUrl}/approve/requests/${id}`, { headers: { cookie: `broker_session=${broker.userToken}` } });
    outputs.push(JSON.stringify(list.body), JSON.stringify(decided.body), await pageRes.text());
    for (const w of waits) w.socket.destroy();
    expect(list.status).toBe(200);
    expect(pageRes.status).toBe(200);
    expect(decided.status).toBe(200);
  });
});
