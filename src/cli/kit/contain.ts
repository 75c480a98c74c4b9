// `vault run --contain`, the outside half: checks that this kernel lets an unprivileged user create
// user and network namespaces, bridges the broker's API and proxy ports to Unix sockets the
// contained side can reach (the namespace has no other way out), and builds the command line that
// starts the contained side (contain-inside.ts) under `unshare`. Nothing here needs root.

import { spawnSync } from "node:child_process";
import { createServer, connect, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { CliFailure } from "./fail.ts";

/** What the contained side needs, handed over in BROKER_CONTAIN_INSIDE (never a secret). */
export interface ContainSpec {
  readonly apiPort: number;
  readonly proxyPort: number;
  readonly apiSocket: string;
  readonly proxySocket: string;
  /** Ports whose connections (to any address) are redirected through the proxy: 443 and the vault's services'. */
  readonly redirectPorts: number[];
  readonly command: string[];
  /** Who ran `vault run`: the command runs as this user and group, not as the namespace's root. */
  readonly uid: number;
  readonly gid: number;
}

export const CONTAIN_ENV = "BROKER_CONTAIN_INSIDE";

const HINT =
  "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 on Debian, user.max_user_namespaces > 0, " +
  "kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu; under Docker, --security-opt seccomp=unconfined), or run without --contain";

/** Throws a CliFailure naming what is missing when containment cannot be set up here. */
export function assertContainable(): void {
  for (const tool of ["unshare", "ip"]) {
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0) {
      throw new CliFailure(
        `--contain needs the ${tool} command (util-linux, iproute2)`,
        `install it (apt-get install ${tool === "ip" ? "iproute2" : "util-linux"}), or run without --contain`,
        2,
      );
    }
  }
  const probe = spawnSync("unshare", ["--user", "--map-root-user", "--net", "--", "ip", "link", "set", "lo", "up"], { encoding: "utf8" });
  if (probe.status !== 0) {
    const why = (probe.stderr || probe.error?.message || "unshare failed").trim().split("\n")[0];
    throw new CliFailure(`this system does not let an unprivileged user create a network namespace (${why})`, HINT, 2);
  }
}

/** The command line that runs this same program's contained side inside new user and network namespaces. */
export function containedArgv(): string[] {
  // A compiled binary is its own entry point; from source, Bun runs the entry file.
  const self = Bun.main.startsWith("/$bunfs/") ? [process.execPath] : [process.execPath, Bun.main];
  return ["unshare", "--user", "--map-root-user", "--net", "--", ...self];
}

export interface Bridges {
  readonly apiSocket: string;
  readonly proxySocket: string;
  close(): void;
}

/** Unix sockets in `dir` (0700) whose every connection is relayed to the broker's API and proxy ports. */
export async function startBridges(dir: string, api: { host: string; port: number }, proxy: { host: string; port: number }): Promise<Bridges> {
  const servers = await Promise.all([listenRelay({ path: join(dir, "api.sock") }, api), listenRelay({ path: join(dir, "proxy.sock") }, proxy)]);
  return {
    apiSocket: join(dir, "api.sock"),
    proxySocket: join(dir, "proxy.sock"),
    close: () => servers.forEach((s) => s.close()),
  };
}

/** Where a relay listens or connects: a Unix socket path, or a TCP host and port. */
export type Endpoint = { readonly path: string } | { readonly host: string; readonly port: number };

const dialEndpoint = (e: Endpoint): Socket => ("path" in e ? connect(e.path) : connect(e.port, e.host));

/** Listens on `on`; every connection is relayed to `to`. */
export async function listenRelay(on: Endpoint, to: Endpoint): Promise<Server> {
  const server = createServer((inbound) => relay(inbound, dialEndpoint(to)));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    if ("path" in on) server.listen(on.path, () => resolve());
    else server.listen(on.port, on.host, () => resolve());
  });
  return server;
}

/** Bytes both ways until either side ends; an error on one side closes both. */
export function relay(a: Socket, b: Socket): void {
  const close = () => (a.destroy(), b.destroy());
  a.on("error", close);
  b.on("error", close);
  a.pipe(b);
  b.pipe(a);
}
