// mitmproxy as the HTTP/2-capable peer in the bench (`bun run bench --peers`, the h2 row): mitmdump from
// Debian's `mitmproxy` package (installed when missing), regular proxy mode on a free loopback port,
// its own confdir in a temporary directory (so it generates its own CA, which the bench clients trust
// the way they trust the broker's), the bench upstream's CA trusted for the upstream leg, HTTP/2 on both
// legs (`http2`, on by default in 8.x, set explicitly), the broker's Authorization value put on every
// request with `modify_headers` (filter `~q`: requests only; an existing Authorization is replaced),
// no flow file, warnings and errors only. The h2 upstream counts the Authorization values it receives,
// so every mitmproxy run proves the header really arrived.

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, proxyAccepts as accepts } from "./broker.ts";
import { keepOutput, stopProcess } from "./child-process.ts";

export interface MitmproxyProc {
  readonly pid: number;
  readonly port: number;
  /** http://127.0.0.1:<port> */
  readonly proxyUrl: string;
  /** the CA mitmproxy generated in its confdir, which the clients must trust */
  readonly caPem: string;
  readonly version: string;
  logs(): string;
  stop(): Promise<void>;
}

function run(cmd: string[], env: Record<string, string> = {}): { ok: boolean; out: string; err: string } {
  const r = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  return { ok: r.exitCode === 0, out: r.stdout.toString(), err: r.stderr.toString() };
}

/** mitmproxy installed (dpkg), else apt-get install it; `apt-get update` first only when the install fails (the bench runs as root). */
export function ensureMitmproxy(log: (s: string) => void): void {
  const st = run(["dpkg", "-s", "mitmproxy"]);
  if (st.ok && /Status: install ok installed/.test(st.out) && Bun.which("mitmdump")) return;
  log("mitmproxy not installed: apt-get install -y mitmproxy");
  const install = () => run(["apt-get", "install", "-y", "mitmproxy"], { DEBIAN_FRONTEND: "noninteractive" });
  if (install().ok) return;
  log("apt-get install failed: apt-get update, then again");
  const update = run(["apt-get", "update"]);
  if (!update.ok) throw new Error(`apt-get update failed: ${update.err.slice(-2000)}`);
  const again = install();
  if (!again.ok) throw new Error(`apt-get install mitmproxy failed: ${again.err.slice(-2000)}`);
}

/**
 * The `modify_headers` spec "<sep>~q<sep>Authorization<sep><value>": the separator is any character the
 * value does not contain. The value is read with Python string escapes, so it must hold no backslash.
 */
function authorizationSpec(value: string): string {
  if (/[\\\r\n]/.test(value) || value.startsWith("@")) throw new Error("authorization value not safe for modify_headers");
  const sep = [..."/|#!~;,^"].find((c) => !value.includes(c));
  if (!sep) throw new Error("no separator for modify_headers: the authorization value contains them all");
  return `${sep}~q${sep}Authorization${sep}${value}`;
}

/**
 * Starts mitmdump in front of the bench's HTTPS upstreams, trusting `upstreamCaPem` for its outgoing TLS
 * and setting `Authorization: <authorization>` on every request it forwards.
 */
export async function startMitmproxy(o: { upstreamCaPem: string; authorization: string; log: (s: string) => void }): Promise<MitmproxyProc> {
  ensureMitmproxy(o.log);
  const dir = mkdtempSync(join(tmpdir(), "broker-bench-mitmproxy-"));
  const upstreamCa = join(dir, "upstream-ca.pem");
  writeFileSync(upstreamCa, o.upstreamCaPem);
  const ca = join(dir, "mitmproxy-ca-cert.pem");
  const version = /Mitmproxy: ([\d.]+)/.exec(run(["mitmdump", "--version"]).out)?.[1] ?? "?";
  const port = freePort();
  const proc = Bun.spawn(
    [
      "mitmdump",
      "--listen-host",
      "127.0.0.1",
      "--listen-port",
      String(port),
      "--set",
      `confdir=${dir}`,
      "--set",
      `ssl_verify_upstream_trusted_ca=${upstreamCa}`,
      "--set",
      "http2=true",
      "--set",
      "flow_detail=0",
      "--set",
      "termlog_verbosity=warn",
      "--modify-headers",
      authorizationSpec(o.authorization),
    ],
    // HOME too: nothing of ours under the real ~/.mitmproxy.
    { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, HOME: dir } },
  );
  const output = keepOutput(proc);
  const stop = async () => {
    await stopProcess(proc);
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (proc.exitCode !== null) {
      await stop();
      throw new Error(`mitmdump exited with ${proc.exitCode}:\n${output().slice(-3000)}`);
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`mitmdump did not start listening on ${port}:\n${output().slice(-3000)}`);
    }
    if (existsSync(ca) && (await accepts(port))) break;
    await Bun.sleep(50);
  }
  return { pid: proc.pid, port, proxyUrl: `http://127.0.0.1:${port}`, caPem: readFileSync(ca, "utf8"), version, logs: output, stop };
}
