// Argument definitions shared by the commands, pure parsers for flag values, and the strict
// check citty lacks: an unknown flag or an extra word is an error, never silently ignored.
// That check is what refuses `--value` and `credential set KEY <value>`: secrets must not
// reach shell history or the process list.

import type { ArgsDef } from "citty";
import { CliFailure, UsageFailure } from "./fail.ts";
import { closestNames, orList } from "./suggest.ts";

export const jsonArg = { json: { type: "boolean", description: "Print JSON (for scripts) instead of text" } } as const;

export const vaultArg = {
  vault: { type: "string", description: "Vault name (default: the one chosen with `broker vault use`, then BROKER_VAULT)" },
} as const;

export const passwordStdinArg = {
  "password-stdin": { type: "boolean", description: "Read the password from standard input (one per line) instead of prompting" },
} as const;

export const addressArg = {
  address: { type: "string", description: "Broker address to use and remember (default: BROKER_ADDR, the saved one, or http://127.0.0.1:14321)" },
} as const;

/**
 * Flags that would carry a secret on the command line: refused with a pointer to the safe way. Where a
 * command has one of these names as a real flag (`service add --token KEY` names a key), it is that flag.
 */
const SECRET_FLAGS = new Set([
  "value",
  "password",
  "secret",
  "new-password",
  "current-password",
  // A secret store's auth (`broker secret-store add|set`): typed at a prompt or piped, never flags.
  "token",
  "role-id",
  "secret-id",
  "access-key-id",
  "secret-access-key",
  "session-token",
  "client-secret",
]);

const TTL_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };

/** `--token-ttl`: `never` (or absent) means the agent token does not expire; else 90m, 12h, 30d, 2w or seconds. */
export function parseTokenTtl(raw: string | undefined): number | null | undefined {
  if (raw === undefined) return undefined;
  const v = raw.trim().toLowerCase();
  if (v === "never") return null;
  const m = /^(\d+)([smhdw]?)$/.exec(v);
  const seconds = m?.[1] ? Number(m[1]) * (TTL_UNITS[m[2] || "s"] ?? 1) : Number.NaN;
  if (!Number.isSafeInteger(seconds) || seconds <= 0) {
    throw new CliFailure(`--token-ttl: "${raw}" is not a duration`, "use a number with a unit (90m, 12h, 30d, 2w), plain seconds, or never", 2);
  }
  return seconds;
}

/** `--allowed-domains a.com,b.org`: lower-cased, de-duplicated; an empty string clears the list. */
export function parseDomainList(raw: string): string[] {
  const out: string[] = [];
  for (const item of raw
    .split(",")
    .map((s) => s.trim().toLowerCase().replace(/^@/, ""))
    .filter(Boolean)) {
    if (/[\s/@]/.test(item))
      throw new CliFailure(`--allowed-domains: "${item}" is not a domain`, "give bare domains separated by commas, e.g. example.com,example.org", 2);
    if (!out.includes(item)) out.push(item);
  }
  return out;
}

/** Returns what is wrong with `argv` for a command with these args, or undefined when it is fine. */
export function findArgProblem(argv: readonly string[], def: ArgsDef): string | undefined {
  const names = new Map<string, string>();
  for (const [name, a] of Object.entries(def)) {
    if (a.type === "positional") continue;
    for (const n of [name, toCamel(name), ...aliasesOf((a as { alias?: unknown }).alias)]) names.set(n, a.type ?? "string");
  }
  const positionalCount = Object.values(def).filter((a) => a.type === "positional").length;
  let positionals = 0;
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] as string;
    if (word === "--") return undefined; // what follows belongs to a child command, not to us
    if (!word.startsWith("-") || word === "-") {
      if (++positionals > positionalCount) return extraArgument();
      continue;
    }
    const [flag = "", inline] = splitFlag(word);
    const type = names.get(flag) ?? (flag.startsWith("no-") && names.get(flag.slice(3)) === "boolean" ? "boolean" : undefined);
    if (!type) {
      if (SECRET_FLAGS.has(flag))
        return `--${flag} does not exist: secrets are never taken on the command line (shell history, process list); they are prompted for, or read from standard input`;
      return `unknown option ${word.split("=")[0]}`;
    }
    if (type !== "boolean" && inline === undefined) i++; // its value is the next word
  }
  return undefined;
}

/** Throws the usage failure `findArgProblem` reports; an unknown flag also gets the closest real ones. */
export function assertArgs(argv: readonly string[], def: ArgsDef, commandLine = "broker <command>"): void {
  const problem = findArgProblem(argv, def);
  if (!problem) return;
  const unknown = /^unknown option --?(\S+)$/.exec(problem)?.[1];
  const guesses = unknown ? closestNames(unknown, longFlagNames(def)).map((n) => `--${n}`) : [];
  throw new UsageFailure(problem, [guesses.length ? `did you mean: ${orList(guesses)}?` : `see \`${commandLine} --help\` for the accepted options`]);
}

/** The long flags a command accepts (its own, and --help), as a person types them. */
function longFlagNames(def: ArgsDef): string[] {
  const own = Object.entries(def).filter(([, a]) => a.type !== "positional");
  return [...own.map(([name]) => name), ...own.flatMap(([, a]) => aliasesOf((a as { alias?: unknown }).alias).filter((n) => n.length > 1)), "help"];
}

// Never echo the extra word: it may be the very secret someone tried to pass.
function extraArgument(): string {
  return "unexpected extra argument (secret values are read from a prompt or standard input, never from the command line)";
}

function splitFlag(word: string): [string, string | undefined] {
  const body = word.replace(/^--?/, "");
  const eq = body.indexOf("=");
  return eq < 0 ? [body, undefined] : [body.slice(0, eq), body.slice(eq + 1)];
}

function aliasesOf(alias: unknown): string[] {
  if (Array.isArray(alias)) return alias.map(String);
  return typeof alias === "string" ? [alias] : [];
}

function toCamel(name: string): string {
  return name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}
