// The CLI's saved state, `<configDir>/cli.json`: server address, session token, current vault.
// The file holds a live session token, so it is written 0600 in a 0700 directory (re-chmod'ed
// even when it already exists) and replaced atomically, never left half-written or world-readable.

import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";
import { Secret } from "../../secret.ts";
import { CliFailure } from "./fail.ts";

export interface CliState {
  readonly address?: string;
  readonly token?: Secret; // SECRET: never log
  readonly email?: string;
  readonly vault?: string;
}

/** Fields to change: a value sets it, `null` removes it, absent leaves it alone. */
export type CliStatePatch = { readonly [K in keyof CliState]?: CliState[K] | null };

export const STATE_FILE = "cli.json";

export function statePath(dir: string): string {
  return join(dir, STATE_FILE);
}

export function readCliState(dir: string): CliState {
  const path = statePath(dir);
  if (!existsSync(path)) return {};
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    throw new CliFailure(`cannot read ${path}: not valid JSON`, `fix or delete it, then log in again with \`broker auth login\``);
  }
  if (!raw || typeof raw !== "object") return {};
  const r = raw as Record<string, unknown>;
  const text = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  const token = text(r.token);
  return { address: text(r.address), token: token ? new Secret(token) : undefined, email: text(r.email), vault: text(r.vault) };
}

export function updateCliState(dir: string, patch: CliStatePatch): CliState {
  const next: Record<string, unknown> = { ...readCliState(dir) };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete next[k];
    else if (v !== undefined) next[k] = v;
  }
  writeCliState(dir, next as CliState);
  return next as CliState;
}

function writeCliState(dir: string, state: CliState): void {
  ensurePrivateDir(dir);
  const body = JSON.stringify(
    {
      address: state.address,
      token: state.token?.reveal(), // the one place the token leaves memory: into a 0600 file
      email: state.email,
      vault: state.vault,
    },
    null,
    2,
  );
  const path = statePath(dir);
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  // "wx" + 0600: a fresh file nobody else can have opened; the umask can only remove bits.
  const fd = openSync(tmp, "wx", 0o600);
  try {
    writeSync(fd, `${body}\n`);
  } finally {
    closeSync(fd);
  }
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700); // also when it existed before with looser bits
}
