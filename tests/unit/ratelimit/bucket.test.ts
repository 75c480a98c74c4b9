// Keyed token buckets on a fake clock: exact counts, Retry-After, refill, and a key map that stays bounded
// (100,000 distinct keys) while evicting full buckets first and never granting more than a fresh bucket.

import { describe, expect, test } from "bun:test";
import { createKeyedBucket } from "../../../src/ratelimit/index.ts";

function makeClock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms), set: (ms: number) => void (t = ms) };
}

function drain(take: () => { ok: boolean }): number {
  let n = 0;
  while (take().ok) n++;
  return n;
}

describe("createKeyedBucket", () => {
  test("a new key gets exactly the burst, then a denial with an integer Retry-After", () => {
    const clock = makeClock();
    const b = createKeyedBucket({ limits: { rps: 5, burst: 20 }, now: clock.now });
    const first = b.take("k");
    expect(first).toEqual({ ok: true, limit: 20, remaining: 19, resetSec: 1 });
    expect(drain(() => b.take("k"))).toBe(19);
    const denied = b.take("k");
    expect(denied).toEqual({ ok: false, limit: 20, remaining: 0, resetSec: 4, retryAfterSec: 1, reason: "rate" });
  });

  test("refills at the rate: one token per 1/rps seconds, never above the burst", () => {
    const clock = makeClock();
    const b = createKeyedBucket({ limits: { rps: 5, burst: 20 }, now: clock.now });
    drain(() => b.take("k"));
    clock.advance(199);
    expect(b.take("k").ok).toBe(false);
    clock.advance(1);
    expect(b.take("k").ok).toBe(true);
    expect(b.take("k").ok).toBe(false);
    clock.advance(3_600_000);
    expect(drain(() => b.take("k"))).toBe(20);
  });

  test("Retry-After rounds up to whole seconds and is at least 1", () => {
    const clock = makeClock();
    const slow = createKeyedBucket({ limits: { rps: 0.1, burst: 1 }, now: clock.now });
    expect(slow.take("k").ok).toBe(true);
    const d = slow.take("k");
    expect(d.ok ? 0 : d.retryAfterSec).toBe(10);
    clock.advance(9_500);
    const later = slow.take("k");
    expect(later.ok ? 0 : later.retryAfterSec).toBe(1);
    const fast = createKeyedBucket({ limits: { rps: 1000, burst: 1 }, now: clock.now });
    fast.take("k");
    const f = fast.take("k");
    expect(f.ok ? 0 : f.retryAfterSec).toBe(1);
  });

  test("costs above 1 draw more tokens; a cost above the burst needs and empties a full bucket", () => {
    const clock = makeClock();
    const b = createKeyedBucket({ limits: { rps: 1, burst: 10 }, now: clock.now });
    expect(b.take("k", 4)).toMatchObject({ ok: true, remaining: 6 });
    expect(b.take("k", 7)).toMatchObject({ ok: false, retryAfterSec: 1 });
    expect(b.take("other", 50)).toMatchObject({ ok: true, remaining: 0 });
    expect(() => b.take("k", 0)).toThrow(RangeError);
    expect(() => b.take("k", Number.NaN)).toThrow(RangeError);
  });

  test("a clock stepping backwards refills nothing, and stepping forward again earns the gap once", () => {
    const clock = makeClock();
    const b = createKeyedBucket({ limits: { rps: 1, burst: 100 }, now: clock.now });
    drain(() => b.take("k"));
    clock.advance(-60_000);
    expect(b.take("k").ok).toBe(false);
    clock.advance(60_000 + 2_000);
    expect(drain(() => b.take("k"))).toBe(2);
  });

  test("setLimits clamps saved tokens to a smaller burst and never tops them up", () => {
    const clock = makeClock();
    const b = createKeyedBucket({ limits: { rps: 1, burst: 10 }, now: clock.now });
    b.take("k");
    b.setLimits({ rps: 1, burst: 3 });
    expect(drain(() => b.take("k"))).toBe(3);
    b.setLimits({ rps: 1, burst: 100 });
    expect(b.take("k").ok).toBe(false);
    expect(drain(() => b.take("fresh"))).toBe(100);
  });
});

describe("bounded key map", () => {
  test("100,000 distinct keys never hold more than maxKeys entries, and memory stays flat", () => {
    const clock = makeClock();
    const b = createKeyedBucket({ limits: { rps: 1, burst: 5 }, now: clock.now, maxKeys: 10_000 });
    for (let i = 0; i < 20_000; i++) b.take(`warm-${i}`);
    Bun.gc(true);
    const before = process.memoryUsage().heapUsed;
    let largest = 0;
    for (let i = 0; i < 100_000; i++) {
      b.take(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
      if (i % 97 === 0) largest = Math.max(largest, b.size());
      if (i % 1000 === 0) clock.advance(1); // same instant for most keys: nothing refills, LRU eviction must work
    }
    largest = Math.max(largest, b.size());
    Bun.gc(true);
    const growth = process.memoryUsage().heapUsed - before;
    expect(largest).toBeLessThanOrEqual(10_000);
    // 10,000 small entries are ~1-2 MB; unbounded growth over 100,000 keys would be ten times that.
    expect(growth).toBeLessThan(16 * 1024 * 1024);
  });

  test("full (idle, refilled) buckets are evicted before a recently exhausted one, even an older one", () => {
    const clock = makeClock();
    const b = createKeyedBucket({ limits: { rps: 1, burst: 3 }, now: clock.now, maxKeys: 10 });
    drain(() => b.take("hot")); // oldest key, in debt
    for (let i = 0; i < 9; i++) b.take(`idle-${i}`);
    clock.advance(1000); // idle keys are full again; "hot" has earned one token only
    b.take("newcomer");
    expect(b.size()).toBeLessThanOrEqual(10);
    expect(b.take("hot").ok).toBe(true);
    expect(b.take("hot").ok).toBe(false);
  });

  test("a forgotten key comes back as a fresh bucket: never more than the burst", () => {
    const clock = makeClock();
    const b = createKeyedBucket({ limits: { rps: 1, burst: 4 }, now: clock.now, maxKeys: 5 });
    drain(() => b.take("victim"));
    for (let i = 0; i < 50; i++) b.take(`flood-${i}`); // forces LRU eviction of in-debt keys
    expect(drain(() => b.take("victim"))).toBeLessThanOrEqual(4);
    expect(b.size()).toBeLessThanOrEqual(5);
  });
});
