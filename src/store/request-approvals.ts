// Held requests awaiting (or given) a human's approval, one row per exact request. The row holds the
// request's description for the person deciding (credentials left out, echoes redacted) and its
// fingerprint, never its credential or whole body. State changes are guarded by the current state
// in the WHERE clause, so two approvals, or two uses of one approval, cannot both apply.

import type { Sql } from "./db.ts";
import { assertList, fail, isText, parseStoredJson } from "./stored-json.ts";

export type RequestApprovalState = "pending" | "approved" | "denied" | "used" | "expired";

export interface RequestApprovalRow {
  id: number;
  publicId: string;
  vaultId: number;
  /** Who sent the request (`agent:3`, `user:1`): only the same principal's retry can use the approval. */
  principal: string;
  /** Sent by a `vault run` session of `principal`. */
  viaSession: boolean;
  /** SHA-256 over the method, URL, body and the headers that count (egress/held-request.ts). */
  fingerprint: string;
  state: RequestApprovalState;
  method: string;
  /** host, or host:port when the port is not 443. */
  host: string;
  /** Path and query as they would be forwarded (redacted); the path alone when the description is sealed. */
  target: string;
  service: string;
  /** [[name, value], …]: the request's headers without credentials, values redacted ([] when sealed). Stored as JSON text, checked when read. */
  headers: readonly (readonly [string, string])[];
  /** The body's start as text (redacted), or null for no body or one that is not text (null when sealed). */
  bodyPreview: string | null;
  /** The full target, headers and body preview sealed with the data key (workflows/held-description.ts); null in rows from before. */
  sealedNonce: Uint8Array | null;
  sealedDescription: Uint8Array | null; // sealed: never log
  bodyBytes: number;
  bodySha256: string;
  createdAt: number;
  expiresAt: number;
  decidedAt: number | null;
  decidedBy: number | null;
  usedAt: number | null;
}

/** The row as the database holds it: headers as JSON text. */
type StoredRequestApprovalRow = Omit<RequestApprovalRow, "headers"> & { headers: string };

const COLUMNS = `id, public_id AS "publicId", vault_id AS "vaultId", principal, fingerprint, state, method, host, target, service, headers,
  body_preview AS "bodyPreview", body_bytes AS "bodyBytes", body_sha256 AS "bodySha256", created_at AS "createdAt", expires_at AS "expiresAt",
  decided_at AS "decidedAt", decided_by AS "decidedBy", used_at AS "usedAt", sealed_nonce AS "sealedNonce", sealed_description AS "sealedDescription", via_session AS "viaSession"`;

/** Where a page of the list ends: in the part awaiting a decision or in the rest, after the row with this id. */
export interface HeldCursor {
  readonly part: "awaiting" | "rest";
  readonly id: number;
}

/** At or above every id (ids stay below 2^53, read as numbers). */
const NO_UPPER_ID = Number.MAX_SAFE_INTEGER;
const HELD = `SELECT ${COLUMNS} FROM request_approvals WHERE vault_id = ?`;
const MINE = "AND principal = ?";
// Awaiting: a range of (vault_id, state, id), or of (vault_id, principal, id) for one principal's (migration 21).
const AWAITING = "AND state = 'pending' AND expires_at > ? AND id > ? ORDER BY id LIMIT ?";
// The rest, newest first: a range of (vault_id, id) as BETWEEN (see audit.ts), skipping the few awaiting rows.
const REST = "AND id BETWEEN 1 AND ? AND (state <> 'pending' OR expires_at <= ?) ORDER BY id DESC LIMIT ?";
/** Each part's statement for the vault's rows [0] and for one principal's [1]. */
const PART_SQL: Record<HeldCursor["part"], readonly string[]> = {
  awaiting: [`${HELD} ${AWAITING}`, `${HELD} ${MINE} ${AWAITING}`],
  rest: [`${HELD} ${REST}`, `${HELD} ${MINE} ${REST}`],
};

