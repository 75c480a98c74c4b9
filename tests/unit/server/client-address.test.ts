// The client address behind a reverse proxy (BROKER_TRUSTED_PROXIES): the rightmost-untrusted rule over
// X-Forwarded-For as a table, then through the real routes: clients behind a trusted proxy are throttled
// (sign-in throttle, AUTH tier) apart, while X-Forwarded-For from any other peer changes nothing.

import { describe, expect, test } from "bun:test";
import { loadConfig } from "../../../src/config.ts";
import { createLoginThrottle, createRateLimiter, resolveSettings } from "../../../src/ratelimit/index.ts";
import { compileTrustedProxies, parseForwardedAddress, pickClientAddress } from "../../../src/server/kit/client-address.ts";
import { createTestApi, type TestApi } from "../../helpers/api.ts";

const TRUSTED = loadConfig({ HOME: "/nonexistent", BROKER_TRUSTED_PROXIES: "127.0.0.1, 10.0.0.0/8, ::1, fd00::/8" }).trustedProxies;
const isTrusted = compileTrustedProxies(TRUSTED);

describe("pickClientAddress", () => {
  // [what, peer, X-Forwarded-For (null: no header), the client address]
  const cases: [string, string, string | null, string][] = [
    ["trusted peer, one entry", "127.0.0.1", "198.51.100.1", "198.51.100.1"],
    ["trusted peer, trusted hops skipped", "10.0.0.3", "198.51.100.1, 10.0.0.2, 10.9.9.9", "198.51.100.1"],
    ["trusted peer, spoofed leftmost entries ignored", "127.0.0.1", "6.6.6.6, 7.7.7.7, 198.51.100.1", "198.51.100.1"],
    ["trusted peer, spoofed leftmost trusted-looking entry ignored", "127.0.0.1", "10.0.0.9, 198.51.100.1, 10.0.0.2", "198.51.100.1"],
    ["trusted peer, every entry trusted: the leftmost (an internal client)", "127.0.0.1", "10.1.2.3, 10.0.0.2", "10.1.2.3"],
    ["trusted peer, garbage left of the client is never read", "127.0.0.1", "unknown, <script>, 198.51.100.1", "198.51.100.1"],
    ["trusted peer, port kept by some proxies is dropped", "127.0.0.1", "198.51.100.1:4711", "198.51.100.1"],
    ["trusted peer, empty list elements skipped", "127.0.0.1", " , 198.51.100.1 ,, ", "198.51.100.1"],
    ["trusted peer, no header", "127.0.0.1", null, "127.0.0.1"],
    ["trusted peer, empty header", "127.0.0.1", "", "127.0.0.1"],
    ["trusted peer, only commas and spaces", "127.0.0.1", " ,, ", "127.0.0.1"],
    ["trusted peer, rightmost entry garbage", "127.0.0.1", "198.51.100.1, unknown", "127.0.0.1"],
    ["trusted peer, garbage between trusted hops", "127.0.0.1", "198.51.100.1, bogus, 10.0.0.2", "127.0.0.1"],
    ["trusted peer, host name", "127.0.0.1", "client.example", "127.0.0.1"],
    ["trusted peer, CIDR", "127.0.0.1", "198.51.100.1/32", "127.0.0.1"],
    ["trusted peer, out-of-range octet", "127.0.0.1", "300.1.2.3", "127.0.0.1"],
    ["trusted peer, octal spelling", "127.0.0.1", "010.0.0.1", "127.0.0.1"],
    ["trusted peer, hex spelling", "127.0.0.1", "0x7f.0.0.1", "127.0.0.1"],
    ["trusted peer, short spelling", "127.0.0.1", "10.1", "127.0.0.1"],
    ["trusted peer, quoted", "127.0.0.1", '"198.51.100.1"', "127.0.0.1"],
    ["trusted peer, RFC 7239 syntax is not X-Forwarded-For", "127.0.0.1", "for=198.51.100.1", "127.0.0.1"],
    ["trusted peer, IPv6 zone", "127.0.0.1", "fe80::1%eth0", "127.0.0.1"],
    ["untrusted peer, spoofed entry ignored", "203.0.113.7", "198.51.100.1", "203.0.113.7"],
    ["untrusted peer, spoofed trusted-looking chain ignored", "203.0.113.7", "198.51.100.1, 10.0.0.2, 127.0.0.1", "203.0.113.7"],
    ["untrusted peer, garbage ignored", "203.0.113.7", "garbage", "203.0.113.7"],
    ["untrusted IPv6 peer", "2001:db8::7", "198.51.100.1", "2001:db8::7"],
    ["untrusted peer next to a trusted range", "11.0.0.1", "198.51.100.1", "11.0.0.1"],
    ["no socket (in-process request)", "unknown", "198.51.100.1", "unknown"],
    ["IPv6 trusted peer, IPv6 client", "::1", "2001:db8::1", "2001:db8::1"],
    ["IPv6 client written long-hand, canonicalised", "::1", "2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
    ["IPv6 client in brackets with a port", "::1", "[2001:db8::1]:4711", "2001:db8::1"],
    ["IPv6 client in brackets", "127.0.0.1", "[2001:db8::1]", "2001:db8::1"],
    ["IPv6 trusted hops skipped", "fd00::1", "2001:db8::1, fd00::2, ::1", "2001:db8::1"],
    ["IPv6 unbracketed with a port-like suffix is not an address", "::1", "2001:db8::1]:80", "::1"],
    ["dual-stack listener: IPv4-mapped trusted peer", "::ffff:127.0.0.1", "198.51.100.1", "198.51.100.1"],
    ["IPv4-mapped client written as IPv4", "127.0.0.1", "::ffff:198.51.100.1", "198.51.100.1"],
    ["IPv4-mapped trusted hop skipped", "127.0.0.1", "198.51.100.1, ::ffff:10.0.0.2", "198.51.100.1"],
    ["an IPv4 range does not cover IPv6 addresses", "127.0.0.1", "198.51.100.1, ::a00:2", "::a00:2"],
  ];
  test.each(cases)("%s", (_what, peer, xff, expected) => {
    expect(pickClientAddress(peer, xff, isTrusted)).toBe(expected);
  });

  test("several X-Forwarded-For headers count as one list, in order (Headers joins them)", () => {
    const headers = new Headers([
      ["x-forwarded-for", "6.6.6.6, 7.7.7.7"],
      ["x-forwarded-for", "198.51.100.1"],
      ["x-forwarded-for", "10.0.0.2"],
    ]);
    expect(pickClientAddress("127.0.0.1", headers.get("x-forwarded-for"), isTrusted)).toBe("198.51.100.1");
  });

  test("nothing trusted: the peer, whatever the header says", () => {
    const none = compileTrustedProxies([]);
    expect(pickClientAddress("127.0.0.1", "198.51.100.1", none)).toBe("127.0.0.1");
  });

  test("a long header is walked only as far as the client", () => {
    const xff = `${Array.from({ length: 5000 }, (_, i) => `not-an-address-${i}`).join(", ")}, 198.51.100.1, 10.0.0.2`;
    expect(pickClientAddress("127.0.0.1", xff, isTrusted)).toBe("198.51.100.1");
  });

  test("parseForwardedAddress accepts the shapes proxies write and nothing else", () => {
    expect(["192.0.2.1", " 192.0.2.1:443 ", "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:443"].map((v) => parseForwardedAddress(v)?.toString())).toEqual([
      "192.0.2.1",
      "192.0.2.1",
      "2001:db8::1",
      "2001:db8::1",
      "2001:db8::1",
    ]);
    for (const bad of ["", "unknown", "_hidden", "192.0.2.1:", "192.0.2.1:123456", "[192.0.2.1", "2001:db8::1:", "1.2.3.4.5", "192.0.2.01"]) {
      expect(parseForwardedAddress(bad)).toBeUndefined();
    }
  });
});

const PASSWORD = "correct horse battery";
const PROXY = "10.0.0.1";

function login(api: TestApi, email: string, password: string, via: { ip: string; xff?: string }) {
  return api.call("POST", "/v1/auth/login", { body: { email, password }, ip: via.ip, headers: via.xff === undefined ? {} : { "x-forwarded-for": via.xff } });
}

/** 20 wrong passwords over 20 emails (the per-account threshold is never reached): the address threshold. */
async function failTwentyTimes(api: TestApi, via: (i: number) => { ip: string; xff?: string }): Promise<void> {
  for (let i = 0; i < 20; i++) expect((await login(api, `user${i}@example.com`, "wrong password", via(i))).status).toBe(401);
}

async function apiBehindProxy(trustedProxies?: readonly string[]): Promise<TestApi> {
  const api = await createTestApi({ trustedProxies });
  const res = await api.call("POST", "/v1/auth/register", {
    body: { email: "owner@example.com", password: PASSWORD },
    ip: PROXY,
    headers: { "x-forwarded-for": "192.0.2.200" },
  });
  expect(res.status).toBe(201);
  return api;
}

describe("the sign-in throttle behind a reverse proxy", () => {
  test("trusted proxy: two X-Forwarded-For clients are throttled apart", async () => {
    const api = await apiBehindProxy([`${PROXY}/32`]);
    await failTwentyTimes(api, () => ({ ip: PROXY, xff: "6.6.6.6, 198.51.100.1" }));
    expect((await login(api, "owner@example.com", PASSWORD, { ip: PROXY, xff: "198.51.100.1" })).status).toBe(429); // the attacker's address is locked
    expect((await login(api, "owner@example.com", PASSWORD, { ip: PROXY, xff: "198.51.100.77, 198.51.100.1" })).status).toBe(429); // the attacker's own leftmost entry buys nothing
    // Another client through the same proxy still signs in, wrong passwords are still 401, and the right one works.
    expect((await login(api, "someone@example.com", "wrong password", { ip: PROXY, xff: "198.51.100.2" })).status).toBe(401);
    expect((await login(api, "owner@example.com", PASSWORD, { ip: PROXY, xff: "198.51.100.2" })).status).toBe(200);
    // The proxy itself, with no header (a health check, say), is a client of its own.
    expect((await login(api, "owner@example.com", PASSWORD, { ip: PROXY })).status).toBe(200);
  });

  test("untrusted peer: a spoofed X-Forwarded-For, new on every attempt, does not escape the lock", async () => {
    const api = await apiBehindProxy([`${PROXY}/32`]);
    await failTwentyTimes(api, (i) => ({ ip: "203.0.113.7", xff: `198.51.100.${i + 1}` }));
    expect((await login(api, "owner@example.com", PASSWORD, { ip: "203.0.113.7", xff: "198.51.100.99" })).status).toBe(429);
    expect((await login(api, "owner@example.com", PASSWORD, { ip: "203.0.113.8", xff: "203.0.113.7" })).status).toBe(200); // nor frame another address
  });

  test("without BROKER_TRUSTED_PROXIES every client shares the proxy's address (the problem this fixes)", async () => {
    const api = await apiBehindProxy();
    await failTwentyTimes(api, () => ({ ip: PROXY, xff: "198.51.100.1" }));
    expect((await login(api, "owner@example.com", PASSWORD, { ip: PROXY, xff: "198.51.100.2" })).status).toBe(429);
  });

  test("IPv6 clients behind a trusted IPv6 proxy are told apart by /64", async () => {
    const api = await apiBehindProxy(["fd00::1/128"]);
    await failTwentyTimes(api, () => ({ ip: "fd00::1", xff: "2001:db8:0:1::5" }));
    expect((await login(api, "owner@example.com", PASSWORD, { ip: "fd00::1", xff: "[2001:db8:0:1::6]:4711" })).status).toBe(429); // same /64
    expect((await login(api, "owner@example.com", PASSWORD, { ip: "fd00::1", xff: "2001:db8:0:2::5" })).status).toBe(200);
  });
});

describe("the AUTH tier behind a reverse proxy", () => {
  test("each X-Forwarded-For client has its own budget; the proxy's own address is not charged", async () => {
    const { rateLimit: r } = loadConfig({ HOME: "/nonexistent", BROKER_RATELIMIT_AUTH_BURST: "3", BROKER_RATELIMIT_AUTH_RPS: "1" });
    const api = await createTestApi({
      trustedProxies: [`${PROXY}/32`],
      rateLimiter: (now) => createRateLimiter(resolveSettings(r.profile, r.overrides, r.locked), now),
      loginThrottle: (now) => createLoginThrottle({ now, accountFailures: Number.POSITIVE_INFINITY, addressFailures: Number.POSITIVE_INFINITY }),
    });
    const statuses = async (xff: string, n: number) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await login(api, "nobody@example.com", "wrong password", { ip: PROXY, xff })).status);
      return out;
    };
    expect(await statuses("198.51.100.1", 4)).toEqual([401, 401, 401, 429]);
    expect(await statuses("198.51.100.2", 3)).toEqual([401, 401, 401]);
    expect((await login(api, "nobody@example.com", "wrong password", { ip: PROXY })).status).toBe(401);
  });
});
