// The `broker` command line: citty commands, help that stops at `--`, and one place where
// failures become a message, a hint and a non-zero exit code.

import { type CommandDef, defineCommand, runCommand } from "citty";
import { ConfigError } from "../config.ts";
import { KeyringError } from "../errors.ts";
import { StoreOpenFailed } from "../store/index.ts";
import { VERSION } from "../version.ts";
import { CliExit, CliFailure } from "./kit/index.ts";
import { assertArgs } from "./kit/index.ts";
import { renderHelp, resolve, resolveCommand, splitCommand } from "./kit/index.ts";

export const rootCommand = defineCommand({
  meta: { name: "broker", version: VERSION, description: "Credential broker for AI agents: agents call APIs, the broker holds the keys" },
  subCommands: {
    server: () => import("./commands/server.ts").then((m) => m.default),
    "master-password": () => import("./commands/master-password.ts").then((m) => m.default),
    "migrate-db": () => import("./commands/migrate-db.ts").then((m) => m.default),
    backup: () => import("./commands/backup.ts").then((m) => m.default),
    doctor: () => import("./commands/doctor.ts").then((m) => m.default),
    auth: () => import("./commands/auth.ts").then((m) => m.default),
    account: () => import("./commands/account.ts").then((m) => m.default),
    vault: () => import("./commands/vault.ts").then((m) => m.default),
    agent: () => import("./commands/agent.ts").then((m) => m.default),
    credential: () => import("./commands/credential.ts").then((m) => m.default),
    service: () => import("./commands/service.ts").then((m) => m.default),
    template: () => import("./commands/template.ts").then((m) => m.default),
    owner: () => import("./commands/owner.ts").then((m) => m.default),
    logs: () => import("./commands/logs.ts").then((m) => m.default),
    ca: () => import("./commands/ca.ts").then((m) => m.default),
    proposal: () => import("./commands/proposal.ts").then((m) => m.default),
    request: () => import("./commands/request.ts").then((m) => m.default),
    mcp: () => import("./commands/mcp.ts").then((m) => m.default),
  },
});

export interface Io {
  out(text: string): void;
  err(text: string): void;
}

const stdio: Io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) };

/** Runs the CLI and returns the exit code (the caller exits). */
export async function main(argv: string[], io: Io = stdio, root: CommandDef<any> = rootCommand): Promise<number> {
  const ownArgs = argv.includes("--") ? argv.slice(0, argv.indexOf("--")) : argv;
  if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-v")) {
    io.out(`${VERSION}\n`);
    return 0;
  }
  if (ownArgs.includes("--help") || ownArgs.includes("-h") || argv.length === 0) {
    const [cmd, parent] = await resolveCommand(root, ownArgs);
    const help = await renderHelp(cmd, parent);
    const text = process.stdout.isTTY && io === stdio ? help : stripAnsi(help);
    io.out(text.endsWith("\n") ? text : `${text}\n`);
    return 0;
  }
  try {
    const { cmd, rest } = await splitCommand(root, argv);
    // citty ignores unknown flags; a leaf command refuses them (and thus any `--value <secret>`).
    if (!cmd.subCommands) assertArgs(rest, await resolve(cmd.args ?? {}));
    await runCommand(root, { rawArgs: argv });
    return 0;
  } catch (err) {
    return reportFailure(err, io, root, ownArgs);
  }
}

async function reportFailure(err: unknown, io: Io, root: CommandDef<any>, args: string[]): Promise<number> {
  if (err instanceof CliExit) return err.code;
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
    const [cmd, parent] = await resolveCommand(root, args);
    io.err(`${stripAnsi(await renderHelp(cmd, parent))}\nerror: ${stripAnsi(err.message)}\n`);
    return 2;
  }
  io.err(`error: ${err instanceof Error ? err.message : String(err)}\nhint: this is unexpected; rerun with BROKER_LOG_LEVEL=debug and report it\n`);
  return 1;
}

function stripAnsi(s: string): string {
  return s.replace(/\u001b\[[0-9;]*m/g, "");
}

/** The contained side of `vault run --contain` (the spec comes from the outside half, never a secret). */
export async function runContainedSide(spec: string): Promise<number> {
  const { runContained } = await import("./kit/contain-inside.ts");
  return runContained(JSON.parse(spec));
}
