// One request through the pipeline (architecture.md §3): what an ingress hands in (EgressInput), what
// the pipeline runs on (EgressDeps), and the state the stages share as they pass it along (Exchange):
// the plan once matched, who approved it, the bytes read so far, and the clocks the audit record and
// the metrics report (and the request's span, when traces are exported). Each stage reads and writes only
// this object, so a decision is made once.

import type { Logger } from "../log.ts";
import type { BudgetGate, BudgetTicket, RequestApprovalGate } from "../workflows/index.ts";
import { auditEntry, type AuditedWorkload, type AuditLog } from "./audit.ts";
import type { Minter } from "./minter.ts";
import type { NetPolicy, Resolver } from "./netguard.ts";
import type { CallUsage } from "./llm-usage.ts";
import type { PriceBook } from "../policy/index.ts";
import type { PolicyMode } from "../store/index.ts";
import { recordedError, type WouldRefuseObservation } from "./report-mode.ts";
import type { EgressPlan, PlanCache } from "./plan.ts";
import type { Upstream } from "./upstream.ts";
import type { SessionActivityLog } from "./session-activity.ts";
import type { RequestSpan, RequestTracing } from "./telemetry.ts";

export interface EgressInput {
  /** Stable principal id (rate limits and audit). */
  readonly principal: string;
  /** The name people read (an agent's name, a person's email; absent for a `vault run` session): the exported span only. */
  readonly principalName?: string;
  /** The session was minted by `vault run --contain`: its audit records say so. */
  readonly contained: boolean;
  /** A `vault run` session acting for whoever minted it (`principal` is the minter's id). */
  readonly scoped?: boolean;
  /** A session exchanged for a workload's platform token: its issuer and subject, named in the audit record. */
  readonly workload?: AuditedWorkload;
  /** `policyMode`: the vault's, as admitted (report mode, report-mode.ts); absent: enforce. */
  readonly vault: { readonly id: number; readonly name: string; readonly policyMode?: PolicyMode };
  /** Canonical lower-case host (or IP literal) and port the agent addressed. */
  readonly host: string;
  readonly port: number;
  readonly method: string;
  /** Path and query exactly as sent. */
  readonly target: string;
  /** An array, not a one-shot iterator: the rules check and the header builder both read it. */
  readonly headers: readonly [string, string][];
  readonly body: ReadableStream<Uint8Array> | null;
  readonly bodyLength: number | null;
  readonly ingress: "explicit" | "transparent";
  /** The agent speaks HTTP/2 (a tunnel stream): the upstream is asked for HTTP/2 too, trailers pass. */
  readonly http2?: boolean;
  /** Aborted when the agent goes away: the upstream exchange is cancelled, not left to run. */
  readonly signal?: AbortSignal;
}

export interface EgressDeps {
  readonly plans: PlanCache;
  readonly policy: NetPolicy;
  readonly resolver: Resolver;
  readonly upstream: Upstream;
  /** Where each exchange leaves its one record (the audit log's writer lives in app/). */
  readonly audit: Pick<AuditLog, "record">;
  readonly log: Logger;
  readonly now: () => number;
  /** 0 = unlimited. */
  readonly maxRequestBytes: number;
  readonly maxResponseBytes: number;
  /** Prometheus counters and histograms (server/kit/metrics.ts); absent when metrics are off. */
  readonly metrics?: EgressMetrics;
  /** Minted OAuth and GitHub App tokens (minted.ts); a minted-token service fails closed without it. */
  readonly minter?: Minter;
  /** Human approval of single requests (rules with "approve": "each"); such a rule fails closed without it. */
  readonly approvals?: RequestApprovalGate;
  /** What each session met at the transparent proxy, for `vault run` to tell its agent (absent: not kept). */
  readonly activity?: SessionActivityLog;
  /** A span per request for an OpenTelemetry collector (telemetry/); absent when export is off. */
  readonly tracing?: RequestTracing;
  /** The vaults' budgets (issue 38); absent: nothing is counted against a budget. */
  readonly budgets?: BudgetGate;
  /** The LLM price table calls are priced by (absent: the shipped one). */
  readonly prices?: PriceBook;
  /** Where an exchange whose record waits for its usage says so, for a graceful shutdown to wait for it. */
  readonly settling?: Settling;
}

/** Exchanges already answered whose audit record waits for their usage (a metered stream's drain). */
export interface Settling {
  track(p: Promise<void>): void;
  /** Resolves once every tracked one has settled, or after `limitMs`. */
  whenSettled(limitMs: number): Promise<void>;
}

export function createSettling(): Settling {
  const pending = new Set<Promise<void>>();
  return {
    track(p) {
      pending.add(p);
      void p.finally(() => pending.delete(p));
    },
    async whenSettled(limitMs) {
      if (pending.size === 0) return;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([Promise.allSettled([...pending]), new Promise<void>((resolve) => (timer = setTimeout(resolve, limitMs)))]);
      clearTimeout(timer);
    },
  };
}

/** What one exchange tells the metrics: names and numbers only, never a path, query or value. */
export interface ExchangeObservation {
  readonly ingress: EgressInput["ingress"];
  readonly vault: string;
  /** The matched service's host pattern, or null before a service matched. */
  readonly service: string | null;
  readonly status: number;
  /** Time spent in the broker until the response head was handed back (seconds). */
  readonly brokerSeconds: number;
  /** Time from dispatch to the upstream's response head, or null when the upstream was never asked. */
  readonly upstreamSeconds: number | null;
}

