// Audit retention that keeps up: rows past the age limit or outside the row cap are deleted continuously,
// in batches bounded in rows and in time, instead of once an hour in one delete (which held the event loop
// for seconds over a million rows and let the table grow far past the cap in between). While anything is
// over a limit, batches follow each other with a short pause; then a check every few seconds. The batch
// size follows the time the last batch took, so each stays near the target whatever the disk and indexes cost.

import { DatabaseUnavailable } from "../errors.ts";
import type { Logger } from "../log.ts";
import { pruneAuditBatch, type AnchorKey, type AuditLimits, type Db, type PruneBatch } from "../store/index.ts";

export interface AuditRetentionOptions {
  readonly maxAgeMs: number;
  readonly maxRows: number;
  readonly now: () => number;
  readonly log: Logger;
  /** Between checks once nothing is over a limit (and while the database is away). Default 2 s. */
  readonly checkEveryMs?: number;
  /** Between batches while catching up: the event loop's share for everything else. Default 10 ms. */
  readonly pauseMs?: number;
  /** What one batch may take. Default 5 ms. */
  readonly targetBatchMs?: number;
  /** Rows in the first batch, and the bounds the size adapts within. */
  readonly batchRows?: { readonly first?: number; readonly min?: number; readonly max?: number };
  /** Times a batch (ms, monotonic; default performance.now); tests pass a clock of their own. */
  readonly clock?: () => number;
  /**
   * Runs one batch elsewhere than on the event loop (a SQLite file store's worker thread: Store.offLoopPrune);
   * absent, the batch runs through `db` (PostgreSQL's pool, or a memory store in tests).
   */
  readonly prune?: (limits: AuditLimits, limit: number) => Promise<PruneBatch>;
  /** Told of every batch (tests, the bench). */
  readonly onBatch?: (b: BatchReport) => void;
  /** The broker's audit key: each anchor a batch moves is signed with it (docs/audit-chain.md, "Heads and anchors"). */
  readonly anchorKey?: AnchorKey;
  /**
   * Retention waits for a checkpoint before removing records none signs yet, but no longer than this (twice the
   * checkpoint interval and a grace): then it removes them too (checked as ever) and says so, so a chain nothing
   * will sign (a row someone added for a vault no checkpoint covers) cannot stop it for ever.
   */
  readonly waitLimitMs?: number;
}

export interface BatchReport extends PruneBatch {
  /** The most rows this batch could delete. */
  readonly limit: number;
}

export interface AuditRetention {
  /** Ends the loop; resolves once no batch is running, so the store may close after it. */
  stop(): Promise<void>;
}

const DEFAULTS = { checkEveryMs: 2_000, pauseMs: 10, targetBatchMs: 5, first: 200, min: 10, max: 20_000 };
/** A size is planned for this share of the target: commits and checkpoints vary from batch to batch. */
const HEADROOM = 0.8;
/** Unexpected failures (not an outage) back off up to this, so a broken table is not an error line every few seconds. */
const MAX_FAILURE_WAIT_MS = 5 * 60_000;

export function startAuditRetention(db: Db, opts: AuditRetentionOptions): AuditRetention {
  const checkEveryMs = opts.checkEveryMs ?? DEFAULTS.checkEveryMs;
  const pauseMs = opts.pauseMs ?? DEFAULTS.pauseMs;
  const targetMs = opts.targetBatchMs ?? DEFAULTS.targetBatchMs;
  const min = opts.batchRows?.min ?? DEFAULTS.min;
  const max = opts.batchRows?.max ?? DEFAULTS.max;
  const clock = opts.clock ?? (() => performance.now());
  let limit = clamp(opts.batchRows?.first ?? DEFAULTS.first, min, max);
  let failureWaitMs = 0;
  /** Since when batches have stopped before records no checkpoint signs yet. */
  let waitingSince: number | undefined;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;

  /** The next size: shrink in proportion when over the target, grow (at most double) toward what fits when a full batch was quick. */
  function adapt(removed: number, ms: number): void {
    if (ms > targetMs) limit = clamp(Math.floor((limit * targetMs * HEADROOM) / ms), min, max);
    else if (removed === limit) limit = clamp(Math.min(limit * 2, Math.floor((limit * targetMs * HEADROOM) / Math.max(ms, 0.01))), min, max);
  }

  /** One batch; returns how long to wait before the next. */
  async function batch(): Promise<number> {
    const size = limit;
    try {
      const now = opts.now();
      const waitedOut = waitingSince !== undefined && opts.waitLimitMs !== undefined && now - waitingSince > opts.waitLimitMs;
      const limits: AuditLimits = {
        olderThan: now - opts.maxAgeMs,
        keepRows: opts.maxRows,
        ...(opts.anchorKey && { signing: { key: opts.anchorKey, at: now } }),
        ...(waitedOut && { waitForCheckpoints: false }),
      };
      const r = await (opts.prune ? opts.prune(limits, size) : pruneAuditBatch(db, limits, size, clock));
      failureWaitMs = 0;
      if (r.waiting) waitingSince ??= now;
      else if (!r.busy) {
        if (waitedOut && r.removed > 0)
          opts.log.error("audit_retention_unsigned_removal", {
            waited_s: Math.round((now - waitingSince!) / 1000),
            reason:
              "records no checkpoint had signed were removed after waiting longer than checkpoints take (the checkpointer is failing, or a chain nothing signs was added); anchors over records that do not check out are unsigned",
          });
        waitingSince = undefined;
      }
      // The records retention removed did not check out: someone changed them before it reached them. The anchor
      // moved unsigned, so every verification names it; this line says so where operators look first.
      for (const u of r.unsignedAnchors ?? [])
        opts.log.error("audit_anchor_unsigned", { vault_id: u.vaultId, seq: u.seq, reason: `the records retention removed do not check out: ${u.reason}` });
      opts.onBatch?.({ ...r, limit: size });
      if (r.busy) return checkEveryMs; // another instance is catching up
      adapt(r.removed, r.ms);
      return r.more ? pauseMs : checkEveryMs;
    } catch (err) {
      // An outage is told by the store's own signals (health, the change feed); retention just waits for its end.
      if (err instanceof DatabaseUnavailable) return checkEveryMs;
      failureWaitMs = Math.min(Math.max(failureWaitMs * 2, checkEveryMs), MAX_FAILURE_WAIT_MS);
      opts.log.error("audit_retention_failed", { err, retry_s: failureWaitMs / 1000 });
      return failureWaitMs;
    }
  }

  function schedule(ms: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      timer = undefined;
      running = batch().then((wait) => {
        running = undefined;
        schedule(wait);
      });
    }, ms);
  }

  schedule(0);
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      await running;
    },
  };
}

function clamp(n: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, n));
}
