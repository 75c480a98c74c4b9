// Vaults and who may use them. `openVault` is the single gate for every vault-scoped operation:
// it resolves the principal's effective role (owner → admin; members; agent grants, which need
// X-Vault; scoped sessions, bound to one vault and never above their minter's current role).

import { Conflict, DatabaseUnavailable, InvalidRequest, NotFound, PermissionDenied, VaultManaged } from "../errors.ts";
import type { PolicyMode, Repos, UnmatchedHosts, VaultRole, VaultRow } from "../store/index.ts";
import type { Domain } from "./context.ts";
import { explainRefusal, lowerRole, mayInVault, type Principal, type VaultAction } from "./principal.ts";
import { iso } from "./users.ts";
import type { VaultGrant } from "./vault-access.ts";

/** A vault opened by `openVault`: domain operations re-check their own action against `principal`. */
export interface OpenVault extends VaultGrant {
  readonly principal: Principal;
  /** Opened by `broker apply` (workflows/vault-apply.ts): the one writer a vault kept as code accepts. */
  readonly asCode?: true;
}

const NO_VAULT = "vault not found (or you have no access to it)";

/** The role `p` holds in `vault` right now, or undefined for none. */
export async function roleIn(repos: Repos, p: Principal, vault: VaultRow): Promise<VaultRole | undefined> {
  switch (p.kind) {
    case "user":
      return p.instanceRole === "owner" ? "admin" : repos.access.memberRole(vault.id, p.userId);
    case "agent":
      return repos.access.grantRole(vault.id, p.agentId);
    case "scoped": {
      if (vault.id !== p.vaultId) return undefined;
      const minter = p.userId !== null ? await userRole(repos, p.userId, vault.id) : await repos.access.grantRole(vault.id, p.agentId!);
      return minter && lowerRole(minter, p.role);
    }
  }
}

async function userRole(repos: Repos, userId: number, vaultId: number): Promise<VaultRole | undefined> {
  const user = await repos.users.byId(userId);
  if (!user) return undefined;
  return user.role === "owner" ? "admin" : repos.access.memberRole(vaultId, userId);
}

/**
 * Opens `name` for `p` and checks `action`. Agent tokens must name the same vault in X-Vault
 * (contract: instance-level agent tokens send X-Vault on every vault-scoped call).
 */
export async function openVault(d: Domain, p: Principal, name: string, action: VaultAction, xVault?: string): Promise<OpenVault> {
  requireXVault(p, name, xVault);
  const grant =
    d.vaultAccess?.get(p.sessionId, name) ??
    (await (d.vaultAccess ? d.vaultAccess.load(p.sessionId, name, () => resolveAccess(d, p, name)) : resolveAccess(d, p, name)).catch((err) => {
      // A database outage: a grant checked recently keeps proxied traffic flowing (bounded by the grace period).
      const recent = err instanceof DatabaseUnavailable ? d.vaultAccess?.recent(p.sessionId, name) : undefined;
      if (recent) return recent;
      throw err;
    }));
  return openedFor(p, grant, action);
}

/**
 * openVault without a wait, when the grant is in the access cache (the proxy's hot path); undefined when it is
 * not (then call openVault). The same checks, in the same order.
 */
export function openCachedVault(d: Domain, p: Principal, name: string, action: VaultAction, xVault?: string): OpenVault | undefined {
  requireXVault(p, name, xVault);
  const grant = d.vaultAccess?.get(p.sessionId, name);
  return grant && openedFor(p, grant, action);
}

function requireXVault(p: Principal, name: string, xVault: string | undefined): void {
  if (p.kind !== "agent") return;
  if (!xVault) throw new InvalidRequest("agent tokens must send the X-Vault header naming the vault", "x-vault");
  if (xVault !== name) throw new InvalidRequest("X-Vault does not match the vault being addressed", "x-vault");
}

function openedFor(p: Principal, grant: VaultGrant, action: VaultAction): OpenVault {
  const open = { vault: grant.vault, role: grant.role, principal: p };
  requireInVault(open, action);
  return open;
}

/**
 * Refuses `action` on an opened vault unless `mayInVault` allows it. Operations that touch secrets
 * call this themselves, so no caller (route, page, console) can skip the rule by opening for less.
 */
export function requireInVault(open: OpenVault, action: VaultAction): void {
  if (!mayInVault(open.principal, open.role, action)) throw new PermissionDenied(explainRefusal(open.principal, open.role, action));
}

/**
 * What a vault kept as code still takes from people, because its file cannot hold it: a value for a credential key
 * the file lists, an invite of an agent or a person the file names, with the role it gives them.
 */
export type DeclaredWrite =
  | { readonly value: string }
  | { readonly agent: string; readonly role: VaultRole }
  | { readonly member: string | null; readonly role: VaultRole };

/**
 * Refuses a write to a vault kept as code (issue 39, architecture.md D27) unless it comes through `broker apply`
 * or is one of the few its file declares (`allowed`). Every domain write to a vault's services, credentials,
 * grants, members, webhooks, budgets and settings calls this after its role check, so the API, the console and
 * the CLI are refused alike. Read from the store on each write: another instance's apply counts at once.
 */
