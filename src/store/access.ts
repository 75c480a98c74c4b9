// Who may use which vault: human memberships (vault_members) and agent grants (agent_grants).

import type { Sql } from "./db.ts";

export type VaultRole = "admin" | "member" | "proxy";

export interface AccessRow {
  vaultId: number;
  vaultName: string;
  role: VaultRole;
}

export interface MemberRow {
  userId: number;
  email: string;
  role: VaultRole;
}

export interface GrantRow {
  agentId: number;
  agentName: string;
  vaultId: number;
  vaultName: string;
  role: VaultRole;
}

export function accessRepo(sql: Sql) {
  return {
    async memberRole(vaultId: number, userId: number): Promise<VaultRole | undefined> {
      return (await sql.get<{ role: VaultRole }>("SELECT role FROM vault_members WHERE vault_id = ? AND user_id = ?", [vaultId, userId]))?.role;
    },
    async setMember(vaultId: number, userId: number, role: VaultRole, now: number): Promise<void> {
      await sql.run(
        `INSERT INTO vault_members (vault_id, user_id, role, created_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (vault_id, user_id) DO UPDATE SET role = excluded.role`,
        [vaultId, userId, role, now],
      );
    },
    async members(vaultId: number): Promise<MemberRow[]> {
      const rows = await sql.all<MemberRow>(
        `SELECT m.user_id AS "userId", u.email, m.role FROM vault_members m JOIN users u ON u.id = m.user_id WHERE m.vault_id = ? ORDER BY u.email`,
        [vaultId],
      );
      return rows.map((r) => ({ ...r, userId: Number(r.userId) }));
    },
    async vaultsOfUser(userId: number): Promise<AccessRow[]> {
      const rows = await sql.all<AccessRow>(
        `SELECT v.id AS "vaultId", v.name AS "vaultName", m.role FROM vault_members m JOIN vaults v ON v.id = m.vault_id WHERE m.user_id = ? ORDER BY v.name`,
        [userId],
      );
      return rows.map((r) => ({ ...r, vaultId: Number(r.vaultId) }));
    },
    async grantRole(vaultId: number, agentId: number): Promise<VaultRole | undefined> {
      return (await sql.get<{ role: VaultRole }>("SELECT role FROM agent_grants WHERE vault_id = ? AND agent_id = ?", [vaultId, agentId]))?.role;
    },
    async setGrant(vaultId: number, agentId: number, role: VaultRole, now: number): Promise<void> {
      await sql.run(
        `INSERT INTO agent_grants (agent_id, vault_id, role, created_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (agent_id, vault_id) DO UPDATE SET role = excluded.role`,
        [agentId, vaultId, role, now],
      );
    },
    async grantsOfAgent(agentId: number): Promise<AccessRow[]> {
      const rows = await sql.all<AccessRow>(
        `SELECT v.id AS "vaultId", v.name AS "vaultName", g.role FROM agent_grants g JOIN vaults v ON v.id = g.vault_id WHERE g.agent_id = ? ORDER BY v.name`,
        [agentId],
      );
      return rows.map((r) => ({ ...r, vaultId: Number(r.vaultId) }));
    },
    /** The grants of the agents named `first` to `last` (a page of agents), in agent then vault name order, in one statement. */
    async grantsOfAgentsNamed(first: string, last: string): Promise<GrantRow[]> {
      const rows = await sql.all<GrantRow>(
        `SELECT g.agent_id AS "agentId", a.name AS "agentName", g.vault_id AS "vaultId", v.name AS "vaultName", g.role
         FROM agents a JOIN agent_grants g ON g.agent_id = a.id JOIN vaults v ON v.id = g.vault_id WHERE a.name BETWEEN ? AND ? ORDER BY a.name, v.name`,
        [first, last],
      );
      return rows.map((r) => ({ ...r, agentId: Number(r.agentId), vaultId: Number(r.vaultId) }));
    },
    /** The agents holding a role in the vault, in name order (a vault kept as code compares them with its file). */
    async grantsInVault(vaultId: number): Promise<GrantRow[]> {
      const rows = await sql.all<GrantRow>(
        `SELECT g.agent_id AS "agentId", a.name AS "agentName", g.vault_id AS "vaultId", v.name AS "vaultName", g.role
         FROM agent_grants g JOIN agents a ON a.id = g.agent_id JOIN vaults v ON v.id = g.vault_id WHERE g.vault_id = ? ORDER BY a.name`,
        [vaultId],
      );
      return rows.map((r) => ({ ...r, agentId: Number(r.agentId), vaultId: Number(r.vaultId) }));
    },
    async removeGrant(vaultId: number, agentId: number): Promise<boolean> {
      return (await sql.run("DELETE FROM agent_grants WHERE vault_id = ? AND agent_id = ?", [vaultId, agentId])) === 1;
    },
    async removeMember(vaultId: number, userId: number): Promise<boolean> {
      return (await sql.run("DELETE FROM vault_members WHERE vault_id = ? AND user_id = ?", [vaultId, userId])) === 1;
    },
    async allGrants(): Promise<GrantRow[]> {
      const rows = await sql.all<GrantRow>(
        `SELECT g.agent_id AS "agentId", a.name AS "agentName", g.vault_id AS "vaultId", v.name AS "vaultName", g.role
         FROM agent_grants g JOIN agents a ON a.id = g.agent_id JOIN vaults v ON v.id = g.vault_id ORDER BY a.name, v.name`,
      );
      return rows.map((r) => ({ ...r, agentId: Number(r.agentId), vaultId: Number(r.vaultId) }));
    },
  };
}

export type AccessRepo = ReturnType<typeof accessRepo>;