export function requestApprovalRepo(sql: Sql) {
  return {
    async create(r: Omit<RequestApprovalRow, "id" | "state" | "decidedAt" | "decidedBy" | "usedAt">): Promise<RequestApprovalRow> {
      const row = await sql.get<StoredRequestApprovalRow>(
        `INSERT INTO request_approvals (public_id, vault_id, principal, fingerprint, state, method, host, target, service, headers, body_preview, body_bytes, body_sha256, created_at, expires_at, sealed_nonce, sealed_description, via_session)
         VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
        [
          r.publicId,
          r.vaultId,
          r.principal,
          r.fingerprint,
          r.method,
          r.host,
          r.target,
          r.service,
          JSON.stringify(r.headers),
          r.bodyPreview,
          r.bodyBytes,
          r.bodySha256,
          r.createdAt,
          r.expiresAt,
          r.sealedNonce,
          r.sealedDescription,
          r.viaSession ? 1 : 0,
        ],
      );
      return normalise(row!);
    },
    async byPublicId(publicId: string): Promise<RequestApprovalRow | undefined> {
      const row = await sql.get<StoredRequestApprovalRow>(`SELECT ${COLUMNS} FROM request_approvals WHERE public_id = ?`, [publicId]);
      return row && normalise(row);
    },
    /** The newest approval of this exact request by this principal. */
    async latest(vaultId: number, principal: string, fingerprint: string): Promise<RequestApprovalRow | undefined> {
      const row = await sql.get<StoredRequestApprovalRow>(
        `SELECT ${COLUMNS} FROM request_approvals WHERE vault_id = ? AND principal = ? AND fingerprint = ? ORDER BY id DESC LIMIT 1`,
        [vaultId, principal, fingerprint],
      );
      return row && normalise(row);
    },
    /**
     * Up to `limit` held requests in list order after `after` (absent: from the start), only `principal`'s
     * when given: awaiting a decision first, oldest of them first; then the rest, newest first. Each part
     * is its own index range (PART_SQL), read only as far as the page needs.
     */
    async list(vaultId: number, now: number, limit: number, after?: HeldCursor, principal?: string): Promise<RequestApprovalRow[]> {
      const mine = principal === undefined ? 0 : 1;
      const pick = (part: HeldCursor["part"]) => PART_SQL[part][mine]!;
      const who = principal === undefined ? [] : [principal];
      const rows: StoredRequestApprovalRow[] = [];
      if (after === undefined || after.part === "awaiting") {
        rows.push(...(await sql.all<StoredRequestApprovalRow>(pick("awaiting"), [vaultId, ...who, now, after?.id ?? 0, limit])));
      }
      if (rows.length < limit) {
        const before = after?.part === "rest" ? after.id - 1 : NO_UPPER_ID;
        rows.push(...(await sql.all<StoredRequestApprovalRow>(pick("rest"), [vaultId, ...who, before, now, limit - rows.length])));
      }
      return rows.map(normalise);
    },
    /** Pending, unexpired approvals in the vault, and of them those `principal` asked for. */
    async countPending(vaultId: number, now: number, principal = ""): Promise<{ vault: number; principal: number }> {
      const row = await sql.get<{ n: number; mine: number }>(
        "SELECT COUNT(*) AS n, COALESCE(SUM(CASE WHEN principal = ? THEN 1 ELSE 0 END), 0) AS mine FROM request_approvals WHERE vault_id = ? AND state = 'pending' AND expires_at > ?",
        [principal, vaultId, now],
      );
      return { vault: Number(row?.n ?? 0), principal: Number(row?.mine ?? 0) };
    },
    /** A human's decision on a pending, unexpired approval; false when it was no longer that. */
    async decide(id: number, state: "approved" | "denied", userId: number, at: number): Promise<boolean> {
      return (
        (await sql.run("UPDATE request_approvals SET state = ?, decided_at = ?, decided_by = ? WHERE id = ? AND state = 'pending' AND expires_at > ?", [
          state,
          at,
          userId,
          id,
          at,
        ])) === 1
      );
    },
    /** Spends an approved, unexpired approval on one request; false when another request already did (or it expired). */
    async use(id: number, at: number): Promise<boolean> {
      return (
        (await sql.run("UPDATE request_approvals SET state = 'used', used_at = ? WHERE id = ? AND state = 'approved' AND expires_at > ?", [at, id, at])) === 1
      );
    },
    /** Records that an approval ran out undecided or unused (once told to the agent); false when it had changed. */
    async expire(id: number, at: number): Promise<boolean> {
      return (
        (await sql.run("UPDATE request_approvals SET state = 'expired' WHERE id = ? AND state IN ('pending', 'approved') AND expires_at <= ?", [id, at])) === 1
      );
    },
    /** Removes approvals that ended before `before` (their descriptions are not kept for ever). */
    async prune(before: number): Promise<number> {
      return sql.run("DELETE FROM request_approvals WHERE expires_at < ?", [before]);
    },
  };
}

export type RequestApprovalRepo = ReturnType<typeof requestApprovalRepo>;

function normalise(r: StoredRequestApprovalRow): RequestApprovalRow {
  const n = (v: number | null) => (v === null ? null : Number(v));
  const id = Number(r.id);
  return {
    ...r,
    id,
    headers: parseStoredJson("request_approvals", id, "headers", r.headers, assertHeaders),
    vaultId: Number(r.vaultId),
    bodyBytes: Number(r.bodyBytes),
    viaSession: Boolean(Number(r.viaSession)),
    sealedNonce: r.sealedNonce === null ? null : new Uint8Array(r.sealedNonce),
    sealedDescription: r.sealedDescription === null ? null : new Uint8Array(r.sealedDescription),
    createdAt: Number(r.createdAt),
    expiresAt: Number(r.expiresAt),
    decidedAt: n(r.decidedAt),
    decidedBy: n(r.decidedBy),
    usedAt: n(r.usedAt),
  };
}

/** The headers column: a list of [name, value] pairs of text (see stored-json.ts). */
function assertHeaders(v: unknown, at: string): asserts v is [string, string][] {
  assertList(v, at);
  v.forEach((h, i) => {
    if (!Array.isArray(h) || h.length !== 2 || !isText(h[0]) || !isText(h[1])) fail(`${at}[${i}]`, "must be a [name, value] pair of text");
  });
}
