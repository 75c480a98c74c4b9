// The request span (telemetry/request-tracing.ts): the agent's trace joined or a new one started, the
// traceparent the upstream gets, the children and their times, and attributes that are the audit record's
// names and numbers only. The spans are checked as the span data the OTLP encoder writes (otlp-encoding.test.ts
// reads that back with the official definitions).

import { describe, expect, test } from "bun:test";
import type { AuditEntry, TracedRequest } from "../../../src/egress/index.ts";
import { createRequestTracing } from "../../../src/telemetry/index.ts";
import type { SpanData } from "../../../src/telemetry/otlp-data.ts";

const TRACE = "0af7651916cd43dd8448eb211c80319c";
const PARENT = "b7ad6b7169203331";

/** Finished spans, as the export queue gets them. */
function setUp() {
  const ended: SpanData[] = [];
  return { tracing: createRequestTracing((s) => void ended.push(s)), spans: () => [...ended] };
}

const record = (over: Partial<AuditEntry> = {}): AuditEntry => ({
  at: Date.now(),
  principal: "agent:7",
  vaultId: 3,
  vault: "main",
  ingress: "transparent",
  method: "POST",
  host: "api.example.com",
  path: "/v1/charges",
  service: "api.example.com",
  credentialKeys: "STRIPE_KEY",
  credentialRefs: null,
  status: 201,
  bytesIn: 12,
  bytesOut: 345,
  durationMs: 4,
  error: null,
  contained: false,
  approvedBy: null,
  ...over,
});

const request = (headers: [string, string][]): TracedRequest => ({
  headers: [["authorization", "Bearer sk-live-sentinel"], ["content-type", "application/json"], ...headers],
  method: "POST",
  host: "api.example.com",
  port: 443,
  ingress: "transparent",
  http2: true,
  principalName: "deploy-bot",
});

/** Runs one request through its span: dispatched at +1 ms, answered at +5, handed back at +6, ended at +9. */
function run(tracing: ReturnType<typeof createRequestTracing>, headers: [string, string][], entry = record()) {
  const t0 = performance.now();
  const span = tracing.open(request(headers), t0);
  const upstream = span.dispatched(t0 + 1);
  span.answered(t0 + 5);
  span.handedBack(t0 + 6);
  span.end(entry, t0 + 9);
  return { span, upstream, t0 };
}

const byName = (spans: SpanData[], name: string) => spans.find((s) => s.name === name)!;
const ms = (s: SpanData) => s.endMs - s.startMs;

