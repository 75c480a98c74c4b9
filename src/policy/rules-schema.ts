// What a list of service rules may say, as one zod schema: the API's bodies (services, proposals and
// the rules a person sets when approving one), the console's rules box and the CLI's --allow flags are
// all read by it. Methods are upper-cased, `*` spelt out as every method, and repeats dropped; each path pattern is read by the
// grammar the matcher compiles (path-rules.ts), so a pattern accepted here always compiles there.

import { z } from "zod";
import { parsedBy, says } from "../schema-input.ts";
import { compilePattern, RULE_METHODS, RULE_LIMITS, type ServiceRule } from "./path-rules.ts";

const NON_EMPTY_LIST = "{field} must be a non-empty list";
const PER_RULE = `{field} may hold at most ${RULE_LIMITS.perRule} entries`;
const METHOD = `{field} must be one of ${RULE_METHODS.join(", ")}, or * for every one of them`;

/** A method, or `*`: every method a rule can name (stored spelt out, so matching is unchanged). */
const Method = z
  .string(says(METHOD))
  .transform((m) => m.toUpperCase())
  .refine((m) => m === "*" || RULE_METHODS.includes(m), says(METHOD));

const PATTERN = `{field} must be a path pattern starting with / (at most ${RULE_LIMITS.pathChars} characters)`;
const PathPattern = parsedBy(
  (v, field) => {
    compilePattern(v as string, field);
    return v as string;
  },
  z.string(says(PATTERN)),
);

const listOf = <T extends z.ZodType>(item: T) => z.array(item, says(NON_EMPTY_LIST)).min(1, says(NON_EMPTY_LIST)).max(RULE_LIMITS.perRule, says(PER_RULE));

const Rule = z
  .strictObject(
    {
      approve: z
        .literal("each", says('{field} must be "each" (a human approves every matching request) or left out'))
        .optional()
        .describe('"each": every matching request waits for a person to approve it'),
      methods: listOf(Method).describe(RULE_METHODS.join(", ")),
      paths: listOf(PathPattern).describe("patterns starting with /; * one segment, ** any number"),
    },
    {
      error: (iss) =>
        iss.code === "unrecognized_keys" ? "{field} is not a rule field (methods, paths, approve)" : '{field} must be {"methods": [...], "paths": [...]}',
    },
  )
  .transform(
    (r): ServiceRule => ({
      methods: [...new Set(r.methods.flatMap((m) => (m === "*" ? RULE_METHODS : [m])))],
      paths: [...new Set(r.paths)],
      ...(r.approve === "each" ? { approve: "each" as const } : {}),
    }),
  );

/** A list of rules; an empty one is refused (it would allow nothing, which leaving it out does not). */
export const RulesList = z
  .array(Rule, says('{field} must be a list of {"methods": [...], "paths": [...]}'))
  .min(1, says("{field} is empty, which would allow nothing; leave it out to allow every method and path"))
  .max(RULE_LIMITS.rules, says(`{field} may hold at most ${RULE_LIMITS.rules} rules`))
  .describe("allowed methods and paths");

/** Every method and path: the rule a service without rules behaves as if it had. */
export const EVERYTHING_RULE: ServiceRule = { methods: RULE_METHODS, paths: ["/**"] };

/**
 * What a person means by approval rules alone on a service that allowed everything: hold those requests
 * and keep allowing the rest (rules are an allow-list, so approval rules alone would allow nothing else).
 * Used where people type rules (the CLI's flags, the console's box); the API's rules mean what they say.
 */
export function keepOthersAllowed(rules: readonly ServiceRule[], hadRules: boolean): readonly ServiceRule[] {
  if (hadRules || rules.length === 0 || !rules.every((r) => r.approve === "each")) return rules;
  return [...rules, EVERYTHING_RULE];
}
