// Session rows for every bearer token that authenticates a principal. Only the token's SHA-256
// is stored; `public_id` is what listings and revocation use, so a token never has to be shown again.
// user_id / agent_id name the human or agent a session belongs to (for scoped sessions: who minted it).
// channel, client_agent and client_address say where it was made, for its owner's list; never a token.

import type { Sql } from "./db.ts";

export type SessionKind = "user" | "scoped" | "agent";

/** How a session was made: a page's form, the JSON API, an identity provider in the browser, or one for the CLI. */
export type SessionChannel = "form" | "api" | "oidc" | "oidc_cli";

/** The columns saying where a session came from (null in rows made before migration 18). */
export interface SessionOrigin {
  channel: SessionChannel | null;
  /** The creating client's User-Agent header, cut to CLIENT_AGENT_MAX characters. */
  clientAgent: string | null;
  /** The creating client's address (the peer, or the trusted proxy's X-Forwarded-For). */
  clientAddress: string | null;
}

export const CLIENT_AGENT_MAX = 256;
const CLIENT_ADDRESS_MAX = 64;

export interface SessionRow extends SessionOrigin {
  id: number;
  publicId: string;
  tokenHash: string;
  kind: SessionKind;
  userId: number | null;
  agentId: number | null;
  vaultId: number | null;
  role: string | null;
  createdAt: number;
  expiresAt: number | null;
  lastSeenAt: number;
  revokedAt: number | null;
  /** Minted by `vault run --contain` (the minter's statement): every request on it is marked in the audit log. */
  contained: boolean;
  /** For a session a workload's token was exchanged for (migration 30): the token's `sub`; else null or absent. */
  workloadSubject?: string | null;
  /** Beside it, the token's `iss` (migration 31; null on sessions exchanged before it). */
  workloadIssuer?: string | null;
}

/** One workload seen in a vault: an issuer and subject whose token some session was exchanged for. */
export interface WorkloadSeenRow {
  readonly agentId: number;
  readonly issuer: string | null;
  readonly subject: string;
  readonly sessions: number;
  readonly active: number;
  readonly firstAt: number;
  readonly lastAt: number;
  readonly lastSeenAt: number;
}

const COLUMNS = `id, public_id AS "publicId", token_hash AS "tokenHash", kind, user_id AS "userId", agent_id AS "agentId", vault_id AS "vaultId",
  role, created_at AS "createdAt", expires_at AS "expiresAt", last_seen_at AS "lastSeenAt", revoked_at AS "revokedAt", contained,
  channel, client_agent AS "clientAgent", client_address AS "clientAddress", workload_subject AS "workloadSubject",
  workload_issuer AS "workloadIssuer"`;

const ACTIVE = "revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)";

/** Who minted a scoped session: a person or an agent. */
export type SessionMinter = { readonly userId: number } | { readonly agentId: number };

// A page is a range of (user_id, id), (vault_id, id) or (agent_id, id) (migration 21) after the cursor,
// in id (creation) order, stopped at LIMIT; revoked and expired rows in the range are skipped until pruned.
const USER_PAGE = `SELECT ${COLUMNS} FROM sessions WHERE user_id = ? AND id > ? AND ${ACTIVE} ORDER BY id LIMIT ?`;
const SCOPED = `SELECT ${COLUMNS} FROM sessions WHERE vault_id = ? AND kind = 'scoped' AND id > ? AND ${ACTIVE}`;
const SCOPED_PAGE = {
  all: `${SCOPED} ORDER BY id LIMIT ?`,
  user: `${SCOPED} AND user_id = ? ORDER BY id LIMIT ?`,
  agent: `${SCOPED} AND agent_id = ? ORDER BY id LIMIT ?`,
};

