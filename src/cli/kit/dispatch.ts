// From argv to what runs, decided before any command does: an unknown command or flag is refused with
// the closest real names (exit 2), and a group given no command runs its `list`, or shows its help.

import type { CommandDef } from "citty";
import { assertArgs } from "./args.ts";
import { UsageFailure } from "./fail.ts";
import { commandLine, resolve, splitCommand } from "./help.ts";
import { closestNames, orList } from "./suggest.ts";

export type Dispatch =
  | { readonly kind: "run"; readonly argv: readonly string[] }
  | { readonly kind: "help"; readonly cmd: CommandDef<any>; readonly path: readonly string[] };

/** What `argv` asks for: a command line citty can run as it is, or a group's help. */
export async function planCommand(root: CommandDef<any>, argv: readonly string[]): Promise<Dispatch> {
  const { cmd, path, rest } = await splitCommand(root, argv);
  const subs = await resolve(cmd.subCommands);
  if (!subs) {
    // citty ignores unknown flags; a leaf command refuses them (and thus any `--value <secret>`).
    assertArgs(rest, await resolve(cmd.args ?? {}), commandLine(path));
    return { kind: "run", argv };
  }
  assertKnownCommand(subs, path, rest);
  if (Object.hasOwn(subs, "list")) return planCommand(root, [...path, "list", ...rest]);
  assertArgs(rest, await resolve(cmd.args ?? {}), commandLine(path));
  return { kind: "help", cmd, path };
}

/** Refuses a word in a group's place that names none of its commands, with the closest ones. */
export function assertKnownCommand(subs: Record<string, unknown> | undefined, path: readonly string[], rest: readonly string[]): void {
  const word = rest[0];
  if (!subs || word === undefined || word.startsWith("-")) return;
  const guesses = closestNames(word, Object.keys(subs)).map((name) => commandLine([...path, name]));
  // The word is echoed (a person needs to see the typo), but never a control character from it.
  throw new UsageFailure(`unknown command "${word.replace(/[\u0000-\u001f\u007f-\u009f]/g, "?")}"`, [
    guesses.length ? `did you mean: ${orList(guesses)}?` : `see \`${commandLine(path)} --help\` for the commands`,
  ]);
}
