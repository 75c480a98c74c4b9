// `broker completion fish`: fish completions generated from the command tree, one `complete` line per
// command and flag with its description. `__broker_path` walks the words typed so far to the command
// they name; after `--` (the command `vault run` starts) no broker completion applies.

import type { CommandNode } from "./command-tree.ts";
import { commandWords, completableCommands, keyOf, oneLine, plainFlags, plainWords, valueFlags } from "./completion-words.ts";

export function renderFishCompletion(tree: CommandNode): string {
  const nodes = completableCommands(tree);
  const lines = nodes.flatMap((n) => [...commandLines(n), ...flagLines(n), ...argLines(n)]);
  return `# fish completion for broker, generated from its commands by \`broker completion fish\`.
# Install: broker completion fish > ~/.config/fish/completions/broker.fish

${table(
  "__broker_commands",
  nodes.map((n) => [keyOf(n), commandWords(n)]),
)}

${table(
  "__broker_value_flags",
  nodes.map((n) => [keyOf(n), valueFlags(n)]),
)}

function __broker_path --description 'The broker command named by the words before the cursor'
    set -l cmdpath ''
    set -l skip 0
    set -l words (commandline -opc)
    set -e words[1]
    for word in $words
        if test $skip = 1
            set skip 0
            continue
        end
        if test "$word" = '--'
            echo -- '--'
            return
        end
        if string match -q -- '-*' $word
            if not string match -q -- '*=*' $word; and contains -- $word (__broker_value_flags $cmdpath)
                set skip 1
            end
            continue
        end
        if contains -- $word (__broker_commands $cmdpath)
            set cmdpath (string trim -- "$cmdpath $word")
        end
    end
    echo -- $cmdpath
end

function __broker_at --description 'Whether the words before the cursor name this broker command'
    set -l here (__broker_path)
    test "$here" = "$argv[1]"
end

complete -c broker -e
${lines.join("\n")}
`;
}

function commandLines(n: CommandNode): string[] {
  const own = commandWords(n);
  return n.subcommands
    .filter((s) => own.includes(s.path.at(-1) ?? ""))
    .map((s) => `complete -c broker -f -n ${at(n)} -a ${s.path.at(-1)} -d ${quote(oneLine(s.description))}`);
}

function flagLines(n: CommandNode): string[] {
  return plainFlags(n).map((f) => {
    const name = f.name.startsWith("--") ? `-l ${f.name.slice(2)}` : `-s ${f.name.slice(1)}`;
    const value = f.choices.length > 0 ? ` -x -a ${quote(plainWords(f.choices).join(" "))}` : f.takesValue ? " -r" : "";
    return `complete -c broker${n.subcommands.length > 0 ? " -f" : ""} -n ${at(n)} ${name}${value} -d ${quote(oneLine(f.description))}`;
  });
}

/** The words a command's argument may be; no file names where it takes none. */
function argLines(n: CommandNode): string[] {
  const words = plainWords(n.choices);
  if (words.length > 0) return [`complete -c broker -f -n ${at(n)} -a ${quote(words.join(" "))}`];
  return n.subcommands.length === 0 && !n.takesWords ? [`complete -c broker -f -n ${at(n)}`] : [];
}

function at(n: CommandNode): string {
  return quote(`__broker_at ${quote(keyOf(n))}`);
}

/** A function printing the words for its key, one a line; keys and words are plain names. */
function table(name: string, rows: readonly (readonly [string, readonly string[]])[]): string {
  const cases = rows.filter(([, words]) => words.length > 0).map(([key, words]) => `        case ${quote(key)}\n            printf '%s\\n' ${words.join(" ")}`);
  return `function ${name}\n    switch "$argv[1]"\n${cases.join("\n")}\n    end\nend`;
}

/** Single-quoted for fish: only \\\\ and \\' are escapes inside. */
function quote(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}
