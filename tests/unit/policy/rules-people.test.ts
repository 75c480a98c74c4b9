// Rules as people write them: `*` for every method, and approval rules alone on a service that allowed
// everything keep the rest allowed (the CLI's flags and the console's box; the API's rules mean what
// they say).

import { describe, expect, test } from "bun:test";
import { parseWith } from "../../../src/contract/index.ts";
import { EVERYTHING_RULE, keepOthersAllowed, needsApproval, matchRule, RULE_METHODS, RulesList } from "../../../src/policy/index.ts";

const read = (rules: unknown) => parseWith(RulesList, rules, "rules");

describe("* as a method", () => {
  test("is every method a rule can name, stored spelt out, so matching is unchanged", () => {
    expect(read([{ methods: ["*"], paths: ["/**"] }])).toEqual([{ methods: [...RULE_METHODS], paths: ["/**"] }]);
    expect(read([{ methods: ["get", "*"], paths: ["/a"] }])[0]!.methods).toEqual(["GET", ...RULE_METHODS.filter((m) => m !== "GET")]);
    const rules = read([{ methods: ["*"], paths: ["/v1/**"] }]);
    for (const m of RULE_METHODS) expect(matchRule(rules, m, ["v1", "x"])).toBe(0);
  });

  test("other spellings are still refused, naming * in the message", () => {
    expect(() => read([{ methods: ["ANY"], paths: ["/a"] }])).toThrow(
      "rules[0].methods[0] must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, or * for every one of them",
    );
    expect(() => read([{ methods: ["**"], paths: ["/a"] }])).toThrow("must be one of");
  });
});

describe("approval rules alone, where people type rules", () => {
  const refunds = read([{ methods: ["POST"], paths: ["/v1/refunds"], approve: "each" }]);

  test("on a service that allowed everything: refunds held, everything else still allowed", () => {
    const rules = keepOthersAllowed(refunds, false);
    expect(rules).toEqual([...refunds, EVERYTHING_RULE]);
    expect(needsApproval(rules, "POST", ["v1", "refunds"])).toBe(true);
    expect(matchRule(rules, "GET", ["v1", "charges"])).toBeGreaterThanOrEqual(0);
    expect(matchRule(rules, "DELETE", ["v1", "customers", "c"])).toBeGreaterThanOrEqual(0);
  });

  test("on a service with rules, or with an allow rule given, the rules are what was typed", () => {
    expect(keepOthersAllowed(refunds, true)).toEqual(refunds);
    const mixed = read([
      { methods: ["GET"], paths: ["/v1/**"] },
      { methods: ["POST"], paths: ["/v1/refunds"], approve: "each" },
    ]);
    expect(keepOthersAllowed(mixed, false)).toEqual(mixed);
  });
});
