// Report mode in the pipeline (architecture.md D33): a refusal of the rules (request line, `_method` body claim,
// WebSocket upgrade) goes on as if allowed, with the canonical target and the credential, its audit record saying
// would_refuse:request_not_allowed with the upstream's status and the counter told once; a service's own rules mode
// wins over its vault's; a hold for a person, an ambiguous path and /proxy to a host without a service are never
// passed; the tunnel's unmatched-host refusal becomes the blind tunnel `tunnel` would open, marked would_refuse:forbidden.

import { beforeAll, describe, expect, test } from "bun:test";
import { BrokerError, toErrorResponse, UpstreamUnreachable } from "../../../src/errors.ts";
import {
  compileNetPolicy,
  createPlanCache,
  decideConnect,
  egress,
  egressBlind,
  egressUpgrade,
  splitRecordedError,
  type AuditEntry,
  type EgressDeps,
  type PlanCache,
  type Upstream,
} from "../../../src/egress/index.ts";
import type { PolicyMode } from "../../../src/store/index.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createTestApi, type TestApi } from "../../helpers/api.ts";

const SECRET = `sk-report-${crypto.randomUUID()}`;
let api: TestApi;
let token: string;
let plans: PlanCache;
let vaultId: number;

const RULES = [
  { methods: ["GET", "POST"], paths: ["/a/**"] },
  { methods: ["PATCH"], paths: ["/a/held"], approve: "each" },
];

beforeAll(async () => {
  api = await createTestApi();
  const reg = await api.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "correct horse battery" } });
  token = reg.body.token as string;
  expect((await api.call("POST", "/v1/vaults", { token, body: { name: "v1" } })).status).toBe(201);
  expect((await api.call("PUT", "/v1/vaults/v1/credentials/API_KEY", { token, body: { value: SECRET } })).status).toBe(200);
  for (const [host, rules_mode] of [
    ["ruled.example.com", undefined],
    ["enforced.example.com", "enforce"],
    ["reported.example.com", "report"],
  ] as const) {
    const body = { host, auth: { type: "bearer", token: "API_KEY" }, rules: RULES, ...(rules_mode && { rules_mode }) };
    expect((await api.call("POST", "/v1/vaults/v1/services", { token, body })).status).toBe(201);
  }
  vaultId = (await api.store.vaults.byName("v1"))!.id;
  plans = createPlanCache(api.store, api.domain.dataKey, () => ({}));
});

interface Sent {
  method: string;
  target: string;
  auth: string | undefined;
}

function harness(opts: { steps?: ({ status: number } | { throw: unknown })[]; upstream?: Upstream } = {}) {
  const sent: Sent[] = [];
  const audits: AuditEntry[] = [];
  const counted: unknown[] = [];
  const held: string[] = [];
  const steps = [...(opts.steps ?? [])];
  const upstream: Upstream = opts.upstream ?? {
    async send(_dest, req) {
      sent.push({ method: req.method, target: req.target, auth: req.headers.find(([k]) => k.toLowerCase() === "authorization")?.[1] });
      const step = steps.shift() ?? { status: 200 };
      if ("throw" in step) throw step.throw;
      return { status: step.status, statusText: "", headers: [["content-type", "text/plain"]], body: new TextEncoder().encode("ok") };
    },
    open: async () => {
      throw new Error("unused");
    },
    openPlain: async () => {
      throw new Error("unused");
    },
    close() {},
  };
  let mtick = 0;
  const deps: EgressDeps = {
    plans,
    policy: compileNetPolicy({ allowPrivateRanges: true, allowlist: [], ownListeners: [] }),
    resolver: async () => ["192.0.2.10"],
    upstream,
    audit: { record: (e) => void audits.push(e) },
    log: createMemoryLogger(),
    now: () => 1000,
    maxRequestBytes: 0,
    maxResponseBytes: 0,
    metrics: { now: () => (mtick += 1), observe: () => {}, wouldRefuse: (o) => void counted.push(o) },
    approvals: {
      pass: async (h) => {
        held.push(`${h.method} ${h.target}`);
        return "user:7";
      },
    },
  };
  return { deps, sent, audits, counted, held };
}

