// A graceful shutdown, in its order: background jobs stop, both listeners stop accepting at once, what is in flight
// gets up to the grace time to finish and whatever is still open then is cut (never longer), then the parts that
// served it close, the audit records queued get what is left of the grace, the last ones are signed, and the store
// closes last.

import { USAGE_SETTLED_WITHIN_MS } from "../egress/index.ts";
import type { Logger } from "../log.ts";

/** The part of Bun's server a drain needs. */
interface ApiListener {
  readonly pendingRequests: number;
  readonly pendingWebSockets: number;
  stop(closeActiveConnections?: boolean): Promise<void>;
}

interface TunnelHandle {
  stop(graceMs?: number): Promise<{ open: number; cut: number }>;
}

export interface DrainReport {
  readonly requestsOpen: number;
  readonly requestsCut: number;
  readonly tunnelConnectionsOpen: number;
  readonly tunnelConnectionsCut: number;
  readonly waitedMs: number;
}

export async function drainListeners(api: ApiListener, tunnel: TunnelHandle | undefined, graceMs: number): Promise<DrainReport> {
  const started = Date.now();
  const inFlight = () => api.pendingRequests + api.pendingWebSockets;
  const requestsOpen = inFlight();
  // Without `true`, Bun stops listening and resolves once every active request has ended (idle keep-alive connections close).
  const apiDone = api.stop(false);
  const tunnelDone = tunnel?.stop(graceMs);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const inTime = await Promise.race([apiDone.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)))]);
  clearTimeout(timer);
  const requestsCut = inTime ? 0 : inFlight();
  if (!inTime) await api.stop(true);
  const tunnels = (await tunnelDone) ?? { open: 0, cut: 0 };
  return { requestsOpen, requestsCut, tunnelConnectionsOpen: tunnels.open, tunnelConnectionsCut: tunnels.cut, waitedMs: Date.now() - started };
}

/** What a shutdown stops, each by the part of it a shutdown needs. */
export interface ShutdownParts {
  readonly log: Logger;
  readonly server: ApiListener;
  readonly tunnel: TunnelHandle | undefined;
  /** Periodic sweeps and re-validation: stopped first. */
  stopJobs(): void;
  readonly auditJobs: { stopRetention(): Promise<void>; stopCheckpointer(opts?: { final?: boolean }): Promise<void> };
  readonly webhooks: { stop(graceMs: number): Promise<unknown> };
  readonly feed: { stop(): Promise<unknown> };
  readonly upstream: { close(): void };
  readonly secretStores: { stop(): void };
  readonly audit: { readonly queued: number; stop(graceMs: number): Promise<void> };
  /** Exchanges answered whose records wait for their usage (a metered stream the agent left: egress/llm-metering.ts). */
  readonly settling?: { whenSettled(limitMs: number): Promise<void> };
  readonly telemetry: { stop(graceMs: number): Promise<void> } | undefined;
  readonly store: { close(): void };
}

export async function shutDown(p: ShutdownParts, { graceMs = 0, reason }: { graceMs?: number; reason?: string } = {}): Promise<void> {
  const started = Date.now();
  p.stopJobs();
  const retentionStopped = p.auditJobs.stopRetention();
  // No delivery starts from here on; those in flight get the same grace as requests, in parallel with them.
  const webhooksSettled = p.webhooks.stop(graceMs);
  p.log.info("shutting_down", {
    reason: reason ?? null,
    grace_s: graceMs / 1000,
    requests_in_flight: p.server.pendingRequests,
    websockets: p.server.pendingWebSockets,
    audit_queued: p.audit.queued,
  });
  // The change feed keeps caches fresh while requests drain: it stops after them.
  const drained = await drainListeners(p.server, p.tunnel, graceMs);
  await p.feed.stop();
  await webhooksSettled; // each delivery's outcome is recorded before the store closes
  p.upstream.close();
  p.secretStores.stop(); // its pools' idle connections to the stores must not hold the process
  await retentionStopped;
  // Answers already sent whose records wait for their usage are made first: for what is left of the grace, but at
  // least as long as the metering waits (a stream cut above gets its usage that long after the cut; each waits no longer).
  await p.settling?.whenSettled(Math.max(USAGE_SETTLED_WITHIN_MS, graceMs - drained.waitedMs));
  // The records queued wait for the database within what is left of the grace; the rest stay in the journal.
  // The collector gets the same time, alongside: what it has not taken by then is dropped and counted.
  const left = Math.max(0, graceMs - (Date.now() - started));
  await Promise.all([p.audit.stop(left), p.telemetry?.stop(left)]);
  // Then the records written until now get a signature (stored; webhook delivery has stopped by now).
  await p.auditJobs.stopCheckpointer({ final: true });
  p.store.close();
  p.log.info("shutdown_complete", {
    waited_ms: drained.waitedMs,
    requests_open: drained.requestsOpen,
    requests_cut: drained.requestsCut,
    tunnel_connections_open: drained.tunnelConnectionsOpen,
    tunnel_connections_cut: drained.tunnelConnectionsCut,
    audit_unwritten: p.audit.queued,
  });
}
