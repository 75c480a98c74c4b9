// The store: async repositories over a backend-neutral Db. Modules outside store/ import from here only.

import type { Db, Dialect, Sql } from "./db.ts";
import { accessRepo } from "./access.ts";
import { agentRepo } from "./agents.ts";
import { auditRepo } from "./audit.ts";
import { auditMarkRepo } from "./audit-marks.ts";
import { caRepo } from "./ca.ts";
import { connectStateRepo } from "./connect-states.ts";
import { budgetRepo } from "./budgets.ts";
import { workloadRepo } from "./workload.ts";
import { changeLogRepo, sqliteChangeLog } from "./sqlite-change-log.ts";
import { credentialRepo } from "./credentials.ts";
import { identityRepo } from "./identities.ts";
import { inviteRepo } from "./invites.ts";
import { proposalRepo } from "./proposals.ts";
import { requestApprovalRepo } from "./request-approvals.ts";
import { serviceRepo } from "./services.ts";
import { settingRepo } from "./settings.ts";
import { keyringRepo } from "./keyring.ts";
import { migrate } from "./migrations.ts";
import { sessionRepo } from "./sessions.ts";
import { DB_FILE, openSqliteFile, openSqliteMemory } from "./sqlite.ts";
import { createSqliteReader, type SqliteReaderOptions } from "./sqlite-reader.ts";
import { openPostgres } from "./postgres.ts";
import type { Secret } from "../secret.ts";
import { maskDatabaseUrl } from "../config.ts";
import { DatabaseUnavailable } from "../errors.ts";
import { userRepo } from "./users.ts";
import { vaultRepo } from "./vaults.ts";
import { vaultCountRepo } from "./vault-counts.ts";
import { webhookRepo } from "./webhooks.ts";
import { vaultCodeRepo } from "./vault-code.ts";
import { secretStoreRepo } from "./secret-store-connections.ts";
import { auditChainRepo } from "./audit-chains.ts";
import { auditCheckpointRepo } from "./audit-checkpoints.ts";
import { policyModeRepo } from "./policy-modes.ts";

