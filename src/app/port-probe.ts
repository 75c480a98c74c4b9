// Before `broker server --workers N` starts its workers on fixed ports: are those ports free, and ours alone? The
// workers bind them with SO_REUSEPORT, which any other process of the same user that also asks for it may share, so a
// second broker started on the same ports (a second `--workers` supervisor, most likely on the same data directory)
// would not fail as a lone broker does (EADDRINUSE) but silently join: its workers would take a share of the
// connections. Two checks, both by the kernel:
// - the claim: the supervisor binds UDP on each fixed port (same host) and holds it while it runs. UDP ports are a
//   space of their own that no worker uses, and a plain bind (no SO_REUSEPORT) of one is exclusive, so of two
//   supervisors started in the same instant exactly one gets it, whoever's workers bind first; the kernel lets go of
//   it when the supervisor ends, however it ends (no file to go stale). *Why not check afterwards* that every
//   connection reaches our own workers (a nonce in /health): that is probabilistic (the kernel's hash may spare us for
//   a while), needs a tie-break when both supervisors see the other, and a second check for the proxy port;
// - the probe: a plain TCP bind of each port, released at once, fails while anything listens there (a lone broker,
//   or the workers of a supervisor that is gone but whose workers have not stopped yet).
// A lone broker needs neither: it binds without SO_REUSEPORT, so the kernel refuses it a port workers hold, and them
// its own.

import { ListenFailed, listenOrExplain, type ListenSetting } from "./listen-error.ts";

export interface PortClaim {
  /** Lets go of the ports (the process's end does too). */
  release(): void;
}

/**
 * Claims the fixed ports (0: any, neither claimed nor probed) for this supervisor's workers; throws ListenFailed
 * naming the setting when another supervisor holds one, or when something listens on one.
 */
export async function claimPorts(host: string, ports: readonly { setting: ListenSetting; port: number }[]): Promise<PortClaim> {
  const held: { close(): void }[] = [];
  const release = () => {
    for (const socket of held.splice(0)) socket.close();
  };
  try {
    for (const { setting, port } of ports) {
      if (port === 0) continue;
      held.push(await claim(setting, host, port));
      const probe = await listenOrExplain(setting, host, port, () => Bun.listen({ hostname: host, port, socket: { data() {} } }));
      probe.stop(true);
    }
  } catch (err) {
    release();
    throw err;
  }
  return { release };
}

async function claim(setting: ListenSetting, host: string, port: number): Promise<{ close(): void }> {
  try {
    // Datagrams anyone sends here are read and dropped.
    return await Bun.udpSocket({ hostname: host, port, socket: { data() {} } });
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (code !== "EADDRINUSE") return listenOrExplain(setting, host, port, () => Promise.reject(err));
    throw new ListenFailed(
      setting,
      host,
      port,
      code,
      `${setting} ${port} is already in use on ${host}: UDP port ${port} there is taken, which a broker server --workers running or starting on that port holds while it runs (so may another program: ss -lunp 'sport = :${port}' names it); stop it or choose another port`,
    );
  }
}
