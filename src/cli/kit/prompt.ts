// Reading secrets from a person or a pipe: a prompt without echo on a terminal, or stdin lines
// (`--password-stdin`, piped credential values). Values come back inside Secret.

import { Secret } from "../../secret.ts";
import { CliFailure } from "./fail.ts";

export function stdinIsTerminal(): boolean {
  return Boolean(process.stdin.isTTY);
}

/** Prompts on the terminal with echo off; Ctrl-C aborts. */
export async function promptHidden(question: string): Promise<Secret> {
  if (!stdinIsTerminal()) throw new CliFailure("cannot prompt: standard input is not a terminal", "pass --password-stdin and pipe the value in");
  const stdin = process.stdin;
  // Echo goes off before the prompt shows: whatever is typed as soon as it appears is never echoed.
  stdin.setRawMode(true);
  process.stderr.write(question);
  stdin.resume();
  let value = "";
  try {
    return await new Promise<Secret>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        for (const ch of chunk.toString("utf8")) {
          if (ch === "\r" || ch === "\n") {
            stdin.off("data", onData);
            return resolve(new Secret(value));
          }
          if (ch === "\u0003") {
            stdin.off("data", onData);
            return reject(new CliFailure("cancelled", undefined, 130));
          }
          if (ch === "\u007f" || ch === "\b") value = value.slice(0, -1);
          else if (ch >= " ") value += ch;
        }
      };
      stdin.on("data", onData);
    });
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    process.stderr.write("\n");
  }
}

/** Prompts twice and insists both entries match. */
export async function promptNewPassword(what: string): Promise<Secret> {
  const first = await promptHidden(`New ${what}: `);
  const second = await promptHidden(`Repeat the new ${what}: `);
  if (first.reveal() !== second.reveal()) throw new CliFailure(`the two ${what} entries differ`, "run the command again");
  return first;
}

let stdinLines: string[] | undefined;

/** Reads standard input once and hands out its lines in order (trailing CR/LF removed). */
export async function readStdinLine(what: string): Promise<Secret> {
  if (!stdinLines) {
    const text = await Bun.stdin.text();
    stdinLines = text.split(/\r?\n/);
    if (stdinLines.at(-1) === "") stdinLines.pop();
  }
  const line = stdinLines.shift();
  if (line === undefined || line === "") throw new CliFailure(`expected the ${what} on standard input, found nothing`, "pipe it in, one value per line");
  return new Secret(line);
}

/**
 * Reads ALL of standard input as one secret (like `printf %s "$V" | gh secret set`): values may
 * hold newlines, so only a single trailing newline (LF or CRLF, as `echo` adds) is removed.
 */
export async function readStdinValue(what: string): Promise<Secret> {
  const text = await Bun.stdin.text();
  const value = text.endsWith("\r\n") ? text.slice(0, -2) : text.endsWith("\n") ? text.slice(0, -1) : text;
  if (value === "")
    throw new CliFailure(`expected the ${what} on standard input, found nothing`, 'pipe it in, e.g. printf %s "$VALUE" | broker credential set KEY');
  return new Secret(value);
}

/** Asks a yes/no-style question on the terminal (with echo) and returns the answer line. */
export async function promptLine(question: string): Promise<string> {
  if (!stdinIsTerminal()) throw new CliFailure("cannot ask for confirmation: standard input is not a terminal", "pass --yes to confirm");
  const { createInterface } = await import("node:readline/promises");
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(question)).trim();
  } finally {
    rl.close();
  }
}
