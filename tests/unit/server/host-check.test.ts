// The API's Host check through app.request: the configured names pass (port ignored, case-insensitive,
// trailing dot, IPv6 brackets), anything else gets 421 misdirected_request with the envelope before any
// route, rate limit or password hash runs; wildcard binds accept IP literals but not unknown names.

import { describe, expect, test } from "bun:test";
import { createMemoryLogger } from "../../../src/log.ts";
import { createApi } from "../../../src/server/app.ts";
import { hostOfHeader, listApiHosts, type HostCheckOptions } from "../../../src/server/kit/host-check.ts";
import { createTestApi } from "../../helpers/api.ts";

async function apiWith(hosts?: HostCheckOptions) {
  const t = await createTestApi(); // its public URL is http://broker.test
  const app = createApi({ domain: t.domain, log: createMemoryLogger(), hosts });
  const get = (host: string | undefined, path = "/health", init: RequestInit = {}) =>
    app.request(path, { ...init, headers: { ...(init.headers as Record<string, string>), ...(host === undefined ? {} : { host }) } });
  return { t, app, get };
}

async function expectMisdirected(res: Response): Promise<void> {
  expect(res.status).toBe(421);
  expect(res.headers.get("x-broker-error")).toBe("misdirected_request");
  expect(res.headers.get("content-type")).toContain("application/json");
  const body = await res.json();
  expect(body.error).toBe("misdirected_request");
  expect(body.message).toContain("BROKER_ALLOWED_HOSTS");
  expect(JSON.stringify(body)).not.toContain("evil"); // the refused Host is never echoed
}

describe("hostOfHeader", () => {
  const cases: [string, string | undefined][] = [
    ["localhost", "localhost"],
    ["LOCALHOST:14321", "localhost"],
    ["localhost.:14321", "localhost"],
    ["Broker.Example.com.", "broker.example.com"],
    ["127.0.0.1:1", "127.0.0.1"],
    ["[::1]:14321", "::1"],
    ["[0:0:0:0:0:0:0:1]", "::1"],
    ["::1", undefined], // IPv6 in a Host header needs brackets
    ["localhost, evil.example", undefined], // two Host headers joined
    ["localhost@evil.example", undefined],
    ["localhost:80@evil.example", undefined],
    ["evil.example/localhost", undefined],
    ["localhost:port", undefined],
    ["[::1]evil", undefined],
    ["", undefined],
  ];
  test.each(cases)("%p -> %p", (value, host) => expect(hostOfHeader(value)).toBe(host));
});

describe("default names (loopback and the public URL's host)", () => {
  test("answered: localhost, 127.0.0.1, [::1] and the public URL host, any port, any case, trailing dot", async () => {
    const { get } = await apiWith();
    for (const host of ["localhost", "localhost:14321", "LocalHost.", "127.0.0.1:8080", "[::1]:14321", "[::1]", "broker.test", "BROKER.TEST.:443"]) {
      expect((await get(host)).status, host).toBe(200);
    }
  });

  test("no Host header at all (HTTP/1.0) names nothing a page could have rebound: answered", async () => {
    const { app } = await apiWith();
    expect((await app.request("/health")).status).toBe(200);
  });

  test("any other Host gets 421 with the envelope, on every path", async () => {
    const { get } = await apiWith();
    for (const host of [
      "evil.example",
      "evil.example:14321",
      "broker.test.evil.example",
      "localhost.evil.example",
      "127.0.0.2",
      "[::2]",
      "10.0.0.5",
      "localhost, evil.example",
    ]) {
      await expectMisdirected(await get(host));
    }
    for (const path of ["/discover", "/v1/vaults", "/approve/1?token=x", "/proxy/api.example.com/x", "/no-such-route", "/assets/broker.css"]) {
      await expectMisdirected(await get("evil.example", path));
    }
  });

  test("refused before the route runs: a login with a foreign Host neither hashes nor counts", async () => {
    const { t, get } = await apiWith();
    let hashed = 0;
    const gate = t.domain.hashing;
    (t.domain as { hashing: typeof gate }).hashing = { run: (work) => ((hashed += 1), gate.run(work)) };
    for (let i = 0; i < 10; i++) {
      await expectMisdirected(
        await get("evil.example", "/v1/auth/login", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email: "a@example.com", password: "whatever password" }),
        }),
      );
    }
    expect(hashed).toBe(0);
    expect(t.domain.loginThrottle.stats().accounts).toBe(0);
  });

  test("421 responses carry the usual security headers", async () => {
    const { get } = await apiWith();
    const res = await get("evil.example");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("cache-control")).toBe("no-store");
  });
});

describe("configured names", () => {
  test("a named bind address, BROKER_PUBLIC_URL and BROKER_ALLOWED_HOSTS are answered; other IPs are not", async () => {
    const { get } = await apiWith({ hosts: listApiHosts("192.168.1.5", "https://broker.example.com/base", ["broker.internal", "10.0.0.9", "::1"]) });
    for (const host of ["192.168.1.5:14321", "broker.example.com", "Broker.Internal.", "10.0.0.9:1", "localhost"])
      expect((await get(host)).status, host).toBe(200);
    for (const host of ["10.1.2.3", "evil.example", "example.com", "0.0.0.0"]) await expectMisdirected(await get(host));
  });

  test("a wildcard bind (0.0.0.0 or ::) is no host name; IP literals pass (rebinding always carries a name), names need configuring", async () => {
    for (const bind of ["0.0.0.0", "::"]) {
      const hosts = listApiHosts(bind, `http://${bind.includes(":") ? `[${bind}]` : bind}:14321`, ["broker.lan"]);
      expect(hosts).not.toContain(bind);
      const { get } = await apiWith({ hosts, anyIpLiteral: true });
      for (const host of ["10.1.2.3:14321", "192.168.1.5", "[2001:db8::5]:14321", "broker.lan", "localhost"])
        expect((await get(host)).status, `${bind} ${host}`).toBe(200);
      for (const host of ["evil.example", "rebind.evil.example:14321", "2130706433", "0x7f.1", "127.1"]) await expectMisdirected(await get(host));
    }
  });
});
