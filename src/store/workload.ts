// Workload identity (migration 30): trusted issuers, their bindings, and the token ids already exchanged.
// Holds configuration and token ids only: never a token.

import type { Sql } from "./db.ts";

export interface WorkloadIssuerRow {
  readonly id: number;
  readonly name: string;
  /** The `iss` a token must carry, exactly. */
  readonly issuer: string;
  /** Where its keys are; null: found by OIDC discovery from `issuer`. */
  readonly jwksUrl: string | null;
  /** Its public keys as a JWKS document (migration 31), instead of `jwksUrl` or discovery; else null. */
  readonly jwks: string | null;
  readonly audiences: readonly string[];
  readonly clockSkewSeconds: number;
  /** Tokens without a `jti` are refused (each token is exchanged at most once). */
  readonly requireJti: boolean;
  readonly createdAt: number;
}

/** A claim path's condition: one pattern or a list of them (any may match). */
export type ClaimCondition = string | readonly string[];

export interface WorkloadBindingRow {
  readonly id: number;
  readonly issuerId: number;
  readonly name: string;
  readonly conditions: Readonly<Record<string, ClaimCondition>>;
  readonly vaultId: number;
  readonly role: string;
  readonly maxSessionSeconds: number;
  /** The agent that stands for this binding's workloads (made with it); null once someone revoked that agent. */
  readonly agentId: number | null;
  readonly createdAt: number;
}

const ISSUER = `id, name, issuer, jwks_url AS "jwksUrl", jwks, audiences, clock_skew_seconds AS "clockSkewSeconds", require_jti AS "requireJti",
  created_at AS "createdAt"`;
const BINDING = `id, issuer_id AS "issuerId", name, conditions, vault_id AS "vaultId", role, max_session_seconds AS "maxSessionSeconds",
  agent_id AS "agentId", created_at AS "createdAt"`;
/** The same columns of `b`, in a join (`RETURNING` names its own table's columns bare, so BINDING stays unqualified). */
const BINDING_B = `b.id, b.issuer_id AS "issuerId", b.name, b.conditions, b.vault_id AS "vaultId", b.role, b.max_session_seconds AS "maxSessionSeconds",
  b.agent_id AS "agentId", b.created_at AS "createdAt"`;

type Stored<T, K extends keyof T> = Omit<T, K> & Record<K, string>;

function readIssuer(r: Stored<WorkloadIssuerRow, "audiences">): WorkloadIssuerRow {
  return {
    ...r,
    id: Number(r.id),
    jwksUrl: r.jwksUrl ?? null,
    jwks: r.jwks ?? null,
    audiences: JSON.parse(r.audiences) as string[],
    clockSkewSeconds: Number(r.clockSkewSeconds),
    requireJti: Number(r.requireJti) === 1,
    createdAt: Number(r.createdAt),
  };
}

function readBinding(r: Stored<WorkloadBindingRow, "conditions">): WorkloadBindingRow {
  return {
    ...r,
    id: Number(r.id),
    issuerId: Number(r.issuerId),
    conditions: JSON.parse(r.conditions) as Record<string, ClaimCondition>,
    vaultId: Number(r.vaultId),
    maxSessionSeconds: Number(r.maxSessionSeconds),
    agentId: r.agentId == null ? null : Number(r.agentId),
    createdAt: Number(r.createdAt),
  };
}

