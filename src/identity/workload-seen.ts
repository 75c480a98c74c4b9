// The workloads a vault has seen (issue 39: "the console's Agents page lists workloads seen"): each platform token
// subject whose token some session of the vault was exchanged for, under the binding's agent, while those sessions are
// kept (30 days after they end). Names and times only: a platform token is never stored.

import type { Domain } from "./context.ts";
import type { OpenVault } from "./vaults.ts";
import { iso } from "./users.ts";

export interface WorkloadSeen {
  /** The binding's agent (`wl-<issuer>-<binding>`), or a note once it was removed. */
  readonly agent: string;
  readonly issuer: string | null;
  readonly subject: string;
  readonly sessions: number;
  readonly active_sessions: number;
  readonly first_exchange: string;
  readonly last_exchange: string;
  readonly last_used: string;
}

/** At most this many rows: a busy pipeline has a subject per job only when its platform puts a run id in `sub`. */
const SHOWN = 100;

export async function listWorkloadsSeen(d: Domain, open: OpenVault): Promise<WorkloadSeen[]> {
  const rows = await d.store.sessions.workloadsSeen(open.vault.id, d.now(), SHOWN);
  const names = new Map<number, string>();
  for (const id of new Set(rows.map((r) => r.agentId))) names.set(id, (await d.store.agents.byId(id))?.name ?? `removed agent (agent:${id})`);
  return rows.map((r) => ({
    agent: names.get(r.agentId)!,
    issuer: r.issuer,
    subject: r.subject,
    sessions: r.sessions,
    active_sessions: r.active,
    first_exchange: iso(r.firstAt),
    last_exchange: iso(r.lastAt),
    last_used: iso(r.lastSeenAt),
  }));
}
