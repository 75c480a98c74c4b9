// Prometheus metrics (prom-client) for GET /metrics: one registry per server, passed through deps.
// Labels are names and classes only: ingress, vault name, service host pattern, status class, tier,
// failure kind. Never a path, query string, token, header or credential value.
// Scrape-time numbers (audit queue, open tunnels, pending proposals and held requests) are read by
// collect callbacks, so the hot path pays only for the per-request counter and two histogram observations.

import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { ConnectFailure, EgressMetrics, ExchangeObservation, UsageObservation } from "../../egress/index.ts";
import type { GlobalEntry, RateDecision, RateDenied, RateLimiter } from "../../ratelimit/index.ts";

export type RefusalTier = "auth" | "authed" | "proxy" | "global";

/** Read at scrape time; each may be absent (no tunnel listener, API-only tests). */
export interface MetricSources {
  readonly auditQueued: () => number;
  readonly auditDropped: () => number;
  readonly proposalsPending: () => Promise<number>;
  /** Held requests (rules with "approve": "each") waiting for a human, not yet expired. */
  readonly requestApprovalsPending: () => Promise<number>;
  readonly tunnel: () => { connections: number; tunnels: number } | undefined;
}

export interface Metrics {
  readonly registry: Registry;
  readonly egress: EgressMetrics;
  connectFailed(kind: ConnectFailure): void;
  refused(tier: RefusalTier): void;
  leaf(outcome: "hit" | "mint"): void;
  /** A read of a secret store through a connection (issue 36): its outcome. */
  secretStoreRead(connection: string, outcome: "ok" | "failed"): void;
  /** The exposition text and its content type. */
  render(): Promise<{ body: string; contentType: string }>;
}

// Broker-added time is usually well under a millisecond; upstream time spans API calls to model streams.
const BROKER_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1];
const UPSTREAM_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const STATUS_CLASSES = ["1xx", "2xx", "3xx", "4xx", "5xx"] as const;

export function statusClass(status: number): string {
  return STATUS_CLASSES[Math.floor(status / 100) - 1] ?? "5xx";
}

/** Distinct model names a registry keeps as labels; calls to any further model count as "other" (an upstream names them). */
const MAX_MODEL_LABELS = 200;

/**
 * LLM usage (issue 38): tokens by direction and money, by vault, agent, service and model. The model label comes from
 * upstream answers (already reduced to a plain name by llm-metering.ts), so its distinct values are bounded.
 */
function llmUsageMetrics(registers: Registry[]): (o: UsageObservation) => void {
  const labelNames = ["vault", "agent", "service", "model"] as const;
  const tokens = new Counter({
    name: "broker_llm_tokens_total",
    help: "LLM tokens the upstreams reported, by vault, agent, service, model and direction (input, output)",
    labelNames: [...labelNames, "direction"] as const,
    registers,
  });
  const calls = new Counter({
    name: "broker_llm_calls_total",
    help: "Metered LLM calls by vault, agent, service, model and whether the price table prices the model",
    labelNames: [...labelNames, "priced"] as const,
    registers,
  });
  const cost = new Counter({
    name: "broker_llm_cost_total",
    help: "What metered LLM calls cost by the price table in use, in its currency",
    labelNames: [...labelNames, "currency"] as const,
    registers,
  });
  const models = new Set<string>();
  return (o) => {
    let model = o.call.model ?? "unknown";
    if (!models.has(model)) {
      if (models.size < MAX_MODEL_LABELS) models.add(model);
      else model = "other";
    }
    const l = { vault: o.vault, agent: o.agent, service: o.service, model };
    tokens.inc({ ...l, direction: "input" }, o.call.inputTokens);
    tokens.inc({ ...l, direction: "output" }, o.call.outputTokens);
    calls.inc({ ...l, priced: o.call.costMicros === undefined ? "false" : "true" });
    if (o.call.costMicros !== undefined) cost.inc({ ...l, currency: o.call.currency }, o.call.costMicros / 1e6);
  };
}

