// `broker completion bash|zsh|fish`: prints a shell completion script generated from the real command
// tree (commands, their commands and flags). The root comes in as an argument, so this file never
// imports the CLI's entry point.

import { type CommandDef, defineCommand } from "citty";
import { addHelpFooter, addWordChoices, CliFailure, loadCommandTree, printLine } from "../kit/index.ts";
import { renderBashCompletion, renderFishCompletion, renderZshCompletion } from "../kit/index.ts";

const RENDERERS = { bash: renderBashCompletion, zsh: renderZshCompletion, fish: renderFishCompletion } as const;
type Shell = keyof typeof RENDERERS;
export const SHELLS = Object.keys(RENDERERS) as Shell[];

const INSTALL = `INSTALL

  bash   add to ~/.bashrc:                  source <(broker completion bash)
  zsh    add to ~/.zshrc, after compinit:   source <(broker completion zsh)
  fish   run once:                          broker completion fish > ~/.config/fish/completions/broker.fish

  Then open a new shell. bash and zsh regenerate the script at each start; fish keeps the file, so
  write it again after an upgrade.`;

export function createCompletionCommand(root: () => CommandDef<any>): CommandDef<any> {
  const command = defineCommand({
    meta: { name: "completion", description: "Print a completion script for bash, zsh or fish (`broker completion --help` says how to install it)" },
    args: { shell: { type: "positional", required: false, description: "bash, zsh or fish" } },
    async run({ args }) {
      const shell = args.shell;
      if (!isShell(shell)) {
        // One line, no usage block: naming the three shells is all the help there is.
        const said = shell?.replace(/[^\w.-]/g, "?");
        throw new CliFailure(said ? `unknown shell "${said}": use bash, zsh or fish` : "name a shell: broker completion bash, zsh or fish", undefined, 2);
      }
      printLine(RENDERERS[shell](await loadCommandTree(root())).trimEnd());
    },
  });
  addWordChoices(command, SHELLS);
  addHelpFooter(command, () => INSTALL);
  return command;
}

function isShell(word: string | undefined): word is Shell {
  return word !== undefined && Object.hasOwn(RENDERERS, word);
}
