// `broker completion bash`: a bash completion function generated from the command tree. The tree is
// written into `case` tables (bash 3.2 has no associative arrays); `_broker` walks the words typed so
// far to the command they name, then offers its commands, its flags, or an enum flag's values.

import type { CommandNode } from "./command-tree.ts";
import { commandWords, completableCommands, keyOf, nextWords, plainFlags, plainWords, valueFlags } from "./completion-words.ts";

export function renderBashCompletion(tree: CommandNode): string {
  const nodes = completableCommands(tree);
  const flagChoices = nodes.flatMap((n) =>
    plainFlags(n)
      .filter((f) => f.choices.length > 0)
      .map((f) => [`${keyOf(n)}|${f.name}`, plainWords(f.choices)] as const),
  );
  const argChoices = nodes.filter((n) => n.choices.length > 0).map((n) => [`${keyOf(n)}|`, plainWords(n.choices)] as const);
  return `# bash completion for broker, generated from its commands by \`broker completion bash\`.
# Install: add \`source <(broker completion bash)\` to ~/.bashrc.

${table(
  "_broker_commands",
  nodes.map((n) => [keyOf(n), commandWords(n)]),
)}

${table(
  "_broker_words",
  nodes.map((n) => [keyOf(n), nextWords(n)]),
)}

${table(
  "_broker_flags",
  nodes.map((n) => [keyOf(n), plainWords(n.flags.map((f) => f.name))]),
)}

${table(
  "_broker_value_flags",
  nodes.map((n) => [keyOf(n), valueFlags(n)]),
)}

${table("_broker_choices", [...flagChoices, ...argChoices], '"$1|$2"')}

_broker() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" cmdpath="" word i
  COMPREPLY=()
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    if [[ "$word" == "--" ]]; then
      # What follows \`--\` is another command line (\`broker vault run -- <command>\`): a command, then files.
      if ((i + 1 == COMP_CWORD)); then COMPREPLY=($(compgen -c -- "$cur")); fi
      return 0
    fi
    if [[ "$word" == -* ]]; then
      if [[ "$word" != *=* && " $(_broker_value_flags "$cmdpath") " == *" $word "* ]]; then
        if [[ "\${COMP_WORDS[i + 1]}" == "=" ]]; then i=$((i + 1)); fi
        if ((i + 1 == COMP_CWORD)); then
          COMPREPLY=($(compgen -W "$(_broker_choices "$cmdpath" "$word")" -- "$cur"))
          return 0
        fi
        i=$((i + 1))
      fi
    elif [[ " $(_broker_commands "$cmdpath") " == *" $word "* ]]; then
      cmdpath="\${cmdpath:+$cmdpath }$word"
    fi
  done
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_broker_flags "$cmdpath")" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$(_broker_words "$cmdpath")" -- "$cur"))
  fi
  return 0
}

complete -o default -F _broker broker
`;
}

/** A function printing the words for its key (\`$1\`, or \`subject\`); keys and words are plain names. */
function table(name: string, rows: readonly (readonly [string, readonly string[]])[], subject = '"$1"'): string {
  const cases = rows.filter(([, words]) => words.length > 0).map(([key, words]) => `    "${key}") echo "${words.join(" ")}" ;;`);
  return `${name}() {\n  case ${subject} in\n${cases.join("\n")}\n  esac\n}`;
}
