// Service host patterns (architecture.md D14): canonical form (lower case, no trailing dot, punycode,
// port kept unless 443), the one-label wildcard, IP literals only where allowed, and matching.

import { describe, expect, test } from "bun:test";
import { InvalidRequest } from "../../../src/errors.ts";
import { hostMatches, parseHostPattern } from "../../../src/policy/hosts.ts";

const IP_OK = { allowIp: true };
const NO_IP = { allowIp: false };

describe("parseHostPattern: accepted input and its canonical form", () => {
  const CASES: [input: string, text: string, name: string, port: number, wildcard: boolean][] = [
    ["API.Example.COM.", "api.example.com", "api.example.com", 443, false],
    ["example.com", "example.com", "example.com", 443, false],
    ["example.com:8443", "example.com:8443", "example.com", 8443, false],
    ["example.com:443", "example.com", "example.com", 443, false],
    ["Example.COM.:8443", "example.com:8443", "example.com", 8443, false],
    ["*.example.com", "*.example.com", "example.com", 443, true],
    ["*.Example.com:8443", "*.example.com:8443", "example.com", 8443, true],
    ["bücher.example", "xn--bcher-kva.example", "xn--bcher-kva.example", 443, false],
    ["BÜCHER.example", "xn--bcher-kva.example", "xn--bcher-kva.example", 443, false],
    ["*.bücher.example", "*.xn--bcher-kva.example", "xn--bcher-kva.example", 443, true],
    ["xn--bcher-kva.example", "xn--bcher-kva.example", "xn--bcher-kva.example", 443, false],
  ];
  test.each(CASES)("%p → %p", (input, text, name, port, wildcard) => {
    for (const rules of [IP_OK, NO_IP]) expect(parseHostPattern(input, rules)).toEqual({ text, name, port, wildcard });
  });
});

describe("parseHostPattern: IP literals", () => {
  const IPS: [input: string, text: string, name: string, port: number][] = [
    ["1.2.3.4", "1.2.3.4", "1.2.3.4", 443],
    ["1.2.3.4:8443", "1.2.3.4:8443", "1.2.3.4", 8443],
    ["::1", "[::1]", "::1", 443],
    ["[::1]", "[::1]", "::1", 443],
    ["[::1]:8443", "[::1]:8443", "::1", 8443],
    ["[::1]:443", "[::1]", "::1", 443],
    ["2001:DB8::1", "[2001:db8::1]", "2001:db8::1", 443],
  ];
  test.each(IPS)("%p allowed with allowIp → %p", (input, text, name, port) => {
    expect(parseHostPattern(input, IP_OK)).toEqual({ text, name, port, wildcard: false });
  });
  test.each(IPS)("%p rejected without allowIp", (input) => {
    expect(() => parseHostPattern(input, NO_IP)).toThrow(InvalidRequest);
  });
  test.each(["1.2.3", "127.1", "0x7f000001", "0x7f.0.0.1", "017.0.0.1"])("non-canonical IPv4 %p is rejected either way", (input) => {
    expect(() => parseHostPattern(input, IP_OK)).toThrow(InvalidRequest);
    expect(() => parseHostPattern(input, NO_IP)).toThrow(InvalidRequest);
  });
});

