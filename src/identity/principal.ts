// Principals (who is asking) and the permission rules. Every token resolves to one principal with
// a stable id, which rate limits key on. Machines (agents, scoped sessions) never read credential
// values, never write credentials or services and never approve, whatever their role; only human
// user sessions can.

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
  /** Minted by `vault run --contain`: its minter says the command runs in a network namespace. */
  readonly contained: boolean;
  /** Exchanged for a workload's platform token (issue 39): the token's `iss` and `sub`, named in every audit record. */
  readonly workload?: WorkloadName;
}

/** The workload a session was exchanged for: its platform token's issuer (null before migration 31) and subject. */
export interface WorkloadName {
  readonly issuer: string | null;
  readonly subject: string;
}

export type Principal = UserPrincipal | AgentPrincipal | ScopedPrincipal;

/** The name people read for a principal (an agent's name, a person's email); a `vault run` session carries none of its own. */
export function principalName(p: Principal): string | undefined {
  return p.kind === "user" ? p.email : p.kind === "agent" ? p.agentName : undefined;
}

/** The workload behind a principal as a request's field, for its audit records; none for people and agents. */
export function withWorkload(p: Principal): { workload?: WorkloadName } {
  return p.kind === "scoped" && p.workload ? { workload: p.workload } : {};
}

/** Whether requests made with this principal are marked contained in the audit log. */
export function isContained(p: Principal): boolean {
  return p.kind === "scoped" && p.contained;
}

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
  | "read_logs" // the vault's audit log
  | "write_secrets" // set/delete credentials; add, change, enable, disable or remove services
  | "reveal" // read credential values
  | "approve" // approve or reject proposals
  | "manage" // agent invites, invite lists, members, agents, vault settings
  | "invite_people" // invite a person: accepting creates or joins a human login
  | "policy_mode" // report mode: a vault's policy mode, a service's rules mode (refusals let through, marked)
  | "delete_vault"; // delete the vault, and with it every credential and service

/**
 * The one permission rule for everything inside a vault (API routes, the approval page, the future
 * console all ask here). Machines (agent tokens, scoped sessions) never read or write secrets,
 * whatever their vault or instance role (architecture.md D18): a service is where a credential is
 * sent, so an agent able to add or repoint one could send a stored value to a host it controls.
 * Such changes reach a vault only through a proposal a human approves.
 */
export function mayInVault(principal: Principal, role: VaultRole, action: VaultAction): boolean {
  const human = principal.kind === "user";
  switch (action) {
    case "read":
      return true;
    case "read_logs":
      return roleRank(role) >= roleRank("member");
    case "write_secrets":
    case "reveal":
    case "approve":
      return human && roleRank(role) >= roleRank("member");
    case "manage":
      return principal.kind !== "scoped" && role === "admin";
    case "delete_vault":
    case "invite_people":
      // An agent able to invite a person could accept the invite itself with a new email and
      // password, and so hold a human login with every secret right the rule above denies it.
      return human && role === "admin";
    case "policy_mode":
      // Report mode lets through what the rules refuse: for an agent, a way round rules only a person may widen (D18).
      return human && role === "admin";
  }
}

const PROPOSE = "file a proposal instead (POST /v1/proposals, see GET /v1/skills/agent) and a human approves it";

/** Why `mayInVault` said no, worded so the caller knows what to do next. Never names a value. */
export function explainRefusal(principal: Principal, role: VaultRole, action: VaultAction): string {
  if (principal.kind !== "user") {
    switch (action) {
      case "write_secrets":
        return `agents never create, change or delete credentials or services, whatever their role: ${PROPOSE}`;
      case "reveal":
        return `agents never read credential values, whatever their role: the broker injects them into your requests through the proxy; if the vault lacks one, ${PROPOSE}`;
      case "approve":
        return "only a human with a user session can approve or reject proposals";
      case "delete_vault":
        return "agents never delete a vault (it holds credentials and services), whatever their role: ask a human admin of the vault";
      case "invite_people":
        return "agents never invite people, whatever their role (an invite makes a human login, which may read and change secrets): ask a human admin of the vault; agent invites are allowed";
      case "policy_mode":
        return "agents never switch a vault or a service to report mode or back, whatever their role (it decides whether the rules refuse): ask a human admin of the vault";
      case "manage":
        if (principal.kind === "scoped") return "a scoped session cannot manage the vault (invites, members, settings); use the token that minted it";
    }
  }
  return `your role in this vault (${role}) does not allow this`;
}
