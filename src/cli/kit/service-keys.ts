// The note after adding or changing a service whose keys the vault does not hold yet: the service is
// saved either way, and agents' requests get no credential until each key is set.

import type { CredentialListBody } from "../../contract/index.ts";
import { type Client, vaultPath } from "./client.ts";
import { printNote } from "./output.ts";

/** The service is added either way: each key may be set next; until then requests get no credential. */
export async function warnIfNoKeys(client: Client, vault: string, keys: string[]): Promise<void> {
  if (!keys.length) return;
  const listed = await client.request<CredentialListBody>("GET", vaultPath(vault, "credentials"), { vault }).catch(() => undefined);
  for (const key of keys) {
    if (listed && !listed.credentials.some((c) => c.key === key)) {
      printNote(`warning: vault ${vault} has no credential ${key} yet; set it with \`broker credential set ${key}\` before agents use this service`);
    }
  }
}