export interface EgressMetrics {
  /** A monotonic clock in milliseconds (performance.now): broker-added time is sub-millisecond. */
  readonly now: () => number;
  observe(o: ExchangeObservation): void;
  /** What a metered LLM call used (issue 38), by vault, agent, service and model. */
  observeUsage?(o: UsageObservation): void;
  /** A refusal report mode let through (report-mode.ts). */
  wouldRefuse?(o: WouldRefuseObservation): void;
}

/** One LLM call's usage for the metrics: names and numbers only. */
export interface UsageObservation {
  readonly vault: string;
  /** The agent's name, or the principal's id (`user:N`) for people and their sessions. */
  readonly agent: string;
  readonly service: string;
  readonly call: CallUsage;
}

export interface Exchange {
  readonly input: EgressInput;
  readonly deps: EgressDeps;
  /** deps.now() when the request came in (the audit record's time). */
  readonly started: number;
  /** The matched service and its credential, once the match stage ran. */
  plan?: EgressPlan;
  /** The person who approved a held request, for the audit record. */
  approvedBy: string | null;
  /** Request body bytes read so far (counted as they stream, or the whole body once read). */
  bytesIn: number;
  /** What failed on the agent's side of the body (malformed chunking, the agent gone), if anything. */
  bodyFailure?: unknown;
  /** Metrics clocks (ms): the request came in, was dispatched upstream, got its answer's head. */
  readonly clock: { readonly t0: number; tSend: number; tHead: number };
  /** The monotonic clock of the metrics or the tracer; absent when neither is on (then no clock is read). */
  readonly tick?: () => number;
  /** The request's span, when traces are exported. */
  readonly span?: RequestSpan;
  /** Its place in the vault's budgets, once counted (stage-budget.ts). */
  budget?: BudgetTicket;
  /** What the LLM call used, once its answer ended (llm-metering.ts). */
  call?: CallUsage;
  /** What its budgets are charged instead when the answer never said (llm-metering.ts estimate). */
  estimate?: CallUsage;
  /** The code of the refusal report mode let through (report-mode.ts), if any: the record says `would_refuse:<code>`. */
  wouldRefuse?: string;
}

export function openExchange(input: EgressInput, deps: EgressDeps): Exchange {
  const tick = deps.metrics?.now ?? deps.tracing?.now;
  const t0 = tick ? tick() : 0;
  const span = deps.tracing?.open(input, t0);
  return { input, deps, started: deps.now(), approvedBy: null, bytesIn: 0, clock: { t0, tSend: 0, tHead: 0 }, ...(tick && { tick }), ...(span && { span }) };
}

/** The one audit record of the exchange (architecture.md §3, stage 8). */
export function auditExchange(x: Exchange, status: number, bytesOut: number, error: string | null): void {
  const entry = auditEntry(x.input, x.started, x.deps.now(), {
    status,
    bytesIn: x.bytesIn,
    bytesOut,
    error: recordedError(error, x.wouldRefuse),
    service: x.plan?.service.host ?? null,
    credentialKeys: x.plan?.credentialKeys ?? [],
    credentialRefs: x.plan?.credentialRefs ?? [],
    approvedBy: x.approvedBy,
  });
  const call = x.call;
  if (call) {
    entry.llmModel = call.model;
    entry.inputTokens = call.inputTokens;
    entry.outputTokens = call.outputTokens;
    entry.totalTokens = call.totalTokens;
    entry.costMicros = call.costMicros ?? null;
  }
  settleBudget(x);
  const { span, tick } = x;
  x.deps.audit.record(entry, span?.ref);
  // The span ends with the exchange (the body streamed), and carries the record's own names and numbers.
  if (span && tick) span.end(entry, tick());
}

/** The request's budgets learn what its call used (nothing more, for a call that was not metered), once. */
export function settleBudget(x: Exchange): void {
  x.budget?.settle(x.call ?? x.estimate);
  if (!x.call && x.estimate && x.budget)
    x.deps.log.info("llm_usage_estimated", { vault: x.input.vault.name, host: x.input.host, tokens: x.estimate.totalTokens });
  const m = x.deps.metrics;
  if (x.call && m?.observeUsage) {
    const { input } = x;
    const agent = input.principal.startsWith("agent:") && input.principalName ? input.principalName : input.principal;
    m.observeUsage({ vault: input.vault.name, agent, service: x.plan?.service.host ?? "none", call: x.call });
  }
}

/** Names and numbers for the metrics, when they are on: the broker's own time, the upstream's apart. */
export function observeExchange(x: Exchange, status: number): void {
  const { span, tick } = x;
  if (span && tick) span.handedBack(tick());
  const m = x.deps.metrics;
  if (!m) return;
  const { t0, tSend, tHead } = x.clock;
  const upstreamMs = tHead ? tHead - tSend : 0;
  m.observe({
    ingress: x.input.ingress,
    vault: x.input.vault.name,
    service: x.plan?.service.host ?? null,
    status,
    brokerSeconds: (m.now() - t0 - upstreamMs) / 1000,
    upstreamSeconds: tHead ? upstreamMs / 1000 : null,
  });
}
