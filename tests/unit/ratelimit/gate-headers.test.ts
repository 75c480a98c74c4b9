// In-flight gates (also the shape for the Argon2id concurrency cap) and the RateLimit/Retry-After headers.

import { describe, expect, test } from "bun:test";
import { createGate, rateLimitHeaders, UNLIMITED } from "../../../src/ratelimit/index.ts";

describe("createGate", () => {
  test("admits up to the ceiling, refuses beyond it, and a release frees exactly one slot", () => {
    const gate = createGate(2);
    const a = gate.acquire();
    const b = gate.acquire();
    expect(a && b).toBeDefined();
    expect(gate.acquire()).toBeUndefined();
    a!();
    a!();
    expect(gate.inFlight()).toBe(1);
    expect(gate.acquire()).toBeDefined();
    expect(gate.acquire()).toBeUndefined();
  });

  test("a lowered ceiling refuses new entries until holders drain, without cutting them off", () => {
    const gate = createGate(3);
    const held = [gate.acquire()!, gate.acquire()!, gate.acquire()!];
    gate.setCeiling(1);
    expect(gate.acquire()).toBeUndefined();
    held[0]!();
    held[1]!();
    expect(gate.acquire()).toBeUndefined();
    held[2]!();
    expect(gate.acquire()).toBeDefined();
  });
});

describe("rateLimitHeaders", () => {
  test("allowed: integer RateLimit-Limit, -Remaining and -Reset, no Retry-After", () => {
    expect(rateLimitHeaders({ ok: true, limit: 200, remaining: 17, resetSec: 4 })).toEqual({
      "RateLimit-Limit": "200",
      "RateLimit-Remaining": "17",
      "RateLimit-Reset": "4",
    });
  });

  test("denied: adds an integer Retry-After", () => {
    const h = rateLimitHeaders({ ok: false, limit: 20, remaining: 0, resetSec: 4, retryAfterSec: 1, reason: "rate" });
    expect(h).toEqual({ "RateLimit-Limit": "20", "RateLimit-Remaining": "0", "RateLimit-Reset": "4", "Retry-After": "1" });
  });

  test("the disabled limiter sends no headers", () => {
    expect(rateLimitHeaders(UNLIMITED)).toEqual({});
  });
});
