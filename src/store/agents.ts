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
    async list(): Promise<AgentRow[]> {
      return (await sql.all<AgentRow>(`SELECT ${COLUMNS} FROM agents ORDER BY name`)).map(normalise);
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
