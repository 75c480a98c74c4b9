// Help output: citty's usage text, plus per-command footers (the server's settings table).

import { type CommandDef, renderUsage } from "citty";

const footers = new WeakMap<object, () => string>();

export function addHelpFooter(cmd: CommandDef<any>, footer: () => string): void {
  footers.set(cmd, footer);
}

export async function renderHelp(cmd: CommandDef<any>, parent?: CommandDef<any>): Promise<string> {
  const usage = await renderUsage(cmd, parent);
  const footer = footers.get(cmd);
  return footer ? `${usage}\n${footer()}\n` : usage;
}

/** Finds the command that `args` name (stopping at the first flag-looking word or `--`). */
export async function resolveCommand(root: CommandDef<any>, args: string[]): Promise<[CommandDef<any>, CommandDef<any> | undefined]> {
  const { cmd, parent } = await splitCommand(root, args);
  return [cmd, parent];
}

/** Like resolveCommand, and also returns the words left for that command's own arguments. */
export async function splitCommand(root: CommandDef<any>, args: string[]): Promise<{ cmd: CommandDef<any>; parent?: CommandDef<any>; rest: string[] }> {
  let cmd = root;
  let parent: CommandDef<any> | undefined;
  let i = 0;
  for (; i < args.length; i++) {
    const word = args[i] as string;
    if (word === "--" || word.startsWith("-")) break;
    const subs = await resolve(cmd.subCommands);
    const next = subs?.[word];
    if (!next) break;
    parent = cmd;
    cmd = await resolve(next);
  }
  return { cmd, parent, rest: args.slice(i) };
}

export async function resolve<T>(v: T | Promise<T> | (() => T | Promise<T>)): Promise<T> {
  return typeof v === "function" ? await (v as () => T | Promise<T>)() : await v;
}
