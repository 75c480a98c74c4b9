// Needles follow the values (architecture.md D22): the plan cache's one echo needle set holds every
// vault's values, whatever host they go to (exact and wildcard services, enabled or not, in their
// sent forms, minted inputs too), is compiled once per change, is read again after a write to any
// vault while keeping the values it held, takes values noted later in place (a stream opened
// before sees them), and remembers tokens sent lately within its bounds (count, age).

import { beforeAll, describe, expect, test } from "bun:test";
import { createPlanCache, type PlanCache } from "../../../src/egress/index.ts";
import type { Needles } from "../../../src/egress/redact.ts";
import { redactText } from "../../../src/egress/redact-headers.ts";
import { createRedactor } from "../../../src/egress/redact.ts";
import { Secret } from "../../../src/secret.ts";
import { createTestApi, type TestApi } from "../../helpers/api.ts";

const HOST = "api.example.com";
const v = (name: string) => `${name}-${crypto.randomUUID()}`;
const VALUES = {
  a: v("va"),
  b: v("vb"),
  c: `vc/${crypto.randomUUID()}+x`,
  d: v("vd"),
  e: v("ve"),
  f: v("vf"),
  akid: `AKID${crypto.randomUUID().replaceAll("-", "").toUpperCase()}`,
  aws: v("aws"),
};

let api: TestApi;
let token: string;
const ids = new Map<string, { id: number; name: string }>();

/** Whether the set redacts `value` whole (the set holds it). */
const holds = (n: Needles, value: string) => redactText(`<${value}>`, n) === "<[redacted]>";

async function must(method: string, path: string, body?: unknown) {
  const r = await api.call(method, path, { token, body });
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function vaultWith(name: string, creds: Record<string, string>, services: { host: string; auth: Record<string, unknown>; enabled?: boolean }[]) {
  await must("POST", "/v1/vaults", { name });
  for (const [k, val] of Object.entries(creds)) await must("PUT", `/v1/vaults/${name}/credentials/${k}`, { value: val });
  for (const s of services) await must("POST", `/v1/vaults/${name}/services`, s);
  ids.set(name, { id: (await api.store.vaults.byName(name))!.id, name });
}

beforeAll(async () => {
  api = await createTestApi();
  token = (await api.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "correct horse battery" } })).body.token;
  await vaultWith("a", { K: VALUES.a }, [{ host: HOST, auth: { type: "bearer", token: "K" } }]);
  await vaultWith("b", { K: VALUES.b }, [{ host: "*.example.com", auth: { type: "basic", username: "bot", token: "K" } }]);
  await vaultWith("c", { K: VALUES.c }, [{ host: HOST, auth: { type: "query", param: "key", token: "K" } }]);
  await vaultWith("d", { K: VALUES.d }, [{ host: HOST, auth: { type: "header", header: "x-api-key", token: "K" }, enabled: false }]);
  await vaultWith("e", { K: VALUES.e }, [{ host: "other.example.com", auth: { type: "bearer", token: "K" } }]);
  await vaultWith("f", { K: VALUES.f }, [{ host: `${HOST}:8443`, auth: { type: "bearer", token: "K" } }]);
  await vaultWith("g", {}, [{ host: HOST, auth: { type: "passthrough" } }]);
  await vaultWith("h", { ID: VALUES.akid, SECRET: VALUES.aws }, [
    { host: HOST, auth: { type: "aws_sigv4", access_key_id: "ID", secret_access_key: "SECRET", region: "eu-west-1", service: "s3" } },
  ]);
});

const cache = (opts: Parameters<typeof createPlanCache>[3] = {}) => createPlanCache(api.store, api.domain.dataKey, () => ({}), opts);
const planOf = (plans: PlanCache, vault: string, host = HOST, port = 443) => plans.plan(ids.get(vault)!, host, port);

describe("the echo needle set", () => {
  test("a passthrough service's answers are scanned for every vault's values, in their sent forms", async () => {
    const plans = cache();
    const passthrough = await planOf(plans, "g");
    expect(passthrough.needles.empty).toBe(true);
    const n = await plans.responseNeedles(passthrough);
    for (const value of [VALUES.a, VALUES.b, VALUES.c, VALUES.d, VALUES.akid, VALUES.aws]) expect(holds(n, value)).toBe(true);
    expect(holds(n, Buffer.from(`bot:${VALUES.b}`).toString("base64"))).toBe(true); // Basic's form, via the wildcard
    expect(holds(n, encodeURIComponent(VALUES.c))).toBe(true); // the query parameter's form
    // Every vault's values, whatever host they go to: another host, another port, another name.
    expect([VALUES.e, VALUES.f].map((x) => holds(n, x))).toEqual([true, true]);
    const other = await plans.responseNeedles(await planOf(plans, "e", "other.example.com"));
    expect(other).toBe(n); // one set for every answer
    // The logger's last-line scrub sees them too.
    expect(new Set(plans.secrets.values())).toContain(VALUES.d);
  });

  test("compiled once per change; a write to any vault is read on the next answer, the old value kept", async () => {
    const plans = cache();
    // Vault g (passthrough) asks: vault a's value is in the set only because the store half holds it.
    const plan = await planOf(plans, "g");
    const first = await plans.responseNeedles(plan);
    expect(await plans.responseNeedles(plan)).toBe(first);
    // A write the cache was not told of is not read: the store is asked once per host and change.
    const rotated = v("va2");
    await must("PUT", "/v1/vaults/a/credentials/K", { value: rotated });
    expect(await plans.responseNeedles(plan)).toBe(first);
    plans.invalidate(ids.get("a")!.id);
    const second = await plans.responseNeedles(plan);
    expect(second).toBe(first); // a value added: in place, so a stream opened before looks for it too
    expect([rotated, VALUES.a].map((x) => holds(second, x))).toEqual([true, true]); // the old value may sit in an upstream
    // A write that changes no value re-reads the store but keeps the compiled set.
    plans.invalidate(ids.get("e")!.id);
    expect(await plans.responseNeedles(plan)).toBe(second);
    // A new vault with a wildcard service for the host joins on the next answer after its write.
    const late = v("late");
    await vaultWith("late", { K: late }, [{ host: "*.example.com", auth: { type: "bearer", token: "K" } }]);
    plans.invalidate(ids.get("late")!.id);
    expect(holds(await plans.responseNeedles(plan), late)).toBe(true);
    // Announcements missed: every vault is read again, and every value held so far stays.
    plans.clear();
    const cleared = await plans.responseNeedles(await planOf(plans, "g"));
    expect([rotated, VALUES.a, late, VALUES.b].map((x) => holds(cleared, x))).toEqual([true, true, true, true]);
  });

  test("a request's own values are in its answer's set even when the store has moved on", async () => {
    const plans = cache();
    const plan = await planOf(plans, "c");
    await plans.responseNeedles(plan);
    const replaced = `vc-replaced-${crypto.randomUUID()}`;
    await must("PUT", "/v1/vaults/c/credentials/K", { value: replaced });
    plans.invalidate(ids.get("c")!.id);
    // A request still holding the plan built before the write (in flight): its value is looked for.
    const n = await plans.responseNeedles(plan);
    expect([VALUES.c, replaced].map((x) => holds(n, x))).toEqual([true, true]);
  });
});

