// BROKER_RESOLVE (curl's --resolve syntax) as loadConfig reads it: good entries normalised, every bad entry one
// problem naming the variable and the entry, all of them reported at once.

import { describe, expect, test } from "bun:test";
import { ConfigError, loadConfig, SETTINGS, type Env } from "../../src/config.ts";

const HOME = { HOME: "/home/alice" };

function problemsOf(env: Env): readonly string[] {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error("expected loadConfig to throw ConfigError");
}

const mappingsOf = (raw: string) => loadConfig({ ...HOME, BROKER_RESOLVE: raw }).hostMappings;

describe("BROKER_RESOLVE: good entries", () => {
  test("unset or blank: no mappings", () => {
    expect(loadConfig(HOME).hostMappings).toEqual([]);
    expect(mappingsOf("  ")).toEqual([]);
  });

  test("host:port:address entries, comma-separated, spaces and empty items ignored", () => {
    expect(mappingsOf(" api.github.com:443:127.0.0.1 ,, api.stripe.com:8443:[::1], ")).toEqual([
      { host: "api.github.com", port: 443, address: "127.0.0.1" },
      { host: "api.stripe.com", port: 8443, address: "::1" },
    ]);
  });

  test("host lower-cased, trailing dot dropped, international names in punycode; IPv6 canonical", () => {
    expect(mappingsOf("API.GitHub.COM.:1:[FD00:0:0:0::0001],bücher.example:65535:10.0.0.1,svc_internal.corp:80:192.168.1.2")).toEqual([
      { host: "api.github.com", port: 1, address: "fd00::1" },
      { host: "xn--bcher-kva.example", port: 65535, address: "10.0.0.1" },
      { host: "svc_internal.corp", port: 80, address: "192.168.1.2" },
    ]);
  });

  test("the same host on two ports is two mappings", () => {
    expect(mappingsOf("api.github.com:443:127.0.0.1,api.github.com:8443:127.0.0.2").map((m) => `${m.host}:${m.port}`)).toEqual([
      "api.github.com:443",
      "api.github.com:8443",
    ]);
  });

  test("the result is frozen", () => {
    const c = loadConfig({ ...HOME, BROKER_RESOLVE: "api.github.com:443:127.0.0.1" });
    expect(Object.isFrozen(c.hostMappings)).toBe(true);
    expect(Object.isFrozen(c.hostMappings[0])).toBe(true);
  });

  test("a metadata address is accepted by the parser: the network guard refuses it at dial time, whatever the settings", () => {
    expect(mappingsOf("api.github.com:443:169.254.169.254")).toEqual([{ host: "api.github.com", port: 443, address: "169.254.169.254" }]);
  });
});

