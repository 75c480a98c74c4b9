// What the shell completion scripts share: which words follow a command, and the check that keeps
// anything but a plain name (a command, a flag, an enum value) out of the generated shell code.

import { type CommandNode, listCommands } from "./command-tree.ts";

const PLAIN = /^-{0,2}[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Only words that are safe to paste into shell code unquoted; anything else is left out. */
export function plainWords(words: readonly string[]): string[] {
  return words.filter((w) => PLAIN.test(w));
}

/** Every command whose words are all plain names (no other can be reached by completion), the root first. */
export function completableCommands(tree: CommandNode): CommandNode[] {
  return listCommands(tree).filter((n) => plainWords(n.path).length === n.path.length);
}

/** A command's flags with plain names. */
export function plainFlags(node: CommandNode): CommandNode["flags"] {
  return node.flags.filter((f) => plainWords([f.name]).length === 1);
}

/** The words that name a command, as the scripts key it: `""`, `"vault"`, `"vault run"`. */
export function keyOf(node: CommandNode): string {
  return node.path.join(" ");
}

/** A command's own commands. */
export function commandWords(node: CommandNode): string[] {
  return plainWords(node.subcommands.map((s) => s.path.at(-1) ?? ""));
}

/** What is offered in a command's next place when no flag is being typed: its commands, its argument's words, or (taking none) its flags. */
export function nextWords(node: CommandNode): string[] {
  if (node.subcommands.length > 0) return commandWords(node);
  if (node.choices.length > 0) return plainWords(node.choices);
  return node.takesWords ? [] : plainWords(node.flags.map((f) => f.name));
}

/** Flags whose next word is their value. */
export function valueFlags(node: CommandNode): string[] {
  return plainWords(node.flags.filter((f) => f.takesValue).map((f) => f.name));
}

/** One line of text, for a description inside a script (the caller quotes it for its shell). */
export function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f]+/g, " ").trim();
}
