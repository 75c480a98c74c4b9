// `broker export` and `broker apply` (issue 39): vaults kept as code. Export writes the vaults a person administers as
// YAML (keys and references, never values); apply reads such a file with line numbers, shows the plan in words, asks
// (or takes --yes) and applies it in one transaction; --dry-run shows the plan and changes nothing.

import { defineCommand } from "citty";
import type { ApplyAnswerBody, VaultFileBody } from "../../contract/index.ts";
import { CliFailure, jsonArg, openContext, printJson, printLine, printNote, promptLine, readVaultFile, writeVaultFile } from "../kit/index.ts";

const ADMIN_HINT = "a vault file is for people who administer the vaults it names (`broker vault list` shows your roles)";
const MARKS = { add: "+", change: "~", remove: "-" } as const;

const exportCommand = defineCommand({
  meta: {
    name: "export",
    description: "Write the vaults you administer as a vault file (YAML): services, credential keys (never values), agents, members, webhooks, budgets",
  },
  args: {
    vault: { type: "string", description: "One vault (default: every vault you administer)" },
    output: { type: "string", alias: "o", description: "Write to this file instead of standard output" },
  },
  async run({ args }) {
    const ctx = openContext();
    const query = args.vault ? `?vault=${encodeURIComponent(args.vault)}` : "";
    const file = await ctx.client.request<VaultFileBody>("GET", `/v1/export${query}`, { hints: { 403: ADMIN_HINT } });
    const names = Object.keys(file.vaults);
    if (names.length === 0) throw new CliFailure("you administer no vault to export", ADMIN_HINT);
    const yaml = writeVaultFile(file);
    if (!args.output) return void process.stdout.write(yaml);
    await Bun.write(args.output, yaml);
    printNote(`Wrote vault${names.length === 1 ? "" : "s"} ${names.join(", ")} to ${args.output}.`);
  },
});

/** The plan in words, a vault at a time: `+ add …`, `~ change …`, `- remove …`, then what is left for a person. */
function printPlan(answer: ApplyAnswerBody): void {
  for (const v of answer.vaults) {
    if (v.changes.length === 0 && v.pending.length === 0) continue;
    printLine(`vault ${v.vault}:`);
    for (const c of v.changes) printLine(`  ${MARKS[c.action]} ${c.said}`);
    for (const p of v.pending) printLine(`  ! left for you: ${p.said}`);
  }
}

function changesWord(n: number): string {
  return `${n} change${n === 1 ? "" : "s"}`;
}

async function readFileArg(path: string): Promise<string> {
  if (path === "-") return await Bun.stdin.text();
  const file = Bun.file(path);
  if (!(await file.exists())) throw new CliFailure(`no file at ${path}`, "give the vault file broker export wrote: broker apply -f vaults.yaml", 2);
  return await file.text();
}

const applyCommand = defineCommand({
  meta: {
    name: "apply",
    description: "Make the broker match a vault file in one transaction: shows the plan in words, then applies it (--dry-run: only shows it)",
  },
  args: {
    file: { type: "string", alias: "f", description: "The vault file (YAML, as broker export writes it); - for standard input", required: true },
    "dry-run": { type: "boolean", description: "Show the plan and change nothing" },
    yes: { type: "boolean", description: "Apply without asking (for CI; needed when standard input is not a terminal)" },
    ...jsonArg,
  },
  async run({ args }) {
    const body = readVaultFile(await readFileArg(args.file));
    const ctx = openContext();
    const send = (dryRun: boolean) =>
      ctx.client.request<ApplyAnswerBody>("POST", `/v1/apply${dryRun ? "?dry_run=true" : ""}`, { body, hints: { 403: ADMIN_HINT } });
    const plan = await send(true);
    if (args["dry-run"] || plan.changes === 0) {
      if (args.json) return printJson(plan);
      printPlan(plan);
      return printLine(
        plan.changes === 0 ? "No changes: the broker already matches the file." : `Dry run: ${changesWord(plan.changes)} would be made; nothing was changed.`,
      );
    }
    if (!args.json) printPlan(plan);
    if (!args.yes && (await promptLine(`Apply ${changesWord(plan.changes)}? Type yes to apply: `)) !== "yes") throw new CliFailure("nothing was applied");
    const done = await send(false);
    if (args.json) return printJson(done);
    // The plan shown is what was asked; another writer between the two calls would show here.
    if (JSON.stringify(done.vaults) !== JSON.stringify(plan.vaults)) {
      printNote("The vaults changed since the plan was shown; this is what was applied:");
      printPlan(done);
    }
    for (const w of done.webhook_secrets)
      printLine(`Webhook ${w.url} of vault ${w.vault}: signing secret ${w.secret} (shown once; verify Broker-Signature with it).`);
    printLine(`Applied ${changesWord(done.changes)}.`);
  },
});

export { applyCommand, exportCommand };
