// `--allow` for `broker service add|update`: repeated flags collected in order, each value split into
// methods then paths, every mistake named against the value typed (exit 2, with a hint), the rules
// described in words; and the command refusing contradictory or empty updates before any request.

import { describe, expect, test } from "bun:test";
import { runOffline } from "../../helpers/cli-offline.ts";
import { CliFailure } from "../../../src/cli/kit/fail.ts";
import { collectFlagValues, collectRuleFlags, describeAllowed, parseAllowFlags, parseRuleFlags } from "../../../src/cli/kit/service-rules.ts";

function failure(fn: () => unknown): CliFailure {
  try {
    fn();
  } catch (err) {
    if (err instanceof CliFailure) return err;
    throw err;
  }
  throw new Error("expected a CliFailure");
}

describe("collectFlagValues", () => {
  test("every --allow, spaced or with =, in order; nothing after --", () => {
    const raw = ["h", "--allow", "GET /a", "--auth", "bearer", "--allow=POST /b", "--allow", "", "--", "--allow", "PUT /c"];
    expect(collectFlagValues(raw, "allow")).toEqual(["GET /a", "POST /b", ""]);
    expect(collectFlagValues(["h", "--allowed", "x", "--allow"], "allow")).toEqual([""]);
    expect(collectFlagValues(["h"], "allow")).toEqual([]);
  });
});

describe("parseAllowFlags", () => {
  test("methods then one or more paths per flag; methods upper-cased, duplicates dropped", () => {
    expect(parseAllowFlags(["GET HEAD /repos/*/issues/**", " post   /repos/*/issues /repos/*/pulls ", "get Get /"])).toEqual([
      { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] },
      { methods: ["POST"], paths: ["/repos/*/issues", "/repos/*/pulls"] },
      { methods: ["GET"], paths: ["/"] },
    ]);
  });

  test.each([
    ["", "--allow needs methods then paths", '--allow "GET HEAD'],
    ["GET HEAD", '--allow "GET HEAD": no path given', '--allow "GET HEAD /repos/**"'],
    ["/repos/**", '--allow "/repos/**": no method given', '--allow "GET HEAD /repos/**"'],
    ["GET /a POST /b", '--allow "GET /a POST /b": "POST" comes after a path; methods go first, and each --allow is one rule', '--allow "POST'],
    ["FETCH /a", '--allow "FETCH /a": FETCH is not a method a rule can allow', "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"],
    ["TRACE /a", '--allow "TRACE /a": TRACE is not a method a rule can allow', "OPTIONS"],
    ["GET /a/../b", '--allow "GET /a/../b": in path /a/../b, dot segments are not allowed', "refused"],
    ["GET /ok /a*b", '--allow "GET /ok /a*b": in path /a*b, * and ** stand for whole segments (between slashes), not parts of one', "* matches one segment"],
    ["GET /a;x", '--allow "GET /a;x": in path /a;x, ; path parameters are ambiguous', ";"],
    ["GET /a%2Fb", '--allow "GET /a%2Fb": in path /a%2Fb, encoded / or \\ in a path segment is ambiguous', "%2F"],
    ["GET /a//b", '--allow "GET /a//b": in path /a//b, empty segments (//) are not allowed', "//"],
  ])("%j is refused with a message naming it", (value, message, hint) => {
    const f = failure(() => parseAllowFlags(["GET /fine", value]));
    expect(f.message).toBe(message);
    expect(f.hint).toContain(hint);
    expect(f.exitCode).toBe(2);
  });

  test("limits are told in flag terms, not the API's field names", () => {
    const many = failure(() => parseAllowFlags(Array.from({ length: 33 }, (_, i) => `GET /p${i}`)));
    expect(many.message).toBe("--allow was given 33 times: there may be at most 32 rules");
    const paths = failure(() => parseAllowFlags([`GET ${Array.from({ length: 17 }, (_, i) => `/p${i}`).join(" ")}`]));
    expect(paths.message).toEndWith(": paths may hold at most 16 entries");
    expect(`${many.message} ${paths.message}`).not.toContain("rules[");
  });
});

