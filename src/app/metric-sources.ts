// What /metrics reads at scrape time besides its counters: the audit queue, the pending proposals and held requests
// (counted in the store), and the tunnel's connections. Read lazily: the audit log and the tunnel exist only once the
// start has bound them, and a scrape is answered only after that.

import type { MetricSources } from "../server/index.ts";
import type { Store } from "../store/index.ts";

export function metricSources(
  store: Store,
  now: () => number,
  live: { readonly audit: () => { readonly queued: number; readonly droppedTotal?: number }; readonly tunnel: MetricSources["tunnel"] },
): MetricSources {
  return {
    auditQueued: () => live.audit().queued,
    auditDropped: () => live.audit().droppedTotal ?? 0,
    proposalsPending: async () => Number((await store.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM proposals WHERE status = 'pending'"))?.n ?? 0),
    requestApprovalsPending: async () =>
      Number((await store.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM request_approvals WHERE state = 'pending' AND expires_at > ?", [now()]))?.n ?? 0),
    tunnel: live.tunnel,
  };
}