async function run(
  h: ReturnType<typeof harness>,
  r: { mode?: PolicyMode; host: string; method: string; target: string; body?: string; ingress?: "explicit" | "transparent" },
) {
  const body = r.body === undefined ? null : new Response(r.body).body;
  try {
    const answer = await egress(
      {
        principal: "agent:1",
        contained: false,
        vault: { id: vaultId, name: "v1", ...(r.mode && { policyMode: r.mode }) },
        host: r.host,
        port: 443,
        method: r.method,
        target: r.target,
        headers: r.body === undefined ? [] : [["content-type", "application/x-www-form-urlencoded"]],
        body,
        bodyLength: r.body === undefined ? null : r.body.length,
        ingress: r.ingress ?? "explicit",
      },
      h.deps,
    );
    if (answer.body && !(answer.body instanceof Uint8Array)) await new Response(answer.body).text(); // the body streamed: the record is written
    return { status: answer.status };
  } catch (err) {
    return { thrown: err instanceof BrokerError ? err.code : String(err), status: toErrorResponse(err).status };
  }
}

describe("the rules in report mode", () => {
  test("enforce (the vault's default): a method outside the rules is 403 and never sent", async () => {
    const h = harness();
    expect(await run(h, { host: "ruled.example.com", method: "DELETE", target: "/a/x" })).toEqual({ thrown: "request_not_allowed", status: 403 });
    expect(h.sent).toEqual([]);
    expect(h.audits).toMatchObject([{ status: 403, error: "request_not_allowed", service: "ruled.example.com" }]);
    expect(h.counted).toEqual([]);
  });

  test("report: the request reaches the upstream with the credential and the canonical path; the record says would_refuse, the status is the upstream's", async () => {
    const h = harness({ steps: [{ status: 204 }] });
    expect(await run(h, { mode: "report", host: "ruled.example.com", method: "DELETE", target: "/b/%64?q=%2F" })).toEqual({ status: 204 });
    expect(h.sent).toEqual([{ method: "DELETE", target: "/b/d?q=%2F", auth: `Bearer ${SECRET}` }]);
    expect(h.audits).toMatchObject([{ status: 204, error: "would_refuse:request_not_allowed", service: "ruled.example.com", path: "/b/%64" }]);
    expect(h.counted).toEqual([{ vault: "v1", service: "ruled.example.com", code: "request_not_allowed" }]);
  });

  test("report: a request the rules allow is not marked", async () => {
    const h = harness();
    expect(await run(h, { mode: "report", host: "ruled.example.com", method: "GET", target: "/a/x" })).toEqual({ status: 200 });
    expect(h.audits).toMatchObject([{ status: 200, error: null }]);
    expect(h.counted).toEqual([]);
  });

  test("a service's own rules mode wins over its vault's, both ways", async () => {
    const enforced = harness();
    expect(await run(enforced, { mode: "report", host: "enforced.example.com", method: "DELETE", target: "/a/x" })).toMatchObject({ status: 403 });
    expect(enforced.sent).toEqual([]);
    const reported = harness();
    expect(await run(reported, { mode: "enforce", host: "reported.example.com", method: "DELETE", target: "/a/x" })).toEqual({ status: 200 });
    expect(reported.audits).toMatchObject([{ error: "would_refuse:request_not_allowed", service: "reported.example.com" }]);
    const unset = harness();
    expect(await run(unset, { host: "reported.example.com", method: "PUT", target: "/z" })).toEqual({ status: 200 });
    expect(unset.counted).toEqual([{ vault: "v1", service: "reported.example.com", code: "request_not_allowed" }]);
  });

  test("report: a body claiming (_method) a method the rules refuse goes through, marked once", async () => {
    const h = harness();
    expect(await run(h, { mode: "report", host: "ruled.example.com", method: "POST", target: "/a/held", body: "_method=DELETE" })).toEqual({
      status: 200,
    });
    expect(h.sent).toMatchObject([{ method: "POST", target: "/a/held" }]);
    expect(h.audits).toMatchObject([{ status: 200, error: "would_refuse:request_not_allowed" }]);
    expect(h.counted.length).toBe(1);
  });

  test("report: a request a rule holds for a person is still held (a hold is no refusal), and not marked", async () => {
    const h = harness();
    expect(await run(h, { mode: "report", host: "ruled.example.com", method: "PATCH", target: "/a/held" })).toEqual({ status: 200 });
    expect(h.held).toEqual(["PATCH /a/held"]);
    expect(h.audits).toMatchObject([{ status: 200, error: null, approvedBy: "user:7" }]);
  });

  test("report: an ambiguous path is still 400, never sent", async () => {
    const h = harness();
    expect(await run(h, { mode: "report", host: "ruled.example.com", method: "GET", target: "/a%2Fb" })).toMatchObject({ status: 400 });
    expect(h.sent).toEqual([]);
    expect(h.counted).toEqual([]);
  });

  test("report: /proxy to a host without a service stays 403 forbidden (no credential, no host anyone named)", async () => {
    const h = harness();
    expect(await run(h, { mode: "report", host: "nowhere.example.com", method: "GET", target: "/" })).toEqual({ thrown: "forbidden", status: 403 });
    expect(h.audits).toMatchObject([{ status: 403, error: "forbidden", service: null }]);
    expect(h.counted).toEqual([]);
  });

  test("report: a request let through that then fails keeps both in its record, the mark first", async () => {
    const h = harness({ steps: [{ throw: new UpstreamUnreachable("cannot connect") }] });
    expect(await run(h, { mode: "report", host: "ruled.example.com", method: "DELETE", target: "/a/x" })).toMatchObject({ status: 502 });
    expect(h.audits).toMatchObject([{ status: 502, error: "would_refuse:request_not_allowed,upstream_unreachable" }]);
    expect(splitRecordedError(h.audits[0]!.error)).toEqual({ wouldRefuse: "request_not_allowed", error: "upstream_unreachable" });
    expect(splitRecordedError("forbidden")).toEqual({ error: "forbidden" });
  });

  test("report: a WebSocket upgrade outside the rules is sent, marked", async () => {
    const written: Uint8Array[] = [];
    const pending = [Buffer.from("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n", "latin1")];
    const h = harness({
      upstream: {
        send: async () => {
          throw new Error("unused");
        },
        openPlain: async () => {
          throw new Error("unused");
        },
        open: async () => ({
          read: async () => pending.shift() ?? null,
          unread: (chunk) => void (chunk.byteLength && pending.unshift(Buffer.from(chunk))),
          write: async (bytes) => void written.push(bytes),
          idleTimeout() {},
          close() {},
          closed: false,
          buffered: 0,
          key: "test",
        }),
        close() {},
      },
    });
    const upgraded = await egressUpgrade(
      {
        principal: "agent:1",
        contained: false,
        vault: { id: vaultId, name: "v1", policyMode: "report" },
        host: "ruled.example.com",
        port: 443,
        method: "GET",
        target: "/ws/%6Cive",
        headers: [
          ["upgrade", "websocket"],
          ["connection", "Upgrade"],
          ["sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="],
          ["sec-websocket-version", "13"],
        ],
        body: null,
        bodyLength: null,
        ingress: "transparent",
      },
      h.deps,
    );
    expect(upgraded.kind).toBe("switched");
    expect(Buffer.concat(written).toString("latin1")).toStartWith("GET /ws/live HTTP/1.1\r\n");
    if (upgraded.kind === "switched") upgraded.finish(0, 0);
    expect(h.audits).toMatchObject([{ status: 101, error: "would_refuse:request_not_allowed" }]);
    expect(h.counted).toEqual([{ vault: "v1", service: "ruled.example.com", code: "request_not_allowed" }]);
  });
});