describe("BROKER_RESOLVE: bad entries", () => {
  const CASES: readonly [entry: string, problem: string][] = [
    ["api.github.com", 'BROKER_RESOLVE: "api.github.com" is not host:port:address (e.g. api.github.com:443:127.0.0.1)'],
    ["api.github.com:443", 'BROKER_RESOLVE: "api.github.com:443" is not host:port:address (e.g. api.github.com:443:127.0.0.1)'],
    [":443:127.0.0.1", 'BROKER_RESOLVE: ":443:127.0.0.1" names no host'],
    ["*.github.com:443:127.0.0.1", 'BROKER_RESOLVE: "*.github.com:443:127.0.0.1" has a wildcard host; name each host'],
    ["*:443:127.0.0.1", 'BROKER_RESOLVE: "*:443:127.0.0.1" has a wildcard host; name each host'],
    ["10.0.0.1:443:127.0.0.1", 'BROKER_RESOLVE: "10.0.0.1:443:127.0.0.1" maps an IP address; the host must be a DNS name'],
    ["2130706433:443:127.0.0.1", 'BROKER_RESOLVE: "2130706433:443:127.0.0.1" maps an IP address; the host must be a DNS name'],
    ["[::1]:443:127.0.0.1", 'BROKER_RESOLVE: "[::1]:443:127.0.0.1" maps an IP address; the host must be a DNS name'],
    [
      "https://api.github.com:443:127.0.0.1",
      'BROKER_RESOLVE: "https://api.github.com:443:127.0.0.1" is not host:port:address (e.g. api.github.com:443:127.0.0.1)',
    ],
    ["+api.github.com:443:127.0.0.1", 'BROKER_RESOLVE: "+api.github.com:443:127.0.0.1" has "+api.github.com" for a host, which is not a DNS name'],
    ["api..github.com:443:127.0.0.1", 'BROKER_RESOLVE: "api..github.com:443:127.0.0.1" has "api..github.com" for a host, which is not a DNS name'],
    ["api.github.com:0:127.0.0.1", 'BROKER_RESOLVE: "api.github.com:0:127.0.0.1" has no valid port; it must be a number from 1 to 65535'],
    ["api.github.com:65536:127.0.0.1", 'BROKER_RESOLVE: "api.github.com:65536:127.0.0.1" has no valid port; it must be a number from 1 to 65535'],
    ["api.github.com::127.0.0.1", 'BROKER_RESOLVE: "api.github.com::127.0.0.1" has no valid port; it must be a number from 1 to 65535'],
    ["api.github.com:https:127.0.0.1", 'BROKER_RESOLVE: "api.github.com:https:127.0.0.1" has no valid port; it must be a number from 1 to 65535'],
    ["api.github.com:-1:127.0.0.1", 'BROKER_RESOLVE: "api.github.com:-1:127.0.0.1" has no valid port; it must be a number from 1 to 65535'],
    ["api.github.com:443:", 'BROKER_RESOLVE: "api.github.com:443:" names no address'],
    [
      "api.github.com:443:localhost",
      'BROKER_RESOLVE: "api.github.com:443:localhost" has "localhost" for an address, which is not an IP address (a host name is not accepted; write IPv4 as four decimal parts)',
    ],
    [
      "api.github.com:443:127.1",
      'BROKER_RESOLVE: "api.github.com:443:127.1" has "127.1" for an address, which is not an IP address (a host name is not accepted; write IPv4 as four decimal parts)',
    ],
    [
      "api.github.com:443:0x7f.0.0.1",
      'BROKER_RESOLVE: "api.github.com:443:0x7f.0.0.1" has "0x7f.0.0.1" for an address, which is not an IP address (a host name is not accepted; write IPv4 as four decimal parts)',
    ],
    [
      "api.github.com:443:300.0.0.1",
      'BROKER_RESOLVE: "api.github.com:443:300.0.0.1" has "300.0.0.1" for an address, which is not an IP address (a host name is not accepted; write IPv4 as four decimal parts)',
    ],
    ["api.github.com:443:127.0.0.1/8", 'BROKER_RESOLVE: "api.github.com:443:127.0.0.1/8" is not host:port:address (e.g. api.github.com:443:127.0.0.1)'],
    ["api.github.com:443:::1", 'BROKER_RESOLVE: "api.github.com:443:::1" has an IPv6 address without brackets; write it as [address], e.g. [::1]'],
    [
      "api.github.com:443:[fe80::1%eth0]",
      'BROKER_RESOLVE: "api.github.com:443:[fe80::1%eth0]" has "[fe80::1%eth0]" for an address, which is not an IPv6 address',
    ],
    ["api.github.com:443:[127.0.0.1]", 'BROKER_RESOLVE: "api.github.com:443:[127.0.0.1]" has "[127.0.0.1]" for an address, which is not an IPv6 address'],
    ["api.github.com:443:127.0.0.1:8443", 'BROKER_RESOLVE: "api.github.com:443:127.0.0.1:8443" is not host:port:address (e.g. api.github.com:443:127.0.0.1)'],
  ];

  for (const [entry, problem] of CASES) {
    test(`${entry}`, () => {
      expect(problemsOf({ ...HOME, BROKER_RESOLVE: entry })).toEqual([problem]);
    });
  }

  test("a host and port mapped twice is a problem, even to the same address", () => {
    expect(problemsOf({ ...HOME, BROKER_RESOLVE: "api.github.com:443:127.0.0.1,API.github.com.:443:127.0.0.1" })).toEqual([
      'BROKER_RESOLVE: "API.github.com.:443:127.0.0.1" maps api.github.com:443 a second time; give one address per host and port',
    ]);
  });

  test("every bad entry is reported at once, beside other settings' problems; good ones do not hide them", () => {
    const problems = problemsOf({
      ...HOME,
      BROKER_RESOLVE: "api.github.com:443:127.0.0.1,*.x.com:443:10.0.0.1,a.com:0:10.0.0.1,b.com:443:b.internal",
      BROKER_PORT: "nope",
    });
    expect(problems).toHaveLength(4);
    expect(problems.filter((p) => p.startsWith("BROKER_RESOLVE: "))).toHaveLength(3);
    expect(problems.some((p) => p.startsWith("BROKER_PORT: "))).toBe(true);
  });
});

describe("BROKER_RESOLVE: documented", () => {
  test("listed in the settings `broker server --help` prints, beside BROKER_NETWORK_ALLOWLIST, and not warned about as unknown", () => {
    const names = SETTINGS.map((s) => s.name);
    expect(names.indexOf("BROKER_RESOLVE")).toBe(names.indexOf("BROKER_NETWORK_ALLOWLIST") + 1);
    expect(SETTINGS.find((s) => s.name === "BROKER_RESOLVE")!.description).toContain("network guard");
    expect(loadConfig({ ...HOME, BROKER_RESOLVE: "api.github.com:443:127.0.0.1" }).warnings).toEqual([]);
  });
});
