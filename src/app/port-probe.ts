// Before `broker server --workers N` starts its workers on fixed ports: are those ports free? The workers bind them
// with SO_REUSEPORT, which any other process of the same user that also asks for it may share, so a second broker
// started by mistake on the same ports (a second `--workers` supervisor, most likely on the same data directory)
// would not fail as a lone broker does (EADDRINUSE) but silently join: its workers would take half the connections
// and append to the same audit journals as the first broker's. A plain bind of each port, released at once, fails
// while anything listens there, so the supervisor stops with the usual sentence instead. (Two supervisors started in
// the same instant can both pass; the probe is for the mistake, not the race.)

import { listenOrExplain, type ListenSetting } from "./listen-error.ts";

/** Throws ListenFailed naming the setting when one of the fixed ports (0: any, not probed) is taken. */
export async function probePortsFree(host: string, ports: readonly { setting: ListenSetting; port: number }[]): Promise<void> {
  for (const { setting, port } of ports) {
    if (port === 0) continue;
    const probe = await listenOrExplain(setting, host, port, () => Bun.listen({ hostname: host, port, socket: { data() {} } }));
    probe.stop(true);
  }
}