describe("parseHostPattern: rejected input", () => {
  const BAD = [
    "*",
    "*.com",
    "*.com.",
    "a.*.com",
    "*.*.com",
    "*a.example.com",
    "*.1.2.3.4",
    "example.com:0",
    "example.com:70000",
    "example.com:65536",
    "",
    " ",
    "exa mple.com",
    "-bad.example.com",
    "bad-.example.com",
    "a..b",
    "example.123",
    "１２７.０.０.１",
    "０x7f000001", // the URL parser would turn these into 127.0.0.1
    "¹²⁷.0.0.1",
    "x".repeat(64) + ".example.com",
  ];
  test.each(BAD)("%p", (input) => {
    for (const rules of [IP_OK, NO_IP]) {
      let err: unknown;
      try {
        parseHostPattern(input, rules);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(InvalidRequest);
      expect((err as InvalidRequest).field).toBe("host");
      expect((err as InvalidRequest).status).toBe(400);
    }
  });

  test.each([[null], [undefined], [42], [{}], [["example.com"]]])("non-string %p", (input) => {
    expect(() => parseHostPattern(input, IP_OK)).toThrow(InvalidRequest);
  });

  test("the error names the field it was given", () => {
    expect(() => parseHostPattern("*", IP_OK, "services[0].host")).toThrow(expect.objectContaining({ field: "services[0].host" }));
  });

  // Input that is not a host name must be refused, not silently rewritten into a different host by
  // the URL parser (userinfo, path, query, fragment, percent-escapes, an empty port).
  test.each([
    "user@example.com",
    "evil.example@good.example",
    "example.com/path",
    "a.com?x",
    "a.com#frag",
    "example.com:",
    "ex%41mple.com",
    "good.com\\@evil.com",
  ])("URL-shaped %p is rejected, not rewritten", (input) => {
    expect(() => parseHostPattern(input, NO_IP)).toThrow(InvalidRequest);
  });
});

describe("parseHostPattern: wildcards over a public suffix", () => {
  // ICANN section (com, co.uk, a wildcard rule *.ck, an IDN suffix), private section (github.io, herokuapp.com,
  // s3.amazonaws.com, a wildcard rule under compute.amazonaws.com), and names the list does not know (its default
  // rule makes the last label the suffix).
  const REFUSED: [input: string, suffix: string][] = [
    ["*.com", "com"],
    ["*.co.uk", "co.uk"],
    ["*.CO.UK.", "co.uk"],
    ["*.github.io", "github.io"],
    ["*.herokuapp.com", "herokuapp.com"],
    ["*.herokuapp.com:8443", "herokuapp.com"],
    ["*.s3.amazonaws.com", "s3.amazonaws.com"],
    ["*.eu-west-1.compute.amazonaws.com", "eu-west-1.compute.amazonaws.com"],
    ["*.anything.ck", "anything.ck"],
    ["*.公司.cn", "xn--55qx5d.cn"],
    ["*.xn--55qx5d.cn", "xn--55qx5d.cn"],
    ["*.internal", "internal"],
  ];
  test.each(REFUSED)("%p is refused, naming the suffix %p", (input, suffix) => {
    for (const rules of [IP_OK, NO_IP]) {
      let err: unknown;
      try {
        parseHostPattern(input, rules, "services[2].host");
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(InvalidRequest);
      expect((err as InvalidRequest).field).toBe("services[2].host");
      expect((err as InvalidRequest).message).toContain(`*.${suffix} would match every site under the`);
      expect((err as InvalidRequest).message).toContain(`e.g. you.${suffix}`);
    }
  });

  test("the message says why", () => {
    expect(() => parseHostPattern("*.github.io", IP_OK)).toThrow(
      "host: *.github.io would match every site under the public suffix github.io, whose names belong to different owners; name the host, e.g. you.github.io",
    );
  });

  const ACCEPTED = ["*.you.github.io", "*.example.co.uk", "*.example.com", "*.www.ck", "*.myapp.herokuapp.com", "*.bucket.s3.amazonaws.com"];
  test.each(ACCEPTED)("%p (one level below a suffix) is accepted", (input) => {
    expect(parseHostPattern(input, NO_IP).wildcard).toBe(true);
  });

  // An exact host names one site, even when that name is itself a suffix: github.io is GitHub's own site.
  test.each(["github.io", "co.uk", "herokuapp.com:8443"])("the exact host %p is accepted", (input) => {
    expect(parseHostPattern(input, NO_IP).wildcard).toBe(false);
  });

  test("acceptPublicSuffixWildcard lets a row stored before the rule be named (for removal)", () => {
    expect(parseHostPattern("*.github.io", { allowIp: true, acceptPublicSuffixWildcard: true }).text).toBe("*.github.io");
    expect(() => parseHostPattern("*", { allowIp: true, acceptPublicSuffixWildcard: true })).toThrow(InvalidRequest);
  });
});

describe("hostMatches", () => {
  const p = (s: string) => parseHostPattern(s, IP_OK);
  const CASES: [pattern: string, host: string, port: number, match: boolean][] = [
    ["*.example.com", "a.example.com", 443, true],
    ["*.example.com", "example.com", 443, false],
    ["*.example.com", "a.b.example.com", 443, false],
    ["*.example.com", ".example.com", 443, false],
    ["*.example.com", "aexample.com", 443, false],
    ["*.example.com", "a.example.com", 8443, false],
    ["*.example.com:8443", "a.example.com", 8443, true],
    ["example.com", "example.com", 443, true],
    ["example.com", "example.com", 8443, false],
    ["example.com", "a.example.com", 443, false],
    ["example.com:8443", "example.com", 8443, true],
    ["example.com:8443", "example.com", 443, false],
    ["API.Example.COM.", "api.example.com", 443, true],
    ["bücher.example", "xn--bcher-kva.example", 443, true],
    ["[::1]:8443", "::1", 8443, true],
    ["[::1]:8443", "::1", 443, false],
    ["1.2.3.4", "1.2.3.4", 443, true],
    ["1.2.3.4", "1.2.3.5", 443, false],
  ];
  test.each(CASES)("%p vs %p:%p → %p", (pattern, host, port, match) => {
    expect(hostMatches(p(pattern), host, port)).toBe(match);
  });
});
