// `--allow "GET HEAD /repos/*/issues/**"` and `--approve "POST /v1/refunds"` for `broker service
// add|update`: each flag is one rule, methods then paths (an --approve rule holds each matching
// request for a human), checked here with the server's own validator so a mistake is named against
// the flag the person typed, before any request. Also the rules in words for `service list`, and
// the examples in the commands' help.

import { InvalidRequest } from "../../errors.ts";
import { parseWith, type ServiceListBody } from "../../contract/index.ts";
import { keepOthersAllowed, RULE_METHODS, RulesList, type Rules } from "../../policy/index.ts";
import { type Client, vaultPath } from "./client.ts";
import { describeRulesInWords } from "../../words/index.ts";
import { CliFailure } from "./fail.ts";
import { readPages } from "./pages.ts";

export const ALLOW_EXAMPLE = 'e.g. --allow "GET HEAD /repos/*/issues/**" --allow "POST /repos/*/issues"';
export const APPROVE_EXAMPLE = 'e.g. --approve "POST /v1/refunds" (each matching request waits for a person)';
const PATTERNS = "paths start with /; * matches one segment, ** any number; .., //, ;, %2F, %5C, %00 and backslashes are refused";

export const allowArg = {
  allow: {
    type: "string",
    valueHint: "METHODS PATHS",
    description: 'Only these methods on these paths, e.g. "GET HEAD /repos/*/issues/**"; repeatable',
  },
} as const;

export const approveArg = {
  approve: {
    type: "string",
    valueHint: "METHODS PATHS",
    description:
      'Allow these methods on these paths, but hold each such request until a person approves it (`broker request`), e.g. "POST /v1/refunds"; repeatable',
  },
} as const;

/** `--rules-mode` of `service update` (report mode, human admins): `vault` sends null, the vault's policy mode again. */
export const rulesModeArg = {
  "rules-mode": {
    type: "enum" as const,
    options: ["enforce", "report", "vault"],
    description:
      "report: requests outside the rules go through, marked would_refuse in the log; enforce: refused; vault: as the vault's --policy-mode (human admins)",
  },
};

/** What a service's rules mode now means, in one line. */
export function rulesModeLine(mode: ServiceListBody["services"][number]["rules_mode"]): string {
  if (mode === "report") return "Its rules are in report mode: a request they refuse goes through, marked would_refuse in the log.";
  if (mode === "enforce") return "Its rules are enforced, whatever the vault's policy mode.";
  return "Its rules follow the vault's policy mode.";
}

/** The `service add` example with rules, and what --allow does (the help puts the auth examples first). */
export const ADD_RULES_EXAMPLE = `  broker service add api.github.com --auth bearer --token GITHUB_TOKEN \\
    --allow "GET HEAD /repos/*/issues/**" --allow "POST /repos/*/issues"
  broker service add api.stripe.com --auth bearer --token STRIPE_KEY \\
    --allow "GET /v1/**" --approve "POST /v1/refunds"`;

export const ADD_RULES_NOTES = `Each --allow is one rule: methods first, then paths; * matches one path segment, ** any number.
Without --allow or --approve every method and path is allowed. A request outside the rules gets 403
request_not_allowed; paths that servers read differently (.., %2F, ;, \\) get 400.

Each --approve is a rule too, whose every request waits for a person: the agent gets 428
approval_required, a person runs \`broker request approve <id>\` (or uses the approval link), and the
agent's identical retry is sent once. --approve allows only what it names: with --approve alone,
every other request is refused; add --allow rules for the requests that need no approval.`;

export const UPDATE_EXAMPLES = `EXAMPLES

  broker service update api.github.com --allow "GET HEAD /repos/**"
  broker service update api.stripe.com --allow "GET /v1/**" --approve "POST /v1/refunds"
  broker service update api.github.com --no-rules
  broker service update api.github.com --template github --operations read,write

--template <id> sets the auth and rules from the catalogue again: other operations, or a catalogue
update's rules once \`broker service list\` says they changed (nothing changes until you do this).

--allow and --approve replace all the service's rules with the ones given (methods first, then
paths; * matches one path segment, ** any number), so give every rule again. An --approve rule
holds each matching request until a person approves it with \`broker request approve <id>\`.
\`broker service list\` shows the rules in words.`;

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

/** A rule flag as typed: which flag (allow or approve) and its value. */
export interface RuleFlag {
  readonly flag: "allow" | "approve";
  readonly value: string;
}

/** Every --allow and --approve, in the order typed (the rules keep that order); nothing after --. */
export function collectRuleFlags(rawArgs: readonly string[]): RuleFlag[] {
  const flags: RuleFlag[] = [];
  for (let i = 0; i < rawArgs.length; i++) {
    const word = rawArgs[i]!;
    if (word === "--") break;
    for (const flag of ["allow", "approve"] as const) {
      if (word === `--${flag}`) flags.push({ flag, value: rawArgs[++i] ?? "" });
      else if (word.startsWith(`--${flag}=`)) flags.push({ flag, value: word.slice(flag.length + 3) });
    }
  }
  return flags;
}