export type { Db, Sql, SqlValue, Dialect } from "./db.ts";
export type { CredentialReference, CredentialRow } from "./credentials.ts";
export type {
  NewSecretStoreConnection,
  SecretStoreConnectionChange,
  SecretStoreConnectionRow,
  SecretStoreKind,
  SecretStoreSettings,
} from "./secret-store-connections.ts";
export type { KeyringRow } from "./keyring.ts";
export type { SessionChannel, SessionKind, SessionMinter, SessionOrigin, SessionRow, WorkloadSeenRow } from "./sessions.ts";
export type { PendingCounts, VaultCounts } from "./vault-counts.ts";
export type { UserRow, InstanceRole } from "./users.ts";
export type { VaultRow, UnmatchedHosts } from "./vaults.ts";
export type { DeclaredAccess, VaultCodeState } from "./vault-code.ts";
export type { AgentRow, AgentScope } from "./agents.ts";
export type { AccessRow, GrantRow, MemberRow, VaultRole } from "./access.ts";
export type { InviteKind, InviteRow } from "./invites.ts";
export type { IdentityRow, OidcCliCodeRow, OidcPurpose, OidcStateRow } from "./identities.ts";
export type { ConnectStateRow } from "./connect-states.ts";
export type { AuthType, MintedAuthType, ServiceRow, ServiceWithCredential } from "./services.ts";
export type { AuditFilter, AuditRow } from "./audit.ts";
export { WOULD_REFUSE, type PolicyMode } from "./policy-modes.ts";
export type { AuditChainRow } from "./audit-chains.ts";
export {
  CHECKPOINT_LOCK,
  takeCheckpointTurn,
  type AuditCheckpointRow,
  type AuditSigningKeyRow,
  type CheckpointHeadRow,
  type CheckpointPlan,
  type CheckpointTurn,
  type MovedHead,
} from "./audit-checkpoints.ts";
export { AUDIT_CHAIN_GENESIS } from "./audit-chain-genesis.ts";
export { writeAuditBatch, type AuditEntry, type BatchRecord } from "./audit-batch.ts";
import type { BatchRecord } from "./audit-batch.ts";
export type { ClaimCondition, WorkloadBindingRow, WorkloadIssuerRow } from "./workload.ts";
export { NO_USAGE, type BudgetLimits, type BudgetPeriod, type BudgetRow, type BudgetScope, type BudgetUsage, type SoftAction } from "./budgets.ts";
export {
  AUDIT_CHAIN_ENCODING,
  AUDIT_CHAIN_ENCODING_USAGE,
  AUDIT_CHECKPOINT_ENCODING,
  auditRecordHash,
  canonicalAuditRecord,
  checkpointMessage,
  type ChainedRecord,
  type CheckpointHead,
} from "./audit-chain-encoding.ts";
export { anchorMessage, AUDIT_ANCHOR_ENCODING, HeldAnchorKey, type AnchorFacts, type AnchorKey, type AnchorSigning } from "./audit-anchors.ts";
export {
  CHAIN_CHECK_STATEMENTS,
  checkpointSignedBy,
  signedAnchorOf,
  walkSegment,
  type ChainPoint as StoredChainPoint,
  type ReadRows,
  type UnsignedAnchor,
} from "./audit-chain-check.ts";
export { pruneAuditBatch, type AuditLimits, type PruneBatch } from "./audit-retention.ts";
import type { AuditLimits, PruneBatch } from "./audit-retention.ts";
export type { ProposalRow, ProposalStatus, ProposedAuth, ProposedRule, ProposedService, ProposedSlot } from "./proposals.ts";
export { fitsAuthField } from "./proposals.ts";
export { CorruptRow } from "./stored-json.ts";
export type { HeldCursor, RequestApprovalRow, RequestApprovalState } from "./request-approvals.ts";
export type { CaRow } from "./ca.ts";
export type { WebhookDelivery, WebhookFormat, WebhookRow, WebhookStatus } from "./webhooks.ts";
export { migrate } from "./migrations.ts";
export { CHANGES_CHANNEL, MIGRATIONS } from "./schema.ts";
export { DB_FILE, ensurePrivateDir } from "./sqlite.ts";
export { AUDIT_JOURNAL_FILE } from "./audit-marks.ts";
export { openPostgres } from "./postgres.ts";
export { backupSqlite, BackupTargetExists, type BackupReport } from "./backup.ts";
export { checkBackup, NotABrokerStore, restoreSqlite, storeHolders, type BackupCheck, type RestoreReport } from "./restore.ts";
export { inspectPostgres, inspectSqlite, type StoreSummary } from "./inspect.ts";
export { copyStore, CopyMismatch, requireEmptySchema, SchemaMismatch, TargetNotEmpty, type CopyReport, type TableCopy } from "./copy.ts";

function createRepos(sql: Sql, dialect: Dialect) {
  return {
    keyring: keyringRepo(sql),
    vaults: vaultRepo(sql, dialect),
    credentials: credentialRepo(sql),
    users: userRepo(sql),
    sessions: sessionRepo(sql),
    agents: agentRepo(sql),
    access: accessRepo(sql),
    invites: inviteRepo(sql),
    services: serviceRepo(sql),
    settings: settingRepo(sql),
    audit: auditRepo(sql),
    auditMarks: auditMarkRepo(sql),
    proposals: proposalRepo(sql),
    requestApprovals: requestApprovalRepo(sql),
    ca: caRepo(sql),
    identities: identityRepo(sql),
    webhooks: webhookRepo(sql),
    secretStores: secretStoreRepo(sql),
    auditChains: auditChainRepo(sql),
    auditCheckpoints: auditCheckpointRepo(sql),
    connectStates: connectStateRepo(sql),
    budgets: budgetRepo(sql),
    vaultCounts: vaultCountRepo(sql),
    policyModes: policyModeRepo(sql),
    vaultCode: vaultCodeRepo(sql),
    workload: workloadRepo(sql),
    changeLog: changeLogRepo(sql, dialect),
  };
}