describe("values sent lately (the recent half)", () => {
  const grant = (value: string) => ({ token: { value: new Secret(value) } });

  test("a minted token joins the set when granted, in place (streams opened before see it); a refreshed one does not push the old one out", async () => {
    const plans = cache();
    const plan = await planOf(plans, "g");
    const [t1, t2] = [v("tok1"), v("tok2")];
    const before = await plans.responseNeedles(plan);
    expect(holds(await plans.responseNeedles(plan, grant(t1)), t1)).toBe(true);
    expect(holds(before, t1)).toBe(true);
    const n = await plans.responseNeedles(plan, grant(t2));
    expect([t1, t2].map((x) => holds(n, x))).toEqual([true, true]);
    // Another vault's answer (no grant of its own), from any host, is scanned for both.
    const other = await plans.responseNeedles(await planOf(plans, "e", "other.example.com"));
    expect([t1, t2].map((x) => holds(other, x))).toEqual([true, true]);
  });

  test("bounded: the oldest values go first beyond the count, all after the age limit", async () => {
    let clock = 1_000_000;
    const plans = cache({ now: () => clock, recentLimits: { total: 3, ttlMs: 60_000 } });
    const plan = await planOf(plans, "g");
    const tokens = Array.from({ length: 5 }, (_, i) => v(`t${i}`));
    for (const t of tokens) {
      clock += 1000;
      await plans.responseNeedles(plan, grant(t));
    }
    const n = await plans.responseNeedles(plan);
    expect(tokens.map((t) => holds(n, t))).toEqual([false, false, true, true, true]);
    expect(holds(n, VALUES.d)).toBe(true); // stored values are not the recent half's to drop
    clock += 60_000 + 2_500; // the age limit, and the wait (1/24 of it) that gathers expiries into one compile
    const later = await plans.responseNeedles(plan);
    expect(tokens.map((t) => holds(later, t))).toEqual([false, false, false, false, false]);
    expect(holds(later, VALUES.d)).toBe(true);
  });
});

describe("streams and short values", () => {
  const grant = (value: string) => ({ token: { value: new Secret(value) } });
  const text = (b: Uint8Array) => Buffer.from(b).toString("latin1");

  test("a stream opened before follows the set, even when values that do not fit make it build a new index", async () => {
    const plans = cache();
    const plan = await planOf(plans, "g");
    const stream = createRedactor(await plans.responseNeedles(plan));
    const early = v("early-token");
    await plans.responseNeedles(plan, grant(early)); // fits: added in place
    expect(text(stream.push(new TextEncoder().encode(`a ${early} b\n`)))).toBe("a [redacted] b\n");
    // Thousands of tokens: more windows than the index has room for, so it is built anew.
    for (let i = 0; i < 3000; i++) await plans.responseNeedles(plan, grant(v(`bulk-${i}`)));
    const late = v("late-token");
    await plans.responseNeedles(plan, grant(late));
    expect(text(stream.push(new TextEncoder().encode(`c ${late} ${early} d\n`)))).toBe("c [redacted] [redacted] d\n");
  });

  test("what a token request sent (noted before it went, even if it then failed) is in the set from the next answer on", async () => {
    const plans = cache();
    const plan = await planOf(plans, "g");
    const before = await plans.responseNeedles(plan);
    const jwt = v("eyJhbGciOiJSUzI1NiJ9.app-jwt");
    plans.noteSent([new Secret(jwt)]);
    expect(holds(await plans.responseNeedles(plan), jwt)).toBe(true);
    expect(holds(before, jwt)).toBe(true); // added in place: a stream opened before sees it too
  });

  test("a value shorter than 12 characters is looked for in its own service's answers only", async () => {
    await vaultWith("short", { K: "pw-1234" }, [{ host: "short.example.com", auth: { type: "bearer", token: "K" } }]);
    const plans = cache();
    const own = await plans.responseNeedles(await planOf(plans, "short", "short.example.com"));
    expect(redactText("<pw-1234>", own)).toBe("<[redacted]>");
    const other = await plans.responseNeedles(await planOf(plans, "a"));
    expect(holds(other, "pw-1234")).toBe(false); // not every answer of every vault
    expect(holds(other, VALUES.e)).toBe(true);
  });
});
