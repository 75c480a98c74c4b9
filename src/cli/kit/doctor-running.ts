// Which settings `broker doctor` checks: when a broker answers on the configured API port and this CLI
// is signed in as the instance owner, the settings that broker runs with (GET /v1/owner/effective-
// settings), since its environment may differ from this shell's; otherwise this shell's environment.
// The first finding says which it was, so a report never describes one broker's settings as another's.

import type { Config } from "../../config.ts";
import type { EffectiveSettingsBody } from "../../contract/index.ts";
import type { Client } from "./client.ts";
import { openContext } from "./context.ts";
import type { Finding } from "./doctor-checks.ts";

/** The settings the guard and public-URL checks read. */
export type CheckedSettings = Pick<Config, "allowPrivateRanges" | "networkAllowlist" | "bindHost" | "publicUrl">;

/**
 * The running broker's settings when it can be asked, else the shell's; with the finding that says which,
 * and (when it answered) the client signed in to it as its owner, for the checks that ask it more.
 */
export async function settingsToCheck(
  config: Config,
  env: Record<string, string | undefined>,
): Promise<{ settings: CheckedSettings; source: Finding; owner?: Client }> {
  const host = config.bindHost === "0.0.0.0" || config.bindHost === "::" ? "127.0.0.1" : config.bindHost;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${config.apiPort}`;
  const shell = (why: string) => ({
    settings: config,
    source: { check: "settings checked", level: "ok" as const, message: `this shell's environment (${why})` },
  });
  if (config.apiPort === 0) return shell("BROKER_PORT=0: no running broker to ask");
  let effective: EffectiveSettingsBody;
  let owner: Client;
  try {
    owner = openContext({ env, address: url }).client;
    effective = await owner.request<EffectiveSettingsBody>("GET", "/v1/owner/effective-settings");
  } catch {
    return shell(`no broker at ${url} told its settings: none runs there, or this CLI is not signed in to it as the instance owner`);
  }
  return {
    settings: {
      allowPrivateRanges: effective.allow_private_ranges,
      networkAllowlist: effective.network_allowlist,
      bindHost: effective.bind_host,
      publicUrl: effective.public_url ?? undefined,
    },
    source: { check: "settings checked", level: "ok", message: `the running broker's at ${url} (its own environment, which may differ from this shell's)` },
    owner,
  };
}
