// Agents: redeeming an agent invite (atomic: a failed redemption does not burn it), listing and
// revoking. An agent holds an instance role (member unless made otherwise) and per-vault grants.

import { NotFound, PermissionDenied } from "../errors.ts";
import type { Domain } from "./context.ts";
import type { Principal } from "./principal.ts";
import { mintAgentSession, type SessionClient } from "./sessions.ts";
import { findLiveInvite, requireDeclaredJoin } from "./invites.ts";
import { requireInVault, roleIn, type OpenVault } from "./vaults.ts";
import { iso } from "./users.ts";
import { checkPageLimit, cutPage } from "./page.ts";
import type { AgentRow, AgentScope, VaultRole } from "../store/index.ts";

/**
 * The answer names two roles: `agent.instance_role` (also `agent.role`, kept for older readers) is the
 * agent's role on this broker instance; each `vaults[].role` is its role in that vault.
 */
export async function redeemAgentInvite(d: Domain, rawToken: string, client?: SessionClient) {
  const result = await d.store.transaction(async (tx) => {
    const now = d.now();
    const invite = await findLiveInvite(tx, rawToken, "agent", now);
    await requireDeclaredJoin(tx, invite.vaultId, { agent: invite.agentName ?? "" }, invite.role);
    // Burn first: the conditional update is what makes concurrent redemptions take turns. On PostgreSQL
    // it locks the invite row, so a second redemption waits here and then finds it used, instead of
    // racing on to create the same agent (a unique-key error). Any failure below rolls the burn back too.
    if (!(await tx.invites.burn(invite.id, now))) throw new NotFound("invite not found, already used or expired");
    const name = invite.agentName!;
    if (await tx.agents.byName(name)) throw new NotFound("invite not found, already used or expired");
    const agent = await tx.agents.create({ name, role: "member", createdBy: invite.createdBy, createdAt: now });
    await tx.access.setGrant(invite.vaultId, agent.id, invite.role, now);
    const session = await mintAgentSession(tx, agent.id, invite.agentTokenTtlMs, now, client);
    const vaults = await tx.access.grantsOfAgent(agent.id);
    return { agent, session, vaults };
  });
  return {
    token: result.session.token.reveal(), // reveal: the agent's token, returned once to the redeemer
    agent: { name: result.agent.name, role: result.agent.role, instance_role: result.agent.role },
    broker_url: d.publicUrl,
    proxy_url: `${d.publicUrl}/proxy`,
    https_proxy: d.proxyUrl,
    vaults: result.vaults.map((v) => ({ name: v.vaultName, role: v.role })),
    expires_at: result.session.row.expiresAt === null ? null : iso(result.session.row.expiresAt),
  };
}

/** Vault names the principal administers (owner: all). */
async function administeredVaults(d: Domain, p: Principal): Promise<Set<number> | "all"> {
  if (p.kind === "user" && p.instanceRole === "owner") return "all";
  if (p.kind === "scoped") return new Set();
  const out = new Set<number>();
  for (const v of await d.store.vaults.list()) if ((await roleIn(d.store, p, v)) === "admin") out.add(v.id);
  return out;
}

export interface AgentView {
  name: string;
  role: AgentRow["role"];
  created_at: string;
  /** Every vault the agent holds a role in, with that role. */
  vaults: { name: string; role: VaultRole }[];
  /** Its active sessions. */
  sessions: number;
}

/** Which agents `p` lists: the owner every one; a person or an agent those granted in a vault it administers; a scoped session none. */
function agentScopeOf(p: Principal): AgentScope | undefined {
  if (p.kind === "user") return p.instanceRole === "owner" ? { kind: "all" } : { kind: "administered_by_user", userId: p.userId };
  if (p.kind === "agent") return { kind: "administered_by_agent", agentId: p.agentId };
  return undefined;
}

/** A page of the agents in the vaults `p` administers (the owner: all), in name order after `after`. */
export async function listAgents(d: Domain, p: Principal, q: { limit: number; after?: string }): Promise<{ agents: AgentView[]; next_cursor: string | null }> {
  checkPageLimit(q.limit);
  const scope = agentScopeOf(p);
  if (!scope) return { agents: [], next_cursor: null };
  return viewAgentPage(d, await d.store.agents.page(scope, q.after ?? "", q.limit + 1), q.limit);
}

/** A page of the agents holding a role in the open vault, for its admins (the console's Agents page). */
export async function listVaultAgents(d: Domain, open: OpenVault, q: { limit: number; after?: string }) {
  requireInVault(open, "manage");
  checkPageLimit(q.limit);
  return viewAgentPage(d, await d.store.agents.page({ kind: "granted_in", vaultId: open.vault.id }, q.after ?? "", q.limit + 1), q.limit);
}

/** One agent holding a role in the open vault, for its admins (the console's agent page); any other name is not found. */
export async function viewVaultAgent(d: Domain, open: OpenVault, name: string): Promise<AgentView> {
  requireInVault(open, "manage");
  const agent = await d.store.agents.byName(name);
  const granted = agent && (await d.store.access.grantsOfAgent(agent.id)).some((g) => g.vaultId === open.vault.id);
  if (!agent || !granted) throw new NotFound(`vault ${open.vault.name} has no agent named ${name}`);
  const [view] = (await viewAgentPage(d, [agent], 1)).agents;
  return view!;
}

/** The page's agents with their grants and session counts, each read for the whole page in one statement (by the page's name range). */
async function viewAgentPage(d: Domain, rows: AgentRow[], limit: number): Promise<{ agents: AgentView[]; next_cursor: string | null }> {
  const page = cutPage(rows, limit, (a) => a.name);
  const first = page.rows[0]?.name;
  const last = page.rows.at(-1)?.name;
  if (first === undefined || last === undefined) return { agents: [], next_cursor: page.next_cursor };
  const grants = new Map<number, { name: string; role: VaultRole }[]>();
  for (const g of await d.store.access.grantsOfAgentsNamed(first, last)) {
    grants.set(g.agentId, [...(grants.get(g.agentId) ?? []), { name: g.vaultName, role: g.role }]);
  }
  const sessions = await d.store.sessions.countActiveForAgentsNamed(first, last, d.now());
  const agents = page.rows.map((a) => ({
    name: a.name,
    role: a.role,
    created_at: iso(a.createdAt),
    vaults: grants.get(a.id) ?? [],
    sessions: sessions.get(a.id) ?? 0,
  }));
  return { agents, next_cursor: page.next_cursor };
}

export async function revokeAgent(d: Domain, p: Principal, name: string): Promise<void> {
  const agent = await d.store.agents.byName(name);
  if (!agent) throw new NotFound("no such agent");
  const admin = await administeredVaults(d, p);
  if (admin !== "all") {
    const grants = await d.store.access.grantsOfAgent(agent.id);
    // Someone who administers none of the agent's vaults learns nothing, not even that it exists.
    if (!grants.some((g) => admin.has(g.vaultId))) throw new NotFound("no such agent");
    if (!grants.every((g) => admin.has(g.vaultId))) {
      throw new PermissionDenied("revoking an agent needs admin on every vault it can use (or the instance owner)");
    }
  }
  await d.store.agents.remove(agent.id); // cascades to its grants and every session it holds or minted
  d.auth.forget();
}
