// The PostgreSQL backend (Bun.SQL), selected by BROKER_DATABASE_URL. Same Db surface as SQLite:
// `?` placeholders become $1..$n, int8 columns come back as numbers (every id and timestamp fits
// in 2^53), and a connection that cannot be had becomes 503 `database_unavailable` rather than a 500.
// TLS, user, password and database travel in the URL (`?sslmode=verify-full` and so on).

import { SQL } from "bun";
import { Conflict, DatabaseUnavailable } from "../errors.ts";
import { RACED, type ChangeListener, type Db, type Reachability, type Sql, type SqlValue } from "./db.ts";

export interface PostgresOptions {
  /** Connections in the pool (bounded: a flood of requests queues instead of opening more). */
  readonly max?: number;
  /** Seconds to wait for a new connection before a request fails with 503. */
  readonly connectTimeoutSec?: number;
  /**
   * Longest wait for one statement or transaction, in milliseconds; absent: no bound (the CLI's tools).
   * A frozen server or a network partition answers nothing, not an error: past this bound the
   * database counts as away, exactly as for a refused connection (503, outage grace). Migrations
   * always run unbounded (`Db.unbounded`): building an index over a large table may take minutes.
   */
  readonly statementTimeoutMs?: number;
}

const INT8 = 20;
/** One number the instances agree on for pg_advisory_xact_lock around migrations. */
const MIGRATION_LOCK = 0x62726f6b; // "brok"

/** Opens a pool; no connection is made until the first statement (see `ping` to check early). */
export function openPostgres(url: string, opts: PostgresOptions = {}): Db {
  const sql = new SQL({
    url,
    adapter: "postgres",
    max: opts.max ?? 10,
    connectionTimeout: opts.connectTimeoutSec ?? 3,
    idleTimeout: 60,
    // Statements are few and fixed: named prepared statements per connection save a parse per call.
    prepare: true,
    // Planned with each call's values: a reused generic plan guesses a filter such as `host = $4` matches a
    // third of the audit log and walks the whole vault instead of the filter's index (60-190 ms at 1M rows).
    // Parsing is still saved; planning these small statements costs microseconds.
    connection: {
      application_name: "broker",
      plan_cache_mode: "force_custom_plan",
      // The server gives up on a statement a little before the client would: a slow query (a log filter
      // that matches nothing over a large log) is cancelled and its connection freed, not left running.
      ...(opts.statementTimeoutMs !== undefined && { statement_timeout: String(serverBound(opts.statementTimeoutMs)) }),
    },
  });
  const alive = opts.statementTimeoutMs === undefined ? undefined : startAliveProbe(url, opts.statementTimeoutMs);
  const bounded = wrapPool(sql, createBreaker(alive), opts.statementTimeoutMs, alive);
  const unbounded = wrapPool(sql, createBreaker(), undefined, undefined, opts.statementTimeoutMs !== undefined);
  return { ...bounded, unbounded };
}

/** The server's own bound: enough below the client's that a live server's cancellation arrives first. */
function serverBound(clientMs: number): number {
  return Math.max(50, clientMs - 250);
}

/** How often the probe connection asks `SELECT 1`, and how recent its last answer must be to call the server alive. */
const PROBE_EVERY_MS = 500;
const ALIVE_WITHIN_MS = 1500;

interface AliveProbe {
  /** The server answered the probe connection lately: a statement that ran out of time met a busy server, not a lost one. */
  answering(): boolean;
  stop(): void;
}

/**
 * One connection of its own asking `SELECT 1` twice a second, never queued behind the pool's work: when a
 * statement runs out of time, this tells a frozen or unreachable server (no answer here either) from a
 * busy one (slow statements, a pool whose connections are all taken). Only the first opens the breaker.
 */
function startAliveProbe(url: string, timeoutMs: number): AliveProbe {
  const probe = new SQL({ url, adapter: "postgres", max: 1, connectionTimeout: 3, idleTimeout: 60, connection: { application_name: "broker-probe" } });
  let lastAnswer = 0;
  let asking = false;
  const timer = setInterval(() => {
    if (asking) return;
    asking = true;
    within(probe.unsafe("SELECT 1") as Promise<unknown>, timeoutMs)
      .then(() => (lastAnswer = Date.now()))
      .catch(() => {})
      .finally(() => (asking = false));
  }, PROBE_EVERY_MS);
  timer.unref?.();
  return {
    answering: () => Date.now() - lastAnswer < ALIVE_WITHIN_MS,
    stop() {
      clearInterval(timer);
      void probe.close({ timeout: 1 });
    },
  };
}

/** A statement that ran out of time while the server still answered: 503 for its caller, the breaker stays closed. */
class StatementTooSlow extends DatabaseUnavailable {}

/** After a lost connection, statements fail at once for this long before one statement probes again. */
const BREAK_MS = 1000;