export function sessionRepo(sql: Sql) {
  return {
    async create(
      s: Omit<SessionRow, "id" | "revokedAt" | "contained" | keyof SessionOrigin> & { contained?: boolean } & Partial<SessionOrigin>,
    ): Promise<SessionRow> {
      const row = await sql.get<SessionRow>(
        `INSERT INTO sessions (public_id, token_hash, kind, user_id, agent_id, vault_id, role, created_at, expires_at, last_seen_at, contained, channel, client_agent, client_address, workload_subject, workload_issuer)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
        [
          s.publicId,
          s.tokenHash,
          s.kind,
          s.userId,
          s.agentId,
          s.vaultId,
          s.role,
          s.createdAt,
          s.expiresAt,
          s.lastSeenAt,
          s.contained ? 1 : 0,
          s.channel ?? null,
          cut(s.clientAgent, CLIENT_AGENT_MAX),
          cut(s.clientAddress, CLIENT_ADDRESS_MAX),
          s.workloadSubject ?? null,
          s.workloadIssuer ?? null,
        ],
      );
      return normalise(row!);
    },
    async byTokenHash(hash: string): Promise<SessionRow | undefined> {
      const row = await sql.get<SessionRow>(`SELECT ${COLUMNS} FROM sessions WHERE token_hash = ?`, [hash]);
      return row && normalise(row);
    },
    async byPublicId(publicId: string): Promise<SessionRow | undefined> {
      const row = await sql.get<SessionRow>(`SELECT ${COLUMNS} FROM sessions WHERE public_id = ?`, [publicId]);
      return row && normalise(row);
    },
    /** The user's active sessions (and scoped ones they minted) in creation order, after id `after` (0 for the first page). */
    async activeForUser(userId: number, now: number, after: number, limit: number): Promise<SessionRow[]> {
      return (await sql.all<SessionRow>(USER_PAGE, [userId, after, now, limit])).map(normalise);
    },
    /** The vault's active scoped sessions in creation order after id `after`: all of them, or those one user or agent minted. */
    async activeScopedForVault(vaultId: number, now: number, after: number, limit: number, mintedBy?: SessionMinter): Promise<SessionRow[]> {
      const rows =
        mintedBy === undefined
          ? await sql.all<SessionRow>(SCOPED_PAGE.all, [vaultId, after, now, limit])
          : "userId" in mintedBy
            ? await sql.all<SessionRow>(SCOPED_PAGE.user, [vaultId, after, now, mintedBy.userId, limit])
            : await sql.all<SessionRow>(SCOPED_PAGE.agent, [vaultId, after, now, mintedBy.agentId, limit]);
      return rows.map(normalise);
    },
    async countActiveForAgent(agentId: number, now: number): Promise<number> {
      const row = await sql.get<{ n: number }>(`SELECT COUNT(*) AS n FROM sessions WHERE agent_id = ? AND ${ACTIVE}`, [agentId, now]);
      return Number(row?.n ?? 0);
    },
    /** Active sessions of each agent named `first` to `last` (a page of agents) that has any, by agent id, in one statement. */
    async countActiveForAgentsNamed(first: string, last: string, now: number): Promise<Map<number, number>> {
      const rows = await sql.all<{ agentId: number; n: number }>(
        `SELECT s.agent_id AS "agentId", COUNT(*) AS n FROM agents a JOIN sessions s ON s.agent_id = a.id
         WHERE a.name BETWEEN ? AND ? AND s.revoked_at IS NULL AND (s.expires_at IS NULL OR s.expires_at > ?) GROUP BY s.agent_id`,
        [first, last, now],
      );
      return new Map(rows.map((r) => [Number(r.agentId), Number(r.n)]));
    },
    async touch(id: number, at: number): Promise<void> {
      await sql.run("UPDATE sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?", [at, id, at]);
    },
    /**
     * Moves a live workload session's expiry later (never earlier) when the same workload exchanged a fresh platform
     * token; false when it is not that workload's live session. The same workload: the binding's agent, and the `sub`
     * under the `iss` the session names (an issuer changed in place keeps its agent, so the agent alone would let a
     * subject of its new `iss` carry on a session every audit record of which names the old one).
     */
    async renewWorkload(id: number, w: { agentId: number; issuer: string; subject: string; expiresAt: number }, now: number): Promise<boolean> {
      const changed = await sql.run(
        `UPDATE sessions SET expires_at = ? WHERE id = ? AND agent_id = ? AND workload_issuer = ? AND workload_subject = ? AND revoked_at IS NULL
           AND expires_at > ? AND expires_at < ?`,
        [w.expiresAt, id, w.agentId, w.issuer, w.subject, now, w.expiresAt],
      );
      if (changed > 0) return true;
      // Already as late as asked: still this workload's live session.
      const row = await sql.get<{ id: number }>(
        "SELECT id FROM sessions WHERE id = ? AND agent_id = ? AND workload_issuer = ? AND workload_subject = ? AND revoked_at IS NULL AND expires_at > ?",
        [id, w.agentId, w.issuer, w.subject, now],
      );
      return row !== undefined;
    },
    async revoke(id: number, at: number): Promise<boolean> {
      return (await sql.run("UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", [at, id])) === 1;
    },
    /** Ends every session of a user, scoped sessions they minted included; returns the revoked token hashes. */
    async revokeAllForUser(userId: number, at: number): Promise<string[]> {
      const rows = await sql.all<{ tokenHash: string }>(`SELECT token_hash AS "tokenHash" FROM sessions WHERE user_id = ? AND revoked_at IS NULL`, [userId]);
      await sql.run("UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL", [at, userId]);
      return rows.map((r) => r.tokenHash);
    },
    /**
     * The workloads whose tokens were exchanged for sessions of this vault, while those sessions are kept (30 days
     * after they end): one row per agent, issuer and subject, most recently exchanged first.
     */
    async workloadsSeen(vaultId: number, now: number, limit: number): Promise<WorkloadSeenRow[]> {
      const rows = await sql.all<Record<keyof WorkloadSeenRow, number | string | null>>(
        `SELECT agent_id AS "agentId", workload_issuer AS "issuer", workload_subject AS "subject", COUNT(*) AS "sessions",
           SUM(CASE WHEN ${ACTIVE} THEN 1 ELSE 0 END) AS "active", MIN(created_at) AS "firstAt", MAX(created_at) AS "lastAt",
           MAX(last_seen_at) AS "lastSeenAt"
         FROM sessions WHERE vault_id = ? AND kind = 'scoped' AND workload_subject IS NOT NULL AND agent_id IS NOT NULL
         GROUP BY agent_id, workload_issuer, workload_subject ORDER BY MAX(created_at) DESC LIMIT ?`,
        [now, vaultId, limit],
      );
      return rows.map((r) => ({
        agentId: Number(r.agentId),
        issuer: r.issuer === null ? null : String(r.issuer),
        subject: String(r.subject),
        sessions: Number(r.sessions),
        active: Number(r.active),
        firstAt: Number(r.firstAt),
        lastAt: Number(r.lastAt),
        lastSeenAt: Number(r.lastSeenAt),
      }));
    },
    /** Removes sessions long past expiry or revocation, so the table does not grow without bound. */
    async prune(before: number): Promise<number> {
      return sql.run("DELETE FROM sessions WHERE (revoked_at IS NOT NULL AND revoked_at < ?) OR (expires_at IS NOT NULL AND expires_at < ?)", [before, before]);
    },
  };
}

export type SessionRepo = ReturnType<typeof sessionRepo>;

function normalise(r: SessionRow): SessionRow {
  const n = (v: number | null) => (v === null ? null : Number(v));
  return {
    ...r,
    id: Number(r.id),
    userId: n(r.userId),
    agentId: n(r.agentId),
    vaultId: n(r.vaultId),
    createdAt: Number(r.createdAt),
    expiresAt: n(r.expiresAt),
    lastSeenAt: Number(r.lastSeenAt),
    revokedAt: n(r.revokedAt),
    contained: Number(r.contained) === 1,
    channel: r.channel ?? null,
    clientAgent: r.clientAgent ?? null,
    clientAddress: r.clientAddress ?? null,
    workloadSubject: r.workloadSubject ?? null,
    workloadIssuer: r.workloadIssuer ?? null,
  };
}

/** An empty value is no value; a long one is cut (a header is the client's to choose, the column is ours). */
function cut(v: string | null | undefined, max: number): string | null {
  return v ? v.slice(0, max) : null;
}
