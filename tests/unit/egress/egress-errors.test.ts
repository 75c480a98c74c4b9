// Logs never carry an injected value (issue 11, item 4): an unexpected error whose message quotes
// the injected header is logged once, scrubbed, and reaches the client as a plain 500 envelope;
// and the logger itself replaces every credential value the plan cache holds, whatever logs it.
// Also: a stored service row that today's host rules refuse fails closed for its hosts only.

import { beforeAll, describe, expect, test } from "bun:test";
import { HostNotAllowed, toErrorResponse } from "../../../src/errors.ts";
import { compileNetPolicy, createPlanCache, egress, type EgressDeps, type PlanCache, type Upstream } from "../../../src/egress/index.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createTestApi, type TestApi } from "../../helpers/api.ts";

// A quote and a backslash: JSON escapes them, so the logger must look for the escaped form too.
const SECRET = `sk-"quoted\\value-${crypto.randomUUID()}`;
let api: TestApi;
let plans: PlanCache;
let vault: { id: number; name: string };

beforeAll(async () => {
  api = await createTestApi();
  const reg = await api.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "correct horse battery" } });
  const token = reg.body.token as string;
  expect((await api.call("POST", "/v1/vaults", { token, body: { name: "v1" } })).status).toBe(201);
  expect((await api.call("PUT", "/v1/vaults/v1/credentials/API_KEY", { token, body: { value: SECRET } })).status).toBe(200);
  const svc = await api.call("POST", "/v1/vaults/v1/services", {
    token,
    body: { host: "api.example.com", auth: { type: "basic", username: "bot", token: "API_KEY" } },
  });
  expect(svc.status).toBe(201);
  vault = { id: (await api.store.vaults.byName("v1"))!.id, name: "v1" };
  plans = createPlanCache(api.store, api.domain.dataKey, () => ({}));
});

/** An upstream client failing the way a runtime error can: its message quotes a header it was given. */
const quotingUpstream: Upstream = {
  async send(_dest, req) {
    const auth = req.headers.find(([k]) => k.toLowerCase() === "authorization")?.[1];
    throw new TypeError(`Invalid header value: '${auth}' (raw secret ${SECRET})`);
  },
  async open() {
    throw new Error("unused");
  },
  async openPlain() {
    throw new Error("unused");
  },
  close() {},
};

function deps(log: ReturnType<typeof createMemoryLogger>): EgressDeps {
  return {
    plans,
    policy: compileNetPolicy({ allowPrivateRanges: true, allowlist: [], ownListeners: [] }),
    resolver: async () => ["192.0.2.10"],
    upstream: quotingUpstream,
    audit: { record() {} },
    log,
    now: Date.now,
    maxRequestBytes: 0,
    maxResponseBytes: 0,
  };
}

const basic = Buffer.from(`bot:${SECRET}`).toString("base64");
const variants = [SECRET, JSON.stringify(SECRET).slice(1, -1), basic];

describe("an error quoting the injected header", () => {
  test("is logged once, scrubbed, and answered as a plain 500 that no later handler logs raw", async () => {
    const log = createMemoryLogger(); // no defence-in-depth scrub: the egress path alone must hold
    const input = {
      principal: "p",
      contained: false,
      vault,
      host: "api.example.com",
      port: 443,
      method: "GET",
      target: "/",
      headers: [] as [string, string][],
      body: null,
      bodyLength: null,
      ingress: "explicit" as const,
    };
    const err = await egress(input, deps(log)).then(
      () => undefined,
      (e: unknown) => e,
    );
    const res = toErrorResponse(err, log); // what the API's error handler and the tunnel do with it
    const body = await res.text();
    expect(res.status).toBe(500);
    expect(JSON.parse(body).error).toBe("internal");
    expect(log.lines.filter((l) => l.includes("egress_failed"))).toHaveLength(1);
    expect(log.lines.some((l) => l.includes("[redacted]"))).toBe(true);
    for (const v of variants) {
      expect(body).not.toContain(v);
      for (const line of log.lines) expect(line).not.toContain(v);
    }
  });
});

describe("the logger's own scrub", () => {
  test("replaces every value the plan cache holds, raw, JSON-escaped and in header form", async () => {
    await plans.plan(vault, "api.example.com", 443);
    const memory = createMemoryLogger();
    const log = memory.scrubbing(plans.secrets);
    log.error("careless", { detail: `value ${SECRET}`, nested: { seen: `got ${basic} back` } });
    log.child({ component: "x" }).warn(`event naming ${SECRET}`);
    expect(memory.lines).toHaveLength(2);
    for (const v of variants) for (const line of memory.lines) expect(line).not.toContain(v);
    expect(memory.lines[0]).toContain("value [redacted]");
    expect(memory.lines[0]).toContain("got [redacted] back");
  });

  test("forgets values when their vault's cache is dropped, unless they were sent to a host lately", async () => {
    await plans.plan(vault, "api.example.com", 443);
    expect([...plans.secrets.values()]).toContain(SECRET);
    plans.invalidate(vault.id);
    // Sent to api.example.com above: an upstream may have kept it, so that host's answers are
    // scanned for it for a day (architecture.md D22), and the logger keeps scrubbing it as long.
    expect(new Set(plans.secrets.values())).toEqual(new Set([SECRET, basic]));
    const unsent = createPlanCache(api.store, api.domain.dataKey, () => ({}));
    await unsent.plan(vault, "api.example.com", 443);
    expect([...unsent.secrets.values()]).toContain(SECRET);
    unsent.invalidate(vault.id);
    expect([...unsent.secrets.values()]).toEqual([]);
  });
});

describe("a service row that no longer passes the host rules", () => {
  test("matches nothing, and the rest of the vault keeps working", async () => {
    // Stored before public-suffix wildcards were refused: it would send the credential to every github.io site.
    await api.store.services.put(
      {
        vaultId: vault.id,
        host: "*.github.io",
        description: "",
        authType: "bearer",
        authKey: "API_KEY",
        authHeader: null,
        authPrefix: null,
        authUsername: null,
        enabled: true,
      },
      Date.now(),
    );
    plans.invalidate(vault.id);
    await expect(plans.plan(vault, "attacker.github.io", 443)).rejects.toBeInstanceOf(HostNotAllowed);
    expect((await plans.plan(vault, "api.example.com", 443)).credentialKeys).toEqual(["API_KEY"]);
  });
});
