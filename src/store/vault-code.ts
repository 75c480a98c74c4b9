// Whether a vault is kept as code (issue 39, migration 29), and what its file declares beside what the store holds.

import type { Sql } from "./db.ts";
import type { VaultRole } from "./access.ts";

/** What a managed vault's file names that people still do by hand: values for its keys, invites of its principals. */
export interface DeclaredAccess {
  /** Credential keys the file lists without a reference: their values are set with the CLI or the console. */
  readonly values: readonly string[];
  /** Agents by name, with the role the file gives each. */
  readonly agents: Readonly<Record<string, VaultRole>>;
  /** People by email, with the role the file gives each. */
  readonly members: Readonly<Record<string, VaultRole>>;
}

export interface VaultCodeState {
  readonly managed: boolean;
  /** Null when the vault is not managed, or its column could not be read (then nothing is declared: fail closed). */
  readonly declared: DeclaredAccess | null;
}

export function vaultCodeRepo(sql: Sql) {
  return {
    async state(vaultId: number): Promise<VaultCodeState> {
      const row = await sql.get<{ managed: number | boolean; declared: string | null }>("SELECT managed, declared FROM vaults WHERE id = ?", [vaultId]);
      return { managed: Boolean(Number(row?.managed ?? 0)), declared: readDeclared(row?.declared ?? null) };
    },
    async set(vaultId: number, state: VaultCodeState): Promise<void> {
      await sql.run("UPDATE vaults SET managed = ?, declared = ? WHERE id = ?", [
        state.managed ? 1 : 0,
        state.declared === null ? null : JSON.stringify(state.declared),
        vaultId,
      ]);
    },
  };
}

export type VaultCodeRepo = ReturnType<typeof vaultCodeRepo>;

function readDeclared(text: string | null): DeclaredAccess | null {
  if (text === null) return null;
  try {
    const v = JSON.parse(text) as Partial<DeclaredAccess>;
    const roles = (m: unknown): Record<string, VaultRole> =>
      typeof m === "object" && m !== null && !Array.isArray(m)
        ? Object.fromEntries(Object.entries(m).filter((e): e is [string, VaultRole] => ["admin", "member", "proxy"].includes(e[1] as string)))
        : {};
    return { values: Array.isArray(v.values) ? v.values.filter((k) => typeof k === "string") : [], agents: roles(v.agents), members: roles(v.members) };
  } catch {
    return null;
  }
}
