// The read worker's thread (a Bun Worker, architecture.md D32): its own read-only connection to the store's
// WAL file, answering one (sql, params) at a time, so a long read costs its caller's time and not the
// event loop's. Reads never write (that connection is read-only and query_only); the writes it makes,
// audit retention's batches and the audit writer's, go through a second connection of its own, opened on
// first use, so deleting old rows (and the checkpoints that follow) and inserting and chaining new ones hold
// this thread, not the event loop. Imports nothing but bun:sqlite and the store's pure audit modules: in the
// compiled binary it is an entry point of its own (build.ts). The protocol is sqlite-reader.ts's.

import { Database } from "bun:sqlite";
import type { UnsignedAnchor } from "./audit-chain-check.ts";
import { batchOps, writeAuditBatch, type BatchRecord, type BatchSql } from "./audit-batch.ts";
import { removePrefix } from "./audit-prune-batch.ts";
import type { SqlValue } from "./db.ts";
import type { ReadReply, ReadRequest } from "./sqlite-read-protocol.ts";

let db: Database | undefined;
let path = "";
let busyTimeoutMs = 5000;
/** Retention's connection: opened on the first batch, never used for anything else. */
let writer: Database | undefined;

function answer(req: ReadRequest): ReadReply | Promise<ReadReply> {
  switch (req.kind) {
    case "open":
      try {
        // readonly: this thread can never create, migrate or write the file; query_only also refuses writes
        // through a statement (a routing mistake fails loudly instead of writing past the main connection).
        db = new Database(req.path, { readonly: true, strict: true });
        path = req.path;
        busyTimeoutMs = req.busyTimeoutMs;
        db.run(`PRAGMA busy_timeout = ${Math.trunc(req.busyTimeoutMs)}`);
        db.run("PRAGMA query_only = ON");
        return { kind: "opened" };
      } catch (err) {
        return { kind: "unopened", ...describe(err) };
      }
    case "all":
    case "get":
      if (!db) return { kind: "failed", id: req.id, message: "the read worker has no open database" };
      try {
        // A statement per call, reset when it returns: each read is its own implicit transaction, so it
        // sees every transaction the main connection committed before the request was posted (WAL).
        const statement = db.query(req.sql);
        const params = req.params as never[];
        if (req.kind === "get") return { kind: "row", id: req.id, row: statement.get(...params) ?? undefined };
        const rows = statement.all(...params);
        // Decoding is the main thread's share of a read: JSON.parse of a page costs it about half of what
        // rebuilding the same rows from a structured clone does, so rows of plain values travel as JSON.
        return isPlain(rows) ? { kind: "json", id: req.id, json: JSON.stringify(rows) } : { kind: "rows", id: req.id, rows };
      } catch (err) {
        return { kind: "failed", id: req.id, ...describe(err) };
      }
    case "prune":
      return prune(req).then(
        (r): ReadReply => ({ kind: "pruned", id: req.id, ...r }),
        (err): ReadReply => ({ kind: "failed", id: req.id, ...describe(err) }),
      );
    case "audit":
      return writeAudit(req).then(
        (heads): ReadReply => ({ kind: "audited", id: req.id, heads }),
        (err): ReadReply => ({ kind: "failed", id: req.id, ...describe(err) }),
      );
    case "close":
      db?.close();
      db = undefined;
      writer?.close();
      writer = undefined;
      // The main thread waits on this flag (Store.close is synchronous): once it is set, no connection of
      // ours keeps the main connection's close from checkpointing and removing the -wal file.
      Atomics.store(req.done, 0, 1);
      Atomics.notify(req.done, 0);
      return { kind: "closed" };
  }
}

