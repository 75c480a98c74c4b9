// URL credentials, placement: the query parameter set once (every agent-supplied spelling of it
// removed, the rest of the query byte-identical), the path template placed exactly before the
// agent's path, the value percent-encoded, and targets that cannot carry it refused.

import { describe, expect, test } from "bun:test";
import { InvalidRequest } from "../../../src/errors.ts";
import { encodeUrlValue, pathPlacement, placeCredential, queryPlacement } from "../../../src/egress/url-credential.ts";
import { Secret } from "../../../src/secret.ts";

const query = (param: string, value: string) => queryPlacement(param, new Secret(value));
const path = (before: string, after: string, value: string) => pathPlacement(before, after, new Secret(value));

describe("query", () => {
  test.each([
    ["/maps", "/maps?key=V"],
    ["/maps?", "/maps?key=V"],
    ["/maps?a=1&b=2", "/maps?a=1&b=2&key=V"],
    ["/maps?key=agent", "/maps?key=V"],
    ["/maps?key=a&x=1&key=b", "/maps?x=1&key=V"],
    ["/maps?key", "/maps?key=V"],
    ["/maps?key=&x", "/maps?x&key=V"],
    ["/maps?k%65y=agent&x=%20", "/maps?x=%20&key=V"],
    ["/maps?%6B%65%79=agent", "/maps?key=V"],
    ["/maps?keys=1&akey=2&Key=3", "/maps?keys=1&akey=2&Key=3&key=V"],
    ["/maps?x=key%3Dagent", "/maps?x=key%3Dagent&key=V"],
  ])("%p → %p", (target, placed) => {
    expect(placeCredential(target, query("key", "V"))).toBe(placed);
  });

  test("a name with + or a malformed escape is compared as a server decodes it", () => {
    expect(placeCredential("/?my+key=a&my%20key=b&my%key=c", query("my key", "V"))).toBe("/?my%key=c&my key=V");
  });

  test("the value is percent-encoded (RFC 3986 unreserved kept)", () => {
    expect(placeCredential("/x", query("key", "a b&c=d/é+~"))).toBe("/x?key=a%20b%26c%3Dd%2F%C3%A9%2B~");
  });
});

describe("path", () => {
  test.each([
    ["/bot", "", "/getMe", "/bot123:ABC/getMe"],
    ["/bot", "", "/", "/bot123:ABC/"],
    ["/bot", "", "/getMe?offset=1&key=x", "/bot123:ABC/getMe?offset=1&key=x"],
    ["/v1/", "/api", "/x/y", "/v1/123:ABC/api/x/y"],
  ])("%p{value}%p + %p → %p", (before, after, target, placed) => {
    expect(placeCredential(target, path(before, after, "123:ABC"))).toBe(placed);
  });

  test("the value is percent-encoded as a path segment (: and @ kept, / ? # % ; escaped)", () => {
    expect(placeCredential("/a", path("/bot", "", "x/y?z#w%;:@"))).toBe("/botx%2Fy%3Fz%23w%25%3B:@/a");
  });

  test("a value that would form a dot segment keeps its dots escaped", () => {
    expect(placeCredential("/a", path("/", "", ".."))).toBe("/%2E%2E/a");
    expect(placeCredential("/a", path("/", "", "."))).toBe("/%2E/a");
    expect(placeCredential("/a", path("/bot", "", ".."))).toBe("/bot../a");
  });
});

test.each(["*", "", "getMe", "http://x/", "/a#frag"])("target %p cannot carry a URL credential: 400", (target) => {
  expect(() => placeCredential(target, query("key", "V"))).toThrow(InvalidRequest);
  expect(() => placeCredential(target, path("/bot", "", "V"))).toThrow(InvalidRequest);
});

test("encodeUrlValue encodes UTF-8 bytes in upper-case hex", () => {
  expect(encodeUrlValue("ü€", /[a-z]/)).toBe("%C3%BC%E2%82%AC");
});

test("placements print as [redacted]", () => {
  const p = query("key", "s3cr3t-value");
  expect(JSON.stringify(p)).not.toContain("s3cr3t");
  expect(Bun.inspect(p)).not.toContain("s3cr3t");
});
