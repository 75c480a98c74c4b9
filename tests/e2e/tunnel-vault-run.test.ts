// `broker vault run` with the compiled binary against a compiled server: the child gets exactly the
// contract's environment (one 0600 CA file for every CA variable, HTTPS_PROXY to the listener,
// inherited proxy settings replaced, no HTTP_PROXY), its curl reaches an HTTPS upstream through the
// listener with the credential injected, its exit code comes back, the scoped session is revoked
// and the CA file removed afterwards.
// The upstream listens on 127.0.0.2, a service on loopback: NO_PROXY is then left unset (loopback names
// would let a client go around the broker to a service).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import type { RunResult, ServerProcess } from "../helpers/binary.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { requireBinary } from "./tunnel-fixture.ts";
import { startVaultRunEnv, type VaultRunEnv } from "./vault-run-fixture.ts";

const SECRET = `sk-vault-run-${crypto.randomUUID()}`;
let upstream: TestUpstream;
let env: VaultRunEnv;
let server: ServerProcess;
let proxyAddress: string;
let hostPort: string;
let outputs: string[];
const cli = (args: string[], stdin?: string, extraEnv: Record<string, string> = {}): Promise<RunResult> => env.cli(args, stdin, extraEnv);

beforeAll(async () => {
  upstream = await startUpstream(undefined, { host: "127.0.0.2", names: { dns: [], ips: ["127.0.0.2"] } });
  hostPort = `127.0.0.2:${upstream.port}`;
  env = await startVaultRunEnv({ upstreamCas: [upstream.pki.caPem], allowlist: "127.0.0.2", secret: SECRET, services: [hostPort] });
  ({ server, outputs } = env);
  const m = /"proxy":"([^"]+)"/.exec(server.logs());
  if (!m) throw new Error(`no proxy address in the listening line:\n${server.logs()}`);
  proxyAddress = m[1]!;
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await upstream?.close();
});

const CA_VARS = [
  "SSL_CERT_FILE",
  "NODE_EXTRA_CA_CERTS",
  "REQUESTS_CA_BUNDLE",
  "CURL_CA_BUNDLE",
  "GIT_SSL_CAINFO",
  "DENO_CERT",
  "AWS_CA_BUNDLE",
  "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
];

function parseEnv(text: string): Map<string, string> {
  const env = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (m) env.set(m[1]!, m[2]!);
  }
  return env;
}

