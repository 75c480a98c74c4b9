// Starts the API listener: opens the store, unlocks the keyring, wires the domain and the egress
// core, and binds Bun.serve to the Hono app.

import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import type { Config } from "../config.ts";
import { buildProposalHint, compileNetPolicy, createAuditLog, createPlanCache, createUpstream, systemResolver, type EgressDeps, type Resolver } from "../egress/index.ts";
import type { Logger } from "../log.ts";
import type { Secret } from "../secret.ts";
import { openStore, type Store } from "../store/index.ts";
import { createAuthenticator, createHashGate, unlockKeyring, type Domain } from "../vault/index.ts";
import { expireProposals } from "../vault/proposals.ts";
import { createApi } from "./app.ts";

export interface RunningServer {
  readonly apiUrl: string;
  readonly store: Store;
  stop(): Promise<void>;
}

export interface StartOptions {
  readonly config: Config;
  readonly log: Logger;
  readonly masterPassword: Secret | undefined;
  readonly now?: () => number;
  /** Tests replay DNS answers (rebinding) through this; production uses the system resolver. */
  readonly resolver?: Resolver;
}

export function upstreamRoots(config: Config): string[] | undefined {
  if (!config.upstreamCaFile) return undefined;
  let pem: string;
  try {
    pem = readFileSync(config.upstreamCaFile, "utf8");
  } catch {
    throw new Error(`BROKER_UPSTREAM_CA_FILE: cannot read ${config.upstreamCaFile}`);
  }
  if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new Error(`BROKER_UPSTREAM_CA_FILE: ${config.upstreamCaFile} holds no PEM certificate`);
  // Extra roots are added to, never substituted for, the default ones.
  return [...rootCertificates, pem];
}

export async function startServer(opts: StartOptions): Promise<RunningServer> {
  const { config, log } = opts;
  const now = opts.now ?? Date.now;
  const ca = upstreamRoots(config);
  const store = await openStore(config.dataDir);
  try {
    const keyring = await unlockKeyring(store, opts.masterPassword, { now });
    if (keyring.created) log.info("keyring_created", { mode: keyring.mode });
    if (keyring.passwordUnused) {
      log.warn("master_password_unused", { hint: "the store has no master password; run `broker master-password set` to add one" });
    }
    let handler: (req: Request, server: unknown) => Response | Promise<Response> = () => new Response("starting", { status: 503 });
    const server = Bun.serve({
      hostname: config.bindHost,
      port: config.apiPort,
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      idleTimeout: 120,
      fetch: (req, srv) => handler(req, srv),
      error: () => new Response("internal error", { status: 500 }),
    });
    const hostPart = config.bindHost.includes(":") ? `[${config.bindHost}]` : config.bindHost;
    const apiUrl = `http://${hostPart}:${server.port}`;
    const publicUrl = config.publicUrl ?? apiUrl; // the bound port, so BROKER_PORT=0 still yields working links
    const plans = createPlanCache(store, keyring.dataKey, (host, port) => buildProposalHint(publicUrl, host, port));
    const audit = createAuditLog(store, { now, log, retentionMs: config.auditRetentionDays * 86_400_000, retentionRows: config.auditMaxRows });
    const upstream = createUpstream({ ca, connectTimeoutMs: config.upstreamTimeoutMs, headersTimeoutMs: config.upstreamTimeoutMs, idleTimeoutSeconds: Math.ceil(config.upstreamTimeoutMs / 1000) });
    const domain: Domain = {
      store,
      dataKey: keyring.dataKey,
      auth: createAuthenticator(store, { now }),
      hashing: createHashGate({ concurrency: 2, queue: 64 }),
      now,
      publicUrl,
      proxyUrl: `http://${hostPart}:${config.proxyPort}`,
      onVaultChange: (id) => plans.invalidate(id),
    };
    const egress: EgressDeps = {
      plans,
      policy: compileNetPolicy({
        allowPrivateRanges: config.allowPrivateRanges,
        allowlist: config.networkAllowlist,
        ownListeners: [{ host: config.bindHost, port: Number(server.port) }, { host: config.bindHost, port: config.proxyPort }],
      }),
      resolver: opts.resolver ?? systemResolver,
      upstream,
      audit,
      log,
      now,
      maxRequestBytes: config.maxRequestBytes,
      maxResponseBytes: config.maxResponseBytes,
    };
    const api = createApi({ domain, log, egress });
    handler = (req, srv) => api.fetch(req, srv);
    // Pending proposals expire by time, not when someone happens to read them.
    const sweep = () => void expireProposals(domain).catch((err) => log.error("proposal_expiry_failed", { err }));
    sweep();
    const sweeper = setInterval(sweep, 60_000);
    log.info("listening", { api: apiUrl, data_dir: config.dataDir, keyring: keyring.mode });
    return {
      apiUrl,
      store,
      async stop() {
        clearInterval(sweeper);
        await server.stop(true);
        upstream.close();
        await audit.stop();
        store.close();
      },
    };
  } catch (err) {
    store.close();
    throw err;
  }
}
