// The `broker` command line: citty commands, help that stops at `--`, unknown words refused before
// anything runs, and one place where failures become a message, a hint and a non-zero exit code.

import { type CommandDef, defineCommand, runCommand } from "citty";
import { ConfigError } from "../config.ts";
import { KeyringError } from "../errors.ts";
import { StoreOpenFailed } from "../store/index.ts";
import { VERSION } from "../version.ts";
import { CliExit, CliFailure, UsageFailure } from "./kit/index.ts";
import { assertKnownCommand, planCommand } from "./kit/index.ts";
import { commandLine, renderHelp, renderUsageLine, resolve, splitCommand, stripAnsi } from "./kit/index.ts";

export const rootCommand = defineCommand({
  meta: { name: "broker", version: VERSION, description: "Credential broker for AI agents: agents call APIs, the broker holds the keys" },
  subCommands: {
    server: () => import("./commands/server.ts").then((m) => m.default),
    "master-password": () => import("./commands/master-password.ts").then((m) => m.default),
    "migrate-db": () => import("./commands/migrate-db.ts").then((m) => m.default),
    backup: () => import("./commands/backup.ts").then((m) => m.default),
    restore: () => import("./commands/restore.ts").then((m) => m.default),
    doctor: () => import("./commands/doctor.ts").then((m) => m.default),
    auth: () => import("./commands/auth.ts").then((m) => m.default),
    account: () => import("./commands/account.ts").then((m) => m.default),
    vault: () => import("./commands/vault.ts").then((m) => m.default),
    agent: () => import("./commands/agent.ts").then((m) => m.default),
    credential: () => import("./commands/credential.ts").then((m) => m.default),
    service: () => import("./commands/service.ts").then((m) => m.default),
    "secret-store": () => import("./commands/secret-store.ts").then((m) => m.default),
    template: () => import("./commands/template.ts").then((m) => m.default),
    owner: () => import("./commands/owner.ts").then((m) => m.default),
    logs: () => import("./commands/logs.ts").then((m) => m.default),
    audit: () => import("./commands/audit.ts").then((m) => m.default),
    budget: () => import("./commands/budget.ts").then((m) => m.default),
    export: () => import("./commands/vault-code.ts").then((m) => m.exportCommand),
    apply: () => import("./commands/vault-code.ts").then((m) => m.applyCommand),
    ca: () => import("./commands/ca.ts").then((m) => m.default),
    proposal: () => import("./commands/proposal.ts").then((m) => m.default),
    request: () => import("./commands/request.ts").then((m) => m.default),
    mcp: () => import("./commands/mcp.ts").then((m) => m.default),
    "workload-issuer": () => import("./commands/workload-issuer.ts").then((m) => m.workloadIssuerCommand),
    "workload-binding": () => import("./commands/workload-binding.ts").then((m) => m.workloadBindingCommand),
    completion: () => import("./commands/completion.ts").then((m) => m.createCompletionCommand(getRoot)),
  },
});

// Completion is generated from the whole tree, so its command is handed the root (it cannot import this file).
function getRoot(): CommandDef<any> {
  return rootCommand;
}

export interface Io {
  out(text: string): void;
  err(text: string): void;
}

const stdio: Io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) };

/** Runs the CLI and returns the exit code (the caller exits). */
export async function main(argv: string[], io: Io = stdio, root: CommandDef<any> = rootCommand): Promise<number> {
  const ownArgs = beforeDash(argv);
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-v")) {
    io.out(`${VERSION}\n`);
    return 0;
  }
  let ran = argv;
  try {
    if (ownArgs.includes("--help") || ownArgs.includes("-h") || argv.length === 0) {
      const { cmd, path, rest } = await splitCommand(root, ownArgs);
      assertKnownCommand(await resolve(cmd.subCommands), path, rest);
      return await printHelp(io, cmd, path);
    }
    const plan = await planCommand(root, argv);
    if (plan.kind === "help") return await printHelp(io, plan.cmd, plan.path);
    ran = [...plan.argv];
    await runCommand(root, { rawArgs: ran });
    return 0;
  } catch (err) {
    return reportFailure(err, io, root, beforeDash(ran));
  }
}

async function printHelp(io: Io, cmd: CommandDef<any>, path: readonly string[]): Promise<number> {
  const help = await renderHelp(cmd, path);
  const text = process.stdout.isTTY && io === stdio ? help : stripAnsi(help);
  io.out(text.endsWith("\n") ? text : `${text}\n`);
  return 0;
}

async function reportFailure(err: unknown, io: Io, root: CommandDef<any>, args: string[]): Promise<number> {
  if (err instanceof CliExit) return err.code;
  if (err instanceof UsageFailure) {
    io.err(`error: ${err.message}\n${err.notes.map((n) => `${n}\n`).join("")}`);
    return err.exitCode;
  }
  if (err instanceof CliFailure) {
    io.err(`error: ${err.message}\n${err.hint ? `hint: ${err.hint}\n` : ""}`);
    return err.exitCode;
  }
  if (err instanceof ConfigError) {
    io.err(`error: ${err.message}\nhint: fix the variables above; \`broker server --help\` lists the server's settings, \`broker auth --help\` the CLI's\n`);
    return 2;
  }
  if (err instanceof KeyringError || err instanceof StoreOpenFailed) {
    io.err(`error: ${err.message}\nhint: ${err.hint}\n`);
    return 1;
  }
  if (err instanceof Error && err.name === "CLIError") {
    // A missing or invalid argument: the one line that says so and the usage line, not the whole help.
    const { cmd, path } = await splitCommand(root, args);
    io.err(`error: ${describeCittyError(err.message)}\n${await renderUsageLine(cmd, path)}\nsee \`${commandLine(path)} --help\`\n`);
    return 2;
  }
  io.err(`error: ${err instanceof Error ? err.message : String(err)}\nhint: this is unexpected; rerun with BROKER_LOG_LEVEL=debug and report it\n`);
  return 1;
}

/** citty's "Missing required positional argument: FILE" in the CLI's words: "missing argument <FILE>". */
function describeCittyError(message: string): string {
  const text = stripAnsi(message);
  const positional = /^Missing required positional argument: (\S+)$/.exec(text)?.[1];
  if (positional) return `missing argument <${positional}>`;
  const flag = /^Missing required argument: (--\S+)$/.exec(text)?.[1];
  if (flag) return `missing required option ${flag}`;
  return text.charAt(0).toLowerCase() + text.slice(1);
}

function beforeDash(argv: readonly string[]): string[] {
  return argv.includes("--") ? argv.slice(0, argv.indexOf("--")) : [...argv];
}

/** The contained side of `vault run --contain` (the spec comes from the outside half, never a secret). */
export async function runContainedSide(spec: string): Promise<number> {
  const { runContained } = await import("./kit/contain-inside.ts");
  return runContained(JSON.parse(spec));
}
