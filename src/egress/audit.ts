// Audit records of proxied requests, queued in memory and written in batches off the request
// path, with retention by age and row count. A record holds names and numbers only: never
// header values, bodies, query strings or tokens.

import { DatabaseUnavailable } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { AuditRow, Store } from "../store/index.ts";

export type AuditEntry = Omit<AuditRow, "id">;

export interface AuditLog {
  record(entry: AuditEntry): void;
  /** Writes everything queued (tests and shutdown). */
  flush(): Promise<void>;
  stop(): Promise<void>;
  /** Records waiting to be written (grows while the database is unreachable). */
  readonly queued: number;
  /** Records dropped because the queue was full, since start (metrics). */
  readonly droppedTotal?: number;
}

export interface AuditOptions {
  readonly flushIntervalMs?: number;
  readonly maxBatch?: number;
  /** Queue bound: beyond it records are dropped (and counted) rather than growing memory. */
  readonly maxQueued?: number;
  readonly retentionMs?: number;
  readonly retentionRows?: number;
  readonly now: () => number;
  readonly log: Logger;
}

export function createAuditLog(store: Store, opts: AuditOptions): AuditLog {
  let queue: AuditEntry[] = [];
  let dropped = 0;
  let droppedTotal = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let writing: Promise<void> = Promise.resolve();
  let lastPrune = 0;
  let retryMs = 0;
  const maxBatch = opts.maxBatch ?? 500;

  async function write(): Promise<void> {
    timer = undefined;
    while (queue.length) {
      const batch = queue.slice(0, maxBatch);
      try {
        await store.transaction((tx) => tx.audit.insert(batch));
        queue = queue.slice(batch.length);
        retryMs = 0;
      } catch (err) {
        if (err instanceof DatabaseUnavailable) {
          // Kept, in order, and written when the database answers again (the queue bound still holds).
          if (retryMs === 0) opts.log.warn("audit_write_deferred", { reason: "database unreachable", queued: queue.length });
          retryMs = Math.min(Math.max(retryMs * 2, 250), 5000);
          timer ??= setTimeout(() => (writing = writing.then(write)), retryMs);
          break;
        }
        queue = queue.slice(batch.length);
        opts.log.error("audit_write_failed", { err, records: batch.length });
      }
    }
    if (dropped) {
      opts.log.warn("audit_records_dropped", { count: dropped, reason: "audit queue full" });
      dropped = 0;
    }
    const now = opts.now();
    if (retryMs === 0 && now - lastPrune > 3_600_000) {
      lastPrune = now;
      await store.audit
        .prune(now - (opts.retentionMs ?? 30 * 86_400_000), opts.retentionRows ?? 1_000_000)
        .catch((err) => opts.log.error("audit_prune_failed", { err }));
    }
  }

  function schedule() {
    timer ??= setTimeout(() => {
      writing = writing.then(write);
    }, opts.flushIntervalMs ?? 250);
  }

  return {
    record(entry) {
      if (queue.length >= (opts.maxQueued ?? 100_000)) {
        dropped++;
        droppedTotal++;
        return;
      }
      queue.push(entry);
      schedule();
    },
    async flush() {
      if (timer) clearTimeout(timer);
      timer = undefined;
      writing = writing.then(write);
      await writing;
    },
    async stop() {
      await this.flush();
      if (timer) clearTimeout(timer);
      timer = undefined;
      if (queue.length) opts.log.error("audit_records_lost", { count: queue.length, reason: "the database was unreachable at shutdown" });
    },
    get queued() {
      return queue.length;
    },
    get droppedTotal() {
      return droppedTotal;
    },
  };
}

/** The outcome of one proxied exchange, turned into its audit record (names and numbers only). */
export interface AuditOutcome {
  readonly status: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly error: string | null;
  readonly service: string | null;
  readonly credentialKeys: readonly string[];
  /** Who approved this exact request, when a rule held it for a human. */
  readonly approvedBy?: string | null;
}

export interface AuditedRequest {
  readonly principal: string;
  readonly contained: boolean;
  readonly vault: { readonly id: number; readonly name: string };
  readonly ingress: string;
  readonly method: string;
  readonly host: string;
  readonly port: number;
  /** Path and query as sent; the query is dropped here (it may carry secrets). */
  readonly target: string;
}

export function auditEntry(req: AuditedRequest, startedAt: number, now: number, o: AuditOutcome): AuditEntry {
  return {
    at: startedAt,
    principal: req.principal,
    vaultId: req.vault.id,
    vault: req.vault.name,
    ingress: req.ingress,
    method: req.method,
    host: req.port === 443 ? req.host : `${req.host}:${req.port}`,
    path: req.target.split("?")[0] ?? "/",
    service: o.service,
    credentialKeys: o.credentialKeys.join(","),
    status: o.status,
    bytesIn: o.bytesIn,
    bytesOut: o.bytesOut,
    durationMs: now - startedAt,
    error: o.error,
    contained: req.contained,
    approvedBy: o.approvedBy ?? null,
  };
}
