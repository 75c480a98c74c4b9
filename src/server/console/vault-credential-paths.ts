// The addresses of the credentials pages (list, one key, reveal, delete) and the small lookups they
// make: the vault's header, one credential by its key with the services that send it, and the secret
// store connections the vault may use. Key names, references and times only: never a value.

import { NotFound } from "../../errors.ts";
import type { OpenVault } from "../../identity/index.ts";
import {
  authKeys,
  listCredentials,
  listEveryService,
  listSecretStores,
  operatorClient,
  type ConnectDeps,
  type ReferenceView,
  type SecretStoreView,
  type ServiceView,
} from "../../workflows/index.ts";
import { signedIn, type ConsoleContext } from "./context.tsx";
import { vaultPath } from "./layout.tsx";

/** One credential as the pages show it: its key, when it changed, the hosts whose services send it. */
export interface CredentialItem {
  key: string;
  updated_at: string;
  usedBy: string[];
  /** Where a credential by reference reads its value, and how its last read went. */
  reference?: ReferenceView;
}

/** `/vaults/<v>/credentials`, `/vaults/<v>/credentials/<key>` or `/vaults/<v>/credentials/<key>/<action>`. */
export function credentialPath(vault: string, key?: string, action?: "reveal" | "delete"): string {
  return `${vaultPath(vault, "credentials")}${key ? `/${encodeURIComponent(key)}` : ""}${action ? `/${action}` : ""}`;
}

/** The vault header of every credentials page. */
export function vaultOf(open: OpenVault) {
  return { name: open.vault.name, role: open.role, section: "credentials" as const };
}

/** The hosts whose services send `key`; a connected account's client id and secret are the operator's app's, not the vault's. */
export function usersOf(services: ServiceView[], key: string, connect: ConnectDeps | undefined): string[] {
  return services.filter((s) => authKeys(s.auth).includes(key) && !operatorClient(connect, s.auth)?.keys.includes(key)).map((s) => s.host);
}

export async function requireKey(c: ConsoleContext, open: OpenVault, key: string): Promise<CredentialItem> {
  const row = (await listCredentials(c.get("kit").d, open, false)).find((r) => r.key === key);
  if (!row) throw new NotFound("this vault has no credential by that name"); // the name came from the URL: never quoted back
  return { ...row, usedBy: usersOf(await listEveryService(c.get("kit").d, open), key, c.get("kit").connect) };
}

/** The secret store connections this vault may use: its own, and the owner's shared with it. */
export async function usableConnections(c: ConsoleContext, open: OpenVault): Promise<SecretStoreView[]> {
  const name = open.vault.name;
  const all = await listSecretStores(c.get("kit").d, signedIn(c));
  return all.filter((s) => s.vault === name || s.shared_with.includes(name)).sort((a, b) => a.name.localeCompare(b.name, "en"));
}
