// Proposal rows. The approval token is kept as its SHA-256 only. Status changes are guarded by
// the current status in the WHERE clause, so two concurrent approvals cannot both apply.

import type { Sql } from "./db.ts";
import type { AuthType } from "./services.ts";
import { assertFields, assertList, assertObject, isText, isTextList, parseStoredJson } from "./stored-json.ts";

export type ProposalStatus = "pending" | "applied" | "rejected" | "expired";

/**
 * A proposed service's auth as stored: its type and fields (credential key names and plain settings,
 * never a value). The same shape as workflows/services.ts ServiceAuth, which proposal-input.ts checks
 * at compile time; the store keeps its own copy because it imports no module above it.
 */
export interface ProposedAuth {
  readonly type: AuthType;
  readonly token?: string;
  readonly header?: string;
  readonly prefix?: string;
  readonly username?: string;
  readonly param?: string;
  readonly template?: string;
  readonly token_url?: string;
  readonly client_id?: string;
  readonly client_secret?: string;
  readonly refresh_token?: string;
  readonly client_auth?: "basic" | "post";
  readonly scopes?: string[];
  readonly audience?: string;
  readonly access_key_id?: string;
  readonly secret_access_key?: string;
  readonly session_token?: string;
  readonly region?: string;
  readonly service?: string;
  readonly app_id?: string;
  readonly installation_id?: string;
  readonly private_key?: string;
  readonly api_url?: string;
}

/** One rule asked for (policy/path-rules.ts ServiceRule). */
export interface ProposedRule {
  readonly methods: readonly string[];
  readonly paths: readonly string[];
  readonly approve?: "each";
}

/** A service a proposal asks for. */
export interface ProposedService {
  readonly action: "set";
  readonly host: string;
  readonly description: string;
  readonly auth: ProposedAuth;
  /** Allowed methods and paths asked for; absent: everything on the host. */
  readonly rules?: readonly ProposedRule[];
  /** Asked for by a catalogue template: its id and the operations (the auth and rules above are their expansion). */
  readonly template?: string;
  readonly operations?: readonly string[];
}

/** A credential slot a proposal asks a human to fill (its key name and how to obtain it; never a value). */
export interface ProposedSlot {
  readonly action: "set";
  readonly key: string;
  readonly description: string;
  readonly obtain: string;
  readonly obtain_instructions: string;
}

export interface ProposalRow {
  id: number;
  vaultId: number;
  status: ProposalStatus;
  message: string;
  userMessage: string;
  /** Stored as JSON text; parsed and checked when the row is read (a row not of this shape is refused with CorruptRow). */
  services: readonly ProposedService[];
  credentials: readonly ProposedSlot[];
  createdBy: string;
  /** Filed by a `vault run` session of `createdBy`. */
  viaSession: boolean;
  createdAt: number;
  expiresAt: number;
  approvalTokenHash: string;
  approvalExpiresAt: number;
  decidedAt: number | null;
  decidedBy: number | null;
}

/** The row as the database holds it: services and credentials as JSON text. */
type StoredProposalRow = Omit<ProposalRow, "services" | "credentials"> & { services: string; credentials: string };

const COLUMNS = `id, vault_id AS "vaultId", status, message, user_message AS "userMessage", services, credentials, created_by AS "createdBy",
  created_at AS "createdAt", expires_at AS "expiresAt", approval_token_hash AS "approvalTokenHash", approval_expires_at AS "approvalExpiresAt",
  decided_at AS "decidedAt", decided_by AS "decidedBy", via_session AS "viaSession"`;

/** At or above every id (ids stay below 2^53, read as numbers). */
const NO_UPPER_ID = Number.MAX_SAFE_INTEGER;
// A page is a range of (vault_id, id), or of (vault_id, status, id) for one status (migration 21), read
// newest first and stopped at LIMIT. The cursor is written as BETWEEN, as in audit.ts, so SQLite without
// statistics picks the index that holds the status too.
const PAGE = `SELECT ${COLUMNS} FROM proposals WHERE vault_id = ? AND id BETWEEN 1 AND ?`;
const NEWEST = "ORDER BY id DESC LIMIT ?";
const PAGE_SQL = {
  all: `${PAGE} ${NEWEST}`,
  status: `${PAGE} AND status = ? ${NEWEST}`,
  /** The few pending rows are skipped in the (vault_id, id) range. */
  decided: `${PAGE} AND status <> 'pending' ${NEWEST}`,
};

