// Principals (who is asking) and the permission rules. Every token resolves to one principal with
// a stable id, which rate limits key on. Machines (agents, scoped sessions) never read credential
// values and never approve, whatever their role; only human user sessions can.

import type { InstanceRole, VaultRole } from "../store/index.ts";

export type { InstanceRole, VaultRole };

interface SessionRef {
  /** Internal row id of the session that authenticated this request. */
  readonly sessionId: number;
  readonly sessionPublicId: string;
  readonly expiresAt: number | null;
}

export interface UserPrincipal extends SessionRef {
  readonly kind: "user";
  readonly id: string;
  readonly userId: number;
  readonly email: string;
  readonly instanceRole: InstanceRole;
}

export interface AgentPrincipal extends SessionRef {
  readonly kind: "agent";
  readonly id: string;
  readonly agentId: number;
  readonly agentName: string;
  readonly instanceRole: InstanceRole;
}

export interface ScopedPrincipal extends SessionRef {
  readonly kind: "scoped";
  readonly id: string;
  readonly vaultId: number;
  readonly role: VaultRole;
  /** Who minted it: exactly one of these is set. Its rights never exceed the minter's current ones. */
  readonly userId: number | null;
  readonly agentId: number | null;
}

export type Principal = UserPrincipal | AgentPrincipal | ScopedPrincipal;

export const VAULT_ROLES: readonly VaultRole[] = ["proxy", "member", "admin"];

export function roleRank(role: VaultRole): number {
  return VAULT_ROLES.indexOf(role);
}

export function lowerRole(a: VaultRole, b: VaultRole): VaultRole {
  return roleRank(a) <= roleRank(b) ? a : b;
}

export function isVaultRole(v: unknown): v is VaultRole {
  return typeof v === "string" && (VAULT_ROLES as readonly string[]).includes(v);
}

/** What a principal may do inside a vault where it holds `role`. */
export type VaultAction =
  | "read" // list services and credential key names, discover, use the proxy, file proposals
  | "write" // set/delete credentials, add/change/remove services
  | "reveal" // read credential values
  | "approve" // approve or reject proposals
  | "manage"; // invites, members, agents, vault settings, delete the vault

export function mayInVault(principal: Principal, role: VaultRole, action: VaultAction): boolean {
  const human = principal.kind === "user";
  switch (action) {
    case "read":
      return true;
    case "write":
      return roleRank(role) >= roleRank("member");
    case "reveal":
    case "approve":
      return human && roleRank(role) >= roleRank("member");
    case "manage":
      return principal.kind !== "scoped" && role === "admin";
  }
}
