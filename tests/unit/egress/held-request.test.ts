// Held requests (rules with "approve": "each"): which rules hold a request, what the fingerprint binds
// (a changed body, query, method or meaningful header is another request; tracing and user agents are
// not), Prefer: wait, and the description a person reads (credentials out, echoes redacted, cut safely).

import { describe, expect, test } from "bun:test";
import { describeHeld, preferredWaitMs, readHeldBody, type HeldRequestInput } from "../../../src/egress/held-request.ts";
import type { EgressPlan } from "../../../src/egress/plan.ts";
import { Needles } from "../../../src/egress/redact.ts";
import { claimedInBody } from "../../../src/egress/method-override.ts";
import { bodyMayClaimHeld, heldByRule } from "../../../src/egress/rules.ts";
import { PayloadTooLarge } from "../../../src/errors.ts";
import { parseWith } from "../../../src/contract/index.ts";
import { RulesList } from "../../../src/policy/index.ts";
import { describeRules } from "../../../src/words/index.ts";

/** The rules schema, as a body's `rules` field (or `field`) is read; absent or null is no rules. */
const parseRules = (v: unknown, field = "rules") =>
  parseWith(
    RulesList.nullish().transform((r) => r ?? undefined),
    v,
    field,
  );

const SECRET = `sk-held-${crypto.randomUUID()}`;
const needles = new Needles([SECRET]);
const plan = (rules: unknown) =>
  ({
    service: { host: "api.stripe.com", authType: "bearer" },
    rules: parseRules(rules),
    auth: { type: "bearer", token: "K" },
    injection: { header: "authorization", value: { reveal: () => SECRET } },
    credentialKeys: ["K"],
    needles,
  }) as unknown as EgressPlan;
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
  headers: [
    ["content-type", "application/json"],
    ["idempotency-key", "k1"],
    ["authorization", "Bearer placeholder"],
    ["user-agent", "sdk/1"],
  ],
  body: new TextEncoder().encode('{"charge":"ch_1"}'),
  ingress: "transparent",
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

  test("an approve rule matches the spellings servers route to the same handler", () => {
    for (const path of [
      "/v1/refunds/",
      "/v1/Refunds",
      "/v1/REFUNDS/",
      "/v1/refunds.json",
      "/v1/Refunds.xml?x=1",
      "/v1/refunds%20",
      "/v1/refunds.",
      "/v1/refunds.%20.",
      "/v1/refunds.json%20.",
      "/v1/customers/cus_1/",
      "/V1/Customers/cus_1.json",
    ]) {
      expect({ path, held: heldByRule(refunds, path.includes("customers") ? "DELETE" : "POST", path) }).toEqual({ path, held: true });
    }
    // Only approval rules match loosely: the broad rule still decides what is allowed, literally.
    expect(heldByRule(refunds, "POST", "/v1/refunds/extra")).toBe(false);
    expect(heldByRule(refunds, "POST", "/v1/refundsx")).toBe(false);
    // HEAD runs the GET handler in Express and Rails: held where GET is.
    const exports = plan([
      { methods: ["GET", "HEAD"], paths: ["/**"] },
      { methods: ["GET"], paths: ["/export"], approve: "each" },
    ]);
    expect(heldByRule(exports, "HEAD", "/export")).toBe(true);
    expect(heldByRule(exports, "HEAD", "/other")).toBe(false);
  });

  test("a _method in the query or the body claims its method; a POST body is read only where that could hold", async () => {
    // (GET: POST on a customer is held anyway in these rules.)
    expect(heldByRule(refunds, "GET", "/v1/customers/cus_1?_method=DELETE")).toBe(true);
    expect(heldByRule(refunds, "GET", "/v1/customers/cus_1?a=1&%5Fmethod=delete")).toBe(true);
    expect(heldByRule(refunds, "GET", "/v1/customers/cus_1?method=DELETE")).toBe(false);
    expect(heldByRule(refunds, "GET", "/v1/customers/cus_1?.method=DELETE")).toBe(true);
    expect(heldByRule(refunds, "GET", "/v1/customers/cus_1", [["X_HTTP_Method_Override", "DELETE"]])).toBe(true);
    expect(heldByRule(refunds, "GET", "/v1/customers/cus_1", [], ["DELETE"])).toBe(true);
    expect(bodyMayClaimHeld(refunds, "POST", "/v1/customers/cus_1")).toBe(true);
    expect(bodyMayClaimHeld(refunds, "POST", "/v1/charges")).toBe(false);
    expect(bodyMayClaimHeld(refunds, "PUT", "/v1/customers/cus_1")).toBe(false);
    const text = (s: string) => new TextEncoder().encode(s);
    expect(await claimedInBody(text("a=1&%5Fmethod=delete"), "application/x-www-form-urlencoded; charset=utf-8")).toEqual(["DELETE"]);
    expect(await claimedInBody(text('{"_method":" Delete "}'), "application/json")).toEqual(["DELETE"]);
    expect(await claimedInBody(text('{"\u005fmethod":"PATCH"}'), "application/vnd.api+json")).toEqual(["PATCH"]);
    const form = new FormData();
    form.append("_method", "DELETE");
    const multipart = new Response(form);
    const contentType = multipart.headers.get("content-type")!;
    expect(await claimedInBody(new Uint8Array(await multipart.arrayBuffer()), contentType)).toEqual(["DELETE"]);
    // Read whatever the declared type: Rack takes an untyped POST as a form, Laravel `text/json` as JSON.
    expect(claimedInBody(text("_method=DELETE"), undefined)).toEqual(["DELETE"]);
    expect(claimedInBody(text("_method=DELETE"), "application/x-www-form-urlencoded, text/plain")).toEqual(["DELETE"]);
    expect(claimedInBody(text('{"_method":"DELETE"}'), "text/json")).toEqual(["DELETE"]);
    // Names as PHP stores them; multipart read leniently (bare LF, no closing boundary).
    expect(claimedInBody(text(".method=DELETE&%20_method=PUT&x=1"), "application/x-www-form-urlencoded")).toEqual(["DELETE", "PUT"]);
    expect(claimedInBody(text('--B\nContent-Disposition: form-data; name="_method"\n\nDELETE\n--B--\n'), "multipart/form-data; boundary=B")).toEqual([
      "DELETE",
    ]);
    expect(claimedInBody(text("--B\r\nContent-Disposition: form-data; name=_method\r\n\r\nPATCH\r\n--B\r\n"), undefined)).toEqual(["PATCH"]);
    // In the declared charset; one the broker cannot decode is refused, not passed.
    expect(claimedInBody(new Uint8Array(Buffer.from('{"_method":"DELETE"}', "utf16le")), "application/json; charset=utf-16le")).toEqual(["DELETE"]);
    expect(() => claimedInBody(text('{"_method":"DELETE"}'), "application/json; charset=utf-7")).toThrow(expect.objectContaining({ field: "content-type" }));
    // Bodies that merely mention a method claim nothing.
    for (const body of ['{"payment_method":"pm_1","note":"_method=DELETE"}', "payment_method=pm_1&x=_method", "[1]", "{bad"])
      expect(claimedInBody(text(body), "application/json")).toEqual([]);
  });
});