/** The thread's one writable connection (retention's batches and the audit writer's), opened on first use. */
function writerConnection(): Database {
  if (!writer) {
    writer = new Database(path, { readwrite: true, strict: true });
    writer.run(`PRAGMA busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
    writer.run("PRAGMA synchronous = NORMAL");
  }
  return writer;
}

/**
 * One batch of the audit writer's records (audit-batch.ts, the code the main connection runs for other stores) in
 * one transaction. Async only in form, as prune() is: the batch runs to its end before the next message is taken.
 */
async function writeAudit(req: Extract<ReadRequest, { kind: "audit" }>): Promise<[number, number][]> {
  const conn = writerConnection();
  const sql: BatchSql = {
    get: async <T>(statement: string, params: readonly SqlValue[]) => (conn.query(statement).get(...(params as never[])) ?? undefined) as T | undefined,
    run: async (statement: string, params: readonly SqlValue[]) => conn.query(statement).run(...(params as never[])).changes,
  };
  conn.run("BEGIN IMMEDIATE");
  try {
    const heads = await writeAuditBatch(batchOps(sql), req.mark, JSON.parse(req.records) as BatchRecord[]);
    conn.run("COMMIT");
    return [...heads];
  } catch (err) {
    rollBack(conn);
    throw err;
  }
}

/**
 * Among the `limit` lowest ids, deletes the rows past the row cap or the age limit, in one transaction
 * (store/audit-prune-batch.ts, as for PostgreSQL and memory stores). Async only in form: every read is this
 * connection's synchronous one, so the batch runs to its end before the next message is taken. Timed whole: it is
 * how long the main connection's writes could wait for this one's lock.
 */
async function prune(
  req: Extract<ReadRequest, { kind: "prune" }>,
): Promise<{ removed: number; more: boolean; ms: number; unsignedAnchors?: UnsignedAnchor[]; waiting?: boolean }> {
  const conn = writerConnection();
  const started = performance.now();
  conn.run("BEGIN IMMEDIATE");
  try {
    const ids = conn.query(req.sql.idBounds).get() as { lowest: number | null; highest: number | null } | null;
    let result: { removed: number; more: boolean; unsignedAnchors?: UnsignedAnchor[]; waiting?: boolean } = { removed: 0, more: false };
    if (ids?.lowest != null && ids.highest != null) {
      const throughId = Number(ids.highest) - req.keepRows;
      const toId = Number(ids.lowest) + req.limit - 1;
      const r = await removePrefix(
        (sql, params) => conn.query(sql).all(...(params as never[])) as Record<string, unknown>[],
        (sql, params) => conn.query(sql).run(...(params as never[])).changes,
        req.sql,
        { fromId: Number(ids.lowest), toId, throughId, olderThan: req.olderThan, waitForCheckpoints: req.waitForCheckpoints },
        req.signing,
      );
      result = {
        removed: r.removed,
        more: !r.waiting && (toId < throughId || r.removed === req.limit),
        ...(r.unsigned.length && { unsignedAnchors: [...r.unsigned] }),
        ...(r.waiting && { waiting: true }),
      };
    }
    conn.run("COMMIT");
    return { ...result, ms: performance.now() - started };
  } catch (err) {
    rollBack(conn);
    throw err;
  }
}

/**
 * Ends the failed transaction, if SQLite has not already: a full disk or an I/O error (at COMMIT, say) rolls it back
 * itself, and a ROLLBACK then would throw "no transaction is active" in place of the error that says what happened
 * (its code is how the reader tells a disk that refuses writes from a batch that is wrong).
 */
function rollBack(conn: Database): void {
  if (conn.inTransaction) conn.run("ROLLBACK");
}

/** Only strings, finite numbers (never -0) and nulls: what JSON carries back exactly as it was. */
function isPlain(rows: unknown[]): boolean {
  for (const row of rows) {
    for (const v of Object.values(row as Record<string, unknown>)) {
      if (v === null || typeof v === "string") continue;
      if (typeof v !== "number" || !Number.isFinite(v) || Object.is(v, -0)) return false;
    }
  }
  return true;
}

function describe(err: unknown): { message: string; code?: string } {
  const code = (err as { code?: unknown } | null)?.code;
  return { message: err instanceof Error ? err.message : String(err), ...(typeof code === "string" && { code }) };
}

function send(reply: ReadReply): void {
  postMessage(reply);
  if (reply.kind === "closed") process.exit(0);
}

self.addEventListener("message", (ev: MessageEvent<ReadRequest>) => {
  const reply = answer(ev.data);
  if (reply instanceof Promise) void reply.then(send);
  else send(reply);
});
