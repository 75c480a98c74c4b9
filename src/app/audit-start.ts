// The audit writer as a start opens it: its journal's lock before anything else (app/journal-lock.ts), then the journal
// (egress/audit-journal.ts), then what a killed run or an outage left unwritten is written, and (by the first worker,
// or a lone broker) what journals of workers that no longer run hold, all before this run's first record.

import type { Config } from "../config.ts";
import { createAuditLog, type AuditExport, type AuditLog } from "../egress/index.ts";
import type { Logger } from "../log.ts";
import { ensurePrivateDir, type Store } from "../store/index.ts";
import { adoptOrphanJournals, journalFileOf, openJournal } from "./audit-journal-open.ts";
import { DataDirBusy, lockJournal, type JournalLock } from "./journal-lock.ts";

/**
 * This process's journal, locked: throws DataDirBusy when another broker serves the data directory. A lock that cannot
 * be made (a full disk) leaves the broker without a journal (undefined), as a journal that cannot be opened does.
 */
export function claimJournal(config: Config, log: Logger): JournalLock | undefined {
  ensurePrivateDir(config.dataDir);
  const file = journalFileOf(config.worker);
  let lock: JournalLock;
  try {
    lock = lockJournal(config.dataDir, file);
  } catch (err) {
    if (err instanceof DataDirBusy) throw err;
    log.error("audit_journal_unavailable", {
      file: `${file}.lock`,
      err,
      detail: "audit records are written to the database from memory only and are lost if the process dies first; fix the data directory and restart",
    });
    return undefined;
  }
  if (lock.tookOverFrom !== undefined)
    log.info("data_dir_lock_taken_over", { pid: lock.tookOverFrom, detail: "the broker that held it did not stop cleanly; its journal is replayed" });
  return lock;
}

export async function startAuditWriter(
  config: Config,
  store: Store,
  deps: {
    readonly now: () => number;
    readonly log: Logger;
    readonly export?: AuditExport;
    readonly onWritten: (heads: ReadonlyMap<number, number>) => void;
    /** Stops the writer if the start fails after this (a failed start undoes what it made). */
    readonly undo: (() => unknown)[];
    /** This process holds its journal's lock (claimJournal): without it, no journal is opened. */
    readonly locked: boolean;
  },
): Promise<AuditLog> {
  const { now, log } = deps;
  const journal = deps.locked ? openJournal(config.dataDir, log, journalFileOf(config.worker)) : undefined;
  const audit = createAuditLog(store, { now, log, ...(journal && { journal }), ...(deps.export && { export: deps.export }), onWritten: deps.onWritten });
  deps.undo.push(() => audit.stop());
  await audit.resume();
  if ((config.worker?.id ?? 1) === 1) await adoptOrphanJournals(config.dataDir, config.worker?.count ?? 1, store, { now, log });
  return audit;
}
