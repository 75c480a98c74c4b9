// A service's rules in words, the same everywhere they are shown: the approval page, the console,
// the CLI's tables, /discover's `allows`, a refused request's message and the approver's warnings.

import type { Rules } from "../policy/index.ts";

/** What a service without rules allows. */
export const EVERYTHING = "every method and path";

/** In plain words: "GET and HEAD on /repos/*\/issues/**; POST on /a or /b (each request approved by a human)". */
export function describeRules(rules: Rules): string {
  const words = (items: readonly string[], last: string) => (items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} ${last} ${items.at(-1)}`);
  return rules
    .map((r) => `${words(r.methods, "and")} on ${words(r.paths, "or")}${r.approve === "each" ? " (each request approved by a human)" : ""}`)
    .join("; ");
}

/** The rules in words, or "every method and path" when there are none. */
export function describeRulesInWords(rules: Rules | undefined): string {
  return rules ? describeRules(rules) : EVERYTHING;
}
