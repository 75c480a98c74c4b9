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
import type { HeadHistory } from "./audit-head-history.ts";
import {
  CHAIN_CHECK_STATEMENTS,
  checkpointSignedBy,
  signedAnchorOf,
  takeCheckpointTurn,
  walkSegment,
  type AnchorKey,
  type AuditCheckpointRow,
  type MovedHead,
  type ReadRows,
  type StoredChainPoint,
  type Store,
} from "../store/index.ts";
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
  /** Told of every head it reads (each look) and signs: when a head passed which seq (app/audit-head-history.ts). */
  readonly history?: HeadHistory;
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
  /** Ends the loop. `final`: then signs whatever moved since the last checkpoint (graceful shutdown). */
  stop(opts?: { final?: boolean }): Promise<void>;
}

/** The most records one look reads to check a head (one further on is signed as far as they reach). */
const MAX_WALK = 10_000;
/** Stored checkpoints looked at, newest first, for one whose signature holds. */
const STORED_LOOKED_AT = 20;
/** A vault whose head did not follow from what was signed is looked at again after this (each look reads its records since). */
const REFUSED_WAIT_MS = 60_000;

/**
 * What of the vault's head may be signed, or why none: the records from the last point the broker signed for the
 * vault (the newest of the last checkpoint this instance made, the vault's newest stored checkpoint whose signature
 * holds, and its signed anchor) must continue it, one per seq, linked and hashing to their contents. Someone who can
 * write the database, and rewrote records and deleted the checkpoints over them, does not get the rewrite signed. A
 * look reads at most MAX_WALK records: a head further on is signed as far as they reach, and the next look goes on.
 */
export async function signableHead(
  read: ReadRows,
  key: AnchorKey,
  head: MovedHead,
  remembered: AuditCheckpointRow | undefined,
): Promise<{ sign: StoredChainPoint } | { reason: string }> {
  const starts: (StoredChainPoint & { what: string })[] = [];
  const mine = remembered?.heads.find((h) => h.vaultId === head.vaultId);
  if (mine) starts.push({ seq: mine.seq, hash: mine.hash, what: `checkpoint ${remembered!.id}, which this broker made` });
  const stored = (await read(CHAIN_CHECK_STATEMENTS.lastCheckpoints, [head.vaultId, STORED_LOOKED_AT])).find((c) => checkpointSignedBy(key, head.vaultId, c));
  if (stored) starts.push({ seq: Number(stored.seq), hash: String(stored.hash), what: `checkpoint ${Number(stored.id)}` });
  const anchor = await signedAnchorOf(read, key, head.vaultId);
  if ("anchor" in anchor) starts.push({ ...anchor.anchor, what: anchor.anchor.seq ? "the signed anchor" : "the chain's start" });
  if (starts.length === 0) return { reason: "reason" in anchor ? anchor.reason : "nothing the broker signed for it is left" };
  const start = starts.reduce((a, b) => (b.seq > a.seq ? b : a));
  if (start.seq > head.seq) return { reason: `its head (seq ${head.seq}) is behind ${start.what} (seq ${start.seq})` };
  const to = Math.min(head.seq, start.seq + MAX_WALK);
  const walked = walkSegment(head.vaultId, start, await read(CHAIN_CHECK_STATEMENTS.between, [head.vaultId, start.seq, to, MAX_WALK]));
  if ("reason" in walked) return { reason: `from ${start.what} (seq ${start.seq}): ${walked.reason}` };
  if (walked.end.seq !== to) return { reason: `from ${start.what} (seq ${start.seq}): records seq ${walked.end.seq + 1} to ${to} are missing` };
  if (to === head.seq && walked.end.hash !== head.hash) return { reason: `the records from ${start.what} do not lead to its head (seq ${head.seq})` };
  return { sign: walked.end };
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
  /** Vaults whose head was refused, until when they are not looked at again. */
  const refusedUntil = new Map<number, number>();
  /** The last checkpoint signed a head only as far as one look reads: the next look goes on at once. */
  let behind = false;

  /** The moved heads that follow from what was signed; the others are named in the log (once a look) and left unsigned. */
  async function signable(read: ReadRows, moved: readonly MovedHead[]): Promise<MovedHead[]> {
    const ok: MovedHead[] = [];
    for (const h of moved) {
      if ((refusedUntil.get(h.vaultId) ?? 0) > opts.now()) continue;
      const r = await signableHead(read, opts.signer.anchorKey, h, opts.memory?.lastMade(h.vaultId));
      if ("sign" in r) {
        refusedUntil.delete(h.vaultId);
        ok.push({ ...h, seq: r.sign.seq, hash: r.sign.hash });
        if (r.sign.seq < h.seq) behind = true;
        continue;
      }
      refusedUntil.set(h.vaultId, opts.now() + REFUSED_WAIT_MS);
      opts.log.error("audit_head_unsigned", { vault_id: h.vaultId, seq: h.seq, reason: `its records do not follow from what the broker signed: ${r.reason}` });
    }
    return ok;
  }

  const due = (force: boolean) => (moved: readonly MovedHead[], lastAt: number | undefined) =>
    moved.length > 0 && (force || recordsSince(moved) >= opts.everyRecords || opts.now() - (lastAt ?? startedAt) >= opts.everyMs);

  /** One turn; `busy` when another instance had it. `force`: the last one, at shutdown (stored, not announced: delivery has stopped). */
  async function turn(force: boolean): Promise<{ busy: boolean; checkpoint?: AuditCheckpointRow }> {
    // Two reads outside any transaction decide whether a turn is worth taking (on SQLite a transaction takes the write lock).
    const moved = await store.auditCheckpoints.movedHeads();
    const seenAt = opts.now();
    for (const h of moved) opts.history?.observe(h.vaultId, h.seq, seenAt);
    // A look that signed a head only partly makes the next one due, whatever the counts say.
    const dueNow = force || behind;
    if (!due(dueNow)(moved, moved.length ? await store.auditCheckpoints.lastAt() : undefined)) return { busy: false };
    behind = false;
    const result = await takeCheckpointTurn(store.db, {
      keyId: opts.signer.keyId,
      now: opts.now,
      due: due(dueNow),
      signable,
      sign: (id, at, heads) => signCheckpoint(opts.signer, { id, at, heads }),
      ...(opts.keepMs !== undefined && { pruneBefore: opts.now() - opts.keepMs }),
    });
    const c = result.checkpoint;
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
