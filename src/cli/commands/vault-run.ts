// `broker vault run [--vault V] [--ttl 1h] [--role proxy] [--proxy-tls] -- cmd args…`: runs a
// command as an agent. Mints a scoped session, writes the broker CA (plus the system roots, so
// blind-tunnelled hosts still verify) to a 0600 file, sets exactly the contract's variables
// (replacing inherited copies; never HTTP_PROXY; NO_PROXY never names a service's host), supervises
// the child (stdio inherited, signals forwarded, exit code passed back; blind-tunnelled hosts and a TLS
// failure explained on stderr, kit/run-activity.ts) and revokes the session when the child exits. With
// --identity-token-file (or BROKER_IDENTITY_TOKEN_FILE) the session is exchanged for the platform's token instead.

import { defineCommand } from "citty";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import { vaultArg } from "../kit/index.ts";
import { apiPath } from "../kit/index.ts";
import { openContext, pickVaultOrOnly } from "../kit/index.ts";
import { CliExit, CliFailure } from "../kit/index.ts";
import { nodeProxyWarning } from "../kit/index.ts";
import { printNote } from "../kit/index.ts";
import { addUsageTail } from "../kit/index.ts";
import { runSupervised, watchRunActivity } from "../kit/index.ts";
import { exchangeIdentityToken, watchIdentityToken } from "../kit/index.ts";
import { assertContainable, CONTAIN_ENV, containedArgv, startBridges, type ContainSpec } from "../kit/index.ts";
import type { DiscoveryBody, ScopedSessionCreatedBody } from "../../contract/index.ts";

// AWS_CA_BUNDLE: the AWS CLI and boto3 read their roots only from there (aws_sigv4 services).
// GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: gRPC's own libraries (grpc-js, grpcio) read their roots from there.
const CA_VARIABLES = [
  "SSL_CERT_FILE",
  "NODE_EXTRA_CA_CERTS",
  "REQUESTS_CA_BUNDLE",
  "CURL_CA_BUNDLE",
  "GIT_SSL_CAINFO",
  "DENO_CERT",
  "AWS_CA_BUNDLE",
  "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
];
/** Inherited proxy settings that would send the child's traffic elsewhere (or bypass the broker). */
const REPLACED = [
  "HTTP_PROXY",
  "http_proxy",
  "HTTPS_PROXY",
  "https_proxy",
  "ALL_PROXY",
  "all_proxy",
  "NO_PROXY",
  "no_proxy",
  "grpc_proxy",
  "no_grpc_proxy",
  "BROKER_VAULT",
];
const SYSTEM_BUNDLES = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"];

export function parseTtl(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const m = /^(\d+)([smhd]?)$/.exec(raw.trim());
  if (!m) throw new CliFailure(`--ttl "${raw}" is not a duration`, "use e.g. 30m, 1h, 7d (5 minutes to 7 days)", 2);
  const unit = { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2] as "" | "s" | "m" | "h" | "d"];
  return Number(m[1]) * unit;
}

function systemRoots(): string {
  for (const path of SYSTEM_BUNDLES) if (existsSync(path)) return readFileSync(path, "utf8");
  return rootCertificates.join("\n");
}

/**
 * The caller's other BROKER_* variables are the server's settings (BROKER_DATABASE_URL with its
 * password, BROKER_MASTER_PASSWORD, BROKER_METRICS_TOKEN, …): an agent must not inherit them. Only the
 * CLI's own config directory passes, and the contract's variables are set below.
 */
const serverOnly = (name: string) => name.startsWith("BROKER_") && name !== "BROKER_CONFIG_DIR";

/** Loopback names and addresses: 127.0.0.0/8, ::1, localhost and its subdomains (a service's host may carry a port). */
function isLoopback(host: string): boolean {
  const bare = host.replace(/^\*\./, "").toLowerCase();
  // [v6]:port, a bare v6 address (more than one colon), or name:port.
  const name = bare.startsWith("[") ? bare.replace(/^\[([^\]]+)\](:\d+)?$/, "$1") : bare.split(":").length > 2 ? bare : bare.replace(/:\d{1,5}$/, "");
  return name === "localhost" || name.endsWith(".localhost") || /^127\.\d+\.\d+\.\d+$/.test(name) || name === "::1" || /^::ffff:127\./.test(name);
}