/**
 * A circuit breaker: while the database is known to be away, callers get 503 immediately (fail fast)
 * and one statement at a time, at most once per BREAK_MS, probes whether it is back. Its state is
 * what /health reports, so a health check never waits on the database.
 */
function createBreaker(alive?: AliveProbe) {
  let up = true;
  let since = Date.now();
  let reason = "";
  let retryAt = 0;
  let probing = false;
  return {
    /** Runs `run` unless the database is known to be away; a failure that means "away" opens the breaker. */
    async guard<T>(run: () => Promise<T>): Promise<T> {
      const probe = !up;
      if (probe && (probing || Date.now() < retryAt)) throw new DatabaseUnavailable(reason);
      if (probe) probing = true;
      try {
        const result = await run();
        if (!up) [up, since, reason] = [true, Date.now(), ""];
        return result;
      } catch (err) {
        let e = translate(err);
        // Out of time while the probe connection still hears the server: this statement was slow, the database is there.
        if (e instanceof StatementTimeout && alive?.answering()) e = new StatementTooSlow(`${e.reason} (the database answers: busy, not away)`);
        if (e instanceof DatabaseUnavailable && !(e instanceof StatementTooSlow)) {
          if (up) [up, since] = [false, Date.now()];
          reason = e.reason;
          retryAt = Date.now() + BREAK_MS;
        }
        throw e;
      } finally {
        if (probe) probing = false;
      }
    },
    state: (): Reachability => (up ? { reachable: true, since } : { reachable: false, since, reason }),
  };
}

type Breaker = ReturnType<typeof createBreaker>;

/** No answer within the bound: the database is away, unless the probe connection says it answers (StatementTooSlow). */
class StatementTimeout extends DatabaseUnavailable {}

/** `work`, or DatabaseUnavailable once `ms` pass without its answer (which is then ignored; `onExpiry` hears of it). */
function within<T>(work: Promise<T>, ms: number | undefined, onExpiry?: () => void): Promise<T> {
  if (ms === undefined) return work;
  work.catch(() => {}); // an answer (or failure) after the bound is nobody's: not an unhandled rejection
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onExpiry?.();
      reject(new StatementTimeout(`no answer within ${ms} ms`));
    }, ms);
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

/** Lifts the connection's statement_timeout for one transaction (migrations may build an index for minutes). */
const NO_SERVER_BOUND = "SET LOCAL statement_timeout = 0";

/**
 * `timeoutMs`: the client's bound (undefined: none). `liftServerBound`: the pool's connections carry a server
 * statement_timeout that this handle's statements must not have (the unbounded handle, for migrations).
 */
function wrapPool(pool: SQL, breaker: Breaker, timeoutMs: number | undefined, alive?: AliveProbe, liftServerBound = false): Db {
  // Outside a transaction each statement passes the breaker; inside one, the transaction already
  // did (a probing transaction must not be refused its own statements), so they are only bounded.
  const gated = <T>(run: () => Promise<T>) => breaker.guard(() => within(run(), timeoutMs));
  const inner = async <T>(tx: Transaction, run: () => Promise<T>) => {
    if (tx.abandoned) throw new DatabaseUnavailable(ABANDONED);
    try {
      return await within(run(), timeoutMs);
    } catch (err) {
      throw translate(err);
    }
  };
  const query = (handle: SQL, text: string, params: readonly SqlValue[], tx: Transaction | undefined) => {
    const run = () => handle.unsafe(numberedText(text), params as SqlValue[]) as Promise<Result>;
    if (tx) return inner(tx, run);
    // Unbounded on a pool whose connections carry the server's bound: lifted for this statement only.
    if (liftServerBound)
      return gated(() =>
        pool.begin(async (t) => {
          await t.unsafe(NO_SERVER_BOUND);
          return (await t.unsafe(numberedText(text), params as SqlValue[])) as Result;
        }),
      );
    return gated(run);
  };
  const on = (handle: SQL, tx?: Transaction): Sql => ({
    async all<T>(text: string, params: readonly SqlValue[] = []) {
      return rows<T>(await query(handle, text, params, tx));
    },
    async get<T>(text: string, params: readonly SqlValue[] = []) {
      return rows<T>(await query(handle, text, params, tx))[0];
    },
    async run(text: string, params: readonly SqlValue[] = []) {
      const result = await query(handle, text, params, tx);
      return result.affectedRows ?? result.count ?? 0;
    },
  });
  return {
    dialect: "postgres",
    ...on(pool),
    transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
      // Bounded as a whole too: waiting for a connection, or a ROLLBACK on a frozen server, never ends otherwise.
      // Its caller, told the database is away, retries or answers 503: a transaction given up on must not
      // commit when the server answers again (its BEGIN may have waited out a freeze, its statements then
      // all answering). Its statements from then on, and its COMMIT, are refused, so it rolls back.
      return breaker.guard(() => {
        const tx: Transaction = { abandoned: false };
        const work = pool.begin(async (handle) => {
          if (liftServerBound) await handle.unsafe(NO_SERVER_BOUND);
          const result = await fn(on(handle, tx));
          if (tx.abandoned) throw new DatabaseUnavailable(ABANDONED);
          return result;
        });
        return within(work as Promise<T>, timeoutMs, () => (tx.abandoned = true));
      });
    },
    exec(script: string) {
      return gated(async () => void (await pool.unsafe(script).simple()));
    },
    async lockMigrations(tx: Sql) {
      await tx.get("SELECT pg_advisory_xact_lock(?)", [MIGRATION_LOCK]);
    },
    notify(channel: string, payload: string) {
      return gated(() => pool.notify(channel, payload));
    },
    async listen(channel: string, listener: ChangeListener) {
      const subscribing = pool.listen(channel, listener.onMessage, listener.onListening);
      try {
        const sub = await within(subscribing, timeoutMs);
        return () => sub.unlisten();
      } catch (err) {
        // Given up on: if the subscription still comes through later, it is removed again.
        subscribing.then((late) => late.unlisten()).catch(() => {});
        throw translate(err);
      }
    },
    reachability: breaker.state,
    close() {
      alive?.stop();
      void pool.close({ timeout: 1 });
    },
  };
}

