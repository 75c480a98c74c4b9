// Agent rows: instance-level identities for software agents. Deleting one cascades to its
// grants and sessions.

import type { Sql } from "./db.ts";
import type { InstanceRole } from "./users.ts";

export interface AgentRow {
  id: number;
  name: string;
  role: InstanceRole;
  createdBy: number | null;
  createdAt: number;
}

const COLUMNS = `id, name, role, created_by AS "createdBy", created_at AS "createdAt"`;

/** Whose agents a page lists: every one (the owner), those granted in a vault someone administers, or in one vault. */
export type AgentScope =
  | { readonly kind: "all" }
  | { readonly kind: "administered_by_user"; readonly userId: number }
  | { readonly kind: "administered_by_agent"; readonly agentId: number }
  | { readonly kind: "granted_in"; readonly vaultId: number };

// A page is a range of the UNIQUE (name) index after the cursor, stopped at LIMIT; each scope is its own
// fixed statement, its condition one primary-key probe of agent_grants (and vault_members) per agent read.
const ORDER = "ORDER BY a.name LIMIT ?";
const PAGE_SQL: Record<AgentScope["kind"], string> = {
  all: `SELECT ${COLUMNS} FROM agents a WHERE a.name > ? ${ORDER}`,
  administered_by_user: `SELECT ${COLUMNS} FROM agents a WHERE a.name > ? AND EXISTS (SELECT 1 FROM agent_grants g JOIN vault_members m ON m.vault_id = g.vault_id
    WHERE g.agent_id = a.id AND m.user_id = ? AND m.role = 'admin') ${ORDER}`,
  administered_by_agent: `SELECT ${COLUMNS} FROM agents a WHERE a.name > ? AND EXISTS (SELECT 1 FROM agent_grants g JOIN agent_grants mine ON mine.vault_id = g.vault_id
    WHERE g.agent_id = a.id AND mine.agent_id = ? AND mine.role = 'admin') ${ORDER}`,
  granted_in: `SELECT ${COLUMNS} FROM agents a WHERE a.name > ? AND EXISTS (SELECT 1 FROM agent_grants g WHERE g.agent_id = a.id AND g.vault_id = ?) ${ORDER}`,
};

function scopeParam(scope: AgentScope): number[] {
  if (scope.kind === "administered_by_user") return [scope.userId];
  if (scope.kind === "administered_by_agent") return [scope.agentId];
  if (scope.kind === "granted_in") return [scope.vaultId];
  return [];
}

export function agentRepo(sql: Sql) {
  return {
    async create(a: Omit<AgentRow, "id">): Promise<AgentRow> {
      const row = await sql.get<AgentRow>(`INSERT INTO agents (name, role, created_by, created_at) VALUES (?, ?, ?, ?) RETURNING ${COLUMNS}`, [
        a.name,
        a.role,
        a.createdBy,
        a.createdAt,
      ]);
      return normalise(row!);
    },
    async byId(id: number): Promise<AgentRow | undefined> {
      const row = await sql.get<AgentRow>(`SELECT ${COLUMNS} FROM agents WHERE id = ?`, [id]);
      return row && normalise(row);
    },
    async byName(name: string): Promise<AgentRow | undefined> {
      const row = await sql.get<AgentRow>(`SELECT ${COLUMNS} FROM agents WHERE name = ?`, [name]);
      return row && normalise(row);
    },
    /** Agents of `scope` in name order after `after` ("" for the first page). */
    async page(scope: AgentScope, after: string, limit: number): Promise<AgentRow[]> {
      return (await sql.all<AgentRow>(PAGE_SQL[scope.kind], [after, ...scopeParam(scope), limit])).map(normalise);
    },
    async remove(id: number): Promise<boolean> {
      return (await sql.run("DELETE FROM agents WHERE id = ?", [id])) === 1;
    },
  };
}

export type AgentRepo = ReturnType<typeof agentRepo>;

function normalise(r: AgentRow): AgentRow {
  return { ...r, id: Number(r.id), createdBy: r.createdBy === null ? null : Number(r.createdBy), createdAt: Number(r.createdAt) };
}
