// `broker vault run --contain` (issue 20) with the compiled binary against a compiled
// server: the command runs in its own user and network namespaces, where the only reachable
// addresses are the broker's API and proxy on 127.0.0.1 (relayed through Unix sockets). Through the
// proxy, curl works with the credential injected; around it (--noproxy '*', a raw socket, DNS)
// nothing gets out; exit codes and revocation behave as without --contain.
// The tests skip, saying why, where the kernel forbids unprivileged namespaces; under CI=true they
// never skip, because this machine kind allows them (checked: `unshare -Urn` works as nobody).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import type { RunResult } from "../helpers/binary.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { requireBinary } from "./tunnel-fixture.ts";
import { startVaultRunEnv, type VaultRunEnv } from "./vault-run-fixture.ts";

const SECRET = `sk-contain-${crypto.randomUUID()}`;
let upstream: TestUpstream;
/** A service reached as https://localhost:<port>, for clients that ignore HTTPS_PROXY (redirected). */
let local: TestUpstream;
/** Not a service: an HTTPS server outside the namespace that nothing inside may reach. */
let outside: TestUpstream;
let env: VaultRunEnv;
let hostPort: string;
const cli = (args: string[]): Promise<RunResult> => env.cli(args);

/** Why containment cannot run here, or undefined when it can. */
function unsupported(): string | undefined {
  const r = spawnSync("unshare", ["--user", "--map-root-user", "--net", "--", "ip", "link", "set", "lo", "up"], { encoding: "utf8" });
  return r.status === 0 ? undefined : `unprivileged network namespaces unavailable: ${(r.stderr || r.error?.message || "").trim()}`;
}
const skipReason = unsupported();
if (skipReason) {
  if (process.env.CI === "true") throw new Error(`this machine kind allows unprivileged namespaces, yet: ${skipReason}`);
  console.warn(`[vault-run-contain] skipped: ${skipReason}`);
}

beforeAll(async () => {
  if (skipReason) return;
  upstream = await startUpstream(undefined, { host: "127.0.0.2", names: { dns: [], ips: ["127.0.0.2"] } });
  hostPort = `127.0.0.2:${upstream.port}`;
  local = await startUpstream(undefined, { host: "127.0.0.1", names: { dns: ["localhost"], ips: [] } });
  outside = await startUpstream(undefined, { host: "127.0.0.2", names: { dns: [], ips: ["127.0.0.2"] } });
  env = await startVaultRunEnv({
    upstreamCas: [upstream.pki.caPem, local.pki.caPem],
    allowlist: "127.0.0.2,127.0.0.1",
    secret: SECRET,
    services: [hostPort, `localhost:${local.port}`],
  });
}, 60_000);

afterAll(async () => {
  await env?.server.stop();
  await upstream?.close();
  await local?.close();
  await outside?.close();
});

