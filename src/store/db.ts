// The backend-neutral SQL surface every store module is written against. SQL is portable
// (`?` placeholders, RETURNING, no dialect functions); backends translate what little differs.
// Values are parameters only: never build SQL text from data.

export type SqlValue = string | number | bigint | boolean | null | Uint8Array;

export interface Sql {
  all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  get<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined>;
  /** Runs a statement and returns how many rows it changed. */
  run(sql: string, params?: readonly SqlValue[]): Promise<number>;
}

/**
 * `(?, ?), (?, ?)`: `rows` groups of `width` placeholders, for a multi-row INSERT. Numbers in,
 * placeholders out: the one computed text SQL may interpolate (tests/unit/store/sql-parameters.test.ts).
 */
export function placeholderRows(rows: number, width: number): string {
  const row = `(${Array(width).fill("?").join(", ")})`;
  return Array(rows).fill(row).join(", ");
}

export type Dialect = "sqlite" | "postgres";

export interface Db extends Sql {
  readonly dialect: Dialect;
  /**
   * Runs `fn` in one transaction, committed when it resolves and rolled back when it throws.
   * Inside `fn`, use only `tx`: other statements wait until the transaction ends.
   */
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>;
  /** Runs a multi-statement script (migrations only). */
  exec(script: string): Promise<void>;
  /** Inside a migration transaction: waits until no other instance is migrating (no-op where writers already serialize). */
  lockMigrations(tx: Sql): Promise<void>;
  /**
   * Cross-instance messages (PostgreSQL LISTEN/NOTIFY). Absent on SQLite, whose file belongs to one
   * instance. `listen` resolves once subscribed and returns the function that unsubscribes.
   */
  notify?(channel: string, payload: string): Promise<void>;
  listen?(channel: string, listener: ChangeListener): Promise<() => Promise<void>>;
  /** Whether the database answered lately, from memory: never waits on it (for /health). Absent on SQLite. */
  reachability?(): Reachability;
  /** The same database with no bound on a statement's time (migrations); absent where statements are not bounded. */
  readonly unbounded?: Db;
  close(): void;
}

export interface Reachability {
  readonly reachable: boolean;
  /** When this state began (epoch ms). */
  readonly since: number;
  /** Why the database counts as away (a connection error's code, or the time bound), when it does. */
  readonly reason?: string;
}

export interface ChangeListener {
  onMessage(payload: string): void;
  /** Runs when the subscription is acknowledged, initially and after every reconnect. */
  onListening(): void;
}

/**
 * The domain checks for duplicates before it writes; a unique violation therefore means two requests
 * raced (under PostgreSQL's READ COMMITTED both checks can pass). Both backends answer the loser 409.
 */
export const RACED = "this conflicts with a record created at the same moment; reload and try again";
