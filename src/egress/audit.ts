// Audit records of proxied requests, journaled (audit-journal.ts), queued in memory and written in
// batches off the request path; retention by age and row count is app/audit-retention.ts's. A record
// holds names and numbers only: never header values, bodies, query strings or tokens.

import { DatabaseUnavailable } from "../errors.ts";
import type { Logger } from "../log.ts";
import { writeAuditBatch, type AuditRow, type Store } from "../store/index.ts";
import { JOURNAL_FILE, type AuditJournal, type JournalRecord } from "./audit-journal.ts";
import type { AuditExport, TraceRef } from "./telemetry.ts";

export type AuditEntry = Omit<AuditRow, "id">;

export interface AuditLog {
  /** `trace`: the request's span, when traces are exported (the exported record names it). */
  record(entry: AuditEntry, trace?: TraceRef): void;
  /**
   * Queues what the journal holds and the database lacks (records of a killed or cut-off run), before
   * any new record. Call once, before the first `record`.
   */
  resume(): Promise<number>;
  /** Writes everything queued (tests and shutdown). */
  flush(): Promise<void>;
  /** Writes what is queued, waiting up to `graceMs` for an unreachable database; what is left stays in the journal. */
  stop(graceMs?: number): Promise<void>;
  /** Records waiting to be written (grows while the database is unreachable). */
  readonly queued: number;
  /** Records dropped because the queue was full, since start (metrics). */
  readonly droppedTotal?: number;
}

export interface AuditOptions {
  readonly flushIntervalMs?: number;
  readonly maxBatch?: number;
  /** Queue bound: beyond it records are dropped (and counted) rather than growing memory. */
  readonly maxQueued?: number;
  /** Every record is written here first, so it survives the process (absent in unit tests: memory only). */
  readonly journal?: AuditJournal;
  readonly now: () => number;
  readonly log: Logger;
  /** Live export to a collector (telemetry/): every new record is handed over as it is made, whatever the database does. */
  readonly export?: AuditExport;
  /**
   * Told, after each batch is committed, each vault's new head seq: every record up to it must be signed within
   * the checkpoint interval from now (app/audit-head-history.ts).
   */
  readonly onWritten?: (heads: ReadonlyMap<number, number>) => void;
}

export function createAuditLog(store: Store, opts: AuditOptions): AuditLog {
  const journal = opts.journal;
  // The mark that keeps a batch whose answer was lost from being written twice: the journal's, or (a broker running
  // without one, its file unusable) this process's own, numbering its records in memory.
  const markId = journal?.id ?? `memory-${crypto.randomUUID()}`;
  let memorySeq = 0;
  let queue: JournalRecord[] = [];
  let dropped = 0;
  let droppedTotal = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let writing: Promise<void> = Promise.resolve();
  let retryMs = 0;
  /** stop() has run: the journal is closed and the store closes next, so nothing is tried again or scheduled. */
  let stopped = false;
  const maxBatch = opts.maxBatch ?? 500;

  /**
   * One batch in one transaction (store/audit-batch.ts: the journal's mark and each vault's hash chain moved with
   * the records). On a SQLite file, the store's worker thread writes it on a connection of its own, so inserting
   * and hashing a busy second's records never holds the event loop; elsewhere, the main connection does.
   * Returns each vault's head after the batch (seq), once committed.
   */
  function insert(batch: readonly JournalRecord[]): Promise<Map<number, number>> {
    if (store.offLoopAudit) return store.offLoopAudit(markId, batch);
    return store.transaction((tx) =>
      writeAuditBatch(
        {
          lockMark: (id) => tx.auditMarks.lock(id),
          setMark: (id, seq) => tx.auditMarks.set(id, seq),
          lockHead: (vaultId) => tx.auditChains.lockHead(vaultId),
          setHead: (vaultId, seq, hash) => tx.auditChains.setHead(vaultId, seq, hash),
          insert: (rows) => tx.audit.insert(rows),
        },
        markId,
        batch,
      ),
    );
  }

  async function write(): Promise<void> {
    timer = undefined;
    journal?.sync(); // on the disk before it is sent: what the database misses survives a power loss too
    while (queue.length) {
      const batch = queue.slice(0, maxBatch);
      try {
        const heads = await insert(batch);
        queue = queue.slice(batch.length);
        retryMs = 0;
        if (heads.size) opts.onWritten?.(heads);
      } catch (err) {
        if (err instanceof DatabaseUnavailable) {
          // Kept, in order, and written when the database answers again (the queue bound still holds).
          if (retryMs === 0) opts.log.warn("audit_write_deferred", { reason: "database unreachable", queued: queue.length });
          retryMs = Math.min(Math.max(retryMs * 2, 250), 5000);
          // Once stopped, a closed store answers DatabaseUnavailable for ever (a SQLite file's worker): a retry
          // scheduled then would keep the process from exiting.
          if (!stopped) timer ??= setTimeout(writeNext, retryMs);
          break;
        }
        queue = queue.slice(batch.length);
        opts.log.error("audit_write_failed", { err, records: batch.length });
      }
    }
    if (retryMs === 0) journal?.settled(queue);
    if (dropped) {
      opts.log.warn("audit_records_dropped", { count: dropped, reason: "audit queue full" });
      dropped = 0;
    }
  }

  /**
   * The next write, after the one under way. A failure no branch of write() expected is logged and the chain
   * goes on: a rejected `writing` would skip every later write, leaving records queued until the process ends.
   */
  function writeNext(): Promise<void> {
    writing = writing.then(write).catch((err: unknown) => opts.log.error("audit_write_failed", { err, records: queue.length }));
    return writing;
  }

  function schedule() {
    timer ??= setTimeout(writeNext, opts.flushIntervalMs ?? 250);
  }

  async function flush() {
    if (timer) clearTimeout(timer);
    timer = undefined;
    await writeNext();
  }

  return {
    record(made, trace) {
      const entry = wellFormed(made);
      opts.export?.add(entry, trace);
      if (stopped) {
        // Made after the writer stopped (an exchange whose usage came in after the shutdown's wait for it): its journal
        // is closed and the store closing, so nothing could write it, and a write retried against the closed store
        // would keep the process from exiting. Said, not kept.
        opts.log.error("audit_records_lost", { count: 1, reason: "made after the audit writer stopped at shutdown" });
        return;
      }
      if (queue.length >= (opts.maxQueued ?? 100_000)) {
        dropped++;
        droppedTotal++;
        return;
      }
      queue.push(journal ? journal.appendRecord(entry) : { seq: ++memorySeq, entry });
      schedule();
    },
    async resume() {
      if (!journal) return 0;
      const missing = journal.resume(await store.auditMarks.get(journal.id));
      if (missing.length === 0) return 0;
      queue = [...missing, ...queue];
      opts.log.info("audit_journal_replayed", { records: missing.length, reason: "written to the journal by an earlier run but not to the database" });
      await flush();
      return missing.length;
    },
    flush,
    async stop(graceMs = 0) {
      const deadline = Date.now() + graceMs;
      await flush();
      // The database may come back within the grace: keep trying rather than leave the records behind.
      while (queue.length && Date.now() < deadline) {
        await Bun.sleep(Math.min(250, Math.max(0, deadline - Date.now())));
        await flush();
      }
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      if (queue.length && journal) {
        opts.log.warn("audit_records_spilled", {
          count: queue.length,
          file: JOURNAL_FILE,
          reason: "the database was unreachable at shutdown; they stay in the journal and are written on the next start",
        });
      } else if (queue.length) {
        opts.log.error("audit_records_lost", { count: queue.length, reason: "the database was unreachable at shutdown" });
      }
      journal?.close();
    },
    get queued() {
      return queue.length;
    },
    get droppedTotal() {
      return droppedTotal;
    },
  };
}