describe("request tracing", () => {
  test("a valid traceparent: the span joins the agent's trace, the upstream is told the broker's upstream span", () => {
    const { tracing, spans } = setUp();
    const { span, upstream } = run(tracing, [
      ["TraceParent", `00-${TRACE}-${PARENT}-01`],
      ["tracestate", "congo=t61rcWkgMzE"],
    ]);
    const all = spans();
    expect(all).toHaveLength(4);
    const server = byName(all, "POST api.example.com");
    expect(server.traceId).toBe(TRACE);
    expect(server.parentSpanId).toBe(PARENT);
    expect(server.parentIsRemote).toBe(true);
    expect(server.traceState).toBe("congo=t61rcWkgMzE");
    expect(span.ref).toEqual({ traceId: TRACE, spanId: server.spanId, sampled: true });
    const up = byName(all, "upstream");
    expect(upstream).toEqual([
      ["traceparent", `00-${TRACE}-${up.spanId}-01`],
      ["tracestate", "congo=t61rcWkgMzE"],
    ]);
    for (const child of ["broker.request", "upstream", "broker.response"]) expect(byName(all, child).parentSpanId).toBe(server.spanId);
  });

  test("children cover the broker's time before dispatch, the upstream's, and the answer's head; the parent lasts the exchange", () => {
    const { tracing, spans } = setUp();
    run(tracing, []);
    const all = spans();
    expect(ms(byName(all, "broker.request"))).toBeCloseTo(1, 3);
    expect(ms(byName(all, "upstream"))).toBeCloseTo(4, 3);
    expect(ms(byName(all, "broker.response"))).toBeCloseTo(1, 3);
    const server = byName(all, "POST api.example.com");
    expect(ms(server)).toBeCloseTo(9, 3);
    // The broker's own time, as the metrics count it: 1 ms before dispatch, 1 ms on the head.
    expect(server.attributes["broker.added_ms"]).toBeCloseTo(2, 3);
  });

  test("no traceparent, an invalid one, or two: a new trace (its tracestate ignored), and the upstream still gets the broker's", () => {
    for (const headers of [
      [],
      [["traceparent", `ff-${TRACE}-${PARENT}-01`]],
      [["traceparent", `00-${"0".repeat(32)}-${PARENT}-01`]],
      [["traceparent", `00-${TRACE}-${"0".repeat(16)}-01`]],
      [["traceparent", "garbage"]],
      [
        ["traceparent", `00-${TRACE}-${PARENT}-01`],
        ["traceparent", `00-${TRACE}-${PARENT}-01`],
      ],
    ] as [string, string][][]) {
      const { tracing, spans } = setUp();
      const { upstream } = run(tracing, [...headers, ["tracestate", "congo=t61rcWkgMzE"]]);
      const server = byName(spans(), "POST api.example.com");
      expect(server.traceId).not.toBe(TRACE);
      expect(server.parentSpanId).toBeUndefined();
      const up = byName(spans(), "upstream");
      expect(upstream).toEqual([["traceparent", `00-${server.traceId}-${up.spanId}-01`]]);
    }
  });

  test("an agent's unsampled trace: no span is recorded, the upstream is told 00 in the agent's trace", () => {
    const { tracing, spans } = setUp();
    const { span, upstream } = run(tracing, [["traceparent", `00-${TRACE}-${PARENT}-00`]]);
    expect(spans()).toEqual([]);
    expect(span.ref.traceId).toBe(TRACE);
    expect(span.ref.sampled).toBe(false);
    expect(upstream[0]![1]).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-00$`));
  });

  test("attributes are the record's names and numbers: no header value, query, token or credential", () => {
    const { tracing, spans } = setUp();
    run(tracing, [["traceparent", `00-${TRACE}-${PARENT}-01`]], record({ path: "/v1/charges", approvedBy: "user:2" }));
    const server = byName(spans(), "POST api.example.com");
    expect(server.attributes).toEqual({
      "http.request.method": "POST",
      "server.address": "api.example.com",
      "server.port": 443,
      "url.path": "/v1/charges",
      "http.response.status_code": 201,
      "http.request.body.size": 12,
      "http.response.body.size": 345,
      "network.protocol.version": "2",
      "broker.ingress": "transparent",
      "broker.vault": "main",
      "broker.service": "api.example.com",
      "broker.principal": "agent:7",
      "broker.principal.name": "deploy-bot",
      "broker.contained": false,
      "broker.approved_by": "user:2",
      "broker.added_ms": expect.any(Number),
    });
    expect(JSON.stringify(spans())).not.toContain("sk-live-sentinel");
  });

  test("a request refused before dispatch: one broker child; an upstream that never answered: its span is an error; 5xx marks the request", () => {
    const { tracing, spans } = setUp();
    const t0 = performance.now();
    const refused = tracing.open(request([]), t0);
    refused.handedBack(t0 + 2);
    refused.end(record({ status: 403, error: "forbidden", service: null }), t0 + 2);
    let all = spans();
    expect(all.map((s) => s.name).sort()).toEqual(["POST api.example.com", "broker.request"]);
    expect(byName(all, "POST api.example.com").attributes["error.type"]).toBe("forbidden");
    expect(byName(all, "POST api.example.com").status).toBeUndefined(); // UNSET: a refusal is the broker working, not failing

    const failed = tracing.open(request([]), t0);
    failed.dispatched(t0 + 1);
    failed.end(record({ status: 502, error: "upstream_unreachable" }), t0 + 30);
    all = spans().slice(2);
    expect(byName(all, "upstream").status).toEqual({ code: 2, message: "upstream_unreachable" });
    expect(byName(all, "POST api.example.com").status).toEqual({ code: 2, message: "upstream_unreachable" });
    expect(all.map((s) => s.name)).not.toContain("broker.response");
  });
});