export type Repos = ReturnType<typeof createRepos>;

/**
 * Reads that can cost the database far more than the rows they return (log pages and their filters, lists
 * filtered by state or joined to grants, counts): given a reader (a SQLite file store's worker thread) they
 * run there, off the event loop (architecture.md D32). Not the reads whose cost is building the rows they
 * return (a whole vault's services or credentials, a range page of services): the main thread rebuilds
 * those rows either way, and decoding them costs it about what SQLite's own row building did
 * (bench/off-loop-reads.ts). Not the request path's point reads either. Reads only: the worker's connection
 * refuses writes. A transaction's repositories keep reading through the transaction, which must see its
 * own writes.
 */
const OFF_LOOP_READS = {
  audit: ["list", "chained", "chainedAt"],
  proposals: ["list"],
  requestApprovals: ["list"],
  agents: ["page"],
  sessions: ["activeForUser", "activeScopedForVault"],
  access: ["members"],
  vaultCounts: ["of", "pendingByVault"],
  policyModes: ["wouldRefuseSince"],
} as const satisfies { readonly [R in keyof Repos]?: readonly (keyof Repos[R])[] };

function routeReads(repos: Repos, reader: Repos): Repos {
  const routed: Record<string, object> = { ...repos };
  for (const [name, methods] of Object.entries(OFF_LOOP_READS)) {
    const from = reader[name as keyof Repos] as Record<string, unknown>;
    routed[name] = { ...repos[name as keyof Repos], ...Object.fromEntries(methods.map((m) => [m, from[m]])) };
  }
  return routed as Repos;
}

/** Where the large reads (and audit retention's deletes) go instead of the main connection (sqlite-reader.ts). */
export type OffLoopReader = Sql & {
  close(): void;
  pruneAudit?: (limits: AuditLimits, limit: number) => Promise<PruneBatch>;
  writeAudit?: OffLoopAuditWrite;
};

/** One batch of audit records written by the worker thread (audit-batch.ts), resolving to each vault's new head seq. */
export type OffLoopAuditWrite = (mark: string, batch: readonly BatchRecord[]) => Promise<Map<number, number>>;

export interface Store extends Repos {
  readonly db: Db;
  /** One atomic unit of work; inside `fn` use only the repositories it is given. */
  transaction<T>(fn: (tx: Repos) => Promise<T>): Promise<T>;
  /** Audit retention's batches off the event loop, where the store has a worker thread (a SQLite file). */
  readonly offLoopPrune?: (limits: AuditLimits, limit: number) => Promise<PruneBatch>;
  /** The audit writer's batches off the event loop, where the store has a worker thread (a SQLite file). */
  readonly offLoopAudit?: OffLoopAuditWrite;
  close(): void;
  [Symbol.dispose](): void;
}

export function createStore(db: Db, reader?: OffLoopReader): Store {
  const repos = createRepos(db, db.dialect);
  const close = () => {
    reader?.close(); // first: its connection open would keep the main one's close from removing the -wal file
    db.close();
  };
  return {
    db,
    ...(reader ? routeReads(repos, createRepos(reader, db.dialect)) : repos),
    transaction: (fn) => db.transaction((tx) => fn(createRepos(tx, db.dialect))),
    ...(reader?.pruneAudit && { offLoopPrune: reader.pruneAudit }),
    ...(reader?.writeAudit && { offLoopAudit: reader.writeAudit }),
    close,
    [Symbol.dispose]: close,
  };
}

/** Where the store lives: PostgreSQL when a URL is given, else the SQLite file in `dataDir`. */
export interface StoreLocation {
  readonly dataDir: string;
  readonly database?: { readonly url: Secret; readonly poolSize: number; readonly statementTimeoutMs?: number } | undefined;
}

/** The store could not be opened: says which one and what to check (the CLI prints both and exits non-zero). */
export class StoreOpenFailed extends Error {
  constructor(
    message: string,
    readonly hint: string,
  ) {
    super(message);
  }
}

