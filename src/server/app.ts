// The Hono application: routes and middleware over injected dependencies. It reads no
// environment and opens nothing; `serve.ts` binds it to a socket.

import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { InvalidRequest, NotFound, toErrorResponse } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { EgressDeps } from "../egress/index.ts";
import type { CaHolder } from "../crypto/index.ts";
import type { Domain } from "../identity/index.ts";
import { HealthView } from "../contract/index.ts";
import { VERSION } from "../version.ts";
import type { ApiEnv } from "./kit/index.ts";
import { hostCheck, listApiHosts, type HostCheckOptions } from "./kit/index.ts";
import { authTier, globalGate } from "./kit/index.ts";
import { resolveClientAddress } from "./kit/index.ts";
import { caRoutes } from "./routes/index.ts";
import { agentRoutes, inviteRedemptionRoutes } from "./routes/index.ts";
import { authRoutes } from "./routes/index.ts";
import { identityRoutes, oidcRoutes } from "./routes/index.ts";
import { ownerRoutes } from "./routes/index.ts";
import type { EffectiveSettingsBody } from "../contract/index.ts";
import { proxyRoutes } from "./routes/index.ts";
import { discoverRoutes, proposalRoutes, templateRoutes } from "./routes/index.ts";
import { requestApprovalRoutes } from "./routes/index.ts";
import { describe } from "./openapi/index.ts";
import { buildOpenApi } from "./openapi/index.ts";
import { approveRoutes, assetRoutes } from "./routes/index.ts";
import { heldApprovalRoutes } from "./routes/index.ts";
import { consoleRoutes } from "./console/index.ts";
import { logRoutes } from "./routes/index.ts";
import { auditExportRoutes } from "./routes/index.ts";
import { auditCheckpointRoutes, auditKeyRoutes } from "./routes/index.ts";
import type { AuditPublicKey } from "../crypto/index.ts";
import { metricsRoutes } from "./routes/index.ts";
import type { Metrics } from "./kit/index.ts";
import type { Secret } from "../secret.ts";
import type { ConnectDeps } from "../workflows/index.ts";
import { sessionRoutes } from "./routes/index.ts";
import { workloadExchangeRoutes, workloadIssuerRoutes } from "./routes/index.ts";
import { vaultInviteRoutes } from "./routes/index.ts";
import { vaultRoutes } from "./routes/index.ts";
import { webhookRoutes } from "./routes/index.ts";
import { budgetRoutes } from "./routes/index.ts";
import { secretStoreRoutes } from "./routes/index.ts";
import { vaultCodeRoutes } from "./routes/index.ts";

export interface ApiDeps {
  readonly domain: Domain;
  readonly log: Logger;
  /** The egress core's dependencies; without them /proxy answers 404 (unit tests of the API alone). */
  readonly egress?: EgressDeps;
  /** The root CA (GET /v1/ca.pem, POST /v1/ca/rotate); absent in API-only unit tests. */
  readonly ca?: CaHolder;
  /** Host names the API answers to; absent: loopback names and the public URL's host. */
  readonly hosts?: HostCheckOptions;
  /** BROKER_AUDIT_RETENTION_DAYS and BROKER_AUDIT_MAX_ROWS, shown read-only on the owner's settings page. */
  readonly auditRetention?: { readonly days: number; readonly maxRows: number };
  /** BROKER_TRUSTED_PROXIES: peers whose X-Forwarded-For names the client; absent or empty: the peer is the client. */
  readonly trustedProxies?: readonly string[];
  /** What /health reports about the database; absent: a bare check that the store answers. */
  readonly databaseHealth?: () => Promise<DatabaseHealth>;
  /** With `broker server --workers N`: this worker's number and the count, said by /health. */
  readonly worker?: { readonly id: number; readonly count: number };
  /** GET /metrics (BROKER_METRICS / BROKER_METRICS_TOKEN); absent: metrics are off and /metrics is 404. */
  readonly metrics?: { readonly registry: Metrics; readonly token: Secret | undefined };
  /** Connecting accounts at templates' providers (BROKER_CONNECT_<ID>_*); absent: no template offers it. */
  readonly connect?: ConnectDeps;
  /** The settings this server runs with, for the owner (`broker doctor`); absent: 404. */
  readonly effectiveSettings?: EffectiveSettingsBody;
  /** The audit signing key this instance loaded (GET /v1/audit/public-key, the Settings page); absent: read from the store. */
  readonly auditKey?: AuditPublicKey;
}

export interface DatabaseHealth {
  readonly backend: "sqlite" | "postgres";
  readonly reachable: boolean;
  /** PostgreSQL: whether changes made by other instances are being announced to this one. */
  readonly announcements?: "listening" | "lost";
  /** Audit records waiting for the database. */
  readonly audit_queued: number;
}

