// Signed checkpoints of the audit chains (issue 37, docs/audit-chain.md, Checkpoints): every
// BROKER_AUDIT_CHECKPOINT_RECORDS records or BROKER_AUDIT_CHECKPOINT_SECONDS, whichever comes first and only
// when a head moved, the heads that moved since the last checkpoint are signed with the broker's Ed25519 key
// and stored; a last one is made at graceful shutdown. Both counts are read from the database (each vault's
// head against the seq its last checkpoint signed; the newest checkpoint's time), so several instances on one
// PostgreSQL count the records all of them wrote and take turns (store/audit-checkpoints.ts). Each
// checkpoint is then sent to the JSON webhooks of the vaults it covers.

import { signCheckpoint, type AuditSigner } from "../crypto/index.ts";
import { DatabaseUnavailable } from "../errors.ts";
import type { WebhookNotifier } from "../identity/index.ts";
import type { Logger } from "../log.ts";
import { takeCheckpointTurn, type AuditCheckpointRow, type MovedHead, type Store } from "../store/index.ts";
import { auditCheckpointEvent } from "../workflows/index.ts";

export interface AuditCheckpointerOptions {
  readonly signer: AuditSigner;
  /** BROKER_AUDIT_CHECKPOINT_RECORDS: a checkpoint once this many records were written since the last. */
  readonly everyRecords: number;
  /** BROKER_AUDIT_CHECKPOINT_SECONDS, in ms: a checkpoint once this long has passed since the last (if a head moved). */
  readonly everyMs: number;
  readonly now: () => number;
  readonly log: Logger;
  /** Remembers each checkpoint this instance makes (the last one, made while stopping, too). */
  readonly memory?: CheckpointMemory;
  /** How often the heads are looked at (two small reads). Default 1 s, or everyMs when shorter. */
  readonly pollMs?: number;
  /** Checkpoints older than this go, as the audit records they cover do (BROKER_AUDIT_RETENTION_DAYS); absent: kept. */
  readonly keepMs?: number;
  /** Told of each checkpoint this instance made, once it is committed (not of the last, made while stopping). */
  readonly onCheckpoint?: (c: AuditCheckpointRow) => void;
}

/**
 * The last checkpoint this instance made for each vault, kept in memory: the broker's own verification checks it
 * against the database, where someone with write access could have deleted it (docs/audit-chain.md, "Verifying").
 */
export interface CheckpointMemory {
  lastMade(vaultId: number): AuditCheckpointRow | undefined;
  remember(c: AuditCheckpointRow): void;
}

export function createCheckpointMemory(): CheckpointMemory {
  const last = new Map<number, AuditCheckpointRow>();
  return {
    lastMade: (vaultId) => last.get(vaultId),
    remember(c) {
      for (const h of c.heads) {
        const before = last.get(h.vaultId);
        if (!before || before.id < c.id) last.set(h.vaultId, c);
      }
    },
  };
}

export interface AuditCheckpointer {
  /**
   * One look now: makes a checkpoint when one is due (with `force`, whenever a head moved) and returns it;
   * undefined when none was due or another instance had the turn.
   */
  tick(force?: boolean): Promise<AuditCheckpointRow | undefined>;
  /** The audit writer wrote records, the oldest begun at `at`: one older than the interval makes the next look due. */
  noteWritten(at: number): void;
  /** Ends the loop. `final`: then signs whatever moved since the last checkpoint (graceful shutdown). */
  stop(opts?: { final?: boolean }): Promise<void>;
}

/** Unexpected failures back off up to this, so a broken table is not an error line every second. */
const MAX_FAILURE_WAIT_MS = 5 * 60_000;
/** At shutdown, how long to wait for another instance's turn to end before leaving the last records to it. */
const FINAL_TURN_WAIT_MS = 2_000;

/** Records written since the last checkpoint, over the heads that moved. */
export function recordsSince(moved: readonly MovedHead[]): number {
  // A head behind its mark (a chain begun again) counts as moved by its whole length.
  return moved.reduce((n, h) => n + (h.seq > h.checkpointSeq ? h.seq - h.checkpointSeq : h.seq), 0);
}

