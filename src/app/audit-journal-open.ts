// Opening the audit journal (egress/audit-journal.ts) at start, and saying in one log line what could not
// be used: a journal that cannot be opened at all leaves the broker serving without one (records go to the
// database from memory, as before the journal existed); a file that is not a journal is moved aside.

import { JOURNAL_FILE, openAuditJournal, type AuditJournal } from "../egress/index.ts";
import type { Logger } from "../log.ts";

/**
 * The audit journal, or none when its file cannot be used (a directory, a device or a pipe in its place, a
 * read-only or full disk): the broker then serves with records held in memory until written, as before the
 * journal existed, and says so in one line. A file that is not a journal is moved aside, also said in one line.
 */
export function openJournal(dataDir: string, log: Logger): AuditJournal | undefined {
  let journal: AuditJournal;
  try {
    journal = openAuditJournal(dataDir, (err) => log.error("audit_journal_write_failed", { err }));
  } catch (err) {
    log.error("audit_journal_unavailable", {
      file: JOURNAL_FILE,
      err,
      detail: "audit records are written to the database from memory only and are lost if the process dies first; fix or remove the file and restart",
    });
    return undefined;
  }
  const { setAside, unreadableLines } = journal.opened;
  if (setAside) {
    log.warn("audit_journal_set_aside", {
      file: JOURNAL_FILE,
      moved_to: setAside,
      detail: "it is not an audit journal, so nothing in it could be replayed; a new one was started",
    });
  } else if (unreadableLines > 0) {
    log.warn("audit_journal_unreadable_lines", {
      file: JOURNAL_FILE,
      lines: unreadableLines,
      detail: "lines that are not audit records were skipped; the records around them are replayed",
    });
  }
  return journal;
}
