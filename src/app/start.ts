// Starts the API listener: opens the store, unlocks the keyring, wires the domain and the egress
// core, and binds Bun.serve to the Hono app. A listener that cannot bind undoes the whole start and
// throws ListenFailed naming its variable and port.

import { describeStore, type Config } from "../config.ts";
import { loadPriceTable } from "./price-table.ts";
import { createPriceBook } from "../policy/index.ts";
import {
  buildProposalHint,
  checkAddress,
  compileNetPolicy,
  createPlanCache,
  createSessionActivity,
  createSettling,
  createUpstream,
  systemResolver,
  type EgressDeps,
  type Resolver,
} from "../egress/index.ts";
import { createMinter, redeemAuthorizationCode } from "../minting/index.ts";
import { createWebhookSender } from "../webhooks/index.ts";
import { toErrorResponse, Unavailable } from "../errors.ts";
import type { LiveSecrets, Logger } from "../log.ts";
import type { Secret } from "../secret.ts";
import { openStore, type PruneBatch, type Store } from "../store/index.ts";
import { createAuthenticator, createVaultAccessCache, type Domain } from "../identity/index.ts";
import { createHashGate, unlockKeyring, type KdfParams } from "../crypto/index.ts";
import { createChangeFeed, type Freshness } from "../store/index.ts";
import { createRateLimiter, resolveSettings } from "../ratelimit/index.ts";
import { createBudgetGate, createRequestApprovalGate, replaceRotatedCredential, restorePrices } from "../workflows/index.ts";
import { CONNECT_CALLBACK_PATH, connectWarnings, operatorClient, type ConnectDeps } from "../workflows/index.ts";
import { restoreRateLimits } from "../identity/index.ts";
import { createOidcClient, createTrustingFetch, createWorkloadKeys } from "../identity/index.ts";
import { createApi } from "../server/index.ts";
import { isWildcardBind, listApiHosts } from "../server/index.ts";
import { listenOrExplain } from "./listen-error.ts";
import { bindTunnelListener, type TunnelLimits } from "../tunnel/index.ts";
import { changeHandlers, revalidateWhileUnannounced } from "./freshness.ts";
import { periodicJobs, startSweeps } from "./periodic-jobs.ts";
import { prepareAuditTrust } from "./audit-trust.ts";
import { effectiveSettings } from "./effective-settings.ts";
import { shutDown } from "./shutdown.ts";
import { databaseHealth } from "./database-health.ts";
import { claimJournal, startAuditWriter } from "./audit-start.ts";
import { brokerLoginThrottle } from "./login-throttle.ts";
import { upstreamRoots } from "./upstream-roots.ts";
import { createSecretStoreRegistry } from "./secret-store-registry.ts";
import { countRefusals, createMetrics, type Metrics } from "../server/index.ts";
import { createTelemetry } from "../telemetry/index.ts";
import { shareWorkerMetrics } from "./worker-metrics.ts";
import type { RunningServer, StartOptions } from "./start-types.ts";

export type { RunningServer, StartOptions };
import { openRootCa } from "./root-ca.ts";
import { warnAboutExposure } from "./exposure-warnings.ts";
import { metricSources } from "./metric-sources.ts";

/**
 * A silent tunnel is closed after 10 minutes: longer than the default upstream timeout (a model API
 * may think for minutes while the agent's connection carries nothing); slow clients are bounded by
 * the head and handshake deadlines instead.
 */
const TUNNEL_IDLE_MS = 10 * 60_000;
const TUNNEL_MAX_HEAD_BYTES = 64 * 1024;