export function startAuditCheckpointer(store: Store, opts: AuditCheckpointerOptions): AuditCheckpointer {
  const pollMs = opts.pollMs ?? Math.min(1_000, opts.everyMs);
  /** Before the first checkpoint ever, time is counted from this instance's start. */
  const startedAt = opts.now();
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<unknown> | undefined;
  let failureWaitMs = 0;
  /** The oldest request start among records written since this instance's last turn began (undefined: none). */
  let oldestWritten: number | undefined;

  const due = (force: boolean, late: boolean) => (moved: readonly MovedHead[], lastAt: number | undefined) =>
    moved.length > 0 && (force || late || recordsSince(moved) >= opts.everyRecords || opts.now() - (lastAt ?? startedAt) >= opts.everyMs);

  /** One turn; `busy` when another instance had it. `force`: the last one, at shutdown (stored, not announced: delivery has stopped). */
  async function turn(force: boolean): Promise<{ busy: boolean; checkpoint?: AuditCheckpointRow }> {
    // A record written a whole interval after its request began is signed now, not an interval later.
    const pending = oldestWritten;
    oldestWritten = undefined;
    const late = pending !== undefined && opts.now() - pending >= opts.everyMs;
    const keep = () => void (oldestWritten = pending === undefined ? oldestWritten : Math.min(pending, oldestWritten ?? pending));
    // Two reads outside any transaction decide whether a turn is worth taking (on SQLite a transaction takes the write lock).
    let result: Awaited<ReturnType<typeof takeCheckpointTurn>>;
    try {
      const moved = await store.auditCheckpoints.movedHeads();
      if (!due(force, late)(moved, moved.length ? await store.auditCheckpoints.lastAt() : undefined)) {
        keep();
        return { busy: false };
      }
      result = await takeCheckpointTurn(store.db, {
        keyId: opts.signer.keyId,
        now: opts.now,
        due: due(force, late),
        sign: (id, at, heads) => signCheckpoint(opts.signer, { id, at, heads }),
        ...(opts.keepMs !== undefined && { pruneBefore: opts.now() - opts.keepMs }),
      });
    } catch (err) {
      keep();
      throw err;
    }
    const c = result.checkpoint;
    if (!c) keep();
    if (c) {
      opts.memory?.remember(c);
      opts.log.debug("audit_checkpoint", { id: c.id, vaults: c.heads.length, key_id: c.keyId });
      if (!stopped) opts.onCheckpoint?.(c);
    }
    return result;
  }

  async function tick(force = false): Promise<AuditCheckpointRow | undefined> {
    return (await turn(force)).checkpoint;
  }

  async function loopOnce(): Promise<number> {
    try {
      await turn(false);
      failureWaitMs = 0;
      return pollMs;
    } catch (err) {
      // An outage is told by the store's own signals (health, the change feed); the heads wait for its end.
      if (err instanceof DatabaseUnavailable) return pollMs;
      failureWaitMs = Math.min(Math.max(failureWaitMs * 2, pollMs), MAX_FAILURE_WAIT_MS);
      opts.log.error("audit_checkpoint_failed", { err, retry_s: failureWaitMs / 1000 });
      return failureWaitMs;
    }
  }

  function schedule(ms: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      timer = undefined;
      const run = loopOnce().then((wait) => {
        running = undefined;
        schedule(wait);
      });
      running = run;
    }, ms);
  }

  schedule(pollMs);
  return {
    tick,
    noteWritten(at) {
      oldestWritten = oldestWritten === undefined ? at : Math.min(oldestWritten, at);
    },
    async stop({ final = false } = {}) {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      await running;
      if (!final) return;
      // The last records this instance wrote get a signature before it goes; another instance's turn is
      // waited for a moment (it may not have read them), then they are left to that instance.
      const deadline = Date.now() + FINAL_TURN_WAIT_MS;
      try {
        for (;;) {
          const r = await turn(true);
          if (!r.busy || Date.now() >= deadline) {
            if (r.busy) opts.log.info("audit_checkpoint_left", { reason: "another instance was making a checkpoint at shutdown" });
            return;
          }
          await Bun.sleep(50);
        }
      } catch (err) {
        opts.log.warn("audit_checkpoint_skipped", {
          err,
          reason: "the last checkpoint could not be made at shutdown; the next one (by any instance) covers these records",
        });
      }
    },
  };
}

/**
 * Sends checkpoint `c` to the JSON webhooks of each vault it covers, with that vault's head (and every head
 * signed, so the signature can be checked). Never throws, never waits for delivery.
 */
export async function announceCheckpoint(store: Store, webhooks: WebhookNotifier, publicUrl: string, c: AuditCheckpointRow): Promise<void> {
  for (const head of c.heads) {
    try {
      if ((await store.webhooks.count(head.vaultId)) === 0) continue;
      const vault = await store.vaults.byId(head.vaultId);
      if (!vault) continue; // deleted since: its chain stays, its webhooks went with it
      webhooks.notify(vault.id, auditCheckpointEvent(publicUrl, vault, c));
    } catch {
      // A notification never fails the checkpoint; the checkpoint is stored and listed either way.
    }
  }
}
