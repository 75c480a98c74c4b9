// The audit writer as a start opens it: its journal first (egress/audit-journal.ts), then what a killed run or an outage
// left unwritten is written, and (by the first worker, or a lone broker) what journals of workers that no longer run
// hold, all before this run's first record.

import type { Config } from "../config.ts";
import { createAuditLog, type AuditExport, type AuditLog } from "../egress/index.ts";
import type { Logger } from "../log.ts";
import { ensurePrivateDir, type Store } from "../store/index.ts";
import { adoptOrphanJournals, journalFileOf, openJournal } from "./audit-journal-open.ts";

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
  },
): Promise<AuditLog> {
  const { now, log } = deps;
  ensurePrivateDir(config.dataDir);
  const journal = openJournal(config.dataDir, log, journalFileOf(config.worker));
  const audit = createAuditLog(store, { now, log, ...(journal && { journal }), ...(deps.export && { export: deps.export }), onWritten: deps.onWritten });
  deps.undo.push(() => audit.stop());
  await audit.resume();
  if ((config.worker?.id ?? 1) === 1) await adoptOrphanJournals(config.dataDir, config.worker?.count ?? 1, store, { now, log });
  return audit;
}
