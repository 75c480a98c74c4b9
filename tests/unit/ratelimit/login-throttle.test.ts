// The login throttle on a fake clock: thresholds per account and per address, the doubling lock and its cap,
// in-flight attempts counted against the threshold, what a success forgives (and what it does not), IPv6 by
// /64, forgetting after a quiet hour, and a bounded key map.

import { describe, expect, test } from "bun:test";
import { addressKey, createLoginThrottle, type LoginLockEvent, type LoginThrottle } from "../../../src/ratelimit/index.ts";

function makeClock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

/** Admits and settles one attempt; returns "ok" when admitted, else the refusal. */
function attempt(t: LoginThrottle, account: string, ip: string, outcome: "fail" | "succeed" | "abandon" = "fail") {
  const a = t.admit(account, ip);
  if (!a.ok) return a;
  a[outcome]();
  return "ok" as const;
}

function failUntilRefused(t: LoginThrottle, account: (i: number) => string, ip: string, max = 1000): number {
  for (let i = 0; i < max; i++) if (attempt(t, account(i), ip) !== "ok") return i;
  return max;
}

describe("per account", () => {
  test("5 failures, then refused for 1 s, 2 s, 4 s … capped at 15 minutes", () => {
    const clock = makeClock();
    const locks: LoginLockEvent[] = [];
    const t = createLoginThrottle({ now: clock.now, onLock: (e) => locks.push(e) });
    for (let i = 0; i < 5; i++) expect(attempt(t, "a@example.com", `10.0.0.${i}`)).toBe("ok");
    expect(attempt(t, "a@example.com", "10.0.0.99")).toEqual({ ok: false, scope: "account", retryAfterSec: 1 });
    expect(locks).toEqual([{ scope: "account", key: "a@example.com", failures: 5, lockSec: 1 }]);
    const waits: number[] = [];
    for (let round = 0; round < 14; round++) {
      const refused = t.admit("a@example.com", "10.0.1.1");
      if (refused.ok) throw new Error("expected a lock");
      waits.push(refused.retryAfterSec);
      clock.advance(refused.retryAfterSec * 1000 - 1);
      expect(t.admit("a@example.com", "10.0.1.1").ok).toBe(false); // not a millisecond early
      clock.advance(1);
      expect(attempt(t, "a@example.com", `10.0.2.${round}`)).toBe("ok"); // one probe when the lock ends
    }
    expect(waits).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900, 900, 900]);
  });

  test("unknown and known emails are counted alike: the throttle takes any string", () => {
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now });
    expect(failUntilRefused(t, () => "nobody@example.com", "10.0.0.1")).toBe(5);
    expect(failUntilRefused(t, () => "alice@example.com", "10.0.0.2")).toBe(5);
  });

  test("a success resets the account: five more failures before the next lock", () => {
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now });
    for (let i = 0; i < 4; i++) attempt(t, "a@example.com", "10.0.0.1");
    expect(attempt(t, "a@example.com", "10.0.0.1", "succeed")).toBe("ok");
    expect(failUntilRefused(t, () => "a@example.com", "10.0.0.1")).toBe(5);
    clock.advance(1000);
    expect(attempt(t, "a@example.com", "10.0.0.1", "succeed")).toBe("ok");
    expect(failUntilRefused(t, () => "a@example.com", "10.0.0.1")).toBe(5);
  });

  test("attempts in flight count: 50 parallel guesses get 5 slots, and abandoned ones give theirs back", () => {
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now });
    const admitted = Array.from({ length: 50 }, (_, i) => t.admit("a@example.com", `10.0.${i}.1`));
    const ok = admitted.filter((a) => a.ok);
    expect(ok.length).toBe(5);
    expect(admitted.find((a) => !a.ok)).toEqual({ ok: false, scope: "account", retryAfterSec: 1 });
    for (const a of ok) if (a.ok) a.abandon();
    expect(t.admit("a@example.com", "10.0.0.1").ok).toBe(true);
  });

  test("settling twice counts once", () => {
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now });
    const a = t.admit("a@example.com", "10.0.0.1");
    if (!a.ok) throw new Error("admitted");
    a.fail();
    a.fail();
    a.abandon();
    expect(failUntilRefused(t, () => "a@example.com", "10.0.0.1")).toBe(4);
  });

  test("an hour without a failure forgets the count; waiting out a lock does not", () => {
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now });
    expect(failUntilRefused(t, () => "a@example.com", "10.0.0.1")).toBe(5);
    clock.advance(15 * 60_000);
    expect(failUntilRefused(t, () => "a@example.com", "10.0.0.1")).toBe(1); // still past the threshold
    clock.advance(60 * 60_000 + 1);
    expect(failUntilRefused(t, () => "a@example.com", "10.0.0.1")).toBe(5);
  });
});

