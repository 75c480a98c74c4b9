// Draining the two listeners for a graceful shutdown: both stop accepting at once, what is in flight
// gets up to the grace time to finish, and whatever is still open then is cut. Never waits longer.

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
