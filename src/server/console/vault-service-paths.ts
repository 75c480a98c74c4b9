// The addresses of the services pages (list, add, edit, actions) and the small lookups every one of
// them makes: the vault's header, its stored key names (never values), one service by its host.

import { NotFound } from "../../errors.ts";
import type { OpenVault } from "../../identity/index.ts";
import { listCredentials, serviceOfHost, type ServiceView } from "../../workflows/index.ts";
import type { ConsoleContext } from "./context.tsx";
import { vaultPath } from "./layout.tsx";

export type ServiceAction = "edit" | "enable" | "disable" | "remove" | "catalogue";

/** `/vaults/<v>/services`, `/vaults/<v>/services/<host>` (save) or `/vaults/<v>/services/<host>/<action>`. */
export function servicePath(vault: string, host?: string, action?: ServiceAction): string {
  return `${vaultPath(vault, "services")}${host ? `/${encodeURIComponent(host)}` : ""}${action ? `/${action}` : ""}`;
}

/** The add pages: `/vaults/<v>/services/new`, with `?template=`, `?custom=1&type=` or `?q=`. */
export function newServicePath(vault: string, query: Record<string, string> = {}): string {
  const qs = new URLSearchParams(query).toString();
  return `${vaultPath(vault, "services")}/new${qs ? `?${qs}` : ""}`;
}

/** An edit page, for one auth type (`type`) or the choice of type (`type=choose`). */
export function editServicePath(vault: string, host: string, type?: string): string {
  return `${servicePath(vault, host, "edit")}${type ? `?type=${encodeURIComponent(type)}` : ""}`;
}

/** The vault header of every services page. */
export function vaultOf(open: OpenVault) {
  return { name: open.vault.name, role: open.role, section: "services" as const };
}

/** The names of the vault's stored credentials, for the key choices. */
export async function keysOf(c: ConsoleContext, open: OpenVault): Promise<string[]> {
  return (await listCredentials(c.get("kit").d, open, false)).map((r) => r.key);
}

/** The service for `host`, or a 404 that never quotes the host (it came from the URL). */
export async function findService(c: ConsoleContext, open: OpenVault, host: string): Promise<ServiceView> {
  const s = await serviceOfHost(c.get("kit").d, open.vault.id, host);
  if (!s) throw new NotFound("this vault has no service for that host");
  return s;
}

/** The "Connect an account" flow of a template (its own pages, vault-connect.tsx). */
export function connectServicePath(vault: string, templateId: string): string {
  return `${vaultPath(vault, "services")}/connect/${encodeURIComponent(templateId)}`;
}