export function createMetrics(sources: MetricSources): Metrics {
  const registry = new Registry();
  const registers = [registry];
  const requests = new Counter({
    name: "broker_proxied_requests_total",
    help: "Proxied requests by ingress, vault, service host pattern and status class",
    labelNames: ["ingress", "vault", "service", "status_class"] as const,
    registers,
  });
  const brokerTime = new Histogram({
    name: "broker_added_seconds",
    help: "Time spent in the broker per proxied request, excluding the wait for the upstream's response head",
    labelNames: ["ingress"] as const,
    buckets: BROKER_BUCKETS,
    registers,
  });
  const upstreamTime = new Histogram({
    name: "broker_upstream_seconds",
    help: "Time from dispatch to the upstream's response head (whole body when small)",
    labelNames: ["ingress"] as const,
    buckets: UPSTREAM_BUCKETS,
    registers,
  });
  const connectErrors = new Counter({
    name: "broker_upstream_connect_errors_total",
    help: "Failed upstream dials by kind (connect, tls, timeout)",
    labelNames: ["kind"] as const,
    registers,
  });
  const refusals = new Counter({
    name: "broker_ratelimit_refusals_total",
    help: "Requests refused by the rate limiter, by tier",
    labelNames: ["tier"] as const,
    registers,
  });
  const leafHits = new Counter({ name: "broker_leaf_cache_hits_total", help: "Leaf certificates served from the cache", registers });
  const leafMints = new Counter({ name: "broker_leaf_mints_total", help: "Leaf certificates minted", registers });
  new Gauge({
    name: "broker_open_tunnels",
    help: "CONNECT tunnels open on the transparent proxy",
    registers,
    collect() {
      this.set(sources.tunnel()?.tunnels ?? 0);
    },
  });
  new Gauge({
    name: "broker_open_connections",
    help: "Client connections held by the transparent proxy listener",
    registers,
    collect() {
      this.set(sources.tunnel()?.connections ?? 0);
    },
  });
  new Gauge({
    name: "broker_audit_queue_depth",
    help: "Audit records waiting to be written",
    registers,
    collect() {
      this.set(sources.auditQueued());
    },
  });
  new Counter({
    name: "broker_audit_dropped_total",
    help: "Audit records dropped because the queue was full",
    registers,
    collect() {
      this.reset();
      this.inc(sources.auditDropped());
    },
  });
  new Gauge({
    name: "broker_proposals_pending",
    aggregator: "max", // read from the store: every worker of `--workers N` sees the same number
    help: "Proposals waiting for a human decision",
    registers,
    async collect() {
      this.set(await sources.proposalsPending());
    },
  });
  new Gauge({
    name: "broker_request_approvals_pending",
    aggregator: "max", // read from the store: every worker of `--workers N` sees the same number
    help: "Held requests waiting for a human's approval",
    registers,
    async collect() {
      this.set(await sources.requestApprovalsPending());
    },
  });
  // Every label set starts at zero, so a scrape shows the series before the first event.
  for (const kind of ["connect", "tls", "timeout"] as const) connectErrors.inc({ kind }, 0);
  for (const tier of ["auth", "authed", "proxy", "global"] as const) refusals.inc({ tier }, 0);
  const storeReads = new Counter({
    name: "broker_secret_store_reads_total",
    help: "Reads of external secret stores (references refreshed) by connection and outcome (ok, failed)",
    labelNames: ["connection", "outcome"] as const,
    registers,
  });

  const usage = llmUsageMetrics(registers);
  const wouldRefuse = new Counter({
    name: "broker_policy_would_refuse_total",
    help: 'Requests report mode let through that the rules or the unmatched-host policy would refuse, by vault, service ("none": no service matched) and refusal code',
    labelNames: ["vault", "service", "code"] as const,
    registers,
  });

  // The per-request series, each looked up once and then reached through nested maps keyed by the label values: the
  // hot path builds no label object and hashes no label string (prom-client's inc({labels}) does both every call).
  const requestSeries = new Map<string, Map<string, Map<string, Map<number, Counter.Internal>>>>();
  const requestCounter = (ingress: string, vault: string, service: string, status: number) => {
    const cls = Math.floor(status / 100);
    let byVault = requestSeries.get(ingress);
    if (!byVault) requestSeries.set(ingress, (byVault = new Map()));
    let byService = byVault.get(vault);
    if (!byService) byVault.set(vault, (byService = new Map()));
    let byClass = byService.get(service);
    if (!byClass) byService.set(service, (byClass = new Map()));
    let child = byClass.get(cls);
    if (!child) byClass.set(cls, (child = requests.labels({ ingress, vault, service, status_class: statusClass(status) })));
    return child;
  };
  const timeSeries = new Map<string, { broker: Histogram.Internal<string>; upstream: Histogram.Internal<string> }>();
  const timers = (ingress: string) => {
    let t = timeSeries.get(ingress);
    if (!t) timeSeries.set(ingress, (t = { broker: brokerTime.labels({ ingress }), upstream: upstreamTime.labels({ ingress }) }));
    return t;
  };

  const egress: EgressMetrics = {
    now: () => performance.now(),
    observe(o: ExchangeObservation) {
      requestCounter(o.ingress, o.vault, o.service ?? "none", o.status).inc();
      const t = timers(o.ingress);
      t.broker.observe(o.brokerSeconds);
      if (o.upstreamSeconds !== null) t.upstream.observe(o.upstreamSeconds);
    },
    observeUsage: usage,
    wouldRefuse: (o) => wouldRefuse.inc({ vault: o.vault, service: o.service, code: o.code }),
  };
  return {
    registry,
    egress,
    connectFailed: (kind) => connectErrors.inc({ kind }),
    refused: (tier) => refusals.inc({ tier }),
    leaf: (outcome) => (outcome === "hit" ? leafHits : leafMints).inc(),
    secretStoreRead: (connection, outcome) => storeReads.inc({ connection, outcome }),
    async render() {
      return { body: await registry.metrics(), contentType: registry.contentType };
    },
  };
}

/** The same limiter, counting every refusal by tier (API and tunnel share it, so both are counted). */
export function countRefusals(limiter: RateLimiter, metrics: Metrics): RateLimiter {
  const seen = <T extends RateDecision | GlobalEntry | RateDenied>(tier: RefusalTier, d: T): T => {
    if (!d.ok) metrics.refused(tier);
    return d;
  };
  return {
    ...limiter,
    check: (tier, key, cost) => seen(tier === "AUTH" ? "auth" : "authed", limiter.check(tier, key, cost)),
    checkProxy: (principal, vault, cost) => seen("proxy", limiter.checkProxy(principal, vault, cost)),
    enterGlobal: () => seen("global", limiter.enterGlobal()),
  };
}