describe("hosts without a service in the tunnel", () => {
  test("the CONNECT decision: a service intercepts; tunnel is blind; deny refuses, or in report mode opens the blind tunnel, marked", async () => {
    const v = (unmatchedHosts: "tunnel" | "deny", policyMode: PolicyMode) => ({ id: vaultId, unmatchedHosts, policyMode });
    expect(await decideConnect(plans, v("deny", "report"), "ruled.example.com", 443)).toBe("intercept");
    expect(await decideConnect(plans, v("tunnel", "enforce"), "nowhere.example.com", 443)).toBe("blind");
    expect(await decideConnect(plans, v("tunnel", "report"), "nowhere.example.com", 443)).toBe("blind");
    expect(await decideConnect(plans, v("deny", "enforce"), "nowhere.example.com", 443)).toBe("refuse");
    expect(await decideConnect(plans, v("deny", "report"), "nowhere.example.com", 443)).toBe("report");
  });

  test("a blind tunnel report mode opened: guarded and dialled as ever, its record says would_refuse:forbidden, counted with service none", async () => {
    const dialled: string[] = [];
    const h = harness({
      upstream: {
        send: async () => {
          throw new Error("unused");
        },
        open: async () => {
          throw new Error("unused");
        },
        openPlain: async (dest) => {
          dialled.push(`${dest.host}:${dest.port} ${(await dest.addresses()).join(",")}`);
          return { read: async () => null, unread() {}, write: async () => {}, idleTimeout() {}, close() {}, closed: false, buffered: 0, key: "p" };
        },
        close() {},
      },
    });
    const input = { principal: "agent:1", contained: false, vault: { id: vaultId, name: "v1" }, host: "nowhere.example.com", port: 443 };
    const tunnel = await egressBlind(input, h.deps, "forbidden");
    tunnel.finish(10, 20);
    expect(dialled).toEqual(["nowhere.example.com:443 192.0.2.10"]);
    expect(h.audits).toMatchObject([{ ingress: "blind", status: 200, bytesIn: 10, bytesOut: 20, error: "would_refuse:forbidden", service: null }]);
    expect(h.counted).toEqual([{ vault: "v1", service: "none", code: "forbidden" }]);
    // The guard still refuses a blocked address, marked as what report mode let through.
    const blocked = harness();
    blocked.deps = {
      ...blocked.deps,
      policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: [], ownListeners: [] }),
      resolver: async () => ["10.0.0.1"],
    };
    const refused = await egressBlind(input, blocked.deps, "forbidden").then(
      () => "opened",
      (err: BrokerError) => err.code,
    );
    expect(refused).toBe("egress_blocked");
    expect(blocked.audits).toMatchObject([{ status: 403, error: "would_refuse:forbidden,egress_blocked" }]);
  });
});

describe("who switches modes", () => {
  test("human admins set the vault's policy_mode and a service's rules_mode; the answers say so", async () => {
    const set = await api.call("PATCH", "/v1/vaults/v1", { token, body: { policy_mode: "report" } });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ name: "v1", policy_mode: "report", unmatched_hosts: "tunnel" });
    expect((await api.call("GET", "/v1/vaults/v1", { token })).body).toMatchObject({ policy_mode: "report" });
    expect((await api.call("PATCH", "/v1/vaults/v1", { token, body: { policy_mode: "enforce" } })).body).toMatchObject({ policy_mode: "enforce" });
    const svc = await api.call("PATCH", "/v1/vaults/v1/services/ruled.example.com", { token, body: { rules_mode: "report" } });
    expect(svc.status).toBe(200);
    expect(svc.body).toMatchObject({ host: "ruled.example.com", rules_mode: "report", rules: RULES });
    const back = await api.call("PATCH", "/v1/vaults/v1/services/ruled.example.com", { token, body: { rules_mode: null } });
    expect(back.body.rules_mode).toBeUndefined();
    const bad = await api.call("PATCH", "/v1/vaults/v1", { token, body: { policy_mode: "audit" } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain("policy_mode must be enforce or report");
  });
});
