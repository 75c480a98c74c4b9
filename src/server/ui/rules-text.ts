// Service rules for people: the one-rule-per-line text of the approval page's and the console's
// rules boxes ("GET HEAD /repos/*/issues/** /repos/*/pulls": methods first, then paths; a line
// starting with the word `approve` holds each matching request for a person). Parsing ends in
// policy's RulesList schema, so typed rules get exactly the API's checks; its errors are reworded to name
// the line. What a change of rules adds to today's is policy's (rules-diff.ts). Nothing here is secret.

import { InvalidRequest } from "../../errors.ts";
import { parseWith } from "../../contract/index.ts";
import { RULE_METHODS, RulesList, type Rules, type ServiceRule } from "../../policy/index.ts";

/** The word that starts an approval rule's line: "approve POST /v1/refunds". */
const APPROVE = "approve";

/** The rules as editable text, one rule per line (approval rules start with `approve`); no rules is the empty text. */
export function formatRulesText(rules: Rules | undefined): string {
  return (rules ?? []).map((r) => [...(r.approve === "each" ? [APPROVE] : []), ...r.methods, ...r.paths].join(" ")).join("\n");
}

/**
 * Reads a rules box: blank lines and `#` comments are skipped; each other line is methods (spaces
 * or commas between them) then paths starting with /, optionally after the word `approve` (each
 * request the rule matches then waits for a person's approval). Empty text is undefined: no rules, every
 * method and path allowed. Throws InvalidRequest naming `label` and the line.
 */
export function parseRulesText(text: string, label = "Rules"): Rules | undefined {
  const lines: number[] = [];
  const raw: ServiceRule[] = [];
  text.split(/\r\n|\r|\n/).forEach((line, i) => {
    const body = line.trim();
    if (body === "" || body.startsWith("#")) return;
    raw.push(readLine(body, `${label}, line ${i + 1}`));
    lines.push(i + 1);
  });
  if (raw.length === 0) return undefined;
  try {
    return parseWith(RulesList, raw, "rules");
  } catch (err) {
    if (!(err instanceof InvalidRequest) || !err.field) throw err;
    throw new InvalidRequest(reword(err, raw, lines, label), "rules");
  }
}

/** One line's tokens: `approve` or not, methods, then paths (a path may hold commas, so only methods split on them). */
function readLine(body: string, where: string): ServiceRule {
  const methods: string[] = [];
  const paths: string[] = [];
  const tokens = body.split(/\s+/);
  const approve = tokens[0]!.toLowerCase() === APPROVE;
  if (approve) tokens.shift();
  if (approve && tokens.length === 0)
    throw new InvalidRequest(
      `${where}: after approve, write the methods and paths whose requests a person approves one by one, e.g. approve POST /v1/refunds`,
      "rules",
    );
  for (const token of tokens) {
    if (token.startsWith("/")) {
      paths.push(token);
      continue;
    }
    for (const m of token.split(",").filter(Boolean)) {
      const method = m.toUpperCase();
      if (paths.length)
        throw new InvalidRequest(`${where}: write the methods first, then the paths (${m} comes after a path); put each rule on its own line`, "rules");
      if (method === APPROVE.toUpperCase()) throw new InvalidRequest(`${where}: approve goes first on the line, e.g. approve POST /v1/refunds`, "rules");
      if (method !== "*" && !RULE_METHODS.includes(method))
        throw new InvalidRequest(`${where}: ${clip(m)} is not a method (${RULE_METHODS.join(", ")}, or * for all), and paths start with /`, "rules");
      methods.push(method);
    }
  }
  const lead = approve ? `${APPROVE} ` : "";
  if (methods.length === 0)
    throw new InvalidRequest(`${where}: start with the methods, e.g. ${lead}${approve ? "POST" : "GET HEAD"} ${clip(paths[0] ?? "/path")}`, "rules");
  if (paths.length === 0) throw new InvalidRequest(`${where}: add at least one path after the methods, e.g. ${lead}${methods.join(" ")} /repos/**`, "rules");
  return approve ? { methods, paths, approve: "each" } : { methods, paths };
}

/** The form field of a service's rules box (a host holds no character a form name must avoid). */
export function rulesFieldName(host: string): string {
  return `rules:${host}`;
}

/**
 * The approving person's rules, by host, for approveProposal: only hosts whose box was posted
 * (a form without boxes keeps what was asked). Emptying the box of a service that asked for rules
 * is refused: read as "nothing" by a person, it would mean "everything".
 */
export function readChosenRules(form: Readonly<Record<string, string>>, services: readonly { host: string; rules?: Rules }[]): Record<string, Rules | null> {
  const chosen: Record<string, Rules | null> = Object.create(null); // keyed by host: no inherited `constructor`
  for (const s of services) {
    const text = form[rulesFieldName(s.host)];
    if (text === undefined) continue;
    const label = `Rules for ${s.host}`;
    const rules = parseRulesText(text, label);
    if (!rules && s.rules)
      throw new InvalidRequest(
        `${label}: the box is empty, which would allow every method and path, more than was asked. Keep at least one rule, or Deny the request`,
        "rules",
      );
    chosen[s.host] = rules ?? null;
  }
  return chosen;
}

/** The posted rules boxes as typed, by host, to show them again after a refusal. */
export function typedRules(form: Readonly<Record<string, string>>, services: readonly { host: string }[]): Record<string, string> {
  const typed: Record<string, string> = Object.create(null); // keyed by host: no inherited `constructor`
  for (const s of services) {
    const text = form[rulesFieldName(s.host)];
    if (text !== undefined) typed[s.host] = text;
  }
  return typed;
}

/** RulesList names fields (rules[2].paths[0]); a person reads lines and the path they typed. */
function reword(err: InvalidRequest, raw: readonly ServiceRule[], lines: readonly number[], label: string): string {
  const m = /^rules\[(\d+)\](?:\.(methods|paths)(?:\[(\d+)\])?)?/.exec(err.field!);
  if (!m) return `${label}${err.message.replace(/^rules\b/, "")}`; // "… may hold at most 32 rules"
  const i = Number(m[1]);
  const rest = err.message.slice(m[0].length).replace(/^[:\s]+/, "");
  const where = `${label}, line ${lines[i]}`;
  if (m[2] === "paths" && m[3] !== undefined) return `${where} (${clip(raw[i]?.paths[Number(m[3])] ?? "")}): ${rest}`;
  return `${where}: ${m[2] ? `${m[2]} ` : ""}${rest}`;
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
