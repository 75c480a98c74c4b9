// Human approval of single requests through /proxy (issue 21): a rule with "approve": "each" holds a
// matching request (428 with the envelope, nothing sent upstream), a human approves it through the
// API, the same request then reaches the upstream exactly once; a changed body, path, method or
// meaningful header is another request; a second use, a denial and an expiry are refused; Prefer:
// wait forwards as soon as a human approves and times out cleanly. Only human user sessions decide.
// The approval's description never shows the credential, even when the agent put it in the body.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { dumpResponse, expectEnvelope, expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

const SECRET = `sk-approve-${crypto.randomUUID()}`;
let upstream: TestUpstream;
let broker: Broker;
let hp: string;
/** The broker's clock runs this far ahead of the wall clock (expiry without waiting 15 minutes). */
let skew = 0;
const outputs: string[] = [];

const RULES = [
  { methods: ["GET", "POST"], paths: ["/v1/**"] }, // broad, listed first: must not let a refund past the human
  { methods: ["POST"], paths: ["/v1/refunds"], approve: "each" },
];

beforeAll(async () => {
  upstream = await startUpstream((req, res, body) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ done: req.url, bytes: body.length }));
  });
  broker = await startBroker({ caPem: upstream.pki.caPem, now: () => Date.now() + skew, env: { BROKER_METRICS: "true" } });
  hp = `127.0.0.1:${upstream.port}`;
  await broker.setCredential("STRIPE_KEY", SECRET);
  await broker.addService(hp, { type: "bearer", token: "STRIPE_KEY" }, { rules: RULES });
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

async function refund(body: string, headers: Record<string, string> = {}): Promise<Response> {
  const res = await broker.proxy(hp, "/v1/refunds?expand=charge", { method: "POST", body, headers: { "content-type": "application/json", ...headers } });
  outputs.push(await dumpResponse(res.clone()));
  return res;
}
const reached = (path = "/v1/refunds?expand=charge") => upstream.received.filter((r) => r.url === path).length;
const approvals = (vault = broker.vault) => `/v1/vaults/${vault}/request-approvals`;
async function decide(id: string, decision: "approve" | "deny", token = broker.userToken) {
  return broker.api("POST", `${approvals()}/${id}/${decision}`, undefined, token);
}

