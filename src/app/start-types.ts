// What starting the broker takes and gives back (app/start.ts): the options a caller (the CLI's `server`, tests,
// benches) passes, and the running broker it gets, with its stop.

import type { Config } from "../config.ts";
import type { KdfParams } from "../crypto/index.ts";
import type { Resolver } from "../egress/index.ts";
import type { Logger } from "../log.ts";
import type { Secret } from "../secret.ts";
import type { PruneBatch, Store } from "../store/index.ts";
import type { TunnelLimits } from "../tunnel/index.ts";

export interface RunningServer {
  readonly apiUrl: string;
  /** host:port of the transparent proxy, when it runs. */
  readonly proxyAddress: string | undefined;
  readonly store: Store;
  /**
   * One audit retention batch with these limits, as the broker's own retention runs it (off the event loop on
   * SQLite, each anchor it moves signed): for tests and benches that need retention now rather than on its clock.
   */
  pruneAudit(limits: { olderThan: number; keepRows: number; waitForCheckpoints?: boolean }, limit: number): Promise<PruneBatch>;
  /**
   * Stops accepting on both listeners; in-flight requests and open tunnels get up to graceMs
   * (default 0: cut at once) to finish; then the audit queue is flushed and the store closed.
   */
  stop(opts?: { graceMs?: number; reason?: string }): Promise<void>;
}

export interface StartOptions {
  readonly config: Config;
  readonly log: Logger;
  readonly masterPassword: Secret | undefined;
  readonly now?: () => number;
  /** Tests replay DNS answers (rebinding) through this; production uses the system resolver. */
  readonly resolver?: Resolver;
  /**
   * Also runs the transparent proxy (tunnel/), as the binary always does; off, only the API runs.
   * Tests may replace the listener's production limits.
   */
  readonly tunnel?: boolean | TunnelLimits;
  /** Argon2id parameters for user passwords, for in-process test fixtures only; the binary never sets it, so it hashes with KDF_DEFAULTS. */
  readonly passwordKdf?: KdfParams;
}