export async function requireUnmanaged(d: Domain, open: OpenVault, allowed?: DeclaredWrite, also = ""): Promise<void> {
  if (open.asCode) return;
  const state = await d.store.vaultCode.state(open.vault.id);
  if (!state.managed) return;
  const declared = state.declared;
  if (allowed && declared) {
    if ("value" in allowed && declared.values.includes(allowed.value)) return;
    if ("agent" in allowed && declared.agents[allowed.agent] === allowed.role) return;
    if ("member" in allowed && allowed.member !== null && declared.members[allowed.member] === allowed.role) return;
  }
  throw new VaultManaged(open.vault.name, also);
}

async function resolveAccess(d: Domain, p: Principal, name: string): Promise<VaultGrant> {
  const vault = await d.store.vaults.byName(name);
  if (!vault) throw new NotFound(NO_VAULT);
  if (p.kind === "scoped" && vault.id !== p.vaultId) throw new PermissionDenied("this session is bound to another vault");
  const role = await roleIn(d.store, p, vault);
  if (!role) throw new NotFound(NO_VAULT);
  return { vault, role };
}

/** The name of vault `id`, from the cache when possible (scoped sessions know only the id). */
export async function vaultNameById(d: Domain, id: number): Promise<string | undefined> {
  return d.vaultAccess?.nameOf(id) ?? (await d.store.vaults.byId(id))?.name;
}

/** A new vault, its name read by the contract (1-63 lower-case letters, digits or '-'). */
export interface NewVault {
  name: string;
}

export async function createVault(d: Domain, p: Principal, input: NewVault) {
  const { name } = input;
  if (p.kind === "scoped" || (p.kind === "agent" && p.instanceRole !== "owner")) {
    throw new PermissionDenied("only users and owner-role agents can create vaults");
  }
  const vault = await d.store.transaction(async (tx) => {
    if (await tx.vaults.byName(name)) throw new Conflict(`a vault named ${name} already exists`);
    const now = d.now();
    const v = await tx.vaults.create(name, now);
    if (p.kind === "user") await tx.access.setMember(v.id, p.userId, "admin", now);
    else await tx.access.setGrant(v.id, p.agentId, "admin", now);
    return v;
  });
  return { name: vault.name, role: "admin" as const, created_at: iso(vault.createdAt) };
}

export async function listVaults(d: Domain, p: Principal) {
  const rows = await d.store.vaults.list();
  const out: { name: string; role: VaultRole; created_at: string }[] = [];
  for (const v of rows) {
    const role = await roleIn(d.store, p, v);
    if (role) out.push({ name: v.name, role, created_at: iso(v.createdAt) });
  }
  return out;
}

export function describeVault(open: VaultGrant) {
  return {
    name: open.vault.name,
    role: open.role,
    created_at: iso(open.vault.createdAt),
    unmatched_hosts: open.vault.unmatchedHosts,
    policy_mode: open.vault.policyMode,
  };
}

/** A change to a vault's settings: an absent field keeps what the vault has. */
export interface VaultChange {
  unmatched_hosts?: UnmatchedHosts;
  /** Report mode (architecture.md D33): refusals of the rules and the unmatched-host policy let through, marked. */
  policy_mode?: PolicyMode;
}

export async function updateVault(d: Domain, open: OpenVault, change: VaultChange) {
  requireInVault(open, "manage"); // whether unknown hosts tunnel is the vault's policy: admins only
  await requireUnmanaged(d, open);
  if (change.policy_mode !== undefined) requireInVault(open, "policy_mode"); // and whether anything is refused: human admins
  // Letting unknown hosts through is a widening, as report mode is: a person decides it (an agent may still tighten).
  if (change.unmatched_hosts === "tunnel" && open.vault.unmatchedHosts !== "tunnel") requireInVault(open, "policy_mode");
  if (change.unmatched_hosts !== undefined || change.policy_mode !== undefined) {
    await d.store.transaction(async (tx) => {
      if (change.unmatched_hosts !== undefined) await tx.vaults.setUnmatchedHosts(open.vault.id, change.unmatched_hosts);
      if (change.policy_mode !== undefined) await tx.policyModes.setVaultMode(open.vault.id, change.policy_mode);
    });
    d.onVaultChange?.(open.vault.id);
  }
  const vault = (await d.store.vaults.byId(open.vault.id))!;
  return describeVault({ vault, role: open.role });
}

export async function deleteVault(d: Domain, open: OpenVault): Promise<void> {
  requireInVault(open, "delete_vault"); // it deletes every credential and service: humans only
  await requireUnmanaged(d, open, undefined, " (with managed: false first, to delete it)");
  // Foreign-key cascades remove credentials, services, invites, grants, memberships and scoped sessions.
  await d.store.vaults.remove(open.vault.id);
  d.auth.forget();
  d.onVaultChange?.(open.vault.id);
}

export async function listMembers(d: Domain, open: OpenVault) {
  return (await d.store.access.members(open.vault.id)).map((m) => ({ email: m.email, role: m.role }));
}