export interface OpenOptions {
  /**
   * A SQLite file store runs its large reads on a worker thread (the server sets this; a one-shot command
   * has nobody to stall). Opening fails if the worker cannot open the file. PostgreSQL's pool is async already.
   */
  readonly readWorker?: Pick<SqliteReaderOptions, "onFault" | "timeoutMs">;
  /**
   * Other processes serve from the same SQLite file (`broker server --workers N`): changes are announced through the
   * change log (migration 32, sqlite-change-log.ts) as PostgreSQL announces them with NOTIFY.
   */
  readonly sharedFile?: boolean;
}

/** How long the server's main SQLite connection waits for another process's lock (see openStore). */
const SERVER_BUSY_TIMEOUT_MS = 250;

/** Opens (creating if needed) the store and brings its schema up to date. */
export async function openStore(where: StoreLocation, opts: OpenOptions = {}): Promise<Store> {
  if (!where.database) {
    const db = openSqliteFile(where.dataDir);
    let reader: ReturnType<typeof createSqliteReader> | undefined;
    try {
      await migrate(db);
      if (opts.readWorker) {
        // The server's main connection is the event loop's: a lock held by another process may stall it only
        // briefly before the store counts as away (503; audit records wait in the journal). The long waits,
        // retention's batches, run on the worker's connection. Migrations above kept the long wait, for
        // instances starting at the same moment.
        await db.exec(`PRAGMA busy_timeout = ${SERVER_BUSY_TIMEOUT_MS}`);
        reader = createSqliteReader(`${where.dataDir}/${DB_FILE}`, opts.readWorker);
        await reader.ready.catch((err: unknown) => {
          const reason = err instanceof DatabaseUnavailable ? err.reason : String(err);
          throw new StoreOpenFailed(`cannot start the store's read worker (${reason})`, "check that broker.db in the data directory is readable by the broker");
        });
      }
    } catch (err) {
      reader?.close();
      db.close();
      throw err;
    }
    return createStore(opts.sharedFile ? Object.assign(db, sqliteChangeLog(db)) : db, reader);
  }
  // The one place the database URL (and its password) leaves its wrapper: to open the pool.
  const db = openPostgres(where.database.url.reveal(), {
    max: where.database.poolSize,
    ...(where.database.statementTimeoutMs !== undefined && { statementTimeoutMs: where.database.statementTimeoutMs }),
  });
  try {
    await migrate(db.unbounded ?? db);
  } catch (err) {
    db.close();
    throw explainOpenFailure(err, maskDatabaseUrl(where.database.url.reveal()));
  }
  return createStore(db);
}

function explainOpenFailure(err: unknown, label: string): unknown {
  if (err instanceof DatabaseUnavailable) {
    return new StoreOpenFailed(
      `cannot reach the database ${label} (${err.reason})`,
      "check that PostgreSQL is running and reachable from here, and the host, port and sslmode in BROKER_DATABASE_URL",
    );
  }
  const state = (err as { errno?: unknown } | null)?.errno;
  const detail = err instanceof Error ? err.message : String(err);
  if (state === "28P01" || state === "28000")
    return new StoreOpenFailed(`PostgreSQL at ${label} refused the sign-in: ${detail}`, "check the user name and password in BROKER_DATABASE_URL");
  if (state === "3D000") return new StoreOpenFailed(`${detail} (at ${label})`, "create it first (createdb) or fix the database name in BROKER_DATABASE_URL");
  if (state === "42501")
    return new StoreOpenFailed(
      `PostgreSQL at ${label}: ${detail}`,
      "the broker's user must own the database (it creates its tables): ALTER DATABASE … OWNER TO …",
    );
  return err;
}

export async function openMemoryStore(): Promise<Store> {
  const db = openSqliteMemory();
  await migrate(db);
  return createStore(db);
}
export {
  ALWAYS_FRESH,
  createChangeFeed,
  REVALIDATE_MS,
  startChangeFeed,
  type Change,
  type ChangeFeed,
  type ChangeHandlers,
  type Freshness,
} from "./changes.ts";