describe("the fingerprint", () => {
  test("the same request is the same fingerprint, whatever the order of headers or the telemetry", () => {
    const same = fp({
      headers: [
        ["user-agent", "other/9"],
        ["idempotency-key", "k1"],
        ["traceparent", "00-a-b-01"],
        ["Content-Type", "application/json"],
        ["x-stainless-retry-count", "2"],
        ["prefer", "wait=10"],
      ],
    });
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
      fp({
        headers: [
          ["content-type", "text/plain"],
          ["idempotency-key", "k1"],
        ],
      }),
      fp({
        headers: [
          ["content-type", "application/json"],
          ["idempotency-key", "k2"],
        ],
      }),
      fp({ headers: [...base.headers, ["x-http-method-override", "DELETE"]] }),
      fp({ headers: [...base.headers, ["accept", "application/vnd.github.v3+json"]] }),
      fp({ headers: [...base.headers, ["accept-language", "de"]] }),
    ];
    expect(new Set([fp({}), ...changed]).size).toBe(changed.length + 1);
  });

  test("headers are bound as forwarded: a Connection header naming a bound one makes another request", () => {
    expect(fp({ headers: [...base.headers, ["connection", "close"]] })).toBe(fp({}));
    expect(fp({ headers: [...base.headers, ["connection", "close, Idempotency-Key"]] })).not.toBe(fp({}));
  });

  test("Prefer is bound without its wait= preference; a WebSocket upgrade is another request than a GET", () => {
    expect(fp({ headers: [...base.headers, ["prefer", "wait=3"]] })).toBe(fp({}));
    expect(fp({ headers: [...base.headers, ["prefer", "tx=commit, wait=3"]] })).toBe(fp({ headers: [...base.headers, ["prefer", "tx=commit"]] }));
    expect(fp({ headers: [...base.headers, ["prefer", "tx=commit"]] })).not.toBe(fp({ headers: [...base.headers, ["prefer", "tx=rollback"]] }));
    const get = { method: "GET", body: new Uint8Array(0), headers: [["sec-websocket-version", "13"]] as [string, string][] };
    expect(fp({ ...get, upgrade: true })).not.toBe(fp(get));
    expect(describeHeld({ ...base, ...get, upgrade: true }, refunds, needles).headers[0]).toEqual(["upgrade", "websocket"]);
  });

  test("headers the broker replaces are not bound: the agent's Authorization on /proxy, a SigV4 signature and its date", () => {
    const bearer = (token: string) =>
      [
        ["content-type", "application/json"],
        ["authorization", `Bearer ${token}`],
      ] as [string, string][];
    const keyed = plan([{ methods: ["POST"], paths: ["/**"], approve: "each" }]);
    Object.assign(keyed, { injection: { header: "x-api-key", value: { reveal: () => SECRET } } });
    const at = (headers: [string, string][], ingress: "explicit" | "transparent") => describeHeld({ ...base, headers, ingress }, keyed, needles).fingerprint;
    expect(at(bearer("session-1"), "explicit")).toBe(at(bearer("session-2"), "explicit"));
    expect(at(bearer("own-1"), "transparent")).not.toBe(at(bearer("own-2"), "transparent"));
    const sigv4 = plan([{ methods: ["POST"], paths: ["/**"], approve: "each" }]);
    Object.assign(sigv4, { injection: undefined, minted: { type: "aws_sigv4" } });
    const signed = (date: string) =>
      describeHeld(
        {
          ...base,
          headers: [
            ["x-amz-date", date],
            ["authorization", `AWS4-HMAC-SHA256 Signature=${date}`],
            ["x-amz-target", "Svc.Delete"],
          ],
        },
        sigv4,
        needles,
      );
    expect(signed("20261127T000000Z").fingerprint).toBe(signed("20261127T000001Z").fingerprint);
    expect(signed("20261127T000000Z").headers).toEqual([["x-amz-target", "Svc.Delete"]]);
  });
});

