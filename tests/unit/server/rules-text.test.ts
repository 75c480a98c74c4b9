// The rules box's line format (methods, then paths; one rule per line) both ways, its errors naming
// the line, and what a change of rules adds to today's (the approval page's "wider than now").

import { describe, expect, test } from "bun:test";
import { InvalidRequest } from "../../../src/errors.ts";
import { covers, widening } from "../../../src/policy/index.ts";
import { formatRulesText, parseRulesText } from "../../../src/server/ui/rules-text.ts";

const RULES = [
  { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**", "/repos/*/pulls"] },
  { methods: ["DELETE"], paths: ["/repos/**"] },
];

function errorOf(text: string, label?: string): string {
  try {
    parseRulesText(text, label);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequest);
    return (err as InvalidRequest).message;
  }
  throw new Error(`no error for ${JSON.stringify(text)}`);
}

describe("approval rules: a line starting with approve", () => {
  const WITH_APPROVE = [
    { methods: ["GET"], paths: ["/v1/**"] },
    { methods: ["POST"], paths: ["/v1/refunds", "/v1/payouts"], approve: "each" as const },
  ];

  test("format then parse gives them back", () => {
    const text = formatRulesText(WITH_APPROVE);
    expect(text).toBe("GET /v1/**\napprove POST /v1/refunds /v1/payouts");
    expect(parseRulesText(text)).toEqual(WITH_APPROVE);
  });

  test("forgiving as other lines: any case, commas between methods, extra spaces", () => {
    expect(parseRulesText("  Approve  post,put /v1/refunds\nAPPROVE DELETE /x")).toEqual([
      { methods: ["POST", "PUT"], paths: ["/v1/refunds"], approve: "each" },
      { methods: ["DELETE"], paths: ["/x"], approve: "each" },
    ]);
  });

  test("mistakes name the line and what to write", () => {
    expect(errorOf("GET /a\napprove")).toBe(
      "Rules, line 2: after approve, write the methods and paths whose requests a person approves one by one, e.g. approve POST /v1/refunds",
    );
    expect(errorOf("approve /v1/refunds")).toBe("Rules, line 1: start with the methods, e.g. approve POST /v1/refunds");
    expect(errorOf("approve POST")).toBe("Rules, line 1: add at least one path after the methods, e.g. approve POST /repos/**");
    expect(errorOf("POST approve /v1/refunds")).toBe("Rules, line 1: approve goes first on the line, e.g. approve POST /v1/refunds");
    expect(errorOf("approve approve POST /a")).toBe("Rules, line 1: approve goes first on the line, e.g. approve POST /v1/refunds");
  });

  test("asking a person less is wider: a plain rule where one asked, or an approval rule dropped", () => {
    const now = [
      { methods: ["GET", "POST"], paths: ["/v1/**"] },
      { methods: ["POST"], paths: ["/v1/refunds"], approve: "each" as const },
    ];
    // The approval rule dropped: refunds are allowed without asking.
    expect(widening(now, [{ methods: ["GET", "POST"], paths: ["/v1/**"] }])).toEqual([{ methods: ["POST"], paths: ["/v1/refunds"] }]);
    // The same rule without approve.
    expect(widening([{ methods: ["POST"], paths: ["/v1/refunds"], approve: "each" }], [{ methods: ["POST"], paths: ["/v1/refunds"] }])).toEqual([
      { methods: ["POST"], paths: ["/v1/refunds"] },
    ]);
    // Adding an approval is narrower, not wider; the same rules are the same.
    expect(widening([{ methods: ["GET", "POST"], paths: ["/v1/**"] }], now)).toBeUndefined();
    expect(widening(now, now)).toBeUndefined();
    expect(
      widening(now, [
        { methods: ["GET", "POST"], paths: ["/v1/**"] },
        { methods: ["POST"], paths: ["/v1/**"], approve: "each" },
      ]),
    ).toBeUndefined();
    // A new approval rule outside today's rules is added, and said to be approved one by one.
    expect(widening([{ methods: ["GET"], paths: ["/v1/**"] }], [{ methods: ["DELETE"], paths: ["/v1/x"], approve: "each" }])).toEqual([
      { methods: ["DELETE"], paths: ["/v1/x"], approve: "each" },
    ]);
  });
});

describe("the line format", () => {
  test("format then parse gives the rules back", () => {
    const text = formatRulesText(RULES);
    expect(text).toBe("GET HEAD /repos/*/issues/** /repos/*/pulls\nDELETE /repos/**");
    expect(parseRulesText(text)).toEqual(RULES);
    expect(formatRulesText(undefined)).toBe("");
  });

  test("empty text, blank lines and comments only: no rules (everything allowed)", () => {
    expect(parseRulesText("")).toBeUndefined();
    expect(parseRulesText("  \n\r\n\t")).toBeUndefined();
    expect(parseRulesText("# nothing yet\n")).toBeUndefined();
  });

  test("forgiving where it is unambiguous: commas between methods, lower case, extra spaces, CRLF, comments", () => {
    expect(parseRulesText("  get,Head   /a  /b \r\n\r\n# the deletes\npost, put /c,d")).toEqual([
      { methods: ["GET", "HEAD"], paths: ["/a", "/b"] },
      { methods: ["POST", "PUT"], paths: ["/c,d"] },
    ]);
    expect(parseRulesText("GET GET /a /a")).toEqual([{ methods: ["GET"], paths: ["/a"] }]);
  });

  test("errors name the label and the line, and say what to write", () => {
    expect(errorOf("GET /a\n/b", "Rules for api.test")).toBe("Rules for api.test, line 2: start with the methods, e.g. GET HEAD /b");
    expect(errorOf("GET HEAD")).toBe("Rules, line 1: add at least one path after the methods, e.g. GET HEAD /repos/**");
    expect(errorOf("FETCH /a")).toBe(
      "Rules, line 1: FETCH is not a method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, or * for all), and paths start with /",
    );
    expect(errorOf("GET repos/a")).toStartWith("Rules, line 1: repos/a is not a method");
    expect(errorOf("GET /a POST /b")).toBe("Rules, line 1: write the methods first, then the paths (POST comes after a path); put each rule on its own line");
  });

  test("paths get the API's checks, reworded to the line and the path typed", () => {
    expect(errorOf("GET /ok\n\nGET /a/../b")).toBe("Rules, line 3 (/a/../b): dot segments are not allowed");
    expect(errorOf("GET /ok /repos/a*")).toBe("Rules, line 1 (/repos/a*): * and ** stand for whole segments (between slashes), not parts of one");
    expect(errorOf("GET /a//b")).toBe("Rules, line 1 (/a//b): empty segments (//) are not allowed");
    expect(errorOf(`GET ${Array.from({ length: 17 }, (_, i) => `/p${i}`).join(" ")}`)).toBe("Rules, line 1: paths may hold at most 16 entries");
    expect(errorOf(Array.from({ length: 33 }, (_, i) => `GET /p${i}`).join("\n"), "Rules for api.test")).toBe("Rules for api.test may hold at most 32 rules");
    expect(errorOf(`GET /${"x".repeat(600)}`)).toMatch(/^Rules, line 1 \(\/x{76}\.\.\.\): must be a path pattern/);
  });
});

describe("what a change adds", () => {
  test("a pattern covers another", () => {
    expect(covers("/repos/**", "/repos/*/issues/**")).toBe(true);
    expect(covers("/repos/*/issues/**", "/repos/a/issues/1")).toBe(true);
    expect(covers("/repos/*/issues/**", "/repos/**")).toBe(false);
    expect(covers("/repos/*", "/repos/**")).toBe(false);
    expect(covers("/repos/*", "/repos/")).toBe(false); // * is one non-empty segment
    expect(covers("/**", "/anything/at/all")).toBe(true);
    expect(covers("/a/b", "/a/%62")).toBe(true);
    expect(covers("/a/*/c", "/a/*/c")).toBe(true);
    expect(covers("/a/*/c", "/a/**/c")).toBe(false);
  });

  test("nothing is added under no rules today, or when the change narrows", () => {
    expect(widening(undefined, RULES)).toBeUndefined();
    expect(widening(RULES, [RULES[0]!])).toBeUndefined();
    expect(widening([{ methods: ["GET"], paths: ["/repos/**"] }], [{ methods: ["GET"], paths: ["/repos/a/issues/1", "/repos/*/pulls"] }])).toBeUndefined();
  });

  test("removing the rules adds everything; new methods and paths are listed", () => {
    expect(widening(RULES, undefined)).toBe("everything");
    const today = [{ methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] }];
    expect(widening(today, [...today, { methods: ["DELETE"], paths: ["/repos/a"] }])).toEqual([{ methods: ["DELETE"], paths: ["/repos/a"] }]);
    expect(widening(today, [{ methods: ["GET", "POST"], paths: ["/repos/*/issues/**", "/repos/*/pulls"] }])).toEqual([
      { methods: ["POST"], paths: ["/repos/*/issues/**"] },
      { methods: ["GET", "POST"], paths: ["/repos/*/pulls"] },
    ]);
  });
});
