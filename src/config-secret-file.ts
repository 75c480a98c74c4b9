// A secret setting read from a file (a systemd credential, a 0600 file): the *_FILE half of settings
// such as BROKER_MASTER_PASSWORD_FILE. Problems name the variable and the error code, never the content.

import { readFileSync } from "node:fs";
import { Secret } from "./secret.ts";

/** `normalise` says what of the file is not part of the secret (a trailing newline, surrounding spaces). */
export function readSecretFile(name: string, file: string, problems: string[], normalise: (content: string) => string): Secret | undefined {
  if (!file.startsWith("/")) {
    problems.push(`${name}: must be an absolute path`);
    return undefined;
  }
  try {
    const value = normalise(readFileSync(file, "utf8"));
    if (value) return new Secret(value);
    problems.push(`${name}: the file is empty`);
  } catch (err) {
    problems.push(`${name}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
  return undefined;
}