describe("broker vault run (compiled binary)", () => {
  test("exact environment, injected request through the listener, exit code, revocation, CA file removed", async () => {
    if (!requireBinary("curl", "curl")) return;
    const script = [
      "env",
      'echo "__CA_MODE__=$(stat -c %a "$SSL_CERT_FILE")"',
      "echo __BODY__",
      `curl -sS https://${hostPort}/from-vault-run`,
      "echo",
      "exit 7",
    ].join("; ");
    const inherited = {
      HTTPS_PROXY: "http://inherited.invalid:1",
      https_proxy: "http://inherited-lower.invalid:1",
      HTTP_PROXY: "http://inherited-http.invalid:1",
      http_proxy: "http://inherited-http-lower.invalid:1",
      NO_PROXY: "*",
      grpc_proxy: "http://inherited-grpc.invalid:1",
      no_grpc_proxy: "*",
      SSL_CERT_FILE: "/nonexistent/inherited.pem",
      // The server's secrets in the caller's shell must not reach the agent.
      BROKER_DATABASE_URL: "postgres://broker:db-password-inherited@127.0.0.1:1/broker",
      BROKER_MASTER_PASSWORD: "master-password-inherited",
      BROKER_METRICS_TOKEN: "metrics-token-inherited-0123456789",
    };
    const before = upstream.received.length;
    const r = await cli(["vault", "run", "--", "sh", "-c", script], undefined, inherited);
    expect(r.exitCode).toBe(7);

    for (const value of ["db-password-inherited", "master-password-inherited", "metrics-token-inherited-0123456789"])
      expect(r.stdout + r.stderr).not.toContain(value);
    const [envText, rest] = r.stdout.split("__BODY__\n");
    const env = parseEnv(envText!);
    const token = env.get("BROKER_SESSION_TOKEN")!;
    expect(token).toBeTruthy();
    expect(env.get("BROKER_ADDR")).toBe(server.url);
    const proxyPort = proxyAddress.split(":").at(-1);
    expect(env.get("HTTPS_PROXY")).toBe(`http://${encodeURIComponent(token)}:demo@127.0.0.1:${proxyPort}`);
    expect(env.has("NO_PROXY")).toBe(false); // the vault has a service on loopback
    expect(env.get("NODE_USE_ENV_PROXY")).toBe("1");
    // gRPC libraries read only their own lower-case variables.
    expect(env.get("grpc_proxy")).toBe(env.get("HTTPS_PROXY"));
    expect(env.has("no_grpc_proxy")).toBe(false);
    const caFile = env.get("SSL_CERT_FILE")!;
    expect(caFile).not.toBe("/nonexistent/inherited.pem");
    for (const v of CA_VARS) expect(env.get(v)).toBe(caFile);
    expect(env.get("__CA_MODE__")).toBe("600");
    for (const v of ["HTTP_PROXY", "http_proxy", "https_proxy", "no_proxy", "ALL_PROXY", "all_proxy"]) expect(env.has(v)).toBe(false);
    // The contract's variables and nothing else of the kind (BROKER_CONFIG_DIR is the caller's own).
    const kind = [...env.keys()].filter((k) => /proxy|^BROKER_|CERT|CA_BUNDLE|CAINFO|ROOTS/i.test(k) && k !== "BROKER_CONFIG_DIR").sort();
    expect(kind).toEqual(["BROKER_ADDR", "BROKER_SESSION_TOKEN", "HTTPS_PROXY", "NODE_USE_ENV_PROXY", "grpc_proxy", ...CA_VARS].sort());

    // The request went through the listener with the credential injected; curl saw no secret.
    expect(rest).toContain('"url":"/from-vault-run"');
    expect(upstream.received.length).toBe(before + 1);
    const seen = upstream.received.at(-1)!;
    expect(seen.rawHeaders.filter(([k]) => /^(proxy-)?authorization$/i.test(k))).toEqual([["authorization", `Bearer ${SECRET}`]]);
    expect(JSON.stringify(seen.rawHeaders)).not.toContain(token);

    // Afterwards: the scoped session is revoked and the CA file is gone.
    const who = await fetch(`${server.url}/v1/auth/whoami`, { headers: { authorization: `Bearer ${token}` } });
    expect(who.status).toBe(401);
    expect(existsSync(caFile)).toBe(false);

    for (const o of [...outputs, server.logs()]) expect(o).not.toContain(SECRET);
    expect(server.logs()).not.toContain(token);
  });

  test("the child's exit code comes back (0 and 1), and each run's session is revoked", async () => {
    const t = await cli(["vault", "run", "--", "sh", "-c", 'printf %s "$BROKER_SESSION_TOKEN"']);
    expect(t.exitCode).toBe(0);
    expect((await fetch(`${server.url}/v1/auth/whoami`, { headers: { authorization: `Bearer ${t.stdout}` } })).status).toBe(401);
    expect((await cli(["vault", "run", "--", "false"])).exitCode).toBe(1);
  });

  test("--proxy-tls: HTTPS_PROXY=https://… and curl reaches the upstream through the TLS-wrapped listener", async () => {
    if (!requireBinary("curl", "curl")) return;
    const script = `printf '%s\\n' "$HTTPS_PROXY" "grpc_proxy=\${grpc_proxy:-unset}"; curl -sS --proxy-cacert "$SSL_CERT_FILE" https://${hostPort}/proxy-tls`;
    const r = await cli(["vault", "run", "--proxy-tls", "--", "sh", "-c", script]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(r.stdout.split("\n")[0]).toStartWith("https://");
    // gRPC libraries cannot use an https:// proxy: they are not handed one (nor the token for a plain one).
    expect(r.stdout.split("\n")[1]).toBe("grpc_proxy=unset");
    expect(r.stdout).toContain('"url":"/proxy-tls"');
    expect(upstream.received.at(-1)!.rawHeaders).toContainEqual(["authorization", `Bearer ${SECRET}`]);
  });
});
