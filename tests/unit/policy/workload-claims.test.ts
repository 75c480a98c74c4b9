// Claim paths and patterns of workload bindings (docs/architecture.md D27): nested and slash-named claims, globs,
// lists, non-string values, and that every condition must hold (an empty set never does).

import { describe, expect, test } from "bun:test";
import { claimValues, conditionsHold, globMatches } from "../../../src/policy/index.ts";

const projected = {
  sub: "system:serviceaccount:ci:deployer",
  aud: ["broker", "other"],
  "kubernetes.io": { namespace: "ci", serviceaccount: { name: "deployer", uid: "u" } },
};
const legacy = { "kubernetes.io/serviceaccount/namespace": "ci", "kubernetes.io/serviceaccount/service-account.name": "deployer" };

describe("claim paths", () => {
  test.each([
    [projected, "sub", ["system:serviceaccount:ci:deployer"]],
    [projected, "kubernetes.io/namespace", ["ci"]],
    [projected, "kubernetes.io/serviceaccount/name", ["deployer"]],
    [projected, "aud", ["broker", "other"]],
    [projected, "kubernetes.io", []],
    [projected, "missing/path", []],
    [legacy, "kubernetes.io/serviceaccount/namespace", ["ci"]],
    [{ run_attempt: 2, ok: true }, "run_attempt", ["2"]],
    [{ ok: true }, "ok", ["true"]],
    [{ a: { "b/c": { d: "x" } } }, "a/b/c/d", ["x"]],
  ] as const)("%j at %s", (claims, path, values) => {
    expect(claimValues(claims, path)).toEqual([...values]);
  });
});

describe("patterns", () => {
  test.each([
    ["repo:org/repo:ref:refs/heads/main", "repo:org/repo:ref:refs/heads/main", true],
    ["repo:org/repo:*", "repo:org/repo:ref:refs/heads/main", true],
    ["repo:org/*:ref:refs/heads/main", "repo:org/x:ref:refs/heads/main", true],
    ["repo:org/repo:*", "repo:org/repository:ref:refs/heads/main", false],
    ["refs/tags/v?", "refs/tags/v1", true],
    ["refs/tags/v?", "refs/tags/v10", false],
    ["*", "", true],
    ["a*b*c", "aXbYc", true],
    ["a*b*c", "aXbY", false],
    ["exact", "Exact", false],
  ] as const)("%s against %s: %p", (pattern, value, expected) => {
    expect(globMatches(pattern, value)).toBe(expected);
  });

  test("every condition must hold, a list matches any of its patterns, and no conditions match nothing", () => {
    expect(conditionsHold(projected, { "kubernetes.io/namespace": "ci", "kubernetes.io/serviceaccount/name": ["ops-*", "deployer"] })).toBe(true);
    expect(conditionsHold(projected, { "kubernetes.io/namespace": "ci", sub: "system:serviceaccount:prod:*" })).toBe(false);
    expect(conditionsHold(projected, {})).toBe(false);
  });
});
