// Every way out of the request pipeline (architecture.md §3), with a fake upstream, minter, approvals
// and clocks, pinned to what egress() did before it was split into stages: the answer or error, the
// audit record's fields (bytesIn, approvedBy, service, error), the metrics observation and timings,
// and what reached the upstream (method, target, body, each send).

import { beforeAll, describe, expect, test } from "bun:test";
import { BrokerError, InvalidRequest, toErrorResponse } from "../../../src/errors.ts";
import {
  compileNetPolicy,
  createPlanCache,
  egress,
  Needles,
  type EgressDeps,
  type EgressPlan,
  type PlanCache,
  type Upstream,
} from "../../../src/egress/index.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { Secret } from "../../../src/secret.ts";
import { createTestApi, type TestApi } from "../../helpers/api.ts";

const SECRET = `sk-split-${crypto.randomUUID()}`;
let api: TestApi;
let real: PlanCache;
let vault: { id: number; name: string };

beforeAll(async () => {
  api = await createTestApi();
  const reg = await api.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "correct horse battery" } });
  const token = reg.body.token as string;
  expect((await api.call("POST", "/v1/vaults", { token, body: { name: "v1" } })).status).toBe(201);
  expect((await api.call("PUT", "/v1/vaults/v1/credentials/API_KEY", { token, body: { value: SECRET } })).status).toBe(200);
  const add = async (host: string, rules?: unknown) =>
    expect(
      (await api.call("POST", "/v1/vaults/v1/services", { token, body: { host, auth: { type: "bearer", token: "API_KEY" }, ...(rules ? { rules } : {}) } }))
        .status,
    ).toBe(201);
  const rules = [
    { methods: ["GET", "HEAD", "POST"], paths: ["/a/**"] },
    { methods: ["PATCH"], paths: ["/a/x"], approve: "each" },
  ];
  await add("plain.example.com");
  await add("ruled.example.com", rules);
  await add("minted.example.com");
  await add("mruled.example.com", rules);
  vault = { id: (await api.store.vaults.byName("v1"))!.id, name: "v1" };
  real = createPlanCache(api.store, api.domain.dataKey, () => ({}));
});

