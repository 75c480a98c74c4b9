// allowClaimedMethods (a body's `_method` claims checked against the target allowedTarget already
// returned) decides exactly as checking the request line's target again with those claims would:
// same pass or refusal, same error and hint, so the path rules are decided once.
// It rests on canonicalPath being idempotent, which is fuzzed here too.

import { expect, test } from "bun:test";
import { allowClaimedMethods, allowedTarget } from "../../../src/egress/rules.ts";
import type { EgressPlan } from "../../../src/egress/plan.ts";
import { canonicalPath, RULE_METHODS } from "../../../src/policy/index.ts";
import { parseWith } from "../../../src/contract/index.ts";
import { RulesList } from "../../../src/policy/index.ts";

/** The rules schema, as a body's `rules` field (or `field`) is read; absent or null is no rules. */
const parseRules = (v: unknown, field = "rules") =>
  parseWith(
    RulesList.nullish().transform((r) => r ?? undefined),
    v,
    field,
  );

const ALPHABET = [
  "a",
  "b",
  "x",
  "A",
  "%41",
  "%2e",
  "%2E%2E",
  "%25",
  "%2F",
  "%3B",
  ";",
  "%3F",
  "%E2%82%AC",
  "%EF%BB%BF",
  "%C3",
  "~",
  "*",
  " ",
  "%20",
  "",
  ".",
  "..",
  "%00",
  "\\",
  "@",
  ":",
];

function rnd(n: number) {
  return Math.floor(Math.random() * n);
}

function randomTarget(): string {
  const segs = Array.from({ length: 1 + rnd(4) }, () => Array.from({ length: rnd(3) }, () => ALPHABET[rnd(ALPHABET.length)]).join(""));
  const q = rnd(3) === 0 ? `?_method=${RULE_METHODS[rnd(RULE_METHODS.length)]}` : rnd(2) ? "?q=1" : "";
  const head = ["", "a/", "A/", "%E2%82%AC/", "~/", "%25/", "%20/"][rnd(7)];
  return "/" + head + segs.join("/") + q;
}

const plan = {
  service: { host: "api.example.com", authType: "bearer" },
  rules: parseRules([
    { methods: ["GET", "POST"], paths: ["/a/**", "/A/*", "/%E2%82%AC/**"] },
    { methods: ["DELETE"], paths: ["/a/x", "/~/*"] },
    { methods: ["PATCH"], paths: ["/a/**"], approve: "each" },
    { methods: ["PUT"], paths: ["/%25/*", "/%20/**"] },
  ]),
} as unknown as EgressPlan;
const hint = (m: string, p: string) => ({ m, p });

function outcome(f: () => unknown): string {
  try {
    return `ok ${JSON.stringify(f() ?? null)}`;
  } catch (err) {
    return `${(err as Error).constructor.name} ${(err as Error).message} ${JSON.stringify(err)}`;
  }
}

test("review: canonicalPath is idempotent on what it returns", () => {
  for (let i = 0; i < 20_000; i++) {
    const t = randomTarget().split("?")[0]!;
    const c = canonicalPath(t);
    if (!c.ok) continue;
    const again = canonicalPath(c.path);
    expect(again).toEqual({ ok: true, path: c.path, segments: c.segments });
  }
});

test("review: allowClaimedMethods ≡ the old second allowedTarget(..., bodyClaims)", () => {
  let compared = 0;
  for (let i = 0; i < 50_000; i++) {
    const target = randomTarget();
    const method = ["POST", "GET", "DELETE"][rnd(3)]!;
    const claims = Array.from({ length: rnd(3) }, () => [...RULE_METHODS, "TRACE", "FOO"][rnd(9)]!);
    const first = outcome(() => allowedTarget(plan, method, target, hint, []));
    if (!first.startsWith("ok")) continue;
    const allowed = allowedTarget(plan, method, target, hint, []);
    const old = outcome(() => void allowedTarget(plan, method, target, hint, [], claims));
    const now = outcome(() => allowClaimedMethods(plan, allowed, claims, hint));
    expect(now).toBe(old);
    compared++;
  }
  expect(compared).toBeGreaterThan(1000);
});