export function proposalRepo(sql: Sql) {
  return {
    async create(p: Omit<ProposalRow, "id" | "status" | "decidedAt" | "decidedBy" | "viaSession"> & { viaSession?: boolean }): Promise<ProposalRow> {
      const row = await sql.get<StoredProposalRow>(
        `INSERT INTO proposals (vault_id, status, message, user_message, services, credentials, created_by, created_at, expires_at, approval_token_hash, approval_expires_at, via_session)
         VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
        [
          p.vaultId,
          p.message,
          p.userMessage,
          JSON.stringify(p.services),
          JSON.stringify(p.credentials),
          p.createdBy,
          p.createdAt,
          p.expiresAt,
          p.approvalTokenHash,
          p.approvalExpiresAt,
          p.viaSession ? 1 : 0,
        ],
      );
      return normalise(row!);
    },
    async byId(id: number): Promise<ProposalRow | undefined> {
      const row = await sql.get<StoredProposalRow>(`SELECT ${COLUMNS} FROM proposals WHERE id = ?`, [id]);
      return row && normalise(row);
    },
    /**
     * The vault's proposals newest first, older than id `before` when given; all of them (null), one
     * status, or every one no longer pending ("decided"). Each its own statement (PAGE_SQL).
     */
    async list(vaultId: number, status: ProposalStatus | "decided" | null, limit: number, before?: number): Promise<ProposalRow[]> {
      const upper = before === undefined ? NO_UPPER_ID : before - 1;
      const rows =
        status === null || status === "decided"
          ? await sql.all<StoredProposalRow>(PAGE_SQL[status ?? "all"], [vaultId, upper, limit])
          : await sql.all<StoredProposalRow>(PAGE_SQL.status, [vaultId, upper, status, limit]);
      return rows.map(normalise);
    },
    async countPending(vaultId: number): Promise<number> {
      const row = await sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM proposals WHERE vault_id = ? AND status = 'pending'", [vaultId]);
      return Number(row?.n ?? 0);
    },
    /** Moves a pending proposal to `status`; false when it was no longer pending. */
    async decide(id: number, status: "applied" | "rejected", userId: number, at: number): Promise<boolean> {
      return (
        (await sql.run("UPDATE proposals SET status = ?, decided_at = ?, decided_by = ? WHERE id = ? AND status = 'pending'", [status, at, userId, id])) === 1
      );
    },
    /** Replaces the approval token of a pending proposal (the old link stops working); false when no longer pending. */
    async renewApprovalToken(id: number, hash: string, expiresAt: number): Promise<boolean> {
      return (
        (await sql.run("UPDATE proposals SET approval_token_hash = ?, approval_expires_at = ? WHERE id = ? AND status = 'pending'", [hash, expiresAt, id])) ===
        1
      );
    },
    /** Expires every pending proposal past its time; returns how many. */
    async expire(now: number): Promise<number> {
      return sql.run("UPDATE proposals SET status = 'expired', decided_at = ? WHERE status = 'pending' AND expires_at <= ?", [now, now]);
    },
    /** As expire, returning the rows it expired (so each is announced once, by the instance that expired it). */
    async expireReturning(now: number): Promise<ProposalRow[]> {
      const rows = await sql.all<StoredProposalRow>(
        `UPDATE proposals SET status = 'expired', decided_at = ? WHERE status = 'pending' AND expires_at <= ? RETURNING ${COLUMNS}`,
        [now, now],
      );
      return rows.map(normalise);
    },
  };
}

export type ProposalRepo = ReturnType<typeof proposalRepo>;

function normalise(r: StoredProposalRow): ProposalRow {
  const n = (v: number | null) => (v === null ? null : Number(v));
  const id = Number(r.id);
  return {
    ...r,
    id,
    services: parseStoredJson("proposals", id, "services", r.services, assertServices),
    credentials: parseStoredJson("proposals", id, "credentials", r.credentials, assertSlots),
    vaultId: Number(r.vaultId),
    viaSession: Boolean(Number(r.viaSession)),
    createdAt: Number(r.createdAt),
    expiresAt: Number(r.expiresAt),
    approvalExpiresAt: Number(r.approvalExpiresAt),
    decidedAt: n(r.decidedAt),
    decidedBy: n(r.decidedBy),
  };
}

// The shape checks of the two JSON columns (see stored-json.ts): exactly what createProposal writes.

const AUTH_TYPES: Readonly<Record<AuthType, true>> = {
  bearer: true,
  basic: true,
  header: true,
  passthrough: true,
  query: true,
  path: true,
  oauth2_client_credentials: true,
  oauth2_refresh: true,
  aws_sigv4: true,
  github_app: true,
};

/** Every field of ProposedAuth with its test: a field added to the type must be added here. */
const AUTH_FIELD_TESTS: { readonly [K in keyof ProposedAuth]-?: (v: unknown) => boolean } = {
  type: (v) => isText(v) && Object.hasOwn(AUTH_TYPES, v),
  token: isText,
  header: isText,
  prefix: isText,
  username: isText,
  param: isText,
  template: isText,
  token_url: isText,
  client_id: isText,
  client_secret: isText,
  refresh_token: isText,
  client_auth: (v) => v === "basic" || v === "post",
  scopes: isTextList,
  audience: isText,
  access_key_id: isText,
  secret_access_key: isText,
  session_token: isText,
  region: isText,
  service: isText,
  app_id: isText,
  installation_id: isText,
  private_key: isText,
  api_url: isText,
};
const AUTH_FIELDS = new Map(Object.entries(AUTH_FIELD_TESTS));

/** Whether `value` has the type auth field `key` holds (a stored service's minted settings are read by it too). */
export function fitsAuthField(key: string, value: unknown): boolean {
  return AUTH_FIELDS.get(key)?.(value) ?? false;
}

const isSet = (v: unknown) => v === "set";
const RULE_FIELDS = new Map<string, (v: unknown) => boolean>([
  ["methods", isTextList],
  ["paths", isTextList],
  ["approve", (v) => v === "each"],
]);
const SERVICE_FIELDS = new Map<string, (v: unknown) => boolean>([
  ["action", isSet],
  ["host", isText],
  ["description", isText],
  ["auth", () => true], // checked below, with its own fields
  ["rules", () => true], // likewise
  ["template", isText],
  ["operations", isTextList],
]);
const SLOT_FIELDS = new Map<string, (v: unknown) => boolean>([
  ["action", isSet],
  ["key", isText],
  ["description", isText],
  ["obtain", isText],
  ["obtain_instructions", isText],
]);

function assertServices(v: unknown, at: string): asserts v is ProposedService[] {
  assertList(v, at);
  v.forEach((s, i) => {
    const here = `${at}[${i}]`;
    assertObject(s, here);
    assertFields(s, here, SERVICE_FIELDS, ["action", "host", "description", "auth"]);
    assertObject(s.auth, `${here}.auth`);
    assertFields(s.auth, `${here}.auth`, AUTH_FIELDS, ["type"]);
    if (s.rules === undefined) return;
    assertList(s.rules, `${here}.rules`);
    s.rules.forEach((r, j) => {
      assertObject(r, `${here}.rules[${j}]`);
      assertFields(r, `${here}.rules[${j}]`, RULE_FIELDS, ["methods", "paths"]);
    });
  });
}

function assertSlots(v: unknown, at: string): asserts v is ProposedSlot[] {
  assertList(v, at);
  v.forEach((c, i) => {
    assertObject(c, `${at}[${i}]`);
    assertFields(c, `${at}[${i}]`, SLOT_FIELDS, [...SLOT_FIELDS.keys()]);
  });
}
