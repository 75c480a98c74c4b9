// `vault run --contain`, the contained side: this same program started by `unshare` in new user and
// network namespaces, as the namespaces' root (which only owns them). It brings up the loopback
// interface (the only one there is: no route out, no DNS server), listens on 127.0.0.1 at the
// broker's API and proxy ports and relays each connection to the Unix sockets the outside half
// bridges to the broker, then runs the agent's command as the calling user and passes its exit code back.

import { spawnSync } from "node:child_process";
import { CONTAIN_ENV, listenRelay, type ContainSpec } from "./contain.ts";
import { listenRedirect, routeEverythingLocally } from "./contain-redirect.ts";
import { runSupervised } from "./supervise.ts";

/** Proxy-Authorization as a proxy-aware client builds it from HTTPS_PROXY's user and password. */
function proxyAuthorization(proxyUrl: string): string {
  const u = new URL(proxyUrl);
  return `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString("base64")}`;
}

/**
 * The command as the user who started `vault run`, in a user namespace nested in this one: it sees its
 * own uid (tools that refuse or change behaviour as root act as they would uncontained) and holds no
 * capability over the network namespace, so it cannot change the routes or listeners set up here.
 */
function asCaller(spec: ContainSpec): string[] {
  return ["unshare", "--user", `--map-user=${spec.uid}`, `--map-group=${spec.gid}`, "--", ...spec.command];
}

export async function runContained(spec: ContainSpec): Promise<number> {
  const up = spawnSync("ip", ["link", "set", "lo", "up"], { encoding: "utf8" });
  if (up.status !== 0) {
    process.stderr.write(`broker: cannot bring up the loopback interface in the namespace: ${(up.stderr || "").trim()}\n`);
    return 1;
  }
  const servers = await Promise.all([
    listenRelay({ host: "127.0.0.1", port: spec.apiPort }, { path: spec.apiSocket }),
    listenRelay({ host: "127.0.0.1", port: spec.proxyPort }, { path: spec.proxySocket }),
  ]);
  // Clients that ignore HTTPS_PROXY: their connections to watched ports go through the proxy anyway.
  if (spec.redirectPorts.length && routeEverythingLocally()) {
    const target = { proxyPort: spec.proxyPort, proxyAuth: proxyAuthorization(process.env.HTTPS_PROXY ?? "") };
    for (const port of spec.redirectPorts) servers.push(await listenRedirect(port, target));
  }
  const env = { ...process.env };
  delete env[CONTAIN_ENV];
  try {
    if (!Bun.which(spec.command[0]!, { PATH: env.PATH ?? "" })) {
      process.stderr.write(`error: cannot run ${spec.command[0]}: command not found\nhint: check the command after --\n`); // as without --contain
      return 127;
    }
    return await runSupervised(asCaller(spec), env);
  } finally {
    for (const s of servers) s.close();
  }
}
