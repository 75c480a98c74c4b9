// How far each instance's audit journal has reached the database (migration 20): the last journal
// sequence number written to audit_logs, moved in the same transaction as the records it covers.

import { lockMark, MARK_SET } from "./audit-batch.ts";
import type { Sql } from "./db.ts";

/**
 * The journal's file in the data directory (egress/audit-journal.ts). It belongs with the store whose
 * marks it is counted against: `broker restore` moves it aside with the store's files.
 */
export const AUDIT_JOURNAL_FILE = "audit-journal.jsonl";

export function auditMarkRepo(sql: Sql) {
  return {
    /**
     * The last sequence number of `journal` already in audit_logs (0: none), its row locked until the
     * transaction ends: a batch given up on but still committing and its retry cannot both write (PostgreSQL
     * holds the second until the first ends; SQLite's writers take turns anyway).
     */
    async lock(journal: string): Promise<number> {
      return lockMark(sql, journal);
    },
    /** The last sequence number of `journal` already in audit_logs (0: none). */
    async get(journal: string): Promise<number> {
      const row = await sql.get<{ seq: number }>("SELECT seq FROM audit_journal_marks WHERE journal = ?", [journal]);
      return row ? Number(row.seq) : 0;
    },
    /** Moves the mark forward (never back). */
    async set(journal: string, seq: number): Promise<void> {
      await sql.run(MARK_SET, [seq, journal, seq]);
    },
  };
}