describe("a rule that asks a human for each request (/proxy)", () => {
  test("the request is held with 428 and the envelope; nothing reaches the upstream", async () => {
    const before = reached();
    const res = await refund('{"charge":"ch_1","amount":500}');
    const body = await expectEnvelope(res, 428, "approval_required");
    expect(body.approval_id).toMatch(/^apr_[A-Za-z0-9_-]{16}$/);
    expect(body.approval_url).toBe(`${broker.apiUrl}/approve/requests/${body.approval_id}`);
    expect(body.poll_url).toBe(`${broker.apiUrl}${approvals()}/${body.approval_id}`);
    expect(Date.parse(body.expires_at) - Date.now() - skew).toBeGreaterThan(14 * 60_000);
    expect(reached()).toBe(before);
    // A retry before anyone decides finds the same approval (no pile of duplicates for the human).
    expect((await refund('{"charge":"ch_1","amount":500}').then((r) => r.json())).approval_id).toBe(body.approval_id);
    // Other requests under the broad rule are not held.
    expect((await broker.proxy(hp, "/v1/charges", { method: "POST", body: "{}" })).status).toBe(200);
    // Operators see it waiting.
    const metrics = await (await fetch(`${broker.apiUrl}/metrics`)).text();
    expect(metrics).toMatch(/^broker_request_approvals_pending 1$/m);
  });

  test("approved by a human, the same request goes through exactly once; a second use is held again", async () => {
    const first = await (await refund('{"charge":"ch_2","amount":700}')).json();
    const approved = await decide(first.approval_id, "approve");
    expect(approved.status).toBe(200);
    expect(approved.body.state).toBe("approved");
    expect(approved.body.decided_by).toBe("owner@example.com");
    const before = reached();
    const res = await refund('{"charge":"ch_2","amount":700}');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ done: "/v1/refunds?expand=charge", bytes: Buffer.byteLength('{"charge":"ch_2","amount":700}') });
    expect(reached()).toBe(before + 1);
    const seen = upstream.received.at(-1)!;
    expect(seen.rawHeaders).toContainEqual(["authorization", `Bearer ${SECRET}`]);
    expect((await broker.api("GET", `${approvals()}/${first.approval_id}`, undefined, broker.userToken)).body.state).toBe("used");

    const again = await refund('{"charge":"ch_2","amount":700}');
    const held = await expectEnvelope(again, 428, "approval_required");
    expect(held.approval_id).not.toBe(first.approval_id);
    expect(reached()).toBe(before + 1);

    // The audit log names the approver for the forwarded request.
    await Bun.sleep(400);
    const logs = (await broker.auditLogs()).filter((l: { path: string }) => l.path === "/v1/refunds");
    const forwarded = logs.filter((l: { status: number }) => l.status === 200);
    expect(forwarded.length).toBeGreaterThan(0);
    expect(
      forwarded.every(
        (l: { approved_by: string | null; approved_by_name: string | null }) => l.approved_by === "user:1" && l.approved_by_name === "owner@example.com",
      ),
    ).toBe(true);
    expect(
      logs
        .filter((l: { status: number }) => l.status === 428)
        .every((l: { error: string; approved_by: null }) => l.error === "approval_required" && l.approved_by === null),
    ).toBe(true);
  });

  test("20 identical retries at once after one approval: one reaches the upstream, the rest share one new approval", async () => {
    const body = '{"charge":"ch_race"}';
    const first = await (await refund(body)).json();
    expect((await decide(first.approval_id, "approve")).status).toBe(200);
    const before = reached();
    const answers = await Promise.all(Array.from({ length: 20 }, () => refund(body)));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 428)).toHaveLength(19);
    expect(reached()).toBe(before + 1);
    const ids = new Set(await Promise.all(answers.filter((r) => r.status === 428).map(async (r) => (await r.json()).approval_id)));
    expect(ids.size).toBe(1);
    expect(ids.has(first.approval_id)).toBe(false);
  });

  test("a different body, query, method override or meaningful header is another request", async () => {
    const first = await (await refund('{"charge":"ch_3","amount":100}', { "idempotency-key": "k1", "stripe-account": "acct_A" })).json();
    expect((await decide(first.approval_id, "approve")).status).toBe(200);
    const before = reached();
    for (const [body, headers] of [
      ['{"charge":"ch_3","amount":100000}', { "idempotency-key": "k1", "stripe-account": "acct_A" }],
      ['{"charge":"ch_3","amount":100}', { "idempotency-key": "k2", "stripe-account": "acct_A" }],
      ['{"charge":"ch_3","amount":100}', { "idempotency-key": "k1", "stripe-account": "acct_B" }],
      ['{"charge":"ch_3","amount":100}', { "idempotency-key": "k1", "stripe-account": "acct_A", "content-type": "application/x-www-form-urlencoded" }],
    ] as const) {
      const res = await refund(body, headers);
      const held = await expectEnvelope(res, 428, "approval_required");
      expect(held.approval_id).not.toBe(first.approval_id);
    }
    const otherQuery = await broker.proxy(hp, "/v1/refunds?expand=customer", {
      method: "POST",
      body: '{"charge":"ch_3","amount":100}',
      headers: { "content-type": "application/json", "idempotency-key": "k1", "stripe-account": "acct_A" },
    });
    expect(otherQuery.status).toBe(428);
    expect(reached()).toBe(before);
    // Headers that change nothing (tracing, user agent, SDK retry counters) do not count.
    const same = await refund('{"charge":"ch_3","amount":100}', {
      "idempotency-key": "k1",
      "stripe-account": "acct_A",
      "user-agent": "other/2",
      traceparent: "00-1-2-01",
      "x-stainless-retry-count": "3",
    });
    expect(same.status).toBe(200);
    expect(reached()).toBe(before + 1);
  });

  test("a method override to POST on the held path is held too", async () => {
    const res = await broker.proxy(hp, "/v1/refunds", { method: "GET", headers: { "x-http-method-override": "POST" } });
    await expectEnvelope(res, 428, "approval_required");
  });

  test("denied: 403 approval_denied, and the upstream never sees it", async () => {
    const first = await (await refund('{"charge":"ch_4"}')).json();
    const denied = await decide(first.approval_id, "deny");
    expect(denied.body.state).toBe("denied");
    const before = reached();
    const res = await refund('{"charge":"ch_4"}');
    const body = await expectEnvelope(res, 403, "approval_denied");
    expect(body.approval_id).toBe(first.approval_id);
    expect(reached()).toBe(before);
    // A decided approval cannot be decided again.
    expect((await decide(first.approval_id, "approve")).status).toBe(409);
  });

  test("expired: 403 approval_expired once, then the retry asks a human again", async () => {
    const first = await (await refund('{"charge":"ch_5"}')).json();
    expect((await decide(first.approval_id, "approve")).status).toBe(200);
    skew += 16 * 60_000;
    {
      const expired = await expectEnvelope(await refund('{"charge":"ch_5"}'), 403, "approval_expired");
      expect(expired.approval_id).toBe(first.approval_id);
      const fresh = await expectEnvelope(await refund('{"charge":"ch_5"}'), 428, "approval_required");
      expect(fresh.approval_id).not.toBe(first.approval_id);
      // An approval past its time cannot be approved any more.
      const pendingOld = await (await refund('{"charge":"ch_6"}')).json();
      skew += 16 * 60_000;
      expect((await decide(pendingOld.approval_id, "approve")).status).toBe(409);
    }
  });

  test("Prefer: wait forwards the held request as soon as a human approves", async () => {
    const body = '{"charge":"ch_wait"}';
    const before = reached();
    const waiting = refund(body, { prefer: "wait=30" });
    let id: string | undefined;
    for (let i = 0; i < 50 && !id; i++) {
      await Bun.sleep(100);
      const list = await broker.api("GET", approvals(), undefined, broker.userToken);
      id = list.body.request_approvals.find((a: { state: string; body: string }) => a.state === "pending" && a.body === body)?.id;
    }
    expect(id).toBeDefined();
    expect(reached()).toBe(before);
    expect((await decide(id!, "approve")).status).toBe(200);
    const res = await waiting;
    expect(res.status).toBe(200);
    expect(reached()).toBe(before + 1);
  });

  test("an agent that gives up waiting is not forwarded later, even when a human approves after", async () => {
    const body = '{"charge":"ch_gone"}';
    const gone = new AbortController();
    const before = reached();
    const waiting = broker
      .proxy(hp, "/v1/refunds?expand=charge", { method: "POST", body, headers: { "content-type": "application/json", prefer: "wait=60" }, signal: gone.signal })
      .catch((e: Error) => e);
    let id: string | undefined;
    for (let i = 0; i < 50 && !id; i++) {
      await Bun.sleep(100);
      id = (await broker.api("GET", approvals(), undefined, broker.userToken)).body.request_approvals.find(
        (a: { state: string; body: string }) => a.state === "pending" && a.body === body,
      )?.id;
    }
    gone.abort();
    expect(await waiting).toBeInstanceOf(Error);
    await Bun.sleep(700); // the broker's next poll sees the agent gone
    expect((await decide(id!, "approve")).status).toBe(200);
    await Bun.sleep(1200);
    expect(reached()).toBe(before);
    expect((await broker.api("GET", `${approvals()}/${id}`, undefined, broker.userToken)).body.state).toBe("approved"); // unspent
  });

  test("Prefer: wait times out cleanly with the 428, and a denial while waiting answers 403", async () => {
    const timedOut = await refund('{"charge":"ch_timeout"}', { prefer: "wait=1" });
    await expectEnvelope(timedOut, 428, "approval_required");
    const body = '{"charge":"ch_wait_deny"}';
    const waiting = refund(body, { prefer: "respond-async, wait=30" });
    let id: string | undefined;
    for (let i = 0; i < 50 && !id; i++) {
      await Bun.sleep(100);
      id = (await broker.api("GET", approvals(), undefined, broker.userToken)).body.request_approvals.find(
        (a: { state: string; body: string }) => a.state === "pending" && a.body === body,
      )?.id;
    }
    await decide(id!, "deny");
    await expectEnvelope(await waiting, 403, "approval_denied");
  });

  test("only a human user session decides; the agent may poll its own approval", async () => {
    const held = await (await refund('{"charge":"ch_agent"}')).json();
    const byAgent = await decide(held.approval_id, "approve", broker.sessionToken);
    expect(byAgent.status).toBe(403);
    expect(byAgent.body.error).toBe("forbidden");
    const polled = await broker.api("GET", `${approvals()}/${held.approval_id}`, undefined, broker.sessionToken);
    expect(polled.status).toBe(200);
    expect(polled.body.state).toBe("pending");
    // The list is for people who review (member and above), not for a proxy-role session.
    expect((await broker.api("GET", approvals(), undefined, broker.sessionToken)).status).toBe(403);
    expect((await broker.api("GET", `${approvals()}/apr_AAAAAAAAAAAAAAAA`, undefined, broker.userToken)).status).toBe(404);
  });

  test("the description shows the request as it will be sent, never the credential, even one the agent put in the body", async () => {
    const body = JSON.stringify({ charge: "ch_leak", note: `key is ${SECRET}` });
    const held = await (await refund(body, { "x-note": `header ${SECRET}`, cookie: "session=abc" })).json();
    const view = (await broker.api("GET", `${approvals()}/${held.approval_id}`, undefined, broker.userToken)).body;
    expect(view.method).toBe("POST");
    expect(view.url).toBe(`https://${hp}/v1/refunds?expand=charge`);
    expect(view.service).toBe(hp);
    expect(view.body).toContain('"note":"key is [redacted]"');
    expect(view.body_bytes).toBe(Buffer.byteLength(body));
    const names = view.headers.map(([n]: [string, string]) => n);
    expect(names).toContain("content-type");
    expect(names).not.toContain("authorization");
    // A cookie the agent sends goes upstream: the person sees it (it is the agent's, not the vault's).
    expect(view.headers).toContainEqual(["cookie", "session=abc"]);
    expect(view.headers).toContainEqual(["x-note", "header [redacted]"]);
    expect(JSON.stringify(view)).not.toContain(SECRET);
    outputs.push(JSON.stringify(view));
    // Stored, the query, header values and body are sealed (as the audit log keeps none of them): the
    // row in the database holds the path alone in the clear.
    const stored = await broker.server.store.db.all<Record<string, unknown>>("SELECT * FROM request_approvals WHERE public_id = ?", [held.approval_id]);
    expect(stored).toHaveLength(1);
    const text = JSON.stringify(stored, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString("latin1") : v));
    for (const clear of ["ch_leak", "key is", "session=abc", "header [redacted]", "expand=charge", "content-type"])
      expect({ clear, stored: text.includes(clear) }).toEqual({ clear, stored: false });
    expect(stored[0]!.target).toBe("/v1/refunds");
  });

  test("a held request's body is capped: a larger one gets 413, unsent", async () => {
    const before = upstream.received.length;
    const res = await refund("x".repeat(1_048_577));
    await expectEnvelope(res, 413, "payload_too_large");
    expect(upstream.received.length).toBe(before);
  });

  test("nothing the broker produced holds the credential", async () => {
    await expectNoLeak(broker, SECRET, outputs);
  });
});
