// Service rules (issue 15): the canonical path form, rule parsing, matching and wording. The property tests
// compare the module with references written here from the spec, by other techniques (a RegExp matcher,
// a byte-walking canonicaliser), so a shared misreading cannot hide in both.

import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { canonicalPath, matchRule, RULE_METHODS, type Rules } from "../../../src/policy/path-rules.ts";
import { parseWith } from "../../../src/contract/index.ts";
import { RulesList } from "../../../src/policy/index.ts";
import { describeRules } from "../../../src/words/index.ts";
import { InvalidRequest } from "../../../src/errors.ts";

/** The rules schema, as a body's `rules` field (or `field`) is read; absent or null is no rules. */
const parseRules = (v: unknown, field = "rules") =>
  parseWith(
    RulesList.nullish().transform((r) => r ?? undefined),
    v,
    field,
  );

const RUNS = { numRuns: 500 };
const LITERAL = /^[A-Za-z0-9\-._~!$&'()*+,=:@]$/;
const hex = (b: number) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`;

/** Reference encoder: unreserved characters stay, every other UTF-8 byte becomes %XX (upper-case hex). */
function encodeSegment(seg: string): string {
  return [...new TextEncoder().encode(seg)].map((b) => (LITERAL.test(String.fromCharCode(b)) ? String.fromCharCode(b) : hex(b))).join("");
}

/** Reference canonicaliser: walks the raw string byte by byte; decodes with a fatal decoder that keeps a BOM. */
function referenceCanonical(raw: string): { path: string; segments: string[] } | null {
  if (!raw.startsWith("/")) return null;
  for (const ch of raw) {
    const c = ch.codePointAt(0)!;
    if (c < 0x21 || c > 0x7e || "\\;#?".includes(ch)) return null;
  }
  const parts = raw.slice(1).split("/");
  const segments: string[] = [];
  for (const [i, part] of parts.entries()) {
    const bytes: number[] = [];
    for (let j = 0; j < part.length; j++) {
      if (part[j] !== "%") {
        bytes.push(part.charCodeAt(j));
        continue;
      }
      const digits = part.slice(j + 1, j + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(digits)) return null;
      bytes.push(parseInt(digits, 16));
      j += 2;
    }
    let seg: string;
    try {
      seg = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(new Uint8Array(bytes));
    } catch {
      return null;
    }
    if (/[\u0000-\u001f\u007f/\\;]/.test(seg) || seg === "." || seg === "..") return null;
    if (seg === "" && i !== parts.length - 1) return null;
    segments.push(seg);
  }
  return { path: `/${segments.map(encodeSegment).join("/")}`, segments };
}

/** Reference matcher: a pattern becomes one RegExp over "/" + the decoded segments joined by "/". */
function patternToRegExp(pattern: string): RegExp {
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  const body = pattern
    .slice(1)
    .split("/")
    .map((seg) => (seg === "**" ? "(?:/[^/]*)*" : seg === "*" ? "/[^/]+" : `/${escape(decodeURIComponent(seg))}`))
    .join("");
  return new RegExp(`^${body}$`, "u");
}
function referenceMatch(rules: readonly { methods: string[]; patterns: string[] }[], method: string, segments: readonly string[]): number {
  const subject = `/${segments.join("/")}`;
  return rules.findIndex((r) => r.methods.includes(method) && r.patterns.some((p) => patternToRegExp(p).test(subject)));
}

function parsed(input: unknown): Rules {
  const rules = parseRules(input, "rules");
  if (!rules) throw new Error("expected rules");
  return rules;
}
function segmentsOf(raw: string): readonly string[] {
  const c = canonicalPath(raw);
  if (!c.ok) throw new Error(`expected ${raw} to be accepted: ${c.reason}`);
  return c.segments;
}
function expectInvalid(input: unknown, field: string | RegExp, message?: RegExp, name = "rules"): void {
  let caught: unknown;
  try {
    parseRules(input, name);
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(InvalidRequest);
  const err = caught as InvalidRequest;
  expect(err.status).toBe(400);
  if (typeof field === "string") expect(err.field).toBe(field);
  else expect(err.field ?? "").toMatch(field);
  if (message) expect(err.message).toMatch(message);
}

const REFUSED_PATHS: [string, string][] = [
  ["empty string", ""],
  ["no leading slash", "a/b"],
  ["raw backslash", "/a\\b"],
  ["raw semicolon", "/a;b=1"],
  ["fragment", "/a#b"],
  ["query not split off", "/a?b=1"],
  ["raw space", "/a b"],
  ["raw tab", "/a\tb"],
  ["raw NUL", "/a\u0000b"],
  ["raw DEL", "/a\u007fb"],
  ["raw non-ASCII", "/café"],
  ["lone %", "/a%"],
  ["% with one hex digit", "/%4"],
  ["% with non-hex", "/%G0"],
  ["% with one bad digit", "/%4g"],
  ["%% pair", "/%%41"],
  ["encoded slash upper", "/a%2Fb"],
  ["encoded slash lower", "/a%2fb"],
  ["encoded backslash upper", "/a%5Cb"],
  ["encoded backslash lower", "/a%5cb"],
  ["encoded NUL", "/a%00b"],
  ["encoded SOH", "/a%01"],
  ["encoded LF", "/a%0A"],
  ["encoded CR", "/a%0d"],
  ["encoded US", "/a%1F"],
  ["encoded DEL", "/a%7F"],
  ["encoded semicolon upper", "/a%3Bb"],
  ["encoded semicolon lower", "/a%3bb"],
  ["truncated UTF-8", "/%C3"],
  ["invalid byte FF", "/%FF"],
  ["lone continuation byte", "/%80"],
  ["overlong slash", "/%C0%AF"],
  ["UTF-16 surrogate", "/%ED%A0%80"],
  ["beyond U+10FFFF", "/%F4%90%80%80"],
  ["truncated 3-byte sequence", "/%E2%82"],
  ["UTF-8 split across segments", "/%C3/%A9"],
  ["dot segment", "/a/./b"],
  ["dot-dot segment", "/a/../b"],
  ["leading dot", "/./a"],
  ["trailing dot", "/a/."],
  ["trailing dot-dot", "/a/.."],
  ["encoded dot", "/a/%2e/b"],
  ["encoded dot-dot upper", "/a/%2E%2E/b"],
  ["half-encoded dot-dot", "/.%2e"],
  ["leading empty segment", "//a"],
  ["only slashes", "//"],
  ["inner empty segment", "/a//b"],
  ["empty segment before trailing slash", "/a//"],
];

describe("canonicalPath refuses ambiguous forms", () => {
  test.each(REFUSED_PATHS)("%s: %p", (_name, raw) => {
    const c = canonicalPath(raw);
    expect(c.ok ? "accepted" : typeof c.reason === "string" && c.reason.length > 0).toBe(true);
  });
});

describe("canonicalPath accepts and canonicalises", () => {
  const CANONICAL = [
    "/",
    "/a",
    "/a/",
    "/repos/x/issues/1/comments",
    "/caf%C3%A9",
    "/a%20b",
    "/%25",
    "/a+b",
    "/~user/-._!$&'()*+,=:@",
    "/.well-known/x",
    "/...",
    "/.a/a.",
    "/%EF%BB%BFa",
    "/%F0%9F%98%80",
    "/%2541",
    "/%252F",
  ];
  test.each(CANONICAL)("a canonical path comes back byte-identical: %p", (raw) => {
    const c = canonicalPath(raw);
    expect(c.ok && c.path).toBe(raw);
  });

  const DECODED: [string, string, string[]][] = [
    ["/%61b", "/ab", ["ab"]],
    ["/%c3%a9", "/%C3%A9", ["é"]],
    ["/caf%C3%A9", "/caf%C3%A9", ["café"]],
    ["/%7e%7E", "/~~", ["~~"]],
    ["/a%2Cb", "/a,b", ["a,b"]],
    ["/%41/%2a", "/A/*", ["A", "*"]],
    ['/a"b', "/a%22b", ['a"b']],
    ["/[x]", "/%5Bx%5D", ["[x]"]],
    ["/a|b{c}^`<>", "/a%7Cb%7Bc%7D%5E%60%3C%3E", ["a|b{c}^`<>"]],
    ["/a%3fb", "/a%3Fb", ["a?b"]],
    ["/a%23b", "/a%23b", ["a#b"]],
    ["/a%20b", "/a%20b", ["a b"]],
    ["/a%25b", "/a%25b", ["a%b"]],
    ["/%2541", "/%2541", ["%41"]],
    ["/%2e%2e%2e", "/...", ["..."]],
    ["/", "/", [""]],
    ["/a/", "/a/", ["a", ""]],
    ["/%EF%BB%BFa", "/%EF%BB%BFa", ["\uFEFFa"]],
    ["/%EF%BB%BF/x", "/%EF%BB%BF/x", ["\uFEFF", "x"]],
    ["/%F0%9F%98%80", "/%F0%9F%98%80", ["😀"]],
  ];
  test.each(DECODED)("%p → %p", (raw, path, segments) => {
    expect(canonicalPath(raw)).toEqual({ ok: true, path, segments });
  });
});

describe("parseRules", () => {
  test("RULE_METHODS", () => {
    expect([...RULE_METHODS]).toEqual(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
  });

  test("no rules means undefined; an empty list is refused as allowing nothing", () => {
    expect(parseRules(undefined, "rules")).toBeUndefined();
    expect(parseRules(null, "rules")).toBeUndefined();
    expectInvalid([], "rules", /nothing/i);
  });

  test("upper-cases and de-duplicates methods, de-duplicates paths", () => {
    const [rule] = parsed([{ methods: ["get", "HEAD", "GET", "head"], paths: ["/a/**", "/a/**", "/b"] }]);
    expect([...rule!.methods].sort()).toEqual(["GET", "HEAD"]);
    expect([...rule!.paths].sort()).toEqual(["/a/**", "/b"]);
  });

  test("uses the field name it is given", () => {
    expectInvalid([{ methods: ["TRACE"], paths: ["/"] }], "service.rules[0].methods[0]", undefined, "service.rules");
  });

  const ok = { methods: ["GET"], paths: ["/"] };
  const BAD: [string, unknown, string | RegExp][] = [
    ["not an array", "GET /a", "rules"],
    ["an object", { methods: ["GET"], paths: ["/"] }, "rules"],
    ["rule not an object", [ok, "GET /a"], "rules[1]"],
    ["methods missing", [{ paths: ["/"] }], /^rules\[0\]\.methods$/],
    ["paths missing", [{ methods: ["GET"] }], /^rules\[0\]\.paths$/],
    ["empty methods (would allow nothing)", [{ methods: [], paths: ["/"] }], /^rules\[0\]\.methods$/],
    ["empty paths (would allow nothing)", [{ methods: ["GET"], paths: [] }], /^rules\[0\]\.paths$/],
    ["methods not an array", [{ methods: "GET", paths: ["/"] }], /^rules\[0\]\.methods$/],
    ["method not a string", [{ methods: ["GET", 5], paths: ["/"] }], "rules[0].methods[1]"],
    ["unknown method", [ok, { methods: ["GET", "TRACE"], paths: ["/"] }], "rules[1].methods[1]"],
    ["CONNECT", [{ methods: ["CONNECT"], paths: ["/"] }], "rules[0].methods[0]"],
    ["path not a string", [{ methods: ["GET"], paths: ["/", null] }], "rules[0].paths[1]"],
    ["empty path", [{ methods: ["GET"], paths: [""] }], "rules[0].paths[0]"],
    ["relative path", [{ methods: ["GET"], paths: ["/a", "a/b"] }], "rules[0].paths[1]"],
    ["star glued to a literal", [{ methods: ["GET"], paths: ["/a*"] }], "rules[0].paths[0]"],
    ["literal after star", [{ methods: ["GET"], paths: ["/*a/b"] }], "rules[0].paths[0]"],
    ["double star glued", [{ methods: ["GET"], paths: ["/a/**b"] }], "rules[0].paths[0]"],
    ["triple star", [{ methods: ["GET"], paths: ["/***"] }], "rules[0].paths[0]"],
    ["dot segment", [{ methods: ["GET"], paths: ["/a/../b"] }], "rules[0].paths[0]"],
    ["encoded dot", [{ methods: ["GET"], paths: ["/a/%2e"] }], "rules[0].paths[0]"],
    ["semicolon", [{ methods: ["GET"], paths: ["/a;b"] }], "rules[0].paths[0]"],
    ["backslash", [{ methods: ["GET"], paths: ["/a\\b"] }], "rules[0].paths[0]"],
    ["bad escape", [{ methods: ["GET"], paths: ["/a%zz"] }], "rules[0].paths[0]"],
    ["encoded slash", [{ methods: ["GET"], paths: ["/a%2Fb"] }], "rules[0].paths[0]"],
    ["encoded NUL", [{ methods: ["GET"], paths: ["/a%00"] }], "rules[0].paths[0]"],
    ["non-UTF-8 escape", [{ methods: ["GET"], paths: ["/%FF"] }], "rules[0].paths[0]"],
    ["query", [{ methods: ["GET"], paths: ["/a?b"] }], "rules[0].paths[0]"],
    ["leading empty segment", [{ methods: ["GET"], paths: ["//a"] }], "rules[0].paths[0]"],
    ["inner empty segment", [{ methods: ["GET"], paths: ["/", "/a//b"] }], "rules[0].paths[1]"],
    ["33 rules", Array.from({ length: 33 }, () => ok), /^rules(\[32\])?$/],
    ["17 paths", [{ methods: ["GET"], paths: Array.from({ length: 17 }, (_, i) => `/p${i}`) }], /^rules\[0\]\.paths(\[16\])?$/],
    ["path over 512 characters", [{ methods: ["GET"], paths: [`/${"a".repeat(512)}`] }], "rules[0].paths[0]"],
  ];
  test.each(BAD)("refuses %s", (_name, input, field) => expectInvalid(input, field));

  test("accepts the limits exactly", () => {
    expect(parsed(Array.from({ length: 32 }, () => ok))).toHaveLength(32);
    expect(parsed([{ methods: ["GET"], paths: Array.from({ length: 16 }, (_, i) => `/p${i}`) }])[0]!.paths).toHaveLength(16);
    expect(parsed([{ methods: ["GET"], paths: [`/${"a".repeat(511)}`] }])[0]!.paths).toHaveLength(1);
    expect(parsed([{ methods: [...RULE_METHODS], paths: ["/", "/a/", "/**", "/*/x/**", "/caf%C3%A9"] }])).toHaveLength(1);
  });
});

describe("matchRule", () => {
  const MATCHES: [string, string, boolean][] = [
    ["/repos/*/issues/**", "/repos/x/issues", true],
    ["/repos/*/issues/**", "/repos/x/issues/", true],
    ["/repos/*/issues/**", "/repos/x/issues/1/comments", true],
    ["/repos/*/issues/**", "/repos/issues", false],
    ["/repos/*/issues/**", "/repos/x/y/issues", false],
    ["/**", "/", true],
    ["/**", "/a/b/", true],
    ["/a/*", "/a/b", true],
    ["/a/*", "/a/", false],
    ["/a/*", "/a", false],
    ["/a/*", "/a/b/c", false],
    ["/a/", "/a/", true],
    ["/a/", "/a", false],
    ["/a", "/a/", false],
    ["/", "/", true],
    ["/", "/a", false],
    ["/a/**", "/a", true],
    ["/a/**/b", "/a/b", true],
    ["/a/**/b", "/a/x/y/b", true],
    ["/a/**/b", "/a/x/y/b/", false],
    ["/*/", "/a/", true],
    ["/*/", "/", false],
    ["/caf%c3%a9", "/caf%C3%A9", true],
    ["/%61", "/a", true],
    ["/a", "/A", false],
  ];
  test.each(MATCHES)("%p on %p → %p", (pattern, path, expected) => {
    expect(matchRule(parsed([{ methods: ["GET"], paths: [pattern] }]), "GET", segmentsOf(path))).toBe(expected ? 0 : -1);
  });

  test("needs the method too, compared exactly, and returns the first rule that allows", () => {
    const rules = parsed([
      { methods: ["POST"], paths: ["/a/**"] },
      { methods: ["GET", "HEAD"], paths: ["/b", "/a/*"] },
      { methods: ["GET"], paths: ["/**"] },
    ]);
    expect(matchRule(rules, "POST", segmentsOf("/a/x"))).toBe(0);
    expect(matchRule(rules, "GET", segmentsOf("/a/x"))).toBe(1);
    expect(matchRule(rules, "HEAD", segmentsOf("/b"))).toBe(1);
    expect(matchRule(rules, "GET", segmentsOf("/c"))).toBe(2);
    expect(matchRule(rules, "DELETE", segmentsOf("/a/x"))).toBe(-1);
    expect(matchRule(rules, "get", segmentsOf("/c"))).toBe(-1);
  });
});

describe("describeRules", () => {
  test("plain words", () => {
    const rules = parsed([
      { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] },
      { methods: ["POST"], paths: ["/a", "/b"] },
    ]);
    expect(describeRules(rules)).toBe("GET and HEAD on /repos/*/issues/**; POST on /a or /b");
    expect(describeRules(parsed([{ methods: ["DELETE"], paths: ["/x/*"] }]))).toBe("DELETE on /x/*");
  });
});

describe("properties", () => {
  const literalSegment = fc.constantFrom("a", "b", "c", "é");
  const encodeLiteral = (s: string, lower: boolean) => (s === "é" ? (lower ? "%c3%a9" : "%C3%A9") : lower && s === "a" ? "%61" : s);
  const patternArb = fc
    .record({
      segs: fc.array(fc.oneof(literalSegment, fc.constantFrom("*", "**")), { maxLength: 5 }),
      trailing: fc.boolean(),
      lower: fc.boolean(),
    })
    .map(({ segs, trailing, lower }) => (segs.length ? `/${segs.map((s) => encodeLiteral(s, lower)).join("/")}${trailing ? "/" : ""}` : "/"));
  const pathArb = fc
    .record({ segs: fc.array(literalSegment, { maxLength: 6 }), trailing: fc.boolean() })
    .map(({ segs, trailing }) => (segs.length ? `/${segs.map((s) => encodeLiteral(s, false)).join("/")}${trailing ? "/" : ""}` : "/"));
  const rulesArb = fc.array(
    fc.record({
      methods: fc.uniqueArray(fc.constantFrom("GET", "POST", "DELETE"), { minLength: 1, maxLength: 3 }),
      patterns: fc.array(patternArb, { minLength: 1, maxLength: 3 }),
    }),
    { minLength: 1, maxLength: 3 },
  );

  test("matchRule agrees with a RegExp reference matcher", () => {
    let hits = 0;
    fc.assert(
      fc.property(rulesArb, pathArb, fc.constantFrom("GET", "POST", "DELETE"), (spec, path, method) => {
        const rules = parsed(spec.map((r) => ({ methods: r.methods, paths: r.patterns })));
        const segments = segmentsOf(path);
        const expected = referenceMatch(spec, method, segments);
        if (expected >= 0) hits++;
        expect(matchRule(rules, method, segments)).toBe(expected);
      }),
      { numRuns: 1000 },
    );
    expect(hits).toBeGreaterThan(50); // the property is not vacuous
  });

  const RAW_TOKENS = [
    "/",
    "a",
    "é",
    ".",
    "..",
    "%",
    "%2e",
    "%2E",
    "%2F",
    "%2f",
    "%5C",
    "%00",
    "%1f",
    "%7F",
    "%3B",
    "%C3",
    "%A9",
    "%c3%a9",
    "%FF",
    "%EF%BB%BF",
    "%25",
    "%41",
    "%4",
    "%zz",
    ";",
    "\\",
    "?",
    "#",
    " ",
    "*",
    "~",
    '"',
    "+",
    "\u0000",
    "\u007f",
  ];
  const rawArb = fc.oneof(
    fc.array(fc.constantFrom(...RAW_TOKENS), { maxLength: 12 }).map((t) => `/${t.join("")}`),
    fc.string({ unit: "binary-ascii", maxLength: 24 }).map((s) => `/${s}`),
    fc.string({ maxLength: 24 }),
  );

  test("canonicalPath agrees with a byte-walking reference", () => {
    fc.assert(
      fc.property(rawArb, (raw) => {
        const ref = referenceCanonical(raw);
        const got = canonicalPath(raw);
        expect(got.ok ? { path: got.path, segments: got.segments } : null).toEqual(ref);
      }),
      RUNS,
    );
  });

  test("canonicalPath is idempotent", () => {
    fc.assert(
      fc.property(rawArb, (raw) => {
        const first = canonicalPath(raw);
        if (!first.ok) return;
        expect(canonicalPath(first.path)).toEqual(first);
      }),
      RUNS,
    );
  });

  test("encodeURIComponent segments come back decoded, in the reference canonical encoding", () => {
    const segment = fc.string({ unit: "binary", minLength: 1, maxLength: 8 }).filter((s) => !/[\u0000-\u001f\u007f/\\;]/.test(s) && s !== "." && s !== "..");
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 5 }), fc.boolean(), (segs, trailing) => {
        const all = trailing || segs.length === 0 ? [...segs, ""] : segs;
        const c = canonicalPath(`/${all.map(encodeURIComponent).join("/")}`);
        expect(c).toEqual({ ok: true, path: `/${all.map(encodeSegment).join("/")}`, segments: all });
      }),
      RUNS,
    );
  });

  test("an accepted path never carries an ambiguous form", () => {
    fc.assert(
      fc.property(rawArb, (raw) => {
        const c = canonicalPath(raw);
        if (!c.ok) return;
        const upper = c.path.toUpperCase();
        for (const bad of ["//", "/./", "/../", "\\", ";", "%2F", "%5C", "%00"]) expect(upper).not.toContain(bad);
        expect(c.path).not.toMatch(/\/\.\.?$/);
        expect(c.path).toMatch(/^\/(?:[A-Za-z0-9\-._~!$&'()*+,=:@/]|%[0-9A-F]{2})*$/);
      }),
      RUNS,
    );
  });
});
