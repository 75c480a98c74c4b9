// `--allow "GET HEAD /repos/*/issues/**"` for `broker service add|update`: each flag is one rule,
// methods then paths, checked here with the server's own validator so a mistake is named against
// the flag the person typed, before any request. Also the rules in words for `service list`, and
// the examples in the commands' help.

import { InvalidRequest } from "../errors.ts";
import { describeRules, parseRules, RULE_METHODS, type Rules } from "../vault/index.ts";
import { CliFailure } from "./fail.ts";

export const ALLOW_EXAMPLE = 'e.g. --allow "GET HEAD /repos/*/issues/**" --allow "POST /repos/*/issues"';
const PATTERNS = "paths start with /; * matches one segment, ** any number; .., //, ;, %2F, %5C, %00 and backslashes are refused";

export const allowArg = {
  allow: {
    type: "string",
    valueHint: "METHODS PATHS",
    description: 'Only these methods on these paths, e.g. "GET HEAD /repos/*/issues/**"; repeatable',
  },
} as const;

/** The `service add` example with rules, and what --allow does (the help puts the auth examples first). */
export const ADD_RULES_EXAMPLE = `  broker service add api.github.com --auth bearer --token GITHUB_TOKEN \\
    --allow "GET HEAD /repos/*/issues/**" --allow "POST /repos/*/issues"`;

export const ADD_RULES_NOTES = `Each --allow is one rule: methods first, then paths; * matches one path segment, ** any number.
Without --allow every method and path is allowed. A request outside the rules gets 403
request_not_allowed; paths that servers read differently (.., %2F, ;, \\) get 400.`;

export const UPDATE_EXAMPLES = `EXAMPLES

  broker service update api.github.com --allow "GET HEAD /repos/**"
  broker service update api.github.com --no-rules

--allow replaces all the service's rules with the ones given (methods first, then paths;
* matches one path segment, ** any number). \`broker service list\` shows them in words.`;

/** Every value given for a repeatable string flag (`--name v` or `--name=v`), in order; citty keeps only the last. */
export function collectFlagValues(rawArgs: readonly string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < rawArgs.length; i++) {
    const word = rawArgs[i]!;
    if (word === "--") break;
    if (word === `--${name}`) values.push(rawArgs[++i] ?? "");
    else if (word.startsWith(`--${name}=`)) values.push(word.slice(name.length + 3));
  }
  return values;
}

/** Turns `--allow` values into rules; a usage failure (exit 2) names the flag value and what to type instead. */
export function parseAllowFlags(values: readonly string[]): Rules {
  const raw = values.map((value) => splitAllow(value));
  try {
    return parseRules(raw) ?? [];
  } catch (err) {
    if (!(err instanceof InvalidRequest)) throw err;
    // The server's field names (rules[1].paths[0]) mean nothing here: name the flag and the word instead.
    const field = err.field ?? "rules";
    const at = /^rules\[(\d+)\](?:\.(methods|paths)(?:\[(\d+)\])?)?$/.exec(field);
    const rest = err.message.startsWith(field) ? err.message.slice(field.length).replace(/^:?\s*/, "") : err.message;
    if (!at) throw usage(`--allow was given ${values.length} times: ${rest.replace(/^may hold/, "there may be")}`, "put several paths of the same methods into one --allow");
    const rule = raw[Number(at[1])]!;
    const subject = at[2] === "paths" && at[3] !== undefined ? `path ${rule.paths[Number(at[3])]}` : (at[2] ?? "the rule");
    const said = /^(must|may) /.test(rest) ? `${subject} ${rest}` : `in ${subject}, ${rest}`;
    throw usage(`--allow "${values[Number(at[1])]}": ${said}`, PATTERNS);
  }
}

function splitAllow(value: string): { methods: string[]; paths: string[] } {
  const words = value.trim().split(/\s+/).filter(Boolean);
  const first = words.findIndex((w) => w.startsWith("/"));
  const methods = first < 0 ? words : words.slice(0, first);
  const paths = first < 0 ? [] : words.slice(first);
  if (words.length === 0) throw usage("--allow needs methods then paths", ALLOW_EXAMPLE);
  if (methods.length === 0) throw usage(`--allow "${value}": no method given`, `start with the methods (${RULE_METHODS.join(", ")}), e.g. --allow "GET HEAD ${paths[0]}"`);
  if (paths.length === 0) throw usage(`--allow "${value}": no path given`, `add one or more paths starting with / (* matches one segment, ** any number), e.g. --allow "${methods.join(" ")} /repos/**"`);
  const stray = paths.find((p) => !p.startsWith("/"));
  if (stray) throw usage(`--allow "${value}": "${stray}" comes after a path; methods go first, and each --allow is one rule`, ALLOW_EXAMPLE);
  const unknown = methods.find((m) => !RULE_METHODS.includes(m.toUpperCase()));
  if (unknown) throw usage(`--allow "${value}": ${unknown} is not a method a rule can allow`, `use ${RULE_METHODS.join(", ")}`);
  return { methods: methods.map((m) => m.toUpperCase()), paths };
}

function usage(message: string, hint: string): CliFailure {
  return new CliFailure(message, hint, 2);
}

/** For tables and messages: the rules in plain words, or that the service allows everything. */
export function describeAllowed(rules: Rules | undefined): string {
  return rules ? describeRules(rules) : "every method and path";
}
