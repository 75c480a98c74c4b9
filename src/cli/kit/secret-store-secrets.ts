// The secret fields of a secret store connection's auth (a Vault token, an AppRole's role id and secret id,
// AWS access keys, an Azure client secret), read as `broker credential set` reads a value: typed at a
// hidden prompt, or piped on standard input. Never a flag or an argument: those reach shell history and the
// process list. One secret takes all of stdin (one trailing newline dropped); several take a line each,
// in the order the help lists. Values travel inside Secret until the request body is serialised.
// Also the files some settings are read from (--ca-file, --key-file).

import { readFileSync, statSync } from "node:fs";
import { Secret } from "../../secret.ts";
import { CliFailure } from "./fail.ts";
import { promptHidden, stdinIsTerminal } from "./prompt.ts";

interface SecretField {
  readonly field: string;
  readonly what: string;
  /** May be left empty (an AWS session token). */
  readonly optional?: boolean;
}

/** Each method's secret fields, in the order they are prompted for or piped. */
export const METHOD_SECRETS: Record<string, readonly SecretField[]> = {
  token: [{ field: "token", what: "Vault token" }],
  approle: [
    { field: "role_id", what: "AppRole role id" },
    { field: "secret_id", what: "AppRole secret id" },
  ],
  keys: [
    { field: "access_key_id", what: "AWS access key id" },
    { field: "secret_access_key", what: "AWS secret access key" },
    { field: "session_token", what: "AWS session token", optional: true },
  ],
  client_credentials: [{ field: "client_secret", what: "Azure client secret" }],
};

/** What the help says about reading them. */
export const SECRETS_NOTES = `SECRETS

  The auth's secrets are never flags: they are typed at hidden prompts, or piped on standard input.
  --auth token               the Vault token: all of stdin (one trailing newline dropped)
  --auth approle             two lines: the role id, then the secret id
  --auth keys                two or three lines: the access key id, the secret access key, and
                             the session token when there is one
  --auth client_credentials  the Azure client secret: all of stdin
  --auth jwt|kubernetes, environment and service_account_key read nothing (the JWT stays in its
  file on the broker's machine; the broker's own AWS_* environment; the key comes from --key-file).
  They are sealed by the broker with its data key and never shown again.
  jwt, kubernetes and environment sign in as the broker itself: the owner's connections only, and a
  --token-file only when the operator listed it in BROKER_SECRET_STORE_TOKEN_FILES.`;

/** Reads the method's secrets: hidden prompts on a terminal, else standard input. Nothing for a method without any. */
export async function readAuthSecrets(method: string, connection: string): Promise<Record<string, Secret>> {
  const fields = METHOD_SECRETS[method] ?? [];
  if (fields.length === 0) return {};
  const terminal = stdinIsTerminal();
  const piped = terminal ? [] : await readPiped(fields.length === 1);
  const out: Record<string, Secret> = {};
  for (const [i, f] of fields.entries()) {
    const value = terminal
      ? await promptHidden(`${f.what} for ${connection}${f.optional ? " (empty for none)" : ""} (input hidden): `)
      : new Secret(piped[i] ?? "");
    if (value.reveal() !== "") out[f.field] = value;
    else if (!f.optional) throw missing(f, fields, terminal, method);
  }
  if (!terminal && piped.length > fields.length)
    throw new CliFailure(`--auth ${method} reads ${fields.length} line(s) from standard input; more were piped`, `${pipeHint(fields)}; nothing was saved`);
  return out;
}

/** All of stdin as one value (`whole`, as `credential set` reads it), or its lines. */
async function readPiped(whole: boolean): Promise<string[]> {
  const text = await Bun.stdin.text();
  if (whole) return [text.endsWith("\r\n") ? text.slice(0, -2) : text.endsWith("\n") ? text.slice(0, -1) : text];
  const lines = text.split(/\r?\n/);
  if (lines.at(-1) === "") lines.pop();
  return lines;
}

function missing(f: SecretField, fields: readonly SecretField[], terminal: boolean, method: string): CliFailure {
  return new CliFailure(
    `no ${f.what} was given: nothing was saved`,
    terminal ? "type it at the prompt" : `--auth ${method}: ${pipeHint(fields)}, e.g. printf '%s\\n' "$V" | broker secret-store add …`,
  );
}

function pipeHint(fields: readonly SecretField[]): string {
  if (fields.length === 1) return `pipe the ${fields[0]!.what} on standard input`;
  return `pipe one line each: ${fields.map((f) => `the ${f.what}${f.optional ? " (optional)" : ""}`).join(", then ")}`;
}

const MAX_FILE_BYTES = 64 * 1024;

/** A setting read from a file (--ca-file, --key-file): its text, or a failure naming the flag and the path. */
export function readSettingFile(flag: string, path: string): string {
  let size: number;
  try {
    size = statSync(path).size;
  } catch (err) {
    throw new CliFailure(`${flag}: cannot read ${path} (${(err as { code?: string }).code ?? "unreadable"})`, "give the path of a readable file", 2);
  }
  if (size > MAX_FILE_BYTES) throw new CliFailure(`${flag}: ${path} is larger than 64 KiB`, "is it the right file?", 2);
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new CliFailure(`${flag}: cannot read ${path} (${(err as { code?: string }).code ?? "unreadable"})`, "give the path of a readable file", 2);
  }
}