describe("--approve", () => {
  test("collected with --allow in the order typed; nothing after --", () => {
    const raw = ["h", "--approve", "POST /v1/refunds", "--allow=GET /v1/**", "--approve=DELETE /v1/x", "--", "--approve", "PUT /y"];
    expect(collectRuleFlags(raw)).toEqual([
      { flag: "approve", value: "POST /v1/refunds" },
      { flag: "allow", value: "GET /v1/**" },
      { flag: "approve", value: "DELETE /v1/x" },
    ]);
  });

  test("an --approve rule is a rule with approve: each, in words a human approves each request", () => {
    const rules = parseRuleFlags([
      { flag: "allow", value: "GET /v1/**" },
      { flag: "approve", value: "post /v1/refunds /v1/payouts" },
    ]);
    expect(rules).toEqual([
      { methods: ["GET"], paths: ["/v1/**"] },
      { methods: ["POST"], paths: ["/v1/refunds", "/v1/payouts"], approve: "each" },
    ]);
    expect(describeAllowed(rules)).toBe("GET on /v1/**; POST on /v1/refunds or /v1/payouts (each request approved by a human)");
  });

  test.each([
    ["", "--approve needs methods then paths", '--approve "POST /v1/refunds"'],
    ["/v1/refunds", '--approve "/v1/refunds": no method given', '--approve "POST /v1/refunds"'],
    ["POST", '--approve "POST": no path given', '--approve "POST /repos/**"'],
    ["POST /a GET /b", '--approve "POST /a GET /b": "GET" comes after a path; methods go first, and each --approve is one rule', "--approve"],
    ["FETCH /a", '--approve "FETCH /a": FETCH is not a method a rule can approve', "GET, HEAD"],
    ["POST /a/../b", '--approve "POST /a/../b": in path /a/../b, dot segments are not allowed', "refused"],
  ])("%j is refused naming --approve", (value, message, hint) => {
    const f = failure(() =>
      parseRuleFlags([
        { flag: "allow", value: "GET /fine" },
        { flag: "approve", value },
      ]),
    );
    expect(f.message).toBe(message);
    expect(f.hint).toContain(hint);
    expect(f.exitCode).toBe(2);
  });

  test("the rule count names both flags when both were given", () => {
    const flags = Array.from({ length: 33 }, (_, i) => ({ flag: i % 2 ? ("approve" as const) : ("allow" as const), value: `POST /p${i}` }));
    expect(failure(() => parseRuleFlags(flags)).message).toBe("--allow and --approve were given 33 times: there may be at most 32 rules");
  });
});

test("describeAllowed: the rules in words, or everything", () => {
  expect(describeAllowed(undefined)).toBe("every method and path");
  expect(
    describeAllowed([
      { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] },
      { methods: ["POST"], paths: ["/a", "/b"] },
    ]),
  ).toBe("GET and HEAD on /repos/*/issues/**; POST on /a or /b");
});

describe("broker service add|update refuse bad rule flags before any request", () => {
  const run = runOffline;

  test.each([
    [["service", "update", "api.example.com"], "error: nothing to change", "--no-rules to remove them"],
    [["service", "update", "api.example.com", "--no-rules", "--allow", "GET /a"], "error: --allow and --no-rules contradict each other", "hint: give --allow"],
    [["service", "update", "api.example.com", "--allow", "GET"], 'error: --allow "GET": no path given', "hint: add one or more paths"],
    [
      ["service", "add", "api.example.com", "--auth", "bearer", "--token", "K", "--allow", "GET /a", "--allow", "DELETE"],
      'error: --allow "DELETE": no path given',
      "hint:",
    ],
    [["service", "update", "api.example.com", "--rules"], "error: unknown option --rules", "did you mean: --rules-mode?"],
    [
      ["service", "update", "api.example.com", "--approve", "POST /v1/refunds", "--no-rules"],
      "error: --approve and --no-rules contradict each other",
      "hint: give --allow (and --approve)",
    ],
    [
      ["service", "add", "api.example.com", "--auth", "bearer", "--token", "K", "--approve", "/v1/refunds"],
      'error: --approve "/v1/refunds": no method given',
      "hint: start with the methods",
    ],
  ])("%j", async (args, message, hint) => {
    const r = await run(args);
    expect(r.code).toBe(2);
    expect(r.err).toContain(message);
    expect(r.err).toContain(hint);
    expect(r.out).toBe("");
  });

  test("help shows --allow, --no-rules and an example", async () => {
    const add = await run(["service", "add", "--help"]);
    expect(add.out).toContain("--allow=<METHODS PATHS>");
    expect(add.out).toContain('--allow "GET HEAD /repos/*/issues/**" --allow "POST /repos/*/issues"');
    const update = await run(["service", "update", "--help"]);
    expect(update.out).toContain("--no-rules");
    expect(update.out).toContain('broker service update api.github.com --allow "GET HEAD /repos/**"');
    for (const help of [add.out, update.out]) {
      expect(help).toContain("--approve=<METHODS PATHS>");
      expect(help).toContain('--allow "GET /v1/**" --approve "POST /v1/refunds"');
      expect(help).toContain("broker request approve <id>");
    }
  });
});