/** Turns `--allow` values into rules; a usage failure (exit 2) names the flag value and what to type instead. */
export function parseAllowFlags(values: readonly string[]): Rules {
  return parseRuleFlags(values.map((value) => ({ flag: "allow", value })));
}

/** Turns --allow and --approve flags into rules (--approve ones with `approve: "each"`); failures as for parseAllowFlags. */
export function parseRuleFlags(flags: readonly RuleFlag[]): Rules {
  const raw = flags.map(({ flag, value }) => ({ ...splitAllow(value, flag), ...(flag === "approve" ? { approve: "each" } : {}) }));
  const values = flags.map((f) => f.value);
  const named = (i: number) => `--${flags[i]!.flag}`;
  try {
    return parseWith(RulesList, raw, "rules");
  } catch (err) {
    if (!(err instanceof InvalidRequest)) throw err;
    // The server's field names (rules[1].paths[0]) mean nothing here: name the flag and the word instead.
    const field = err.field ?? "rules";
    const at = /^rules\[(\d+)\](?:\.(methods|paths)(?:\[(\d+)\])?)?$/.exec(field);
    const rest = err.message.startsWith(field) ? err.message.slice(field.length).replace(/^:?\s*/, "") : err.message;
    if (!at) throw usage(`${describeCount(flags)}: ${rest.replace(/^may hold/, "there may be")}`, "put several paths of the same methods into one flag");
    const rule = raw[Number(at[1])]!;
    const subject = at[2] === "paths" && at[3] !== undefined ? `path ${rule.paths[Number(at[3])]}` : (at[2] ?? "the rule");
    const said = /^(must|may) /.test(rest) ? `${subject} ${rest}` : `in ${subject}, ${rest}`;
    throw usage(`${named(Number(at[1]))} "${values[Number(at[1])]}": ${said}`, PATTERNS);
  }
}

/** "--allow was given 33 times", or "--allow and --approve were given 33 times". */
function describeCount(flags: readonly RuleFlag[]): string {
  const kinds = [...new Set(flags.map((f) => `--${f.flag}`))];
  return kinds.length === 1 ? `${kinds[0]} was given ${flags.length} times` : `--allow and --approve were given ${flags.length} times`;
}

function splitAllow(value: string, flag: "allow" | "approve" = "allow"): { methods: string[]; paths: string[] } {
  const words = value.trim().split(/\s+/).filter(Boolean);
  const first = words.findIndex((w) => w.startsWith("/"));
  const methods = first < 0 ? words : words.slice(0, first);
  const paths = first < 0 ? [] : words.slice(first);
  if (words.length === 0) throw usage(`--${flag} needs methods then paths`, flag === "allow" ? ALLOW_EXAMPLE : APPROVE_EXAMPLE);
  if (methods.length === 0)
    throw usage(
      `--${flag} "${value}": no method given`,
      `start with the methods (${RULE_METHODS.join(", ")}), e.g. --${flag} "${flag === "allow" ? "GET HEAD" : "POST"} ${paths[0]}"`,
    );
  if (paths.length === 0)
    throw usage(
      `--${flag} "${value}": no path given`,
      `add one or more paths starting with / (* matches one segment, ** any number), e.g. --${flag} "${methods.join(" ")} /repos/**"`,
    );
  const stray = paths.find((p) => !p.startsWith("/"));
  if (stray)
    throw usage(
      `--${flag} "${value}": "${stray}" comes after a path; methods go first, and each --${flag} is one rule`,
      flag === "allow" ? ALLOW_EXAMPLE : APPROVE_EXAMPLE,
    );
  const unknown = methods.find((m) => m !== "*" && !RULE_METHODS.includes(m.toUpperCase()));
  if (unknown) throw usage(`--${flag} "${value}": ${unknown} is not a method a rule can ${flag}`, `use ${RULE_METHODS.join(", ")}, or * for all of them`);
  return { methods: methods.map((m) => m.toUpperCase()), paths };
}

function usage(message: string, hint: string): CliFailure {
  return new CliFailure(message, hint, 2);
}

/** For tables and messages: the rules in plain words, or that the service allows everything (words/, as the console says it). */
export function describeAllowed(rules: Rules | undefined): string {
  return describeRulesInWords(rules);
}

/**
 * `service update`'s rule flags: --approve alone on a service without rules holds those requests and
 * keeps everything else allowed; on a service with rules, the flags replace them (give every rule again).
 */
export async function rulesFromFlags(client: Client, vault: string, host: string, rules: Rules): Promise<Rules> {
  if (!rules.every((r) => r.approve === "each")) return rules;
  // Every page is read: the service may be on any of them.
  const page = (q: string) => client.request<ServiceListBody>("GET", `${vaultPath(vault, "services")}?${q}`, { vault });
  const listed = await readPages(page, (b) => b.services, "after").catch(() => undefined);
  const current = listed?.find((s) => s.host === host.toLowerCase().replace(/\.$/, "").replace(/:443$/, ""));
  return keepOthersAllowed(rules, current?.rules !== undefined);
}