export function createApi(deps: ApiDeps): Hono<ApiEnv> {
  const d = deps.domain;
  const api = new Hono<ApiEnv>();
  api.onError((err) => {
    if (err instanceof HTTPException && err.status < 500) return toErrorResponse(new InvalidRequest(err.message || "invalid request"), deps.log);
    return toErrorResponse(err, deps.log);
  });
  api.notFound(() => toErrorResponse(new NotFound("no such endpoint"), deps.log));
  api.use("*", async (c, next) => {
    await next();
    // Set on the finished Response itself: Hono's c.header() would copy the whole Response once per
    // call here (~5% of the CPU samples of a /proxy request). Only a Response with frozen headers
    // (one fetch() returned) needs the copy.
    let headers = c.res.headers;
    try {
      headers.set("x-content-type-options", "nosniff");
    } catch {
      c.res = new Response(c.res.body, c.res);
      headers = c.res.headers;
      headers.set("x-content-type-options", "nosniff");
    }
    headers.set("referrer-policy", "no-referrer");
    if (!headers.has("cache-control")) headers.set("cache-control", "no-store");
  });
  // Before anything else runs or is counted: a Host this broker does not answer to gets 421 (DNS rebinding).
  api.use("*", hostCheck(deps.hosts ?? { hosts: listApiHosts("127.0.0.1", d.publicUrl, []) }));

  // Once, before anything keys on it: behind a trusted reverse proxy the client is not the socket peer.
  if (deps.trustedProxies?.length) api.use("*", resolveClientAddress(deps.trustedProxies));

  // GLOBAL covers everything; AUTH (per client IP) covers the anonymous, expensive or token-guessable endpoints.
  api.use("*", globalGate(d.rateLimiter));
  for (const path of ["/v1/auth/register", "/v1/auth/login", "/v1/vault-invites/*", "/invite/*", "/approve/*", "/v1/sessions/exchange"])
    api.use(path, authTier(d.rateLimiter));

  // 200 while the process serves: during a database outage it still proxies for cached sessions, and a
  // liveness probe that restarted it would throw those caches (and queued audit records) away.
  api.get(
    "/health",
    describe({ summary: "Liveness and the database's state", tags: ["meta"], auth: "none", success: { status: 200, schema: HealthView } }),
    async (c) => {
      if (!deps.databaseHealth) {
        await d.store.db.get("SELECT 1"); // a health check that cannot reach its store is not healthy
        return c.json({ status: "ok", version: VERSION });
      }
      const database = await deps.databaseHealth();
      const ok = database.reachable && database.announcements !== "lost";
      const worker = deps.worker && { id: deps.worker.id, of: deps.worker.count };
      return c.json({ status: ok ? "ok" : "degraded", version: VERSION, database, ...(worker && { worker }) });
    },
  );

  if (deps.metrics) api.route("/metrics", metricsRoutes(deps.metrics.registry, deps.metrics.token));

  // Before /v1/auth: its sub-app asks every path for a bearer token, and these routes are anonymous.
  api.route("/v1/auth/oidc", oidcRoutes(d, deps.log));
  api.route("/v1/account/identities", identityRoutes(d));
  api.route("/v1/auth", authRoutes(d));
  api.route("/v1/vaults", vaultRoutes(d));
  api.route("/v1/vault-invites", vaultInviteRoutes(d));
  api.route("/v1/agents", agentRoutes(d));
  api.route("/v1/sessions/exchange", workloadExchangeRoutes(d, deps.log)); // anonymous: before /v1/sessions' principal check
  api.route("/v1/sessions", sessionRoutes(d, deps.egress?.activity));
  api.route("/v1/workload-issuers", workloadIssuerRoutes(d));
  api.route("/v1/owner", ownerRoutes(d, deps.effectiveSettings));
  api.route("/invite", inviteRedemptionRoutes(d));
  api.route("/v1/vaults", logRoutes(d));
  api.route("/v1/vaults", auditExportRoutes(d));
  api.route("/v1/vaults", auditCheckpointRoutes(d));
  api.route("/v1/audit", auditKeyRoutes(d, deps.auditKey));
  api.route("/v1/vaults", webhookRoutes(d));
  api.route("/v1/vaults", budgetRoutes(d));
  api.route("/v1/secret-stores", secretStoreRoutes(d));
  api.route("/v1", vaultCodeRoutes(d)); // /v1/export and /v1/apply
  api.route("/v1/vaults", requestApprovalRoutes(d));
  api.route("/", discoverRoutes(d));
  api.route("/v1/proposals", proposalRoutes(d));
  api.route("/v1/templates", templateRoutes());
  api.route("/approve/requests", heldApprovalRoutes(d, deps.log)); // before /approve/:id
  api.route("/approve", approveRoutes(d, deps.log));
  api.route("/assets", assetRoutes());
  const minter = deps.egress?.minter;
  const mintedState = minter && ((vaultId: number, host: string) => minter.state(vaultId, host));
  api.route("/", consoleRoutes(d, deps.log, { ca: deps.ca, auditRetention: deps.auditRetention, mintedState, connect: deps.connect, auditKey: deps.auditKey })); // HTML pages at /, /account, /vaults/...; JSON clients keep JSON
  if (deps.egress) api.route("/proxy", proxyRoutes(d, deps.egress));
  if (deps.ca) {
    const ca = caRoutes(d, deps.ca, deps.log);
    api.route("/v1/ca", ca);
    api.get(
      "/v1/ca.pem",
      describe({
        summary: "The root CA certificate agents trust for the transparent proxy",
        tags: ["ca"],
        auth: "none",
        success: { status: 200, contentType: "application/x-pem-file" },
      }),
      (c) => c.body(deps.ca!.current.certPem, 200, { "content-type": "application/x-pem-file", "cache-control": "no-cache" }),
    );
  }
  // Last: the document lists every route registered above (and itself), built once on first request.
  let openApi: Record<string, unknown> | undefined;
  api.get(
    "/v1/openapi.json",
    describe({
      summary: "This API as an OpenAPI 3.1 document",
      tags: ["meta"],
      auth: "none",
      success: { status: 200, contentType: "application/json", description: "The OpenAPI 3.1 document" },
    }),
    (c) => c.json((openApi ??= buildOpenApi(api.routes, d.publicUrl)), 200, { "cache-control": "no-cache" }),
  );
  return api;
}