export async function startServer(opts: StartOptions): Promise<RunningServer> {
  const { config } = opts;
  // Defence in depth: every line is scrubbed of the credential values held in memory (item 4 of the
  // no-reveal rules); the plan cache that holds them joins once the keyring is open.
  const cached: LiveSecrets[] = [];
  const log = opts.log.scrubbing({
    *values() {
      for (const source of cached) yield* source.values();
    },
  });
  const now = opts.now ?? Date.now;
  const upstreamCa = upstreamRoots(config);
  const prices = createPriceBook(loadPriceTable(config), config.pricesFile ? "file" : "shipped");
  // One process per audit journal (app/journal-lock.ts): a second broker on this data directory stops here, having
  // touched nothing. Released last, once the journal is closed.
  const journalLock = claimJournal(config, log);
  // Large reads (log pages, service lists, counts) go to a worker thread on SQLite: their time is their caller's, not every request's.
  const store = await openStore(config, {
    readWorker: { onFault: (reason) => log.warn("read_worker_failed", { reason }) },
    // Workers on one SQLite file announce changes to each other through its change log, as instances on PostgreSQL do.
    sharedFile: config.worker !== undefined,
  }).catch((err: unknown) => {
    journalLock?.release();
    throw err;
  });
  // One worker of several (`broker server --workers N`): both ports shared with the others; the instance-wide jobs
  // (sweeps, retention, checkpoints) run in worker 1 only.
  const reusePort = config.worker !== undefined;
  const leads = (config.worker?.id ?? 1) === 1;
  // What a failed start must undo, newest first: a bound API port must not outlive a busy proxy port.
  const undo: (() => unknown)[] = [];
  try {
    const keyring = await unlockKeyring(store, opts.masterPassword, { now });
    if (keyring.created) log.info("keyring_created", { mode: keyring.mode });
    if (keyring.passwordUnused) {
      log.warn("master_password_unused", { hint: "the store has no master password; run `broker master-password set` to add one" });
    }
    // The API port is bound first: the guard, the public URL and every link need the bound port. A
    // request that arrives before the app below is built waits for it; one during a failed start gets 503.
    const app = Promise.withResolvers<ReturnType<typeof createApi>>();
    app.promise.catch(() => {});
    let ready: ReturnType<typeof createApi> | undefined; // set once, so requests after the start take no extra promise hop
    const server = await listenOrExplain("BROKER_PORT", config.bindHost, config.apiPort, () =>
      Bun.serve({
        hostname: config.bindHost,
        port: config.apiPort,
        maxRequestBodySize: Number.MAX_SAFE_INTEGER,
        idleTimeout: 255, // Bun's maximum: a model API may think for minutes before its first byte
        reusePort,
        fetch: (req, srv) => (ready ? ready.fetch(req, srv) : app.promise.then((api) => api.fetch(req, srv))),
        error: (err) => toErrorResponse(err, log),
      }),
    );
    undo.push(
      () => server.stop(true),
      () => app.reject(new Unavailable("the broker could not start")),
    );
    const boundTunnel = opts.tunnel
      ? await listenOrExplain("BROKER_PROXY_PORT", config.bindHost, config.proxyPort, () =>
          bindTunnelListener(config.bindHost, config.proxyPort, { reusePort }),
        )
      : undefined;
    if (boundTunnel) undo.push(() => boundTunnel.close());
    const hostPart = config.bindHost.includes(":") ? `[${config.bindHost}]` : config.bindHost;
    const apiUrl = `http://${hostPart}:${server.port}`;
    const publicUrl = config.publicUrl ?? apiUrl; // the bound port, so BROKER_PORT=0 still yields working links
    // Identity-provider sign-in: an unreachable or invalid provider stops the start (message names BROKER_OIDC_ISSUER).
    const oidc = config.oidc && (await createOidcClient({ ...config.oidc, redirectUri: `${publicUrl}/v1/auth/oidc/callback`, ca: upstreamCa }));
    // The audit log's signing key, and this instance's memory of what it signed and saw (app/audit-trust.ts).
    const auditTrust = await prepareAuditTrust(store, keyring.dataKey, { config, now, log });
    // Read at scrape time, after the start (the API answers only then): the audit log and the tunnel are bound below.
    const metrics: Metrics | undefined = config.metrics && createMetrics(metricSources(store, now, { audit: () => audit, tunnel: () => tunnel?.stats?.() }));
    const rootCa = await openRootCa(store, keyring.dataKey, { now, log, ...(metrics && { onLookup: (o: "hit" | "mint") => metrics.leaf(o) }) });
    const { ca, leaves } = rootCa;
    // Several instances on PostgreSQL: caches are dropped when another instance announces a change,
    // and re-validated every second while announcements may be missed (store/changes.ts).
    const outageGraceMs = config.database?.outageGraceMs ?? 0;
    const feed = createChangeFeed(store.db, {
      now,
      onState: (listening) =>
        listening
          ? log.info("database_listening", {})
          : log.warn("database_announcements_lost", { detail: "caches are re-validated every second until they arrive again" }),
      onError: (err) => log.debug("database_heartbeat_failed", { err }), // an outage is told once, by database_announcements_lost
    });
    undo.push(() => feed.stop());
    const freshness: Freshness = feed;
    const vaultAccess = createVaultAccessCache({ now, freshness, outageGraceMs });
    // Workers share the limits: each enforces its share (ratelimit/limiter.ts), so together they allow what the settings say.
    const share = config.worker;
    const limiter = createRateLimiter(resolveSettings(config.rateLimit.profile, config.rateLimit.overrides, config.rateLimit.locked), now, { share });
    const rateLimiter = metrics ? countRefusals(limiter, metrics) : limiter;
    // Credentials by reference (issue 36): read through their connections off the request path. The guard and
    // DNS are read when a store is dialled (both are set up below, once the listeners are bound).
    const secretStores = createSecretStoreRegistry({
      store,
      dataKey: keyring.dataKey,
      freshness,
      now,
      log,
      policy: () => policy,
      resolver: () => resolver,
      roots: upstreamCa,
      upstreamTimeoutMs: config.upstreamTimeoutMs,
      tokenFiles: config.secretStoreTokenFiles,
      invalidateVault: (id) => plans.invalidate(id),
      noteSent: (values) => plans.noteSent(values),
      ...(metrics && { onRead: (connection: string, outcome: "ok" | "failed") => metrics.secretStoreRead(connection, outcome) }),
    });
    undo.push(() => secretStores.stop());
    // A connected account's service mints with the operator's app (BROKER_CONNECT_<ID>_*), never a vault's copy of it.
    const plans = createPlanCache(store, keyring.dataKey, (host, port) => buildProposalHint(publicUrl, host, port), {
      now,
      freshness,
      outageGraceMs,
      operatorClient: (auth) => operatorClient({ apps: config.connect }, auth),
      references: secretStores,
    });
    cached.push(plans.secrets, secretStores.secrets, {
      *values() {
        for (const app of config.connect) yield app.clientSecret.reveal(); // reveal: the logger's scrub patterns only
      },
    });
    // The journal is the records' first stop (egress/audit-journal.ts): what a killed run or an outage left
    // unwritten is written now, before this run's first record.
    // Live export to the operator's collector (off, and no request holds a span, without its endpoint).
    const telemetry = config.otel && createTelemetry(config.otel, { log, roots: upstreamCa });
    if (telemetry) {
      cached.push(telemetry.secrets);
      undo.push(() => telemetry.stop(0));
    }
    const audit = await startAuditWriter(config, store, {
      now,
      log,
      ...(telemetry && { export: telemetry.audit }),
      onWritten: (heads) => auditTrust.onWritten(heads),
      undo,
      locked: journalLock !== undefined,
    });
    const upstream = createUpstream({
      ca: upstreamCa,
      connectTimeoutMs: Math.min(10_000, config.upstreamTimeoutMs),
      idleTimeoutSeconds: Math.ceil(config.upstreamTimeoutMs / 1000),
      onConnectError: metrics && ((kind) => metrics.connectFailed(kind)),
    });
    undo.push(() => upstream.close());
    // Both listeners are bound: the guard never dials either, and agents get the bound (maybe ephemeral) proxy port.
    const proxyPort = boundTunnel?.port ?? config.proxyPort;
    const policy = compileNetPolicy({
      allowPrivateRanges: config.allowPrivateRanges,
      allowlist: config.networkAllowlist,
      // Upstreams, minted-token endpoints, webhooks and blind tunnels all dial through this policy.
      hostMappings: config.hostMappings,
      ownListeners: [
        { host: config.bindHost, port: Number(server.port) },
        { host: config.bindHost, port: proxyPort },
      ],
    });
    const resolver = opts.resolver ?? systemResolver;
    // Proposal notifications go through the same guard and the same roots.
    const webhooks = createWebhookSender({ store, dataKey: keyring.dataKey, policy: () => policy, resolver, ca: upstreamCa, now, log });
    undo.push(() => webhooks.stop());
    const domain: Domain = {
      store,
      dataKey: keyring.dataKey,
      auth: createAuthenticator(store, { now, freshness, outageGraceMs }),
      hashing: createHashGate({ concurrency: 2, queue: 64 }),
      now,
      publicUrl,
      proxyUrl: `http://${hostPart}:${proxyPort}`,
      passwordKdf: opts.passwordKdf,
      vaultAccess,
      guardRefuses: (ip, port) => {
        const verdict = checkAddress(ip, port, policy);
        return verdict.allowed ? undefined : verdict.reason;
      },
      loginThrottle: brokerLoginThrottle(now, share, log),
      rateLimiter,
      oidc,
      // Trusted workload issuers' keys come over HTTPS verified against the same roots as every upstream (D27).
      workloadKeys: createWorkloadKeys({ fetch: createTrustingFetch(upstreamCa), cooldownMs: config.workloadJwksCooldownMs }),
      onVaultChange: (id) => {
        plans.invalidate(id);
        vaultAccess.clear();
        budgets.invalidate(id);
      },
      webhooks,
      secretStores,
      secretStoreTokenFiles: config.secretStoreTokenFiles,
      prices,
      ...auditTrust.domain,
    };
    const budgets = createBudgetGate(domain, { trustMs: (normal) => freshness.trustMs(normal), log });
    const minter = createMinter({
      upstream,
      policy,
      resolver,
      now,
      log,
      saveRotated: (vaultId, key, value) => replaceRotatedCredential(domain, vaultId, key, value),
      noteSent: (values) => plans.noteSent(values),
    });
    cached.push(minter.secrets);
    // Connecting an account: the code is redeemed at the provider's token endpoint like any token request.
    const connect: ConnectDeps = {
      apps: config.connect,
      redirectUri: `${publicUrl}${CONNECT_CALLBACK_PATH}`,
      redeem: (r) => redeemAuthorizationCode({ upstream, policy, resolver, noteSent: (values) => plans.noteSent(values) }, r),
    };
    for (const detail of connectWarnings(config.connect)) log.warn("connect_settings_unused", { detail });
    const settling = createSettling();
    const egress: EgressDeps = {
      minter,
      approvals: createRequestApprovalGate(domain),
      budgets,
      prices,
      settling,
      plans,
      policy,
      resolver,
      upstream,
      audit,
      log,
      activity: createSessionActivity(now),
      ...(metrics && { metrics: metrics.egress }),
      ...(telemetry && { tracing: telemetry.tracing }),
      now,
      maxRequestBytes: config.maxRequestBytes,
      maxResponseBytes: config.maxResponseBytes,
    };
    await restoreRateLimits(domain).catch((err) => log.warn("saved_rate_limits_ignored", { err }));
    await restorePrices(domain).catch((err) => log.warn("saved_llm_prices_ignored", { err }));
    const reloadCa = rootCa.reload;
    const fresh = { plans, vaultAccess, domain, reloadCa, log, secretStores, budgets };
    await feed.start(changeHandlers(fresh));
    const stopRevalidating = revalidateWhileUnannounced(feed, fresh);
    undo.push(stopRevalidating);
    const hosts = { hosts: listApiHosts(config.bindHost, publicUrl, config.allowedHosts), anyIpLiteral: isWildcardBind(config.bindHost) };
    warnAboutExposure(config, hosts.anyIpLiteral, log);
    const auditRetention = { days: config.auditRetentionDays, maxRows: config.auditMaxRows };
    // Workers: whichever worker a scrape reaches answers for all of them (app/worker-metrics.ts).
    const shared = metrics && config.worker && shareWorkerMetrics(metrics, { dataDir: config.dataDir, worker: config.worker, log });
    if (shared) undo.push(() => shared.stop());
    const served = shared ? shared.metrics : undefined;
    const api = createApi({
      domain,
      log,
      egress,
      ca,
      hosts,
      trustedProxies: config.trustedProxies,
      auditRetention,
      // Announcements are there to lose on PostgreSQL, and between workers on one SQLite file.
      databaseHealth: databaseHealth({ db: store.db, feed: config.database || config.worker ? feed : undefined, auditQueued: () => audit.queued }),
      ...(config.worker && { worker: config.worker }),
      connect,
      effectiveSettings: effectiveSettings(config, Number(server.port), boundTunnel?.port ?? null, store.db.dialect),
      auditKey: auditTrust.signer,
      ...(metrics && { metrics: { registry: served ?? metrics, token: config.metrics?.token } }),
    });
    const listenerName = config.bindHost === "0.0.0.0" || config.bindHost === "::" ? "127.0.0.1" : config.bindHost;
    const tunnel = boundTunnel?.serve({
      domain,
      egress,
      leaves,
      log,
      listenerContext: async () => (await leaves.get(listenerName)).context,
      maxTunnelsPerPrincipal: config.maxTunnelsPerPrincipal,
      maxHeadBytes: TUNNEL_MAX_HEAD_BYTES,
      idleTimeoutMs: TUNNEL_IDLE_MS,
      ...(typeof opts.tunnel === "object" && opts.tunnel),
    });
    ready = api;
    app.resolve(api);
    // Pending proposals expire by time, not when someone happens to read them.
    const sweeper = leads ? startSweeps(periodicJobs(log), domain) : undefined;
    // Retention and signed checkpoints (sent to the vaults' JSON webhooks; a last one at graceful shutdown).
    const auditJobs = auditTrust.start(webhooks, publicUrl, { lead: leads });
    undo.push(() => auditJobs.stopCheckpointer());
    const proxyAddress = tunnel ? `${hostPart}:${tunnel.port}` : undefined;
    log.info("listening", { api: apiUrl, proxy: proxyAddress ?? null, data_dir: config.dataDir, store: describeStore(config), keyring: keyring.mode });
    if (config.otel) log.info("otel_export_on", { traces: config.otel.traces.url, logs: config.otel.logs.url, protocol: config.otel.traces.protocol });
    return {
      apiUrl,
      proxyAddress,
      store,
      pruneAudit: auditTrust.pruneAudit,
      stop: (o) =>
        shutDown(
          {
            log,
            server,
            tunnel,
            stopJobs: () => {
              clearInterval(sweeper);
              if (shared) shared.stop();
              stopRevalidating();
            },
            auditJobs,
            webhooks,
            feed,
            upstream,
            secretStores,
            audit,
            settling,
            telemetry: telemetry || undefined,
            store,
          },
          o,
        ).finally(() => journalLock?.release()),
    };
  } catch (err) {
    // Best effort: every step runs and a failed one is logged, but the first error is the one to report.
    for (const step of undo.reverse())
      await Promise.resolve()
        .then(step)
        .catch((undoErr: unknown) => log.warn("start_undo_failed", { err: undoErr }));
    store.close();
    journalLock?.release();
    throw err;
  }
}
