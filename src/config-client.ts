// The CLI's own settings (BROKER_ADDR, BROKER_SESSION_TOKEN, BROKER_VAULT, BROKER_CONFIG_DIR): where it
// finds the broker and its login. The server's settings are in config.ts.

import { ConfigError, normaliseHttpUrl, type Env, type LoadOptions } from "./config.ts";
import { Secret } from "./secret.ts";

/** Where the CLI finds the broker and its login. Secrets (the session token) stay inside Secret. */
export interface ClientConfig {
  /** Directory of `cli.json` (BROKER_CONFIG_DIR, $XDG_CONFIG_HOME/broker or ~/.config/broker). */
  readonly configDir: string;
  /** BROKER_ADDR: overrides the address saved in the config file. */
  readonly addr: string | undefined;
  /** BROKER_SESSION_TOKEN: overrides the token saved in the config file. SECRET: never log. */
  readonly sessionToken: Secret | undefined;
  /** BROKER_VAULT: the vault used when neither --vault nor `broker vault use` names one. */
  readonly vault: string | undefined;
  /** BROKER_IDENTITY_TOKEN_FILE: a platform token to exchange for a session (`vault run`, issue 39). */
  readonly identityTokenFile: string | undefined;
}

export const DEFAULT_CLIENT_ADDR = "http://127.0.0.1:14321";

/** Pure: the CLI's view of the environment. Relative XDG_CONFIG_HOME is ignored, as the XDG spec says. */
export function loadClientConfig(env: Env, opts: LoadOptions = {}): ClientConfig {
  const problems: string[] = [];
  const home = opts.homeDir ?? env.HOME;
  const configDir = readClientConfigDir(env, home, problems);
  const addr = env.BROKER_ADDR?.trim() ? readClientAddr("BROKER_ADDR", env.BROKER_ADDR, problems) : undefined;
  const token = env.BROKER_SESSION_TOKEN?.trim();
  const vault = env.BROKER_VAULT?.trim() || undefined;
  if (problems.length) throw new ConfigError(problems);
  const identityTokenFile = env.BROKER_IDENTITY_TOKEN_FILE?.trim() || undefined;
  return Object.freeze({ configDir, addr, sessionToken: token ? new Secret(token) : undefined, vault, identityTokenFile });
}

/** Validates a broker address (http or https, no credentials, query or fragment) and drops trailing slashes. */
export function readClientAddr(name: string, raw: string, problems: string[]): string {
  const url = normaliseHttpUrl(raw);
  if (url === undefined) problems.push(`${name}: must be an http(s) URL without credentials, query or fragment, like ${DEFAULT_CLIENT_ADDR}`);
  return url ?? "";
}

function readClientConfigDir(env: Env, home: string | undefined, problems: string[]): string {
  const explicit = env.BROKER_CONFIG_DIR?.trim();
  if (explicit) {
    if (!explicit.startsWith("/")) problems.push("BROKER_CONFIG_DIR: must be an absolute path");
    return explicit.replace(/\/+$/, "") || "/";
  }
  const xdg = env.XDG_CONFIG_HOME?.trim();
  if (xdg?.startsWith("/")) return `${xdg.replace(/\/+$/, "")}/broker`;
  if (!home) {
    problems.push("BROKER_CONFIG_DIR: not set and HOME is unknown; set BROKER_CONFIG_DIR to an absolute path");
    return "";
  }
  return `${home.replace(/\/+$/, "")}/.config/broker`;
}
