// What makes this instance's audit log provable (issue 37, docs/audit-chain.md), put together in one place: the
// signing key (made on first start), the memory of the checkpoints this instance made and of when it saw each head
// move (both only in memory: someone who can write the database cannot change them), what the domain reads of them,
// and, once the API answers, retention (signing each anchor it moves) and the checkpointer.

import type { Config } from "../config.ts";
import { loadAuditSigningKey, UNSIGNED_GRACE_MS, type AuditSigner } from "../crypto/index.ts";
import type { Domain, WebhookNotifier } from "../identity/index.ts";
import type { Logger } from "../log.ts";
import { pruneAuditBatch, type PruneBatch, type Store } from "../store/index.ts";
import { announceCheckpoint, createCheckpointMemory, startAuditCheckpointer } from "./audit-checkpointer.ts";
import { createHeadHistory } from "./audit-head-history.ts";
import { startAuditRetention } from "./audit-retention.ts";

export interface AuditTrust {
  readonly signer: AuditSigner;
  /** What the domain reads: the key loaded at start, the checkpoint interval and this instance's memory. */
  readonly domain: Required<Pick<Domain, "auditKey" | "auditCheckpoints">>;
  /** The audit writer committed a batch: each vault's new head seq (they must be signed within the interval). */
  onWritten(heads: ReadonlyMap<number, number>): void;
  /** One retention batch as the broker runs it, anchors signed (RunningServer.pruneAudit). */
  pruneAudit(limits: { olderThan: number; keepRows: number; waitForCheckpoints?: boolean }, limit: number): Promise<PruneBatch>;
  /**
   * Starts retention and the checkpointer, whose checkpoints go to the vaults' webhooks. `lead: false` (a worker but
   * the first of `broker server --workers N`): the checkpointer only, retention being worker 1's.
   */
  start(webhooks: WebhookNotifier, publicUrl: string, opts?: { lead?: boolean }): AuditTrustJobs;
}

export interface AuditTrustJobs {
  /** Ends retention (resolves once no batch runs). */
  stopRetention(): Promise<void>;
  /** Ends the checkpointer; `final`: signs what moved since the last checkpoint first (graceful shutdown). */
  stopCheckpointer(opts?: { final?: boolean }): Promise<void>;
}

export async function prepareAuditTrust(
  store: Store,
  dataKey: CryptoKey,
  deps: { readonly config: Config; readonly now: () => number; readonly log: Logger },
): Promise<AuditTrust> {
  const { config, now, log } = deps;
  // Of instances starting at once, one key is kept.
  const key = await loadAuditSigningKey(store, dataKey, now());
  if (key.created) log.info("audit_signing_key_created", { key_id: key.signer.keyId });
  const signer = key.signer;
  const everyMs = config.auditCheckpointSeconds * 1000;
  const memory = createCheckpointMemory();
  const history = createHeadHistory({ everyMs, graceMs: UNSIGNED_GRACE_MS });
  return {
    signer,
    domain: {
      auditKey: signer,
      auditCheckpoints: { everyMs, lastMade: memory.lastMade, signedThrough: (vaultId) => history.signedThrough(vaultId, now()) },
    },
    onWritten(heads) {
      const at = now();
      for (const [vaultId, seq] of heads) history.observe(vaultId, seq, at);
    },
    pruneAudit(limits, limit) {
      const signed = { ...limits, signing: { key: signer.anchorKey, at: now() } };
      return store.offLoopPrune ? store.offLoopPrune(signed, limit) : pruneAuditBatch(store.db, signed, limit);
    },
    start(webhooks, publicUrl, opts) {
      const retention =
        opts?.lead === false
          ? { stop: async () => {} }
          : startAuditRetention(store.db, {
              maxAgeMs: config.auditRetentionDays * 86_400_000,
              maxRows: config.auditMaxRows,
              now,
              log,
              anchorKey: signer.anchorKey,
              waitLimitMs: 2 * everyMs + UNSIGNED_GRACE_MS,
              ...(store.offLoopPrune && { prune: store.offLoopPrune }),
            });
      const checkpointer = startAuditCheckpointer(store, {
        signer,
        everyRecords: config.auditCheckpointRecords,
        everyMs,
        // A day longer than the records: a record retention has not reached yet keeps the checkpoint that signs it.
        keepMs: (config.auditRetentionDays + 1) * 86_400_000,
        memory,
        history,
        now,
        log,
        onCheckpoint: (c) => void announceCheckpoint(store, webhooks, publicUrl, c),
      });
      return { stopRetention: () => retention.stop(), stopCheckpointer: (o) => checkpointer.stop(o) };
    },
  };
}
