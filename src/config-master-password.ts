// The master password, from BROKER_MASTER_PASSWORD or the file BROKER_MASTER_PASSWORD_FILE names (a systemd
// credential, a 0600 file). The variable is deleted once read; /proc/<pid>/environ still shows the value the
// process started with, which is why the file exists. Never logs the value.

import { readSecretFile } from "./config-secret-file.ts";
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
  // One trailing newline (what `echo` and editors add) is not part of the password; other spaces are.
  return readSecretFile("BROKER_MASTER_PASSWORD_FILE", file, problems, (content) => content.replace(/\r?\n$/, ""));
}