/** The outcome of one proxied exchange, turned into its audit record (names and numbers only). */
export interface AuditOutcome {
  readonly status: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly error: string | null;
  readonly service: string | null;
  readonly credentialKeys: readonly string[];
  /** The references among them, as people write them (plan.ts `credentialRefs`); never values. Absent: none. */
  readonly credentialRefs?: readonly string[];
  /** Who approved this exact request, when a rule held it for a human. */
  readonly approvedBy?: string | null;
}

/** The workload behind a session exchanged for its platform token (issue 39): the token's `iss` and `sub`. */
export interface AuditedWorkload {
  readonly issuer: string | null;
  readonly subject: string;
}

export interface AuditedRequest {
  readonly principal: string;
  readonly contained: boolean;
  readonly workload?: AuditedWorkload;
  readonly vault: { readonly id: number; readonly name: string };
  readonly ingress: string;
  readonly method: string;
  readonly host: string;
  readonly port: number;
  /** Path and query as sent; the query (and a fragment, never meant for a server) is dropped here: it may carry secrets. */
  readonly target: string;
}

export function auditEntry(req: AuditedRequest, startedAt: number, now: number, o: AuditOutcome): AuditEntry {
  const entry: AuditEntry = {
    at: startedAt,
    principal: req.principal,
    vaultId: req.vault.id,
    vault: req.vault.name,
    ingress: req.ingress,
    method: req.method,
    host: req.port === 443 ? req.host : `${req.host}:${req.port}`,
    path: pathOf(req.target),
    service: o.service,
    credentialKeys: o.credentialKeys.join(","),
    // JSON, not joined: a reference may hold a comma.
    credentialRefs: o.credentialRefs?.length ? JSON.stringify(o.credentialRefs) : null,
    status: o.status,
    bytesIn: o.bytesIn,
    bytesOut: o.bytesOut,
    durationMs: now - startedAt,
    error: o.error,
    contained: req.contained,
    approvedBy: o.approvedBy ?? null,
  };
  // Set, not spread in: every request builds one of these, and few have a workload.
  if (req.workload) {
    entry.workloadIssuer = req.workload.issuer;
    entry.workloadSubject = req.workload.subject;
  }
  return entry;
}

/** The target without its query and fragment. */
function pathOf(target: string): string {
  const q = target.indexOf("?");
  const h = target.indexOf("#");
  const end = q < 0 ? h : h < 0 ? q : Math.min(q, h);
  return end < 0 ? target : target.slice(0, end);
}

/**
 * The entry with every text field well-formed UTF-16: a lone surrogate (a hostile upstream's model name, say) becomes
 * U+FFFD, as both databases store it, so the chain's hash covers what is stored and the record verifies. Unchanged
 * (and not copied) in the usual case.
 */
function wellFormed(entry: AuditEntry): AuditEntry {
  let out: Record<string, unknown> | undefined;
  for (const key in entry) {
    const value = (entry as unknown as Record<string, unknown>)[key];
    if (typeof value === "string" && !value.isWellFormed()) (out ??= { ...entry })[key] = value.toWellFormed();
  }
  return (out as AuditEntry | undefined) ?? entry;
}