export function workloadRepo(sql: Sql) {
  return {
    async addIssuer(i: Omit<WorkloadIssuerRow, "id">): Promise<WorkloadIssuerRow> {
      const row = await sql.get<Stored<WorkloadIssuerRow, "audiences">>(
        `INSERT INTO workload_issuers (name, issuer, jwks_url, jwks, audiences, clock_skew_seconds, require_jti, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${ISSUER}`,
        [i.name, i.issuer, i.jwksUrl, i.jwks, JSON.stringify(i.audiences), i.clockSkewSeconds, i.requireJti ? 1 : 0, i.createdAt],
      );
      return readIssuer(row!);
    },
    /** Changes an issuer in place: its bindings (and their agents and sessions) stay. */
    async updateIssuer(id: number, i: Omit<WorkloadIssuerRow, "id" | "name" | "createdAt">): Promise<WorkloadIssuerRow | undefined> {
      const row = await sql.get<Stored<WorkloadIssuerRow, "audiences">>(
        `UPDATE workload_issuers SET issuer = ?, jwks_url = ?, jwks = ?, audiences = ?, clock_skew_seconds = ?, require_jti = ? WHERE id = ? RETURNING ${ISSUER}`,
        [i.issuer, i.jwksUrl, i.jwks, JSON.stringify(i.audiences), i.clockSkewSeconds, i.requireJti ? 1 : 0, id],
      );
      return row && readIssuer(row);
    },
    async issuers(): Promise<WorkloadIssuerRow[]> {
      return (await sql.all<Stored<WorkloadIssuerRow, "audiences">>(`SELECT ${ISSUER} FROM workload_issuers ORDER BY name`)).map(readIssuer);
    },
    async issuerByName(name: string): Promise<WorkloadIssuerRow | undefined> {
      const row = await sql.get<Stored<WorkloadIssuerRow, "audiences">>(`SELECT ${ISSUER} FROM workload_issuers WHERE name = ?`, [name]);
      return row && readIssuer(row);
    },
    /** Every issuer whose tokens carry this `iss` (usually one). */
    async issuersFor(iss: string): Promise<WorkloadIssuerRow[]> {
      return (await sql.all<Stored<WorkloadIssuerRow, "audiences">>(`SELECT ${ISSUER} FROM workload_issuers WHERE issuer = ? ORDER BY id`, [iss])).map(
        readIssuer,
      );
    },
    async removeIssuer(id: number): Promise<boolean> {
      return (await sql.run("DELETE FROM workload_issuers WHERE id = ?", [id])) > 0;
    },
    async addBinding(b: Omit<WorkloadBindingRow, "id">): Promise<WorkloadBindingRow> {
      const row = await sql.get<Stored<WorkloadBindingRow, "conditions">>(
        `INSERT INTO workload_bindings (issuer_id, name, conditions, vault_id, role, max_session_seconds, agent_id, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${BINDING}`,
        [b.issuerId, b.name, JSON.stringify(b.conditions), b.vaultId, b.role, b.maxSessionSeconds, b.agentId, b.createdAt],
      );
      return readBinding(row!);
    },
    /** An issuer's bindings in the order they were made: the first that matches a token wins. */
    async bindings(issuerId: number): Promise<WorkloadBindingRow[]> {
      return (
        await sql.all<Stored<WorkloadBindingRow, "conditions">>(`SELECT ${BINDING} FROM workload_bindings WHERE issuer_id = ? ORDER BY id`, [issuerId])
      ).map(readBinding);
    },
    /** Every binding to a vault, with its issuer's name, by issuer and then in the order they are tried. */
    async bindingsOfVault(vaultId: number): Promise<(WorkloadBindingRow & { readonly issuerName: string })[]> {
      const rows = await sql.all<Stored<WorkloadBindingRow, "conditions"> & { issuerName: string }>(
        `SELECT ${BINDING_B}, i.name AS "issuerName" FROM workload_bindings b JOIN workload_issuers i ON i.id = b.issuer_id
         WHERE b.vault_id = ? ORDER BY i.name, b.id`,
        [vaultId],
      );
      return rows.map((r) => ({ ...readBinding(r), issuerName: String(r.issuerName) }));
    },
    /** Changes a binding's conditions, role, session cap or agent in place (vaults as code). */
    async updateBinding(
      id: number,
      b: Pick<WorkloadBindingRow, "conditions" | "role" | "maxSessionSeconds" | "agentId">,
    ): Promise<WorkloadBindingRow | undefined> {
      const row = await sql.get<Stored<WorkloadBindingRow, "conditions">>(
        `UPDATE workload_bindings SET conditions = ?, role = ?, max_session_seconds = ?, agent_id = ? WHERE id = ? RETURNING ${BINDING}`,
        [JSON.stringify(b.conditions), b.role, b.maxSessionSeconds, b.agentId, id],
      );
      return row && readBinding(row);
    },
    async removeBinding(issuerId: number, name: string): Promise<WorkloadBindingRow | undefined> {
      const row = await sql.get<Stored<WorkloadBindingRow, "conditions">>(
        `DELETE FROM workload_bindings WHERE issuer_id = ? AND name = ? RETURNING ${BINDING}`,
        [issuerId, name],
      );
      return row && readBinding(row);
    },
    /**
     * Records a token id of issuer URL `iss` as used until `expiresAt`; false when it is recorded and not yet expired
     * (a replay). Kept per `iss`, not per issuer row (migration 33): removing, re-adding or changing a row forgets
     * nothing. One statement, so two instances exchanging the same token at once cannot both succeed.
     */
    async claimJti(iss: string, jti: string, expiresAt: number, now: number): Promise<boolean> {
      const row = await sql.get<{ jti: string }>(
        `INSERT INTO workload_token_ids (issuer, jti, expires_at) VALUES (?, ?, ?)
         ON CONFLICT (issuer, jti) DO UPDATE SET expires_at = excluded.expires_at WHERE workload_token_ids.expires_at <= ?
         RETURNING jti`,
        [iss, jti, expiresAt, now],
      );
      return row !== undefined;
    },
    async pruneJtis(now: number): Promise<number> {
      return sql.run("DELETE FROM workload_token_ids WHERE expires_at <= ?", [now]);
    },
  };
}