/** A transaction in progress: `abandoned` once its bound passed and its caller was told the database is away. */
interface Transaction {
  abandoned: boolean;
}

const ABANDONED = "the transaction outlived its bound and was rolled back";

type Result = unknown[] & { count?: number; affectedRows?: number; columns?: { name: string; type: number }[] | null };

/** int8 arrives as a string; every int8 this schema holds (ids, milliseconds, byte counts) fits a double. */
function rows<T>(result: Result): T[] {
  const big = (result.columns ?? []).filter((c) => c.type === INT8).map((c) => c.name);
  if (big.length === 0) return result as T[];
  for (const row of result as Record<string, unknown>[]) {
    for (const name of big) {
      const v = row[name];
      if (typeof v === "string" || typeof v === "bigint") row[name] = Number(v);
    }
  }
  return result as T[];
}

/** `?` → `$1, $2, …`, skipping quoted literals and identifiers (the store's SQL keeps `?` out of them anyway). */
// The statements are constants: each is numbered once, not on every call (a request path runs several).
const numbered = new Map<string, string>();
const MAX_NUMBERED = 1000;

function numberedText(text: string): string {
  let out = numbered.get(text);
  if (out === undefined) {
    if (numbered.size >= MAX_NUMBERED) numbered.clear(); // statements built per call (IN lists) must not grow it forever
    out = numberPlaceholders(text);
    numbered.set(text, out);
  }
  return out;
}

export function numberPlaceholders(text: string): string {
  let out = "";
  let n = 0;
  let quote: string | undefined;
  for (const ch of text) {
    if (quote) {
      if (ch === quote) quote = undefined;
      out += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
    } else if (ch === "?") {
      out += `$${++n}`;
    } else {
      out += ch;
    }
  }
  return out;
}

/**
 * A lost or refused connection is the database being away, which callers answer with 503; errors
 * the server reports about a statement (constraints, syntax) pass through unchanged.
 */
function translate(err: unknown): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string" && CONNECTION_CODES.has(code)) return new DatabaseUnavailable(code);
  if (typeof code === "string" && /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EHOSTUNREACH)$/.test(code)) return new DatabaseUnavailable(code);
  // SQLSTATE class 08 (connection exception) and 57P01-03 (admin shutdown, crash, cannot connect now).
  const state = (err as { errno?: unknown } | null)?.errno;
  if (typeof state === "string" && (/^08/.test(state) || /^57P0[123]$/.test(state))) return new DatabaseUnavailable(state);
  if (state === UNIQUE_VIOLATION) return new Conflict(RACED);
  // The server's statement_timeout (57014, query_canceled): a live server gave up on a slow statement.
  if (state === "57014") return new StatementTooSlow("the statement ran past the database's statement_timeout (busy, not away)");
  return err;
}

const UNIQUE_VIOLATION = "23505";

const CONNECTION_CODES = new Set([
  "ERR_POSTGRES_CONNECTION_CLOSED",
  "ERR_POSTGRES_CONNECTION_TIMEOUT",
  "ERR_POSTGRES_CONNECTION_REFUSED",
  "ERR_POSTGRES_IDLE_TIMEOUT",
  "ERR_POSTGRES_LIFETIME_TIMEOUT",
  "ERR_POSTGRES_TLS_NOT_AVAILABLE",
  "ERR_POSTGRES_TLS_UPGRADE_FAILED",
  "ERR_POSTGRES_UNKNOWN_AUTHENTICATION_METHOD",
]);