describe.skipIf(Boolean(skipReason))("broker vault run --contain (compiled binary)", () => {
  test("through the proxy curl works with the credential injected; around it nothing gets out", async () => {
    if (!requireBinary("curl", "curl")) return;
    const before = upstream.received.length;
    const script = [
      `echo "proxy: $(curl -sS https://${hostPort}/contained)"`,
      // A server outside the namespace that is no service, bypassing the proxy: unreachable.
      `curl -sS --noproxy '*' --max-time 5 -k https://127.0.0.2:${outside.port}/bypass >/dev/null 2>&1; echo "noproxy: $?"`,
      `python3 -c 'import socket
try:
  socket.create_connection(("1.1.1.1", 80), timeout=3); print("raw: connected")
except OSError as e: print("raw: refused", e.errno)'`,
      `getent hosts example.com >/dev/null; echo "dns: $?"`,
      `curl -sS -o /dev/null -w "api: %{http_code}\\n" "$BROKER_ADDR/health"`,
      "exit 7",
    ].join("\n");
    const r = await cli(["vault", "run", "--contain", "--", "sh", "-c", script]);
    expect(r.exitCode).toBe(7);
    expect(r.stdout).toContain('"url":"/contained"');
    expect(r.stdout).toMatch(/^noproxy: [1-9]\d*$/m);
    expect(r.stdout).toMatch(/^raw: refused \d+$/m);
    expect(r.stdout).toMatch(/^dns: [1-9]\d*$/m);
    expect(r.stdout).toContain("api: 200");
    expect(outside.received).toEqual([]);
    const reached = upstream.received.slice(before);
    expect(reached.map((x) => x.url)).toEqual(["/contained"]);
    expect(reached[0]!.rawHeaders).toContainEqual(["authorization", `Bearer ${SECRET}`]);
    expect(r.stdout + r.stderr).not.toContain(SECRET);
  });

  test("a client that ignores HTTPS_PROXY (Node 20 fetch) reaches a service through the broker, injected", async () => {
    const script = `fetch("https://localhost:${local.port}/node-direct").then(async (r) => console.log("node:", r.status, await r.text()), (e) => console.log("node failed:", e.cause?.code ?? e.message))`;
    const r = await cli(["vault", "run", "--contain", "--", "node", "-e", script]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toStartWith("node: 200");
    const seen = local.received.at(-1)!;
    expect(seen.url).toBe("/node-direct");
    expect(seen.rawHeaders).toContainEqual(["authorization", `Bearer ${SECRET}`]);
    expect(r.stdout).not.toContain(SECRET);
  });

  test("exit codes come back as without --contain, and the session is revoked", async () => {
    for (const code of [0, 3]) {
      const r = await cli(["vault", "run", "--contain", "--", "sh", "-c", `echo "$BROKER_SESSION_TOKEN"; exit ${code}`]);
      expect(r.exitCode).toBe(code);
      const token = r.stdout.trim();
      expect(token).toStartWith("av_sess_");
      const after = await fetch(`${env.server.url}/discover`, { headers: { authorization: `Bearer ${token}` } });
      expect(after.status).toBe(401);
    }
  });

  test("SIGTERM reaches the command as without --contain: it exits 143 and the session is revoked", async () => {
    for (const contain of [false, true]) {
      const args = ["vault", "run", ...(contain ? ["--contain"] : []), "--", "sh", "-c", 'echo "$BROKER_SESSION_TOKEN"; trap "exit 143" TERM; sleep 30 & wait'];
      const proc = Bun.spawn([env.bin, ...args], { env: env.owner, stdout: "pipe", stderr: "pipe" });
      const reader = proc.stdout.getReader();
      let out = "";
      while (!out.includes("\n")) {
        const { value, done } = await reader.read();
        if (done) break;
        out += new TextDecoder().decode(value);
      }
      reader.releaseLock();
      proc.kill("SIGTERM");
      expect({ contain, code: await proc.exited }).toEqual({ contain, code: 143 });
      const after = await fetch(`${env.server.url}/discover`, { headers: { authorization: `Bearer ${out.trim()}` } });
      expect({ contain, status: after.status }).toEqual({ contain, status: 401 });
    }
  });

  test("the audit log marks the contained run's requests, and only those", async () => {
    const plain = await cli(["vault", "run", "--", "curl", "-sS", `https://${hostPort}/uncontained`]);
    expect(plain.exitCode).toBe(0);
    type Log = { path: string; contained?: boolean; credential_keys: string[] };
    let logs: Log[] = [];
    // Audit records are written in batches: wait for the last run's.
    for (let i = 0; i < 50 && !logs.some((l) => l.path === "/uncontained"); i++) {
      logs = JSON.parse((await cli(["logs", "--json", "--limit", "1000"])).stdout) as Log[];
      if (!logs.some((l) => l.path === "/uncontained")) await Bun.sleep(200);
    }
    const byPath = (path: string) => logs.filter((l) => l.path === path);
    expect(byPath("/contained").map((l) => l.contained)).toEqual([true]);
    expect(byPath("/node-direct").map((l) => l.contained)).toEqual([true]); // redirected, still marked
    expect(byPath("/uncontained").map((l) => l.contained)).toEqual([false]);
    expect(byPath("/contained")[0]!.credential_keys).toEqual(["API_KEY"]);
    const table = (await cli(["logs"])).stdout;
    expect(table).toMatch(/transparent,contained .*\/contained/);
  });

  test("the command runs as the user who started vault run, without power over the namespace's routes", async () => {
    const r = await cli(["vault", "run", "--contain", "--", "sh", "-c", 'id -u; id -g; ip route add local 10.0.0.0/8 dev lo 2>/dev/null; echo "route: $?"']);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.split("\n").slice(0, 2)).toEqual([String(process.getuid!()), String(process.getgid!())]);
    expect(r.stdout).toMatch(/^route: [1-9]\d*$/m);
  });

  test("a command that does not exist: 127 and the same message as without --contain", async () => {
    const contained = await cli(["vault", "run", "--contain", "--", "no-such-command-here"]);
    const plain = await cli(["vault", "run", "--", "no-such-command-here"]);
    expect(contained.exitCode).toBe(127);
    expect(plain.exitCode).toBe(127);
    expect(contained.stderr.trim()).toBe(plain.stderr.trim());
  });

  test("a redirected connection the broker refuses is not silent: the reason on stderr, or the 403 and its hint under deny", async () => {
    // 127.0.0.3 is no service and outside the network guard's allowlist; the port is a service's, so it is redirected.
    const target = `https://127.0.0.3:${upstream.port}/refused`;
    const script = `fetch("${target}").then(async (r) => console.log("node:", r.status, await r.text()), (e) => console.log("node failed:", e.cause?.code ?? e.message))`;
    const tunnelled = await cli(["vault", "run", "--contain", "--", "node", "-e", script]);
    expect(tunnelled.stdout).toStartWith("node failed:");
    expect(tunnelled.stderr).toContain(`the broker refused a connection to 127.0.0.3:${upstream.port} that did not use HTTPS_PROXY (HTTP 403 egress_blocked`);

    expect((await cli(["vault", "set", "--unmatched-hosts", "deny"])).exitCode).toBe(0);
    try {
      const denied = await cli(["vault", "run", "--contain", "--", "node", "-e", script]);
      expect(denied.stdout).toStartWith("node: 403");
      const body = JSON.parse(denied.stdout.slice("node: 403 ".length)) as { error: string; proposal_hint?: { host: string } };
      expect(body.error).toBe("forbidden");
      expect(body.proposal_hint?.host).toBe(`127.0.0.3:${upstream.port}`);
    } finally {
      expect((await cli(["vault", "set", "--unmatched-hosts", "tunnel"])).exitCode).toBe(0);
    }
  });

  test("nothing printed holds the credential", () => {
    for (const o of env.outputs) expect(o).not.toContain(SECRET);
  });
});
