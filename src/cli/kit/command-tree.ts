// The command tree as plain data, every lazy command loaded: what shell completion is generated from.
// It reads the definitions the CLI runs, so a new command or flag completes with no further work.

import type { ArgDef, CommandDef } from "citty";
import { resolve } from "./help.ts";

export interface FlagNode {
  /** As typed: `--json`, `-f`. */
  readonly name: string;
  readonly description: string;
  /** The next word is the flag's value (not a command). */
  readonly takesValue: boolean;
  /** The values an enum flag accepts. */
  readonly choices: readonly string[];
}

export interface CommandNode {
  /** The words that name it after `broker`; `[]` for the root. */
  readonly path: readonly string[];
  readonly description: string;
  readonly flags: readonly FlagNode[];
  readonly subcommands: readonly CommandNode[];
  /** Whether it takes a positional argument. */
  readonly takesWords: boolean;
  /** The words its positional argument may be. */
  readonly choices: readonly string[];
}

const wordChoices = new WeakMap<object, readonly string[]>();

/** Offers `words` for a command's positional argument (e.g. the shells of `broker completion`). */
export function addWordChoices(cmd: CommandDef<any>, words: readonly string[]): void {
  wordChoices.set(cmd, words);
}

const HELP: FlagNode = { name: "--help", description: "Show help", takesValue: false, choices: [] };
const VERSION: FlagNode = { name: "--version", description: "Show the version", takesValue: false, choices: [] };

export async function loadCommandTree(cmd: CommandDef<any>, path: readonly string[] = []): Promise<CommandNode> {
  const meta = await resolve(cmd.meta ?? {});
  const args: Record<string, ArgDef> = await resolve(cmd.args ?? {});
  const subcommands: CommandNode[] = [];
  for (const [name, sub] of Object.entries((await resolve(cmd.subCommands)) ?? {})) {
    const def = await resolve(sub);
    if ((await resolve(def.meta ?? {})).hidden) continue;
    subcommands.push(await loadCommandTree(def, [...path, name]));
  }
  const flags = Object.entries(args).flatMap(([name, a]) => flagNodes(name, a));
  return {
    path,
    description: meta.description ?? "",
    flags: [...flags, HELP, ...(path.length === 0 ? [VERSION] : [])],
    subcommands,
    takesWords: Object.values(args).some((a) => a.type === "positional"),
    choices: wordChoices.get(cmd) ?? [],
  };
}

function flagNodes(name: string, a: ArgDef): FlagNode[] {
  if (a.type === "positional") return [];
  const aliases = "alias" in a && a.alias !== undefined ? (Array.isArray(a.alias) ? a.alias : [a.alias]) : [];
  const choices = a.type === "enum" ? (a.options ?? []) : [];
  return [name, ...aliases].map((n) => ({
    name: n.length === 1 ? `-${n}` : `--${n}`,
    description: a.description ?? "",
    takesValue: a.type !== "boolean",
    choices,
  }));
}

/** Every command in the tree, the root first. */
export function listCommands(node: CommandNode): CommandNode[] {
  return [node, ...node.subcommands.flatMap(listCommands)];
}
