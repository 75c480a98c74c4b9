// `broker doctor`: reads the server's configuration and checks what would stop or weaken it (ports, file
// modes, database, keyring, root CA, network guard, public URL, OIDC issuer, and, signed in as the running
// broker's owner, each secret store connection), each with its fix. Read-only (a store check reads values
// again into the broker's memory, as its refresh would).

import { defineCommand } from "citty";
import { ConfigError, loadConfig, type Config } from "../../config.ts";
import { jsonArg } from "../kit/index.ts";
import { CliExit } from "../kit/index.ts";
import { checkGuard, checkOidc, checkPorts, checkPublicUrl, type Finding } from "../kit/index.ts";
import { checkCa, checkDataDir, checkDatabase, checkKeyring } from "../kit/index.ts";
import { printJson, printLine } from "../kit/index.ts";
import { checkSecretStores, checkWorkers, settingsToCheck } from "../kit/index.ts";

const doctorCommand = defineCommand({
  meta: { name: "doctor", description: "Check the server's configuration, files, database, CA and secret store connections, and say how to fix what is wrong" },
  args: {
    "data-dir": { type: "string", description: "Data directory (default: BROKER_DATA_DIR or ~/.broker)" },
    ...jsonArg,
  },
  async run({ args }) {
    const env = args["data-dir"] ? { ...process.env, BROKER_DATA_DIR: args["data-dir"] } : process.env;
    const findings = await runChecks(env);
    const failed = findings.some((f) => f.level === "problem");
    if (args.json) printJson({ ok: !failed, checks: findings });
    else printFindings(findings);
    if (failed) throw new CliExit(1);
  },
});

async function runChecks(env: Record<string, string | undefined>): Promise<Finding[]> {
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.problems.map((p) => ({
      check: "configuration",
      level: "problem",
      message: p,
      fix: "fix the variable; `broker server --help` lists every setting",
    }));
  }
  const findings: Finding[] = [
    config.warnings.length === 0
      ? { check: "configuration", level: "ok", message: "valid" }
      : {
          check: "configuration",
          level: "warning",
          message: config.warnings.join("; "),
          fix: "remove or correct the variable (`broker server --help` lists every setting)",
        },
  ];
  findings.push(...(await checkPorts(config)));
  findings.push(...checkWorkers(config));
  findings.push(...checkDataDir(config));
  const db = await checkDatabase(config);
  findings.push(...db.findings);
  findings.push(checkKeyring(db.summary, Boolean(env.BROKER_MASTER_PASSWORD)));
  findings.push(checkCa(db.summary, Date.now()));
  // The guard and the public URL as the running broker has them, when it can be asked.
  const { settings, source, owner } = await settingsToCheck(config, env);
  findings.push(source);
  findings.push(...checkGuard(settings));
  findings.push(checkPublicUrl(settings));
  // Each secret store connection reads its references again: only the running broker's owner may ask.
  if (owner) findings.push(...(await checkSecretStores(owner)));
  const oidc = await checkOidc(config);
  if (oidc) findings.push(oidc);
  return findings;
}

function printFindings(findings: readonly Finding[]): void {
  const width = Math.max(...findings.map((f) => f.level.length));
  for (const f of findings) {
    printLine(`${f.level.padEnd(width)}  ${f.check}: ${f.message}`);
    if (f.fix && f.level !== "ok") printLine(`${" ".repeat(width)}  fix: ${f.fix}`);
  }
  const problems = findings.filter((f) => f.level === "problem").length;
  const warnings = findings.filter((f) => f.level === "warning").length;
  printLine();
  printLine(problems ? `${problems} problem(s), ${warnings} warning(s).` : `No problems${warnings ? `, ${warnings} warning(s)` : ""}.`);
}

export default doctorCommand;
