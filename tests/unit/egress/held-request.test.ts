// Held requests (rules with "approve": "each"): which rules hold a request, what the fingerprint binds
// (a changed body, query, method or meaningful header is another request; tracing and user agents are
// not), Prefer: wait, and the description a person reads (credentials out, echoes redacted, cut safely).

import { describe, expect, test } from "bun:test";
import { describeHeld, preferredWaitMs, readHeldBody, type HeldRequestInput } from "../../../src/egress/held-request.ts";
import type { EgressPlan } from "../../../src/egress/plan.ts";
import { Needles } from "../../../src/egress/redact.ts";
import { heldByRule } from "../../../src/egress/rules.ts";
import { PayloadTooLarge } from "../../../src/errors.ts";
import { describeRules, parseRules } from "../../../src/vault/index.ts";

const SECRET = `sk-held-${crypto.randomUUID()}`;
const needles = new Needles([SECRET]);
const plan = (rules: unknown) =>
  ({ service: { host: "api.stripe.com", authType: "bearer" }, rules: parseRules(rules), auth: { type: "bearer", token: "K" }, injection: { header: "authorization", value: { reveal: () => SECRET } }, credentialKeys: ["K"], needles }) as unknown as EgressPlan;
const refunds = plan([
  { methods: ["GET", "POST"], paths: ["/v1/**"] },
  { methods: ["POST", "DELETE"], paths: ["/v1/refunds", "/v1/customers/*"], approve: "each" },
]);

const base: HeldRequestInput = {
  vault: { id: 1, name: "v" },
  principal: "agent:1",
  method: "POST",
  host: "api.stripe.com",
  port: 443,
  target: "/v1/refunds?expand=charge",
  headers: [["content-type", "application/json"], ["idempotency-key", "k1"], ["authorization", "Bearer placeholder"], ["user-agent", "sdk/1"]],
  body: new TextEncoder().encode('{"charge":"ch_1"}'),
};
const fp = (over: Partial<HeldRequestInput>) => describeHeld({ ...base, ...over }, refunds, needles).fingerprint;

describe("rules that hold", () => {
  test("approve: each parses, is described, and anything else is refused naming the field", () => {
    expect(parseRules([{ methods: ["post"], paths: ["/a"], approve: "each" }])).toEqual([{ methods: ["POST"], paths: ["/a"], approve: "each" }]);
    expect(describeRules(parseRules([{ methods: ["POST"], paths: ["/a"], approve: "each" }])!)).toBe("POST on /a (each request approved by a human)");
    for (const approve of ["always", true, "", null]) {
      expect(() => parseRules([{ methods: ["POST"], paths: ["/a"], approve }])).toThrow(expect.objectContaining({ field: "rules[0].approve" }));
    }
  });

  test("any matching approve rule holds, even behind a broader rule; a method override counts", () => {
    expect(heldByRule(refunds, "POST", "/v1/refunds")).toBe(true);
    expect(heldByRule(refunds, "POST", "/v1/refunds?x=1")).toBe(true);
    expect(heldByRule(refunds, "DELETE", "/v1/customers/cus_1")).toBe(true);
    expect(heldByRule(refunds, "GET", "/v1/refunds")).toBe(false);
    expect(heldByRule(refunds, "POST", "/v1/charges")).toBe(false);
    expect(heldByRule(refunds, "GET", "/v1/refunds", [["X-HTTP-Method-Override", "post"]])).toBe(true);
    expect(heldByRule(plan([{ methods: ["POST"], paths: ["/v1/**"] }]), "POST", "/v1/refunds")).toBe(false);
  });
});

describe("the fingerprint", () => {
  test("the same request is the same fingerprint, whatever the order of headers or the telemetry", () => {
    const same = fp({ headers: [["user-agent", "other/9"], ["idempotency-key", "k1"], ["traceparent", "00-a-b-01"], ["Content-Type", "application/json"], ["x-stainless-retry-count", "2"], ["prefer", "wait=10"]] });
    expect(same).toBe(fp({}));
  });

  test("method, host, port, path, query, body and meaningful headers each make another request", () => {
    const changed = [
      fp({ method: "PUT" }),
      fp({ host: "api.other.com" }),
      fp({ port: 8443 }),
      fp({ target: "/v1/refunds?expand=customer" }),
      fp({ target: "/v1/refunds" }),
      fp({ body: new TextEncoder().encode('{"charge":"ch_2"}') }),
      fp({ headers: [...base.headers, ["stripe-account", "acct_B"]] }),
      fp({ headers: [["content-type", "text/plain"], ["idempotency-key", "k1"]] }),
      fp({ headers: [["content-type", "application/json"], ["idempotency-key", "k2"]] }),
      fp({ headers: [...base.headers, ["x-http-method-override", "DELETE"]] }),
    ];
    expect(new Set([fp({}), ...changed]).size).toBe(changed.length + 1);
  });
});

