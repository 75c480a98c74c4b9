// The master password, from BROKER_MASTER_PASSWORD or the file BROKER_MASTER_PASSWORD_FILE names (a systemd
// credential, a 0600 file). The variable is deleted once read; /proc/<pid>/environ still shows the value the
// process started with, which is why the file exists. Never logs the value.

import { readFileSync } from "node:fs";
import { Secret } from "./secret.ts";

type Env = Record<string, string | undefined>;

export function readMasterPassword(env: Env, problems: string[]): Secret | undefined {
  const inline = env.BROKER_MASTER_PASSWORD;
  // Contract: removed from the process environment after reading, so no child process inherits it.
  delete env.BROKER_MASTER_PASSWORD;
  const file = env.BROKER_MASTER_PASSWORD_FILE?.trim();
  if (!file) return inline ? new Secret(inline) : undefined;
  if (inline) {
    problems.push("BROKER_MASTER_PASSWORD and BROKER_MASTER_PASSWORD_FILE: set exactly one, not both");
    return undefined;
  }
  if (!file.startsWith("/")) {
    problems.push("BROKER_MASTER_PASSWORD_FILE: must be an absolute path");
    return undefined;
  }
  try {
    // One trailing newline (what `echo` and editors add) is not part of the password; other spaces are.
    const value = readFileSync(file, "utf8").replace(/\r?\n$/, "");
    if (value) return new Secret(value);
    problems.push("BROKER_MASTER_PASSWORD_FILE: the file is empty");
  } catch (err) {
    problems.push(`BROKER_MASTER_PASSWORD_FILE: cannot read the file (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
  return undefined;
}
