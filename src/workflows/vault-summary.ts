// How much a vault holds and what in it waits for a person, counted by the store (no rows read), for
// the console's overview and its pending badges. Each count is given only to a role that may open the
// list it counts (mayInVault), so a count never says more than the page it links to; null otherwise.

import type { Domain, Principal, VaultRole } from "../identity/index.ts";
import { mayInVault, requireInVault, type OpenVault } from "../identity/index.ts";

export interface VaultSummary {
  readonly credentials: number;
  readonly services: number;
  /** Agents with a role in the vault (null: the role does not manage agents). */
  readonly agents: number | null;
  /** Proposals waiting for a decision. */
  readonly pending_proposals: number;
  /** Held requests waiting for a decision (null: the role does not read held requests). */
  readonly held_requests: number | null;
}

/** What is waiting in one vault, as its tabs and the vault list show it. */
export interface PendingSummary {
  readonly pending_proposals: number;
  readonly held_requests: number | null;
}

const readsRequests = (p: Principal, role: VaultRole) => mayInVault(p, role, "read_logs");

export async function summariseVault(d: Domain, open: OpenVault): Promise<VaultSummary> {
  requireInVault(open, "read");
  const n = await d.store.vaultCounts.of(open.vault.id, d.now());
  return {
    credentials: n.credentials,
    services: n.services,
    agents: mayInVault(open.principal, open.role, "manage") ? n.agents : null,
    pending_proposals: n.proposals,
    held_requests: readsRequests(open.principal, open.role) ? n.requests : null,
  };
}

/**
 * What waits in each of `vaults` (the caller's own list, with the role it holds in each): one grouped
 * query for the whole list, however many vaults it names.
 */
export async function pendingInVaults(d: Domain, p: Principal, vaults: readonly { name: string; role: VaultRole }[]): Promise<Map<string, PendingSummary>> {
  const counts = await d.store.vaultCounts.pendingByVault(d.now());
  const out = new Map<string, PendingSummary>();
  for (const v of vaults) {
    const n = counts.get(v.name) ?? { proposals: 0, requests: 0 };
    out.set(v.name, { pending_proposals: n.proposals, held_requests: readsRequests(p, v.role) ? n.requests : null });
  }
  return out;
}