/**
 * NO_PROXY for the child: loopback, so it reaches local things directly, but never a host a service
 * names: a service on loopback (a first local test) must go through the broker, or the child would
 * reach it without a credential and fail on its certificate. Empty: NO_PROXY is not set.
 */
export function noProxyFor(serviceHosts: readonly string[]): string {
  // Clients such as Python's requests match NO_PROXY entries as plain suffixes: `localhost` would also
  // skip the broker for a service named `api.devlocalhost`, so any service ending so drops it too.
  return serviceHosts.some((h) => isLoopback(h) || /localhost(:\d+)?$/i.test(h) || /127\.0\.0\.1(:\d+)?$/.test(h)) ? "" : "localhost,127.0.0.1";
}

export function childEnvironment(
  base: Record<string, string | undefined>,
  s: { addr: string; token: string; vault: string; proxyPort: number; caFile: string; tls: boolean; noProxy?: string },
) {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) if (v !== undefined && !REPLACED.includes(k) && !CA_VARIABLES.includes(k) && !serverOnly(k)) env[k] = v;
  const host = new URL(s.addr).hostname;
  env.BROKER_ADDR = s.addr;
  env.BROKER_SESSION_TOKEN = s.token;
  env.HTTPS_PROXY = `${s.tls ? "https" : "http"}://${encodeURIComponent(s.token)}:${encodeURIComponent(s.vault)}@${host}:${s.proxyPort}`;
  const noProxy = s.noProxy ?? "localhost,127.0.0.1";
  if (noProxy) env.NO_PROXY = noProxy;
  // gRPC libraries read only lower-case variables, their own first (grpc_proxy, no_grpc_proxy). They
  // cannot speak TLS to a proxy (grpc-js ignores an https:// one), so --proxy-tls leaves them unset
  // rather than hand them the token for a plain connection.
  if (!s.tls) {
    env.grpc_proxy = env.HTTPS_PROXY;
    if (noProxy) env.no_grpc_proxy = noProxy;
  }
  env.NODE_USE_ENV_PROXY = "1";
  for (const name of CA_VARIABLES) env[name] = s.caFile;
  return env;
}

