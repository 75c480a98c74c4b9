// Large reads of a SQLite file store, off the event loop (architecture.md D32): bun:sqlite is synchronous,
// so a read the main connection runs stalls every request for its whole length. This sends (sql, params)
// to a worker thread with its own read-only connection (sqlite-read-worker.ts) and awaits the rows.
// Reads never write (the audit's retention and writer batches go to a writable connection of the worker's
// own); a request the worker does not answer in time fails with DatabaseUnavailable and the worker is
// replaced at the next one. Memory stores have no file to share: they keep reading (and writing) in-thread.

import { DatabaseUnavailable } from "../errors.ts";
import type { Sql, SqlValue } from "./db.ts";
import type { ReadReply, ReadRequest } from "./sqlite-read-protocol.ts";
import { RETENTION_STATEMENTS } from "./audit.ts";
import type { AuditLimits, PruneBatch } from "./audit-retention.ts";
import type { BatchRecord } from "./audit-batch.ts";

/** A read (queue wait included) or the worker's start not answered within this counts as a hung worker. */
export const READ_TIMEOUT_MS = 10_000;
/** Longest Store.close() waits for the worker to close its connection before terminating it. */
const CLOSE_WAIT_MS = 1000;

/** What the reader needs of a Worker: tests hand in stand-ins that hang or crash. */
export interface ReadThread {
  postMessage(message: ReadRequest): void;
  addEventListener(type: "message" | "error" | "close", listener: (ev: Event) => void): void;
  terminate(): void;
}

export interface SqliteReaderOptions {
  readonly timeoutMs?: number;
  /** The worker connection's busy timeout (WAL readers rarely wait; a checkpoint restart can make them). */
  readonly busyTimeoutMs?: number;
  /** Told why a worker was given up (it hung, crashed or could not open the file); the server logs it. */
  readonly onFault?: (reason: string) => void;
  readonly spawn?: () => ReadThread;
}

export interface SqliteReader extends Sql {
  /** One batch of audit retention, run by the worker on a connection of its own (store/audit-retention.ts). */
  pruneAudit(limits: AuditLimits, limit: number): Promise<PruneBatch>;
  /** One batch of the audit writer's records, written by the worker on that connection (store/audit-batch.ts). */
  writeAudit(mark: string, batch: readonly BatchRecord[]): Promise<Map<number, number>>;
  /** Settles once the first worker has opened its connection: rejects with DatabaseUnavailable if it cannot. */
  readonly ready: Promise<void>;
  /** Synchronous, as Store.close() is: waits (bounded) for the worker to close its connection. */
  close(): void;
}

// From source the worker's entry is beside this file; in the compiled binary build.ts embeds it as a
// second entry point at its path under src/, which resolves beside the bundle's own entry.
const WORKER_ENTRY = import.meta.url.endsWith("/store/sqlite-reader.ts")
  ? new URL("./sqlite-read-worker.ts", import.meta.url).href
  : new URL("./store/sqlite-read-worker.js", import.meta.url).href;

export function spawnReadWorker(): ReadThread {
  // env {}: the worker needs no setting, so no secret of the process environment is copied into its heap.
  const worker = new Worker(WORKER_ENTRY, { name: "store-reader", env: {} });
  // An idle worker must not keep a finished process alive; a read in flight does, through its timer.
  (worker as unknown as Bun.Worker).unref();
  return worker as unknown as ReadThread;
}

interface Pending {
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
  readonly timer: ReturnType<typeof setTimeout>;
}

interface Thread {
  readonly worker: ReadThread;
  readonly pending: Map<number, Pending>;
  readonly opened: PromiseWithResolvers<void>;
  readonly openTimer: ReturnType<typeof setTimeout>;
  gone: boolean;
}

