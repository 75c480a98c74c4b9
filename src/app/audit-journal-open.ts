// Opening the audit journal (egress/audit-journal.ts) at start, and saying in one log line what could not
// be used: a journal that cannot be opened at all leaves the broker serving without one (records go to the
// database from memory, as before the journal existed); a file that is not a journal is moved aside.

import { readdirSync } from "node:fs";
import { createAuditLog, JOURNAL_FILE, openAuditJournal, type AuditJournal } from "../egress/index.ts";
import type { Store } from "../store/index.ts";
import type { Logger } from "../log.ts";
import type { WorkerRole } from "../config.ts";
import { DataDirBusy, lockJournal, type JournalLock } from "./journal-lock.ts";

/**
 * The journal file of a worker: worker 1 keeps the broker's own (a single process's), each other worker one of its own
 * (`audit-journal-2.jsonl`…), so two processes never append to one file. Each names itself in audit_journal_marks.
 */
export function journalFileOf(worker: WorkerRole | undefined): string {
  return !worker || worker.id === 1 ? JOURNAL_FILE : JOURNAL_FILE.replace(/\.jsonl$/, `-${worker.id}.jsonl`);
}

/**
 * The audit journal, or none when its file cannot be used (a directory, a device or a pipe in its place, a
 * read-only or full disk): the broker then serves with records held in memory until written, as before the
 * journal existed, and says so in one line. A file that is not a journal is moved aside, also said in one line.
 */
export function openJournal(dataDir: string, log: Logger, file = JOURNAL_FILE): AuditJournal | undefined {
  let journal: AuditJournal;
  try {
    journal = openAuditJournal(dataDir, (err) => log.error("audit_journal_write_failed", { err }), file);
  } catch (err) {
    log.error("audit_journal_unavailable", {
      file,
      err,
      detail: "audit records are written to the database from memory only and are lost if the process dies first; fix or remove the file and restart",
    });
    return undefined;
  }
  const { setAside, unreadableLines } = journal.opened;
  if (setAside) {
    log.warn("audit_journal_set_aside", {
      file,
      moved_to: setAside,
      detail: "it is not an audit journal, so nothing in it could be replayed; a new one was started",
    });
  } else if (unreadableLines > 0) {
    log.warn("audit_journal_unreadable_lines", {
      file,
      lines: unreadableLines,
      detail: "lines that are not audit records were skipped; the records around them are replayed",
    });
  }
  return journal;
}

const WORKER_JOURNAL = /^audit-journal-(\d+)\.jsonl$/;

/**
 * The journals of workers that no longer run (a broker started with fewer workers than before, or alone): written to
 * the database now, each through a writer of its own (its own mark, so nothing is written twice), before this run's
 * first record. The first worker (or the only process) does this while it starts alone.
 */
export async function adoptOrphanJournals(dataDir: string, workers: number, store: Store, deps: { now: () => number; log: Logger }): Promise<number> {
  let adopted = 0;
  let names: string[];
  try {
    names = readdirSync(dataDir);
  } catch {
    return 0;
  }
  for (const name of names) {
    const id = Number(WORKER_JOURNAL.exec(name)?.[1]);
    if (!id || id <= workers) continue;
    // Its lock too (journal-lock.ts): a worker of another broker on this data directory may still write it.
    let lock: JournalLock;
    try {
      lock = lockJournal(dataDir, name);
    } catch (err) {
      if (err instanceof DataDirBusy)
        deps.log.warn("audit_journal_in_use", {
          file: name,
          ...(err.pid !== undefined && { pid: err.pid }),
          ...(err.host !== undefined && { host: err.host }),
          detail: "another process writes it; left to that process",
        });
      else deps.log.error("audit_journal_unavailable", { file: `${name}.lock`, err, detail: "its records are written at a later start" });
      continue;
    }
    try {
      const journal = openJournal(dataDir, deps.log, name);
      if (!journal) continue;
      const writer = createAuditLog(store, { now: deps.now, log: deps.log, journal });
      try {
        adopted += await writer.resume();
      } finally {
        await writer.stop();
      }
    } finally {
      lock.release();
    }
  }
  return adopted;
}
