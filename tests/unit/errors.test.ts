// toErrorResponse: the one JSON envelope, X-Broker-Error, status, and nothing internal leaks.

import { describe, expect, test } from "bun:test";
import {
  Conflict,
  Internal,
  InvalidRequest,
  MethodNotAllowed,
  MisdirectedRequest,
  NotFound,
  PayloadTooLarge,
  PermissionDenied,
  RateLimited,
  toErrorResponse,
  Unauthorized,
  Unavailable,
  type BrokerError,
} from "../../src/errors.ts";
import { createMemoryLogger } from "../../src/log.ts";

async function envelope(res: Response) {
  return { status: res.status, code: res.headers.get("x-broker-error"), body: (await res.json()) as Record<string, unknown> };
}

describe("known errors", () => {
  const cases: [BrokerError, number, string][] = [
    [new InvalidRequest("name is required"), 400, "invalid_request"],
    [new Unauthorized(), 401, "unauthorized"],
    [new PermissionDenied("needs admin"), 403, "forbidden"],
    [new NotFound(), 404, "not_found"],
    [new MethodNotAllowed(), 405, "method_not_allowed"],
    [new Conflict("vault exists"), 409, "conflict"],
    [new PayloadTooLarge("body too large"), 413, "payload_too_large"],
    [new MisdirectedRequest(), 421, "misdirected_request"],
    [new RateLimited(5), 429, "rate_limited"],
    [new Unavailable("store locked"), 503, "unavailable"],
    [new Internal(), 500, "internal"],
  ];

  test.each(cases)("%p -> %p %p", async (err, status, code) => {
    const res = toErrorResponse(err);
    const e = await envelope(res);
    expect(e.status).toBe(status);
    expect(e.code).toBe(code);
    expect(e.body.error).toBe(code);
    expect(e.body.message).toBe(err.message);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(res.headers.get("cache-control")).toBe("no-store");
  });

  test("the envelope is exactly {error, message, ...extra}", async () => {
    expect((await envelope(toErrorResponse(new Conflict("vault exists")))).body).toEqual({ error: "conflict", message: "vault exists" });
    expect((await envelope(toErrorResponse(new InvalidRequest("bad name", "name")))).body).toEqual({
      error: "invalid_request",
      message: "bad name",
      field: "name",
    });
  });

  test("RateLimited carries Retry-After and retry_after", async () => {
    const res = toErrorResponse(new RateLimited(30));
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("30");
    expect(res.headers.get("x-broker-error")).toBe("rate_limited");
    expect(await res.json()).toEqual({ error: "rate_limited", message: "rate limit exceeded", retry_after: 30 });
  });

  test("MethodNotAllowed carries Allow when given", () => {
    expect(toErrorResponse(new MethodNotAllowed(undefined, "GET, POST")).headers.get("allow")).toBe("GET, POST");
    expect(toErrorResponse(new MethodNotAllowed()).headers.get("allow")).toBeNull();
  });

  test("known errors are not logged as unhandled", () => {
    const log = createMemoryLogger();
    toErrorResponse(new NotFound(), log);
    expect(log.lines).toEqual([]);
  });
});

describe("unknown errors", () => {
  const leaky = "SQLITE_CONSTRAINT at /var/lib/broker/broker.db token=av_sess_abcdef";

  test.each([new Error(leaky), new TypeError(leaky), leaky, { message: leaky }, undefined])("%p becomes a generic 500 internal", async (thrown) => {
    const res = toErrorResponse(thrown);
    const text = await res.text();
    expect(res.status).toBe(500);
    expect(res.headers.get("x-broker-error")).toBe("internal");
    expect(JSON.parse(text)).toEqual({ error: "internal", message: "internal error" });
    expect(text).not.toContain("SQLITE");
    expect(text).not.toContain("av_sess_");
  });

  test("are logged once as unhandled_error, through the redacting logger", () => {
    const log = createMemoryLogger();
    toErrorResponse(new Error(leaky), log);
    expect(log.lines).toHaveLength(1);
    const record = JSON.parse(log.lines[0]!);
    expect(record).toMatchObject({ level: "error", event: "unhandled_error", err: { name: "Error" } });
    expect(log.lines[0]).not.toContain("abcdef");
  });
});
