// How much a vault holds and how much in it waits for a person, counted by the database (COUNT over
// indexed columns: no row is read into memory). For the console's overview and its pending badges.

import type { Sql } from "./db.ts";

export interface VaultCounts {
  credentials: number;
  services: number;
  agents: number;
  members: number;
  /** Proposals still pending (as the proposals list shows them). */
  proposals: number;
  /** Held requests pending and not yet expired. */
  requests: number;
}

/** Pending proposals and held requests of one vault, by its name. */
export interface PendingCounts {
  proposals: number;
  requests: number;
}

export function vaultCountRepo(sql: Sql) {
  return {
    /** Everything the overview counts, in one statement. */
    async of(vaultId: number, now: number): Promise<VaultCounts> {
      const row = await sql.get<Record<keyof VaultCounts, number | string>>(
        `SELECT
           (SELECT COUNT(*) FROM credentials WHERE vault_id = ?) AS credentials,
           (SELECT COUNT(*) FROM services WHERE vault_id = ?) AS services,
           (SELECT COUNT(*) FROM agent_grants WHERE vault_id = ?) AS agents,
           (SELECT COUNT(*) FROM vault_members WHERE vault_id = ?) AS members,
           (SELECT COUNT(*) FROM proposals WHERE vault_id = ? AND status = 'pending') AS proposals,
           (SELECT COUNT(*) FROM request_approvals WHERE vault_id = ? AND state = 'pending' AND expires_at > ?) AS requests`,
        [vaultId, vaultId, vaultId, vaultId, vaultId, vaultId, now],
      );
      return {
        credentials: Number(row?.credentials ?? 0),
        services: Number(row?.services ?? 0),
        agents: Number(row?.agents ?? 0),
        members: Number(row?.members ?? 0),
        proposals: Number(row?.proposals ?? 0),
        requests: Number(row?.requests ?? 0),
      };
    },
    /**
     * Pending proposals and held requests of every vault that has any, by vault name: one grouped
     * statement for a whole list of vaults (vaults with nothing pending are absent).
     */
    async pendingByVault(now: number): Promise<Map<string, PendingCounts>> {
      const rows = await sql.all<{ name: string; kind: string; n: number | string }>(
        `SELECT v.name, 'proposals' AS kind, COUNT(*) AS n FROM proposals p JOIN vaults v ON v.id = p.vault_id
           WHERE p.status = 'pending' GROUP BY v.name
         UNION ALL
         SELECT v.name, 'requests' AS kind, COUNT(*) AS n FROM request_approvals r JOIN vaults v ON v.id = r.vault_id
           WHERE r.state = 'pending' AND r.expires_at > ? GROUP BY v.name`,
        [now],
      );
      const out = new Map<string, PendingCounts>();
      for (const r of rows) {
        const entry = out.get(r.name) ?? { proposals: 0, requests: 0 };
        if (r.kind === "proposals") entry.proposals = Number(r.n);
        else entry.requests = Number(r.n);
        out.set(r.name, entry);
      }
      return out;
    },
  };
}

export type VaultCountRepo = ReturnType<typeof vaultCountRepo>;