const command = defineCommand({
  meta: { name: "run", description: "Run a command as an agent: its HTTPS traffic goes through the broker (HTTPS_PROXY), holding no credential" },
  args: {
    ...vaultArg,
    ttl: { type: "string", description: "Session lifetime, 5m to 7d (default 24h); the session is revoked when the command exits anyway" },
    role: { type: "string", description: "Role of the session: proxy (default), member or admin; never above your own" },
    "proxy-tls": { type: "boolean", description: "Use https:// to reach the proxy itself (HTTPS_PROXY=https://…)" },
    contain: { type: "boolean", description: "Run the command in its own network namespace: it can reach only the broker (Linux, no root needed)" },
    "identity-token-file": {
      type: "string",
      description: "Sign in with the platform's token in this file (CI OIDC, Kubernetes, SPIFFE) instead of a broker token (or BROKER_IDENTITY_TOKEN_FILE)",
    },
  },
  async run({ rawArgs, args }) {
    const dash = rawArgs.indexOf("--");
    const command = dash >= 0 ? rawArgs.slice(dash + 1) : [];
    if (command.length === 0) throw new CliFailure("no command to run", "put it after --, e.g. broker vault run -- curl https://api.github.com/user", 2);
    const warning = nodeProxyWarning(command, process.env.PATH);
    if (warning && !args.contain) printNote(warning); // contained, its connections are redirected to the proxy anyway
    if (args.contain) assertContainable();
    const ctx = openContext();
    const identityFile = args["identity-token-file"] ?? ctx.config.identityTokenFile;
    if (identityFile && (args.role || args.ttl || args.contain)) {
      throw new CliFailure("--role, --ttl and --contain do not apply to an identity token", "the binding decides the role and the session's lifetime", 2);
    }
    let vault: string;
    let session: { id: string; token: string; proxy_port: number | null };
    let revoke: () => Promise<unknown>;
    if (identityFile) {
      const exchanged = await exchangeIdentityToken(ctx.client, identityFile, args.vault);
      vault = exchanged.vault;
      session = exchanged;
      // The platform rotates its token while the command runs: each new one renews this session.
      const watch = watchIdentityToken(exchanged, identityFile, { note: printNote });
      revoke = () => {
        watch.stop();
        return exchanged.client.request("DELETE", apiPath("v1", "sessions", exchanged.id)).catch(() => undefined);
      };
    } else {
      vault = await pickVaultOrOnly(ctx, args.vault);
      // A contained run says so: the audit log marks every request made with its session.
      const body = { vault, role: args.role ?? "proxy", ttl_seconds: parseTtl(args.ttl), ...(args.contain ? { contained: true } : {}) };
      const minted = await ctx.client.request<ScopedSessionCreatedBody>("POST", apiPath("v1", "sessions"), { body, vault });
      session = minted;
      revoke = () => ctx.client.request("DELETE", apiPath("v1", "sessions", minted.id)).catch(() => undefined);
    }
    const dir = mkdtempSync(join(tmpdir(), "broker-run-")); // 0700
    let onExit: (() => void) | undefined;
    try {
      const ca = await fetch(`${ctx.addr}/v1/ca.pem`).then((r) => (r.ok ? r.text() : Promise.reject(new Error(`HTTP ${r.status}`))));
      const caFile = join(dir, "broker-ca.pem");
      writeFileSync(caFile, `${ca}\n${systemRoots()}`, { mode: 0o600 });
      if (!session.proxy_port) throw new CliFailure("the server did not report its proxy port", "upgrade the broker server");
      const hosts = await serviceHosts(ctx.addr, session.token);
      const contained = args.contain ? await containment(dir, ctx.addr, session.proxy_port, hosts.map(portOf), command) : undefined;
      const addr = contained?.addr ?? ctx.addr;
      const noProxy = noProxyFor(hosts);
      const env = childEnvironment(process.env, {
        addr,
        token: session.token,
        vault,
        proxyPort: session.proxy_port,
        caFile,
        tls: Boolean(args["proxy-tls"]),
        noProxy,
      });
      if (contained) env[CONTAIN_ENV] = JSON.stringify(contained.spec);
      onExit = contained?.close;
      const activity = watchRunActivity({ addr: ctx.addr, token: session.token, sessionId: session.id, vault });
      let code = 127;
      try {
        code = await runSupervised(contained ? containedArgv() : command, env);
      } finally {
        await activity.finish(command, code, noProxy);
      }
      throw new CliExit(code);
    } catch (err) {
      if (err instanceof CliExit) throw err;
      if (err instanceof Error && /ENOENT|not found/i.test(err.message))
        throw new CliFailure(`cannot run ${command[0]}: command not found`, "check the command after --", 127);
      throw err;
    } finally {
      onExit?.();
      await revoke();
      rmSync(dir, { recursive: true, force: true });
    }
  },
});

addUsageTail(command, "-- <command> [args…]");

export default command;

/**
 * Bridges for a contained run: inside the namespace the broker is at 127.0.0.1 on the same ports,
 * relayed through Unix sockets in the run's private directory to wherever it really is.
 */
async function containment(dir: string, addr: string, proxyPort: number, ports: number[], command: string[]) {
  const api = new URL(addr);
  const apiPort = Number(api.port || (api.protocol === "https:" ? 443 : 80));
  const bridges = await startBridges(
    dir,
    { host: api.hostname.replace(/^\[|\]$/g, ""), port: apiPort },
    { host: api.hostname.replace(/^\[|\]$/g, ""), port: proxyPort },
  );
  const redirectPorts = [...new Set([443, ...ports])].filter((p) => p !== apiPort && p !== proxyPort);
  const caller = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
  const spec: ContainSpec = { apiPort, proxyPort, apiSocket: bridges.apiSocket, proxySocket: bridges.proxySocket, redirectPorts, command, ...caller };
  return { spec, addr: `${api.protocol}//127.0.0.1:${apiPort}`, close: bridges.close };
}

/** The hosts of the vault's services (enabled ones), as the session's /discover lists them. */
async function serviceHosts(addr: string, token: string): Promise<string[]> {
  const res = await fetch(`${addr}/discover`, { headers: { authorization: `Bearer ${token}` } });
  if (!res.ok) return [];
  const { services = [] } = (await res.json()) as DiscoveryBody;
  return services.map((s) => s.host);
}

/** A service host's port (443 when it names none). */
const portOf = (host: string) => Number(/:(\d{1,5})$/.exec(host)?.[1] ?? 443);
