// What a CLI command needs to talk to the broker: the effective address, token and vault,
// resolved from flags, the environment (via loadClientConfig) and the saved cli.json.
// Precedence: address --address > BROKER_ADDR > saved > default; token BROKER_SESSION_TOKEN >
// saved; vault --vault > `broker vault use` > BROKER_VAULT.

import { type ClientConfig, DEFAULT_CLIENT_ADDR, loadClientConfig, readClientAddr } from "../../config-client.ts";
import type { VaultListBody } from "../../contract/index.ts";
import type { Secret } from "../../secret.ts";
import { type Client, createClient } from "./client.ts";
import { CliFailure } from "./fail.ts";
import { type CliState, readCliState, updateCliState } from "./state.ts";

export interface CliContext {
  readonly config: ClientConfig;
  readonly state: CliState;
  readonly addr: string;
  readonly client: Client;
}

export interface ContextOptions {
  /** `--address` on the command line. */
  readonly address?: string;
  readonly env?: Record<string, string | undefined>;
}

export function openContext(opts: ContextOptions = {}): CliContext {
  const config = loadClientConfig(opts.env ?? process.env);
  const state = readCliState(config.configDir);
  const addr = opts.address !== undefined ? parseAddressFlag(opts.address) : (config.addr ?? state.address ?? DEFAULT_CLIENT_ADDR);
  // A saved token belongs to the server it came from: never send it to a different address.
  const savedToken = state.token && (state.address ?? DEFAULT_CLIENT_ADDR) === addr ? state.token : undefined;
  // BROKER_SESSION_TOKEN belongs to BROKER_ADDR when that is set (`vault run` sets both): never sent elsewhere.
  const envToken = config.sessionToken && (config.addr === undefined || config.addr === addr) ? config.sessionToken : undefined;
  const token = envToken ?? savedToken;
  const tokenSource = envToken ? "env" : savedToken ? "file" : undefined;
  return { config, state, addr, client: createClient({ addr, token, tokenSource }) };
}

export function parseAddressFlag(raw: string): string {
  const problems: string[] = [];
  const addr = readClientAddr("--address", raw, problems);
  if (problems[0]) throw new CliFailure(problems[0], "for example --address http://127.0.0.1:14321", 2);
  return addr;
}

/** The vault a vault-scoped command addresses, or a failure saying how to choose one. */
export function pickVault(ctx: CliContext, flag: string | undefined): string {
  const vault = flag?.trim() || ctx.state.vault || ctx.config.vault;
  if (vault) return vault;
  throw new CliFailure(
    "no vault selected",
    "pass --vault <name>, choose one with `broker vault use <name>`, or set BROKER_VAULT; `broker vault list` shows your vaults",
  );
}

/**
 * pickVault for the commands an agent runs (`vault run`, `proposal list`, `logs`): when nothing names a
 * vault, the token's own vault if it has exactly one (an agent redeemed for one vault, a `vault run` session).
 */
export async function pickVaultOrOnly(ctx: CliContext, flag: string | undefined): Promise<string> {
  const chosen = flag?.trim() || ctx.state.vault || ctx.config.vault;
  if (chosen || !ctx.client.hasToken) return pickVault(ctx, chosen);
  const { vaults } = await ctx.client.request<VaultListBody>("GET", "/v1/vaults");
  if (vaults.length === 1) return vaults[0]!.name;
  if (vaults.length === 0) throw new CliFailure("no vault selected, and you hold a role in none", "a vault admin adds you (or an agent invite does)");
  throw new CliFailure(
    "no vault selected",
    `you can use ${vaults.map((v) => v.name).join(", ")}: pass --vault <name>, or choose one with \`broker vault use <name>\``,
  );
}

/** Remembers a fresh login: the token is tied to the address it was issued by. */
export function saveLogin(ctx: CliContext, login: { token: Secret; email?: string }): void {
  const sameServer = (ctx.state.address ?? DEFAULT_CLIENT_ADDR) === ctx.addr;
  updateCliState(ctx.config.configDir, {
    address: ctx.addr,
    token: login.token,
    email: login.email ?? null,
    // The remembered vault names a vault on the old server; it means nothing on a new one.
    vault: sameServer ? undefined : null,
  });
}

export function forgetLogin(ctx: CliContext): void {
  updateCliState(ctx.config.configDir, { token: null, email: null });
}

export function rememberVault(ctx: CliContext, vault: string | null): void {
  updateCliState(ctx.config.configDir, { vault });
}
