// One batch of audit retention: the lowest ids, at most `limit` of them, deleted where they are over the row
// cap or past the age limit, in one transaction. Small batches keep each one short (on SQLite a statement
// holds the event loop); several instances on one PostgreSQL take turns, so one catches up while the others
// only check.
//
// Age is read from the low end of the log: `at` (when a request began) grows with the id but for requests
// that ran long or instances whose clocks differ, so a row that is past the limit behind a younger one is
// deleted once that one is, late by at most that difference.

import type { AnchorSigning } from "./audit-anchors.ts";
import type { UnsignedAnchor } from "./audit-chain-check.ts";
import { auditRepo } from "./audit.ts";
import type { Db } from "./db.ts";

export interface AuditLimits {
  /** Rows with `at` before this (epoch ms) go. */
  readonly olderThan: number;
  /** Rows outside the newest this many ids go. */
  readonly keepRows: number;
  /** Signs the anchors the batch moves (the broker always gives it; without it they are stored unsigned). */
  readonly signing?: AnchorSigning;
  /**
   * With `signing`: whether to stop before records no checkpoint signs yet (default), or remove them too, their
   * anchors unsigned (after waiting longer than checkpoints take: a chain nothing will sign must not stop retention).
   */
  readonly waitForCheckpoints?: boolean;
}

export interface PruneBatch {
  /** Rows deleted: at most the batch's limit. */
  readonly removed: number;
  /** More is over a limit: run the next batch soon rather than at the next check. */
  readonly more: boolean;
  /** Another instance was pruning: this one deleted nothing and should check again later. */
  readonly busy: boolean;
  /**
   * What the batch cost, in ms, for sizing the next one: on SQLite the whole transaction (bun:sqlite runs
   * on the event loop, so that is how long everything else waited); on PostgreSQL its DELETE, the part that
   * grows with the batch (the other statements are fixed round trips that hold nothing).
   */
  readonly ms: number;
  /** Anchors moved unsigned because the records removed did not check out (absent: none). */
  readonly unsignedAnchors?: readonly UnsignedAnchor[];
  /** The batch stopped before records no checkpoint signs yet. */
  readonly waiting?: boolean;
}

/** The instances' number for pg_try_advisory_xact_lock around a batch ("audi"); migrations use another. */
export const PRUNE_LOCK = 0x61756469;

/** Deletes, among the `limit` lowest ids, the rows past either limit. `clock` (ms, monotonic) times it. */
export async function pruneAuditBatch(db: Db, limits: AuditLimits, limit: number, clock: () => number = () => performance.now()): Promise<PruneBatch> {
  const started = clock();
  const batch = await db.transaction(async (tx): Promise<PruneBatch> => {
    if (db.dialect === "postgres") {
      // A try, never a wait: an instance that finds the turn taken has nothing to do that the other is not doing.
      const turn = await tx.get<{ taken: boolean }>("SELECT pg_try_advisory_xact_lock(?) AS taken", [PRUNE_LOCK]);
      if (!turn?.taken) return { removed: 0, more: false, busy: true, ms: 0 };
    }
    const audit = auditRepo(tx);
    const ids = await audit.idBounds();
    if (!ids) return { removed: 0, more: false, busy: false, ms: 0 };
    const throughId = ids.highest - limits.keepRows;
    const toId = ids.lowest + limit - 1;
    const deleting = clock();
    const r = await audit.deletePrunable(ids.lowest, toId, throughId, limits.olderThan, limits.signing, limits.waitForCheckpoints !== false);
    // Ids past this range are still over the cap, or the whole range was old enough to go and the next may be too
    // (unless it waits for a checkpoint: then at the next check).
    const more = !r.waiting && (toId < throughId || r.removed === limit);
    return {
      removed: r.removed,
      more,
      busy: false,
      ms: clock() - deleting,
      ...(r.unsigned.length && { unsignedAnchors: r.unsigned }),
      ...(r.waiting && { waiting: true }),
    };
  });
  return db.dialect === "sqlite" ? { ...batch, ms: clock() - started } : batch;
}
