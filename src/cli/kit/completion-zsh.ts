// `broker completion zsh`: a zsh completion function generated from the command tree, with each
// command's and flag's description. `_broker` walks the words typed so far to the command they name;
// after `--` it hands the rest to zsh's normal completion (the command `vault run` starts).

import type { CommandNode } from "./command-tree.ts";
import { commandWords, completableCommands, keyOf, nextWords, oneLine, plainFlags, plainWords, valueFlags } from "./completion-words.ts";

export function renderZshCompletion(tree: CommandNode): string {
  const nodes = completableCommands(tree);
  const described = (name: string, text: string) => quote(`${name}:${oneLine(text)}`);
  const subcommands = nodes.map(
    (n) =>
      [keyOf(n), n.subcommands.filter((s) => commandWords(n).includes(s.path.at(-1) ?? "")).map((s) => described(s.path.at(-1) ?? "", s.description))] as const,
  );
  const flags = nodes.map((n) => [keyOf(n), plainFlags(n).map((f) => described(f.name, f.description))] as const);
  const words = nodes.map((n) => [keyOf(n), n.subcommands.length > 0 ? [] : nextWords(n)] as const);
  const choices = [
    ...nodes.flatMap((n) => plainFlags(n).map((f) => [`${keyOf(n)}|${f.name}`, plainWords(f.choices)] as const)),
    ...nodes.map((n) => [`${keyOf(n)}|`, plainWords(n.choices)] as const),
  ];
  return `#compdef broker
# zsh completion for broker, generated from its commands by \`broker completion zsh\`.
# Install: add \`source <(broker completion zsh)\` to ~/.zshrc after compinit, or save it as _broker in your $fpath.

${table("_broker_commands", subcommands)}

${table("_broker_flags", flags)}

${table("_broker_words", words)}

${table(
  "_broker_value_flags",
  nodes.map((n) => [keyOf(n), valueFlags(n)] as const),
)}

${table("_broker_choices", choices, '"$1|$2"')}

_broker() {
  local cmdpath='' word i
  local -a items names
  for (( i = 2; i < CURRENT; i++ )); do
    word=\${words[i]}
    if [[ $word == -- ]]; then
      words=("\${(@)words[i+1,-1]}")
      (( CURRENT -= i ))
      _normal
      return
    fi
    if [[ $word == -* ]]; then
      _broker_value_flags "$cmdpath"
      if [[ $word != *=* ]] && (( \${items[(Ie)$word]} )); then
        if (( i + 1 == CURRENT )); then
          _broker_choices "$cmdpath" "$word"
          if (( $#items )); then compadd -a items; else _files; fi
          return
        fi
        (( i++ ))
      fi
      continue
    fi
    _broker_commands "$cmdpath"
    names=("\${(@)items%%:*}")
    if (( \${names[(Ie)$word]} )); then cmdpath=\${cmdpath:+$cmdpath }$word; fi
  done
  if [[ \${words[CURRENT]} == -* ]]; then
    _broker_flags "$cmdpath"
    _describe -t options 'option' items
    return
  fi
  _broker_commands "$cmdpath"
  if (( $#items )); then _describe -t commands 'command' items; return; fi
  _broker_words "$cmdpath"
  if (( $#items )); then compadd -a items; else _files; fi
}

if [[ \${funcstack[1]} == _broker ]]; then _broker "$@"; else compdef _broker broker; fi
`;
}

/** A function setting \`items\` (the caller's local array) for its key; each item is already quoted. */
function table(name: string, rows: readonly (readonly [string, readonly string[]])[], subject = '"$1"'): string {
  const cases = rows.filter(([, items]) => items.length > 0).map(([key, items]) => `    (${quote(key)}) items=(${items.join(" ")}) ;;`);
  return `${name}() {\n  case ${subject} in\n${cases.join("\n")}\n    (*) items=() ;;\n  esac\n}`;
}

/** Single-quoted for zsh: nothing inside is expanded. */
function quote(text: string): string {
  return `'${text.replace(/'/g, "'\\''")}'`;
}