export function createSqliteReader(path: string, opts: SqliteReaderOptions = {}): SqliteReader {
  const timeoutMs = opts.timeoutMs ?? READ_TIMEOUT_MS;
  const spawn = opts.spawn ?? spawnReadWorker;
  let closed = false;
  let nextId = 1;

  const start = (): Thread => {
    const opened = Promise.withResolvers<void>();
    opened.promise.catch(() => {}); // only `ready` reports it
    const thread: Thread = {
      worker: spawn(),
      pending: new Map(),
      opened,
      openTimer: setTimeout(() => giveUp(thread, `the read worker did not start within ${timeoutMs} ms`), timeoutMs),
      gone: false,
    };
    thread.worker.addEventListener("message", (ev) => onReply(thread, (ev as MessageEvent<ReadReply>).data));
    thread.worker.addEventListener("error", (ev) => giveUp(thread, `the read worker failed: ${(ev as ErrorEvent).message ?? "unknown error"}`));
    thread.worker.addEventListener("close", () => giveUp(thread, "the read worker exited"));
    thread.worker.postMessage({ kind: "open", path, busyTimeoutMs: opts.busyTimeoutMs ?? 5000 });
    return thread;
  };

  /** A hung or dead worker takes its reads with it; the next read starts a fresh one (never a loop of restarts). */
  const giveUp = (thread: Thread, reason: string): void => {
    if (thread.gone) return;
    if (current === thread) current = undefined;
    retire(thread, new DatabaseUnavailable(reason));
    thread.worker.terminate();
    if (!closed) opts.onFault?.(reason);
  };

  const onReply = (thread: Thread, reply: ReadReply): void => {
    if (thread.gone) return;
    if (reply.kind === "opened") {
      clearTimeout(thread.openTimer);
      thread.opened.resolve();
      return;
    }
    if (reply.kind === "unopened") return giveUp(thread, `the read worker cannot open ${path}: ${reply.message}`);
    if (reply.kind === "closed") return;
    const p = thread.pending.get(reply.id);
    if (!p) return;
    thread.pending.delete(reply.id);
    clearTimeout(p.timer);
    if (reply.kind === "rows") p.resolve(reply.rows);
    else if (reply.kind === "pruned")
      p.resolve({
        removed: reply.removed,
        more: reply.more,
        busy: false,
        ms: reply.ms,
        ...(reply.unsignedAnchors && { unsignedAnchors: reply.unsignedAnchors }),
        ...(reply.waiting && { waiting: true }),
      });
    else if (reply.kind === "json") p.resolve(JSON.parse(reply.json));
    else if (reply.kind === "audited") p.resolve(new Map(reply.heads));
    else if (reply.kind === "row") p.resolve(reply.row);
    else p.reject(toError(reply.message, reply.code));
  };

  let current: Thread | undefined = start();
  const ready = current.opened.promise;

  const ask = (request: (id: number) => ReadRequest): Promise<unknown> => {
    if (closed) return Promise.reject(new DatabaseUnavailable("the store is closed"));
    const thread = (current ??= start());
    const id = nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => giveUp(thread, `a read got no answer within ${timeoutMs} ms`), timeoutMs);
      thread.pending.set(id, { resolve, reject, timer });
      try {
        thread.worker.postMessage(request(id));
      } catch (err) {
        // A value that cannot be sent fails its own read, not the worker (its timer would give it up).
        clearTimeout(timer);
        thread.pending.delete(id);
        reject(err);
      }
    });
  };

  const read = (kind: "all" | "get", sql: string, params: readonly SqlValue[]) => ask((id) => ({ kind, id, sql, params }));

  return {
    ready,
    async pruneAudit(limits, limit) {
      return (await ask((id) => ({
        kind: "prune",
        id,
        sql: RETENTION_STATEMENTS,
        olderThan: limits.olderThan,
        keepRows: limits.keepRows,
        limit,
        // A plain copy for the worker (structured clone keeps no private fields): it lives only in the message.
        ...(limits.signing && { signing: { key: { keyId: limits.signing.key.keyId, pkcs8: limits.signing.key.pkcs8 }, at: limits.signing.at } }),
        waitForCheckpoints: limits.waitForCheckpoints !== false,
      }))) as PruneBatch;
    },
    async writeAudit(mark, batch) {
      // The journal's lines are these records' JSON already: joined, not encoded again.
      const records = `[${batch.map((r) => r.line ?? JSON.stringify({ seq: r.seq, entry: r.entry })).join(",")}]`;
      try {
        return (await ask((id) => ({ kind: "audit", id, mark, records }))) as Map<number, number>;
      } catch (err) {
        // A disk that refuses writes for now is an outage, not a wrong batch: the writer keeps the records (memory
        // and journal) and tries again, where a failed batch is dropped and the journal emptied of it.
        const code = (err as { code?: unknown } | null)?.code;
        if (typeof code === "string" && STORAGE_REFUSED.test(code)) throw new DatabaseUnavailable(`${code}: ${(err as Error).message}`);
        throw err;
      }
    },
    async all<T>(sql: string, params: readonly SqlValue[] = []) {
      return (await read("all", sql, params)) as T[];
    },
    async get<T>(sql: string, params: readonly SqlValue[] = []) {
      return (await read("get", sql, params)) as T | undefined;
    },
    async run() {
      throw new Error("the read worker never writes: route only reads to it");
    },
    close() {
      if (closed) return;
      closed = true;
      const thread = current;
      current = undefined;
      if (!thread) return;
      retire(thread, new DatabaseUnavailable("the store is closed"));
      // The main connection's close checkpoints and removes the -wal file only when no other connection is
      // open, so the worker closes its own first (the flag is shared memory; the main thread waits on it).
      const done = new Int32Array(new SharedArrayBuffer(4));
      try {
        thread.worker.postMessage({ kind: "close", done });
        Atomics.wait(done, 0, 0, CLOSE_WAIT_MS);
      } finally {
        thread.worker.terminate();
      }
    },
  };
}

/** Fails whatever still waits on the thread; it answers nothing from now on. */
function retire(thread: Thread, err: DatabaseUnavailable): void {
  thread.gone = true;
  clearTimeout(thread.openTimer);
  thread.opened.reject(err);
  for (const p of thread.pending.values()) {
    clearTimeout(p.timer);
    p.reject(err);
  }
  thread.pending.clear();
}

/**
 * SQLite's codes for a file that cannot be written for now, whatever the batch: a full disk (SQLITE_FULL), a failing
 * or read-only one (SQLITE_IOERR_*, SQLITE_READONLY_*), a writable connection the thread cannot open (SQLITE_CANTOPEN:
 * out of file descriptors; it opens on first use), memory (SQLITE_NOMEM). An audit batch refused so waits, as in an outage.
 */
const STORAGE_REFUSED = /^SQLITE_(FULL|IOERR|READONLY|CANTOPEN|NOMEM|PROTOCOL|NOLFS)(_|$)/;

/** As on the main connection: a lock held past the busy timeout means the store is away for now (503). */
function toError(message: string, code: string | undefined): Error {
  if (code?.startsWith("SQLITE_BUSY")) return new DatabaseUnavailable(`${code}: the database file is locked by another process`);
  return Object.assign(new Error(message), code === undefined ? {} : { code });
}
