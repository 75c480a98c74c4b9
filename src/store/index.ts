// The store: async repositories over a backend-neutral Db. Modules outside store/ import from here only.

import type { Db, Sql } from "./db.ts";
import { accessRepo } from "./access.ts";
import { agentRepo } from "./agents.ts";
import { auditRepo } from "./audit.ts";
import { caRepo } from "./ca.ts";
import { connectStateRepo } from "./connect-states.ts";
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
import { openSqliteFile, openSqliteMemory } from "./sqlite.ts";
import { openPostgres } from "./postgres.ts";
import type { Secret } from "../secret.ts";
import { maskDatabaseUrl } from "../config.ts";
import { DatabaseUnavailable } from "../errors.ts";
import { userRepo } from "./users.ts";
import { vaultRepo } from "./vaults.ts";
import { vaultCountRepo } from "./vault-counts.ts";
import { webhookRepo } from "./webhooks.ts";

export type { Db, Sql, SqlValue, Dialect } from "./db.ts";
export type { CredentialRow } from "./credentials.ts";
export type { KeyringRow } from "./keyring.ts";
export type { SessionChannel, SessionKind, SessionOrigin, SessionRow } from "./sessions.ts";
export type { PendingCounts, VaultCounts } from "./vault-counts.ts";
export type { UserRow, InstanceRole } from "./users.ts";
export type { VaultRow, UnmatchedHosts } from "./vaults.ts";
export type { AgentRow } from "./agents.ts";
export type { AccessRow, GrantRow, MemberRow, VaultRole } from "./access.ts";
export type { InviteKind, InviteRow } from "./invites.ts";
export type { IdentityRow, OidcCliCodeRow, OidcPurpose, OidcStateRow } from "./identities.ts";
export type { ConnectStateRow } from "./connect-states.ts";
export type { AuthType, MintedAuthType, ServiceRow } from "./services.ts";
export type { AuditFilter, AuditRow } from "./audit.ts";
export type { ProposalRow, ProposalStatus, ProposedAuth, ProposedRule, ProposedService, ProposedSlot } from "./proposals.ts";
export { fitsAuthField } from "./proposals.ts";
export { CorruptRow } from "./stored-json.ts";
export type { RequestApprovalRow, RequestApprovalState } from "./request-approvals.ts";
export type { CaRow } from "./ca.ts";
export type { WebhookDelivery, WebhookFormat, WebhookRow, WebhookStatus } from "./webhooks.ts";
export { migrate } from "./migrations.ts";
export { CHANGES_CHANNEL, MIGRATIONS } from "./schema.ts";
export { DB_FILE, ensurePrivateDir } from "./sqlite.ts";
export { openPostgres } from "./postgres.ts";
export { backupSqlite, BackupTargetExists, type BackupReport } from "./backup.ts";
export { checkBackup, NotABrokerStore, restoreSqlite, storeHolders, type BackupCheck, type RestoreReport } from "./restore.ts";
export { inspectPostgres, inspectSqlite, type StoreSummary } from "./inspect.ts";
export { copyStore, CopyMismatch, requireEmptySchema, SchemaMismatch, TargetNotEmpty, type CopyReport, type TableCopy } from "./copy.ts";

function createRepos(sql: Sql) {
  return {
    keyring: keyringRepo(sql),
    vaults: vaultRepo(sql),
    credentials: credentialRepo(sql),
    users: userRepo(sql),
    sessions: sessionRepo(sql),
    agents: agentRepo(sql),
    access: accessRepo(sql),
    invites: inviteRepo(sql),
    services: serviceRepo(sql),
    settings: settingRepo(sql),
    audit: auditRepo(sql),
    proposals: proposalRepo(sql),
    requestApprovals: requestApprovalRepo(sql),
    ca: caRepo(sql),
    identities: identityRepo(sql),
    webhooks: webhookRepo(sql),
    connectStates: connectStateRepo(sql),
    vaultCounts: vaultCountRepo(sql),
  };
}

export type Repos = ReturnType<typeof createRepos>;

export interface Store extends Repos {
  readonly db: Db;
  /** One atomic unit of work; inside `fn` use only the repositories it is given. */
  transaction<T>(fn: (tx: Repos) => Promise<T>): Promise<T>;
  close(): void;
  [Symbol.dispose](): void;
}

export function createStore(db: Db): Store {
  return {
    db,
    ...createRepos(db),
    transaction: (fn) => db.transaction((tx) => fn(createRepos(tx))),
    close: () => db.close(),
    [Symbol.dispose]: () => db.close(),
  };
}

/** Where the store lives: PostgreSQL when a URL is given, else the SQLite file in `dataDir`. */
export interface StoreLocation {
  readonly dataDir: string;
  readonly database?: { readonly url: Secret; readonly poolSize: number } | undefined;
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

/** Opens (creating if needed) the store and brings its schema up to date. */
export async function openStore(where: StoreLocation): Promise<Store> {
  if (!where.database) {
    const db = openSqliteFile(where.dataDir);
    try {
      await migrate(db);
    } catch (err) {
      db.close();
      throw err;
    }
    return createStore(db);
  }
  // The one place the database URL (and its password) leaves its wrapper: to open the pool.
  const db = openPostgres(where.database.url.reveal(), { max: where.database.poolSize });
  try {
    await migrate(db);
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
