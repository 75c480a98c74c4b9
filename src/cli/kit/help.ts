// Help output: citty's usage text, named by the whole command line (`USAGE broker vault run …`), with
// per-command usage tails and footers (the server's settings table); and the walk from argv to the
// command it names.

import { type CommandDef, renderUsage } from "citty";

export const CLI_NAME = "broker";

const footers = new WeakMap<object, () => string>();
const usageTails = new WeakMap<object, string>();

export function addHelpFooter(cmd: CommandDef<any>, footer: () => string): void {
  footers.set(cmd, footer);
}

/** What the USAGE line shows after the options and arguments, e.g. `-- <command> [args…]` for `vault run`. */
export function addUsageTail(cmd: CommandDef<any>, tail: string): void {
  usageTails.set(cmd, tail);
}

/** `["vault", "run"]` → `broker vault run`. */
export function commandLine(path: readonly string[]): string {
  return [CLI_NAME, ...path].join(" ");
}

/** The whole help of the command at `path` (the words that name it, `[]` for the root). */
export async function renderHelp(cmd: CommandDef<any>, path: readonly string[]): Promise<string> {
  const usage = await renderNamedUsage(cmd, path);
  const subs = await resolve(cmd.subCommands);
  const bare = subs && Object.hasOwn(subs, "list") ? `\nRun alone, \`${commandLine(path)}\` runs \`${commandLine([...path, "list"])}\`.\n` : "";
  const footer = footers.get(cmd);
  return `${usage}${bare}${footer ? `\n${footer()}\n` : ""}`;
}

/** The USAGE line alone, without colour: `USAGE broker backup [OPTIONS] <FILE>`. */
export async function renderUsageLine(cmd: CommandDef<any>, path: readonly string[]): Promise<string> {
  const lines = stripAnsi(await renderNamedUsage(cmd, path)).split("\n");
  return lines.find((l) => l.startsWith("USAGE ")) ?? `USAGE ${commandLine(path)}`;
}

async function renderNamedUsage(cmd: CommandDef<any>, path: readonly string[]): Promise<string> {
  const meta = await resolve(cmd.meta ?? {});
  // citty names a command by its parent's name and its own (`sessions list`); the whole line can be pasted.
  const text = await renderUsage({ ...cmd, meta: { ...meta, name: commandLine(path) } });
  const tail = usageTails.get(cmd);
  return text
    .split("\n")
    .map((line) => (stripAnsi(line).startsWith("USAGE ") ? line.replace(/ *(\u001b\[39m)?$/, (_, end = "") => `${tail ? ` ${tail}` : ""}${end}`) : line))
    .join("\n");
}

export function stripAnsi(s: string): string {
  return s.replace(/\u001b\[[0-9;]*m/g, "");
}

/** The command that `args` name (stopping at the first flag-looking word or `--`), the words that named it, and the rest. */
export async function splitCommand(root: CommandDef<any>, args: readonly string[]): Promise<{ cmd: CommandDef<any>; path: string[]; rest: string[] }> {
  let cmd = root;
  const path: string[] = [];
  for (const word of args) {
    if (word.startsWith("-")) break;
    const subs = await resolve(cmd.subCommands);
    const next = subs && Object.hasOwn(subs, word) ? subs[word] : undefined; // never `constructor` from the prototype
    if (!next) break;
    path.push(word);
    cmd = await resolve(next);
  }
  return { cmd, path, rest: args.slice(path.length) };
}

export async function resolve<T>(v: T | Promise<T> | (() => T | Promise<T>)): Promise<T> {
  return typeof v === "function" ? await (v as () => T | Promise<T>)() : await v;
}