describe("per client address", () => {
  test("20 failures over distinct emails, then the address is refused while other addresses are not", () => {
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now });
    expect(failUntilRefused(t, (i) => `user${i}@example.com`, "203.0.113.7")).toBe(20);
    expect(t.admit("fresh@example.com", "203.0.113.7")).toEqual({ ok: false, scope: "address", retryAfterSec: 1 });
    expect(attempt(t, "fresh@example.com", "203.0.113.8")).toBe("ok");
  });

  test("a success forgives that user's own typos on the address, not everyone's", () => {
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now });
    for (let i = 0; i < 15; i++) attempt(t, `other${i}@example.com`, "203.0.113.7");
    for (let i = 0; i < 3; i++) attempt(t, "typo@example.com", "203.0.113.7");
    expect(attempt(t, "typo@example.com", "203.0.113.7", "succeed")).toBe("ok");
    // 18 - 3 = 15 remain: five more failures lock the address.
    expect(failUntilRefused(t, (i) => `late${i}@example.com`, "203.0.113.7")).toBe(5);
  });

  test("signing in to one's own account does not reset the address (no spraying with a decoy login)", () => {
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now });
    let guesses = 0;
    for (let round = 0; round < 10; round++) {
      for (let i = 0; i < 10; i++) if (attempt(t, `victim${round * 10 + i}@example.com`, "203.0.113.7") === "ok") guesses++;
      attempt(t, "attacker@example.com", "203.0.113.7", "succeed");
    }
    expect(guesses).toBe(20);
  });

  test("IPv6 is keyed by /64; IPv4-mapped IPv6 is the IPv4 address", () => {
    expect(addressKey("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:db8:1:2:bbbb::2")).toBe("2001:db8:1:2::/64");
    expect(addressKey("::ffff:192.0.2.1")).toBe("192.0.2.1");
    expect(addressKey("192.0.2.1")).toBe("192.0.2.1");
    expect(addressKey("unknown")).toBe("unknown");
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now });
    expect(failUntilRefused(t, (i) => `u${i}@example.com`, "2001:db8:1:2::1", 10)).toBe(10);
    expect(failUntilRefused(t, (i) => `v${i}@example.com`, "2001:db8:1:2:ffff::9")).toBe(10);
  });
});

describe("bounded memory", () => {
  test("100,000 distinct failing emails and addresses keep each map at its bound", () => {
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now, maxKeys: 1000, addressFailures: Number.POSITIVE_INFINITY });
    for (let i = 0; i < 100_000; i++) attempt(t, `u${i}@example.com`, `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    const s = t.stats();
    expect(s.accounts).toBeLessThanOrEqual(1000);
    expect(s.addresses).toBeLessThanOrEqual(1000);
    expect(s.pairs).toBeLessThanOrEqual(1000);
  });

  test("settled keys are evicted before a live lock, even when the lock is the oldest entry", () => {
    const clock = makeClock();
    const t = createLoginThrottle({ now: clock.now, maxKeys: 10 });
    expect(failUntilRefused(t, () => "victim@example.com", "10.0.0.1")).toBe(5);
    for (let i = 0; i < 9; i++) expect(attempt(t, `ok${i}@example.com`, `10.1.0.${i}`, "succeed")).toBe("ok");
    expect(attempt(t, "new@example.com", "10.2.0.1")).toBe("ok"); // the map is full: one key must go
    expect(t.stats().accounts).toBeLessThanOrEqual(10);
    expect(t.admit("victim@example.com", "10.0.0.1")).toMatchObject({ ok: false, scope: "account" });
  });
});