describe("the description", () => {
  test("credential headers are left out and an echo of the credential is redacted everywhere", () => {
    const held = describeHeld(
      { ...base, target: `/v1/refunds?k=${SECRET}`, headers: [...base.headers, ["cookie", "s=1"], ["x-note", `is ${SECRET}`]], body: new TextEncoder().encode(`{"note":"${SECRET}"}`) },
      refunds,
      needles,
    );
    expect(held.headers.map(([n]) => n)).toEqual(["content-type", "idempotency-key", "user-agent", "x-note"]);
    expect(held.headers).toContainEqual(["x-note", "is [redacted]"]);
    expect(held.target).toBe("/v1/refunds?k=[redacted]");
    expect(held.bodyPreview).toBe('{"note":"[redacted]"}');
    expect(JSON.stringify(held)).not.toContain(SECRET);
    expect(held.host).toBe("api.stripe.com");
    expect(describeHeld({ ...base, port: 8443 }, refunds, needles).host).toBe("api.stripe.com:8443");
  });

  test("a long body is redacted before it is cut; binary bodies and empty ones have no preview", () => {
    const long = `${"a".repeat(65_530)}${SECRET}${"b".repeat(10)}`;
    const held = describeHeld({ ...base, body: new TextEncoder().encode(long) }, refunds, needles);
    expect(held.bodyPreview!.length).toBe(65_536);
    expect(held.bodyPreview).not.toContain(SECRET.slice(0, 8));
    expect(held.bodyBytes).toBe(long.length);
    expect(describeHeld({ ...base, body: new Uint8Array([0, 159, 146, 150]) }, refunds, needles).bodyPreview).toBeNull();
    expect(describeHeld({ ...base, body: new Uint8Array([1, 2, 3]) }, refunds, needles).bodyPreview).toBeNull();
    expect(describeHeld({ ...base, body: new Uint8Array(0) }, refunds, needles).bodyPreview).toBeNull();
  });
});

describe("reading and waiting", () => {
  test("bodies are read whole up to 1 MiB; a larger one is refused, declared or streamed", async () => {
    const stream = (n: number) => new Blob([new Uint8Array(n)]).stream();
    expect((await readHeldBody(stream(1_048_576), null)).byteLength).toBe(1_048_576);
    expect(await readHeldBody(null, null)).toEqual(new Uint8Array(0));
    await expect(readHeldBody(stream(1_048_577), null)).rejects.toBeInstanceOf(PayloadTooLarge);
    await expect(readHeldBody(stream(10), 2_000_000)).rejects.toBeInstanceOf(PayloadTooLarge);
  });

  test("Prefer: wait is read among other preferences and capped at 120 s", () => {
    expect(preferredWaitMs([])).toBe(0);
    expect(preferredWaitMs([["prefer", "wait=30"]])).toBe(30_000);
    expect(preferredWaitMs([["Prefer", "respond-async, wait=5"]])).toBe(5_000);
    expect(preferredWaitMs([["prefer", "return=minimal"], ["prefer", 'wait="7"']])).toBe(7_000);
    expect(preferredWaitMs([["prefer", "wait=100000"]])).toBe(120_000);
    expect(preferredWaitMs([["prefer", "nowait=5"]])).toBe(0);
  });
});

describe("what the person deciding reads", () => {
  test("headers as they will be sent: no Host, X-Vault or hop-by-hop ones", () => {
    const held = describeHeld({ ...base, headers: [...base.headers, ["host", "127.0.0.1:8080"], ["x-vault", "demo"], ["connection", "keep-alive, x-drop"], ["x-drop", "1"], ["keep-alive", "5"]] }, refunds, needles);
    expect(held.headers.map(([n]) => n)).toEqual(["content-type", "idempotency-key", "user-agent"]);
  });

  test("controls and bidirectional overrides are written out, not hidden in the text", () => {
    const held = describeHeld({ ...base, target: "/v1/refunds?n=\u202Egnp.exe", headers: [["x-note", "a\u009Bb"]], body: new TextEncoder().encode('{"to":"\u202Eevil","x":"\u007F"}') }, refunds, needles);
    expect(held.target).toBe("/v1/refunds?n=<U+202E>gnp.exe");
    expect(held.headers).toEqual([["x-note", "a<U+009B>b"]]);
    expect(held.bodyPreview).toBe('{"to":"<U+202E>evil","x":"<U+007F>"}');
  });
});
