// URL credentials, validation: the query parameter name and the path template readAuth accepts
// (with field names on refusal), and the words the console and approval page show for them.

import { describe, expect, test } from "bun:test";
import { InvalidRequest } from "../../../src/errors.ts";
import { splitPathTemplate } from "../../../src/policy/index.ts";
import { describeUrlAuth } from "../../../src/words/index.ts";
import { parseWith, ServiceAuthInput } from "../../../src/contract/index.ts";

/** The contract's service auth schema, read as a body's `auth` field (or `field`) would be. */
const readAuth = (v: unknown, field = "auth") => parseWith(ServiceAuthInput, v, field);

const fieldOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (err) {
    if (err instanceof InvalidRequest) return (err.extra() as { field?: string }).field;
    throw err;
  }
  return undefined;
};

describe("query auth", () => {
  test.each(["key", "api_key", "access-token", "x.y", "k~1", "A".repeat(64)])("param %p is accepted", (param) => {
    expect(readAuth({ type: "query", param, token: "GOOGLE_API_KEY" })).toEqual({ type: "query", param, token: "GOOGLE_API_KEY" });
  });

  test.each([undefined, "", "a b", "a&b", "a=b", "k%65y", "ke#y", "key[]", "ключ", "A".repeat(65), 42])("param %p is refused", (param) => {
    expect(fieldOf(() => readAuth({ type: "query", param, token: "K" }))).toBe("auth.param");
  });

  test("needs a credential key, and only the fields of its type are kept", () => {
    expect(fieldOf(() => readAuth({ type: "query", param: "key" }))).toBe("auth.token");
    expect(readAuth({ type: "query", param: "key", token: "K", header: "x-a", prefix: "p", username: "u", template: "/{value}" })).toEqual({
      type: "query",
      param: "key",
      token: "K",
    });
  });
});

describe("path auth", () => {
  test.each(["/bot{value}", "/{value}", "/v1/{value}/api", "/key-{value}-x", "/a:b@c/{value}", "/{value}x/y"])("template %p is accepted", (template) => {
    expect(readAuth({ type: "path", template, token: "TELEGRAM_TOKEN" })).toEqual({ type: "path", template, token: "TELEGRAM_TOKEN" });
  });

  test.each([
    [undefined, "missing"],
    ["bot{value}", "not starting with /"],
    ["/bot", "no placeholder"],
    ["/{value}/{value}", "two placeholders"],
    ["/bot{value}/", "ending with /"],
    ["//{value}", "empty segment"],
    ["/a//{value}", "inner empty segment"],
    ["/./{value}", "dot segment"],
    ["/../{value}", "dot-dot segment"],
    ["/a%2F{value}", "percent escape"],
    ["/a;b/{value}", "; parameter"],
    ["/a?x={value}", "query"],
    ["/a#{value}", "fragment"],
    ["/a\\{value}", "backslash"],
    ["/a {value}", "space"],
    ["/{VALUE}", "wrong placeholder"],
    [`/${"a".repeat(125)}{value}`, "too long"],
  ])("template %p is refused (%s)", (template) => {
    expect(fieldOf(() => readAuth({ type: "path", template, token: "K" }))).toBe("auth.template");
  });

  test("the template splits around its placeholder", () => {
    expect(splitPathTemplate("/bot{value}")).toEqual({ before: "/bot", after: "" });
    expect(splitPathTemplate("/v1/{value}/api")).toEqual({ before: "/v1/", after: "/api" });
  });

  test("field names follow the proposal's path", () => {
    expect(fieldOf(() => readAuth({ type: "path", template: "/x", token: "K" }, "services[2].auth"))).toBe("services[2].auth.template");
  });
});

test("both are described in plain words, names only", () => {
  expect(describeUrlAuth({ type: "query", param: "key" })).toBe("sent as the ?key= query parameter");
  expect(describeUrlAuth({ type: "path", template: "/bot{value}" })).toBe("sent in the path as /bot{value}, before the requested path");
  expect(describeUrlAuth({ type: "bearer" })).toBeUndefined();
});

describe("a header prefix holds what a header value may: printable ASCII", () => {
  test("bidi, zero-width and other non-ASCII characters are refused; ordinary prefixes pass", () => {
    for (const prefix of ["Token \u202e", "Bearer\u200b ", "Clé ", "a\u0000", "x\r\n"]) {
      expect(fieldOf(() => readAuth({ type: "header", header: "x-key", prefix, token: "K" }))).toBe("auth.prefix");
    }
    expect(readAuth({ type: "header", header: "x-key", prefix: "Token token=", token: "K" })).toEqual({
      type: "header",
      header: "x-key",
      prefix: "Token token=",
      token: "K",
    });
  });
});
