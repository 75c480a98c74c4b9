// Keeping this instance's caches true to the shared database (architecture.md D11): a change another
// instance announces drops what it touched (a vault's plan, session look-ups, the root CA, saved rate
// limits), a lost connection drops everything, and while announcements may be missed the root CA and
// the saved rate limits, which have no trust period of their own, are re-read every second.

import { DatabaseUnavailable } from "../errors.ts";
import type { PlanCache } from "../egress/index.ts";
import { restoreRateLimits, type Domain, type VaultAccessCache } from "../identity/index.ts";
import type { Logger } from "../log.ts";
import { restorePrices } from "../workflows/index.ts";
import { REVALIDATE_MS, type ChangeHandlers } from "../store/index.ts";

export interface Cached {
  readonly plans: PlanCache;
  readonly vaultAccess: VaultAccessCache;
  readonly domain: Domain;
  /** Re-reads the root CA, replacing it (and the leaves minted under it) when it changed. */
  readonly reloadCa: () => Promise<void>;
  readonly log: Logger;
  /** Secret store connections (issue 36): re-read when another instance changes one. */
  readonly secretStores?: { announced(): void };
  /** The vaults' budgets as the budget gate caches them (issue 38). */
  readonly budgets?: { invalidate(vaultId: number): void; clear(): void };
}

export function changeHandlers({ plans, vaultAccess, domain, reloadCa, log, secretStores, budgets }: Cached): ChangeHandlers {
  return {
    apply(change) {
      if (change.t === "vault") {
        plans.invalidate(change.id, true); // perhaps another instance's write: its values may be out already
        vaultAccess.clear();
        budgets?.invalidate(change.id);
      } else if (change.t === "session") {
        domain.auth.forget([change.tokenHash]);
      } else if (change.t === "principal") {
        domain.auth.forget();
        vaultAccess.clear();
      } else if (change.t === "secret_store") {
        secretStores?.announced();
      } else if (change.t === "ca") {
        void reloadCa().catch((err) => log.error("ca_reload_failed", { err }));
      } else {
        void restoreRateLimits(domain).catch((err) => log.error("settings_reload_failed", { err }));
        void restorePrices(domain).catch((err) => log.error("settings_reload_failed", { err }));
      }
    },
    resync() {
      plans.clear();
      budgets?.clear();
      secretStores?.announced();
      vaultAccess.clear();
      domain.auth.forget();
      void reloadCa().catch((err) => log.error("ca_reload_failed", { err }));
      void restoreRateLimits(domain).catch((err) => log.error("settings_reload_failed", { err }));
      void restorePrices(domain).catch((err) => log.error("settings_reload_failed", { err }));
    },
  };
}

/** Re-reads the root CA and saved rate limits every second while the feed is not listening; returns the stop. */
export function revalidateWhileUnannounced(feed: { readonly listening: boolean }, { domain, reloadCa, log }: Cached): () => void {
  // An outage is not worth a log line: it is told once, by database_announcements_lost.
  const quiet = (event: string) => (err: unknown) => {
    if (!(err instanceof DatabaseUnavailable)) log.error(event, { err });
  };
  const timer = setInterval(() => {
    if (feed.listening) return;
    void reloadCa().catch(quiet("ca_reload_failed"));
    void restoreRateLimits(domain).catch(quiet("settings_reload_failed"));
    void restorePrices(domain).catch(quiet("settings_reload_failed"));
  }, REVALIDATE_MS);
  timer.unref?.();
  return () => clearInterval(timer);
}
