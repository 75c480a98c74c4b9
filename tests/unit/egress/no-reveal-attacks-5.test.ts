// No reveal, fifth attack round (unit level): holes found in the shared echo set (echo-needles.ts),
// its per-request join of short values (Needles.with, plan.ts responseNeedles), the scanner's
// following of a rebuilt index, header redaction and UTF-16 alignment. Each test fails while the
// hole is open.

import { beforeAll, describe, expect, test } from "bun:test";
import { createPlanCache, type PlanCache } from "../../../src/egress/index.ts";
import type { Needles } from "../../../src/egress/redact.ts";
import { redactText } from "../../../src/egress/redact-headers.ts";
import { createRedactor } from "../../../src/egress/redact.ts";
import { Secret } from "../../../src/secret.ts";
import { createTestApi, type TestApi } from "../../helpers/api.ts";

const HOST = "api.example.com";
const v = (name: string) => `${name}-${crypto.randomUUID()}`;
const SHORT = { a: "pw-a1b2c3", b: "pw-b7x8y9" }; // fewer than 12 characters each
let api: TestApi;
let token: string;
const ids = new Map<string, { id: number; name: string }>();

const holds = (n: Needles, value: string) => redactText(`<${value}>`, n) === "<[redacted]>";

async function must(method: string, path: string, body?: unknown) {
  const r = await api.call(method, path, { token, body });
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function vaultWith(name: string, creds: Record<string, string>, services: { host: string; auth: Record<string, unknown> }[]) {
  await must("POST", "/v1/vaults", { name });
  for (const [k, val] of Object.entries(creds)) await must("PUT", `/v1/vaults/${name}/credentials/${k}`, { value: val });
  for (const s of services) await must("POST", `/v1/vaults/${name}/services`, s);
  ids.set(name, { id: (await api.store.vaults.byName(name))!.id, name });
}

beforeAll(async () => {
  api = await createTestApi();
  token = (await api.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "correct horse battery" } })).body.token;
  await vaultWith("a", { K: v("long-a") }, [{ host: HOST, auth: { type: "bearer", token: "K" } }]);
  await vaultWith("s", { K: SHORT.a }, [{ host: "short.example.com", auth: { type: "bearer", token: "K" } }]);
});

const cache = () => createPlanCache(api.store, api.domain.dataKey, () => ({}), {});
const planOf = (plans: PlanCache, vault: string, host = HOST, port = 443) => plans.plan(ids.get(vault)!, host, port);
const grant = (value: string, sent: string[] = []) => ({ token: { value: new Secret(value) }, sent: sent.map((s) => new Secret(s)) });

describe("short values of a request's own grant", () => {
  test("a minted token shorter than 12 characters is redacted in the answers it was sent for", async () => {
    const plans = cache();
    const plan = await planOf(plans, "a");
    const n = await plans.responseNeedles(plan, grant("ghs_9Xk2Lq")); // 10 characters: a short-lived token as some endpoints mint
    expect(holds(n, "ghs_9Xk2Lq")).toBe(true);
  });
});

describe("values of the service's own, and values noted between answers", () => {
  test("a service's own short value, just rotated, is still redacted in that service's next answers (sent within 24 h)", async () => {
    const plans = cache();
    const before = await plans.responseNeedles(await planOf(plans, "s", "short.example.com"));
    expect(holds(before, SHORT.a)).toBe(true); // sent with this plan
    await must("PUT", "/v1/vaults/s/credentials/K", { value: SHORT.b });
    plans.invalidate(ids.get("s")!.id);
    const after = await plans.responseNeedles(await planOf(plans, "s", "short.example.com"));
    expect(holds(after, SHORT.b)).toBe(true);
    // The upstream kept the value sent a second ago and echoes it now: README "every value sent in the last 24 hours (... values since rotated)".
    expect(holds(after, SHORT.a)).toBe(true);
  });

  test("what a failed token request sent (noteSent) is looked for in a stream already open, before any other answer compiles the set", async () => {
    const plans = cache();
    const plan = await planOf(plans, "a");
    const stream = createRedactor(await plans.responseNeedles(plan)); // e.g. a request bin's live feed, open
    const basic = Buffer.from(`client-id:${v("client-secret")}`).toString("base64"); // client_secret_basic as sent
    plans.noteSent([new Secret(basic)]); // the token request goes out and is refused: no grant, no answer compiles
    const out = Buffer.from(stream.push(new TextEncoder().encode(`event: request\ndata: Authorization: Basic ${basic}\n\n`))).toString();
    expect(out).toBe("event: request\ndata: Authorization: Basic [redacted]\n\n");
  });
});