describe("the description", () => {
  test("credential headers are left out and an echo of the credential is redacted everywhere", () => {
    const held = describeHeld(
      {
        ...base,
        target: `/v1/refunds?k=${SECRET}`,
        headers: [...base.headers, ["cookie", "s=1"], ["x-note", `is ${SECRET}`]],
        body: new TextEncoder().encode(`{"note":"${SECRET}"}`),
      },
      refunds,
      needles,
    );
    expect(held.headers.map(([n]) => n)).toEqual(["content-type", "idempotency-key", "user-agent", "cookie", "x-note"]);
    expect(held.headers).toContainEqual(["cookie", "s=1"]); // the agent's own: shown, since it is sent
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

  test("a body is shown as its declared charset reads, or not at all when the broker cannot decode it", () => {
    const typed = (contentType: string, body: Uint8Array) =>
      describeHeld({ ...base, headers: [["content-type", contentType]], body }, refunds, needles).bodyPreview;
    expect(typed("application/json; charset=utf-16le", new Uint8Array(Buffer.from('{"amount":7}', "utf16le")))).toBe('{"amount":7}');
    expect(typed("application/json; charset=utf-7", new TextEncoder().encode('{"amount":1,"m":"+ACI-"}'))).toBeNull();
    expect(typed("text/plain; charset=iso-8859-1", new Uint8Array([0x63, 0x61, 0x66, 0xe9]))).toBe("café");
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
    expect(
      preferredWaitMs([
        ["prefer", "return=minimal"],
        ["prefer", 'wait="7"'],
      ]),
    ).toBe(7_000);
    expect(preferredWaitMs([["prefer", "wait=100000"]])).toBe(120_000);
    expect(preferredWaitMs([["prefer", "nowait=5"]])).toBe(0);
  });
});

describe("what the person deciding reads", () => {
  test("headers as they will be sent: no Host, X-Vault or hop-by-hop ones", () => {
    const held = describeHeld(
      {
        ...base,
        headers: [...base.headers, ["host", "127.0.0.1:8080"], ["x-vault", "demo"], ["connection", "keep-alive, x-drop"], ["x-drop", "1"], ["keep-alive", "5"]],
      },
      refunds,
      needles,
    );
    expect(held.headers.map(([n]) => n)).toEqual(["content-type", "idempotency-key", "user-agent"]);
  });

  test("controls and bidirectional overrides are written out, not hidden in the text", () => {
    const held = describeHeld(
      { ...base, target: "/v1/refunds?n=\u202Egnp.exe", headers: [["x-note", "a\u009Bb"]], body: new TextEncoder().encode('{"to":"\u202Eevil","x":"\u007F"}') },
      refunds,
      needles,
    );
    expect(held.target).toBe("/v1/refunds?n=<U+202E>gnp.exe");
    expect(held.headers).toEqual([["x-note", "a<U+009B>b"]]);
    expect(held.bodyPreview).toBe('{"to":"<U+202E>evil","x":"<U+007F>"}');
  });
});