/** The real plan cache, with minted.* and mruled.* turned into minted-token services. */
function plansWithMinted(): PlanCache {
  return new Proxy(real, {
    get(target, prop, receiver) {
      if (prop === "plan")
        return async (v: { id: number; name: string }, host: string, port: number): Promise<EgressPlan> => {
          const p = await target.plan(v, host, port);
          if (!host.startsWith("minted.") && !host.startsWith("mruled.")) return p;
          return { ...p, minted: { type: "oauth2_client_credentials", fields: {}, inputs: new Map(), fingerprint: "f" } as never };
        };
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

type Step = { status: number; body?: string } | { throw: unknown };
interface Sent {
  method: string;
  target: string;
  auth: string | undefined;
  body: string | null;
  bodyLength: number | null;
}

function grantOf(tok: string) {
  return {
    injection: { header: "authorization", value: { reveal: () => `Bearer ${tok}` } },
    needles: new Needles([tok]),
    token: { value: new Secret(tok), issuedAt: 0, expiresAt: Number.MAX_SAFE_INTEGER },
    sent: [],
  };
}

interface Scenario {
  name: string;
  method: string;
  host: string;
  target: string;
  body?: string | { chunks: string[]; fail?: unknown };
  /** Declared length (null: streamed); default: the body's length, or null without a body. */
  bodyLength?: number | null;
  steps: Step[];
  maxRequestBytes?: number;
  regrant?: "ok" | "throw" | "none";
  approve?: string;
}

async function run(s: Scenario) {
  const sent: Sent[] = [];
  const audits: unknown[] = [];
  const observations: unknown[] = [];
  const steps = [...s.steps];
  const upstream: Upstream = {
    async send(_dest, req) {
      let body: string | null = null;
      if (req.body) {
        const chunks: Uint8Array[] = [];
        try {
          for await (const c of req.body as ReadableStream<Uint8Array>) chunks.push(c);
        } catch (err) {
          sent.push({ method: req.method, target: req.target, auth: auth(req.headers), body: "<failed>", bodyLength: req.bodyLength });
          throw new TypeError(`body stream failed: ${(err as Error).message}`);
        }
        body = Buffer.concat(chunks).toString();
      }
      sent.push({ method: req.method, target: req.target, auth: auth(req.headers), body, bodyLength: req.bodyLength });
      const step = steps.shift() ?? { status: 200 };
      if ("throw" in step) throw step.throw;
      return {
        status: step.status,
        statusText: "",
        headers: [["content-type", "text/plain"]],
        body: step.body === undefined ? null : new TextEncoder().encode(step.body),
      };
    },
    async open() {
      throw new Error("unused");
    },
    async openPlain() {
      throw new Error("unused");
    },
    close() {},
  };
  let tick = 1000;
  let mtick = 0;
  const deps: EgressDeps = {
    plans: plansWithMinted(),
    policy: compileNetPolicy({ allowPrivateRanges: true, allowlist: [], ownListeners: [] }),
    resolver: async () => ["192.0.2.10"],
    upstream,
    audit: { record: (e) => void audits.push({ ...e, at: "t", durationMs: typeof e.durationMs }) },
    log: createMemoryLogger(),
    now: () => (tick += 7),
    maxRequestBytes: s.maxRequestBytes ?? 0,
    maxResponseBytes: 0,
    metrics: { now: () => (mtick += 10), observe: (o) => void observations.push(o) },
    minter: {
      grant: async () => grantOf("tok-one"),
      regrant: () =>
        s.regrant === "none" ? undefined : s.regrant === "throw" ? Promise.reject(new InvalidRequest("regrant refused")) : Promise.resolve(grantOf("tok-two")),
      secrets: new Map() as never,
      state: () => undefined,
    } as never,
    approvals: { pass: async () => s.approve ?? "user:7" },
  };
  const text = typeof s.body === "string" ? s.body : s.body ? s.body.chunks.join("") : undefined;
  const stream = (() => {
    if (s.body === undefined) return null;
    const chunks = typeof s.body === "string" ? [s.body] : s.body.chunks;
    const fail = typeof s.body === "string" ? undefined : s.body.fail;
    let i = 0;
    return new ReadableStream<Uint8Array>({
      pull(ctrl) {
        if (i < chunks.length) return ctrl.enqueue(new TextEncoder().encode(chunks[i++]!));
        if (fail) return ctrl.error(fail);
        ctrl.close();
      },
    });
  })();
  const bodyLength = s.bodyLength !== undefined ? s.bodyLength : text === undefined ? null : Buffer.byteLength(text);
  let outcome: unknown;
  try {
    const answer = await egress(
      {
        principal: "agent:1",
        contained: false,
        vault,
        host: s.host,
        port: 443,
        method: s.method,
        target: s.target,
        headers: [["content-type", "application/x-www-form-urlencoded"]],
        body: stream,
        bodyLength,
        ingress: "explicit",
      },
      deps,
    );
    const body = answer.body instanceof Uint8Array ? new TextDecoder().decode(answer.body) : answer.body ? await new Response(answer.body).text() : null;
    outcome = { status: answer.status, body };
  } catch (err) {
    const res = toErrorResponse(err);
    outcome = { thrown: err instanceof BrokerError ? err.code : String(err), status: res.status, envelope: await res.json() };
  }
  const result = { outcome, sent, audits, observations };
  return result;
}

const auth = (h: readonly [string, string][]) => h.find(([k]) => k.toLowerCase() === "authorization")?.[1];

describe("every exit of egress()", () => {
  test("TRACE: 405 upfront, no service, no upstream", async () => {
    const r = await run({ name: "trace", method: "TRACE", host: "plain.example.com", target: "/", steps: [] });
    expect(r.outcome).toMatchObject({ thrown: "method_not_allowed", status: 405 });
    expect(r.sent).toEqual([]);
    expect(r.audits).toMatchObject([
      { status: 405, bytesIn: 0, bytesOut: 0, service: null, error: "method_not_allowed", approvedBy: null, credentialKeys: "" },
    ]);
    expect(r.observations).toEqual([{ ingress: "explicit", vault: "v1", service: null, status: 405, brokerSeconds: 0.01, upstreamSeconds: null }]);
  });

  test("declared body over the cap: 413 upfront", async () => {
    const r = await run({
      name: "declared-over-cap",
      method: "POST",
      host: "plain.example.com",
      target: "/",
      body: "x".repeat(100),
      maxRequestBytes: 50,
      steps: [],
    });
    expect(r.outcome).toMatchObject({ thrown: "payload_too_large", status: 413 });
    expect(r.audits).toMatchObject([{ status: 413, bytesIn: 0, service: null, error: "payload_too_large" }]);
  });

  test("unmatched host: 403 forbidden, service null", async () => {
    const r = await run({ name: "unmatched", method: "GET", host: "nowhere.example.com", target: "/", steps: [] });
    expect(r.outcome).toMatchObject({ thrown: "forbidden", status: 403 });
    expect(r.audits).toMatchObject([{ status: 403, service: null, error: "forbidden" }]);
  });

  test("a method the rules refuse: 403 with the service named", async () => {
    const r = await run({ name: "rule-refused", method: "DELETE", host: "ruled.example.com", target: "/a/x", steps: [] });
    expect(r.outcome).toMatchObject({ thrown: "request_not_allowed", status: 403 });
    expect(r.audits).toMatchObject([{ status: 403, service: "ruled.example.com", error: "request_not_allowed", bytesIn: 0 }]);
  });

  test("a body claiming (_method) a method the rules refuse: 403, the same hint as the request line would get, bytesIn counted", async () => {
    const body = "_method=DELETE&a=1";
    const r = await run({ name: "body-claim-refused", method: "POST", host: "ruled.example.com", target: "/a/x", body, steps: [] });
    expect(r.outcome).toMatchObject({ thrown: "request_not_allowed", status: 403 });
    expect(r.sent).toEqual([]);
    expect(r.audits).toMatchObject([{ status: 403, service: "ruled.example.com", error: "request_not_allowed", bytesIn: body.length }]);
    // The hint names the claimed method and the canonical path.
    const env = (r.outcome as { envelope: { proposal_hint?: { proposal?: { message?: string } } } }).envelope;
    expect(env.proposal_hint?.proposal?.message).toBe("Needs DELETE /a/x on ruled.example.com, which its rules do not allow.");
  });

  test("a body claim on a percent-encoded path: checked on the same canonical path", async () => {
    const body = "_method=DELETE";
    const r = await run({ name: "body-claim-encoded", method: "POST", host: "ruled.example.com", target: "/a/%78?q=%2F", body, steps: [] });
    expect(r.outcome).toMatchObject({ thrown: "request_not_allowed", status: 403 });
    const env = (r.outcome as { envelope: { proposal_hint?: { proposal?: { message?: string } } } }).envelope;
    expect(env.proposal_hint?.proposal?.message).toBe("Needs DELETE /a/x on ruled.example.com, which its rules do not allow.");
  });

  test("a body claiming a held method: approved, approvedBy and bytesIn recorded, the read body is what goes out", async () => {
    const body = "_method=PATCH&a=1";
    const r = await run({ name: "body-claim-held", method: "POST", host: "ruled.example.com", target: "/a/x?z=1", body, steps: [{ status: 200, body: "ok" }] });
    expect(r.outcome).toEqual({ status: 200, body: "ok" });
    expect(r.sent).toEqual([{ method: "POST", target: "/a/x?z=1", auth: `Bearer ${SECRET}`, body, bodyLength: body.length }]);
    expect(r.audits).toMatchObject([{ status: 200, bytesIn: body.length, bytesOut: 2, service: "ruled.example.com", error: null, approvedBy: "user:7" }]);
  });

  test("a POST read for its claims that claims nothing: not held, the read body goes out", async () => {
    const body = "a=1";
    const r = await run({
      name: "body-read-unclaimed",
      method: "POST",
      host: "ruled.example.com",
      target: "/a/x",
      body: { chunks: ["a", "=1"] },
      bodyLength: null,
      steps: [{ status: 201 }],
    });
    expect(r.outcome).toEqual({ status: 201, body: null });
    expect(r.sent).toEqual([{ method: "POST", target: "/a/x", auth: `Bearer ${SECRET}`, body, bodyLength: 3 }]);
    expect(r.audits).toMatchObject([{ status: 201, bytesIn: 3, bytesOut: 0, approvedBy: null }]);
  });

  test("an empty POST read for its claims: sent with no body stream and its declared length", async () => {
    const r = await run({ name: "body-read-empty", method: "POST", host: "ruled.example.com", target: "/a/x", body: "", steps: [{ status: 204 }] });
    expect(r.sent).toEqual([{ method: "POST", target: "/a/x", auth: `Bearer ${SECRET}`, body: null, bodyLength: 0 }]);
    expect(r.audits).toMatchObject([{ status: 204, bytesIn: 0 }]);
  });

  test("a streamed body over the cap the upstream consumed before failing: 413, bytesIn past the cap", async () => {
    const r = await run({
      name: "stream-over-cap",
      method: "POST",
      host: "plain.example.com",
      target: "/",
      body: { chunks: ["x".repeat(40), "x".repeat(40)] },
      bodyLength: null,
      maxRequestBytes: 50,
      steps: [{ status: 200 }],
    });
    expect(r.outcome).toMatchObject({ thrown: "payload_too_large", status: 413 });
    expect(r.audits).toMatchObject([{ status: 413, bytesIn: 80, error: "payload_too_large", service: "plain.example.com" }]);
    expect((r.observations[0] as { upstreamSeconds: unknown }).upstreamSeconds).toBeNull();
  });

  test("the agent's body failing mid-stream: its own error (400), not the upstream's", async () => {
    const r = await run({
      name: "stream-client-failure",
      method: "POST",
      host: "plain.example.com",
      target: "/",
      body: { chunks: ["abc"], fail: new InvalidRequest("client closed the connection mid-body") },
      bodyLength: null,
      steps: [],
    });
    expect(r.outcome).toMatchObject({ thrown: "invalid_request", status: 400 });
    expect(r.audits).toMatchObject([{ status: 400, bytesIn: 3, error: "invalid_request" }]);
  });

  test("the upstream failing after it consumed the body: 500 internal, bytesIn kept, service named", async () => {
    const r = await run({
      name: "upstream-throws",
      method: "POST",
      host: "plain.example.com",
      target: "/",
      body: "hello",
      steps: [{ throw: new TypeError(`boom ${SECRET}`) }],
    });
    expect(r.outcome).toMatchObject({ thrown: "internal", status: 500 });
    expect(JSON.stringify(r.outcome)).not.toContain(SECRET);
    expect(r.audits).toMatchObject([{ status: 500, bytesIn: 5, bytesOut: 0, error: "internal", service: "plain.example.com" }]);
    expect(r.observations).toMatchObject([{ status: 500, service: "plain.example.com", upstreamSeconds: null }]);
  });

  test("HEAD: the answer without a body, bytesOut 0, metrics with an upstream time", async () => {
    const r = await run({ name: "head", method: "HEAD", host: "plain.example.com", target: "/", steps: [{ status: 200 }] });
    expect(r.outcome).toEqual({ status: 200, body: null });
    expect(r.audits).toMatchObject([{ status: 200, bytesIn: 0, bytesOut: 0 }]);
    expect(r.observations).toEqual([
      { ingress: "explicit", vault: "v1", service: "plain.example.com", status: 200, brokerSeconds: 0.02, upstreamSeconds: 0.01 },
    ]);
  });

  test("minted: a small declared body is kept, and sent again with the fresh token after a 401", async () => {
    const r = await run({
      name: "minted-small-replay",
      method: "POST",
      host: "minted.example.com",
      target: "/t",
      body: "small",
      steps: [{ status: 401 }, { status: 200, body: "ok" }],
    });
    expect(r.outcome).toEqual({ status: 200, body: "ok" });
    expect(r.sent).toEqual([
      { method: "POST", target: "/t", auth: "Bearer tok-one", body: "small", bodyLength: 5 },
      { method: "POST", target: "/t", auth: "Bearer tok-two", body: "small", bodyLength: 5 },
    ]);
    expect(r.audits).toMatchObject([{ status: 200, bytesIn: 5, bytesOut: 2 }]);
  });

  test("minted: a streamed body is not replayed; the 401 stands", async () => {
    const r = await run({
      name: "minted-stream-no-replay",
      method: "POST",
      host: "minted.example.com",
      target: "/t",
      body: { chunks: ["str", "eam"] },
      bodyLength: null,
      steps: [{ status: 401, body: "no" }],
    });
    expect(r.outcome).toEqual({ status: 401, body: "no" });
    expect(r.sent).toHaveLength(1);
    expect(r.audits).toMatchObject([{ status: 401, bytesIn: 6 }]);
  });

  test("minted: no body (GET) is replayed", async () => {
    const r = await run({ name: "minted-get-replay", method: "GET", host: "minted.example.com", target: "/t", steps: [{ status: 401 }, { status: 200 }] });
    expect(r.sent.map((x) => x.auth)).toEqual(["Bearer tok-one", "Bearer tok-two"]);
  });

  test("minted: a held body (read whole for approval) is replayed after a 401", async () => {
    const body = "_method=PATCH";
    const r = await run({
      name: "minted-held-replay",
      method: "POST",
      host: "mruled.example.com",
      target: "/a/x",
      body,
      steps: [{ status: 401 }, { status: 200 }],
    });
    expect(r.sent.map((x) => [x.auth, x.body])).toEqual([
      ["Bearer tok-one", body],
      ["Bearer tok-two", body],
    ]);
    expect(r.audits).toMatchObject([{ status: 200, bytesIn: body.length, approvedBy: "user:7" }]);
  });

  test("minted: a regrant that fails is the error; no second send", async () => {
    const r = await run({ name: "minted-regrant-fails", method: "GET", host: "minted.example.com", target: "/t", steps: [{ status: 401 }], regrant: "throw" });
    expect(r.outcome).toMatchObject({ thrown: "invalid_request", status: 400 });
    expect(r.sent).toHaveLength(1);
    expect(r.audits).toMatchObject([{ status: 400, error: "invalid_request", service: "minted.example.com" }]);
  });

  test("minted: refreshed too often (no regrant): the 401 stands", async () => {
    const r = await run({
      name: "minted-regrant-none",
      method: "GET",
      host: "minted.example.com",
      target: "/t",
      steps: [{ status: 401, body: "x" }],
      regrant: "none",
    });
    expect(r.outcome).toEqual({ status: 401, body: "x" });
    expect(r.sent).toHaveLength(1);
  });
});
