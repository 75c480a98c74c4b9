// The egress core: both ingress paths (/proxy and the tunnel) call `egress` with a request and
// who is asking. Never imports Hono or listens on sockets.

export {
  createSettling,
  egress,
  type EgressDeps,
  type EgressInput,
  type EgressMetrics,
  type ExchangeObservation,
  type Settling,
  type UsageObservation,
} from "./egress.ts";
export { answerOf, headerOf, toWebResponse, wholeBody, type Answer } from "./answer.ts";
export { createAuditLog, type AuditEntry, type AuditLog } from "./audit.ts";
export { USAGE_SETTLED_WITHIN_MS } from "./llm-metering.ts";
export { openAuditJournal, JOURNAL_FILE, type AuditJournal } from "./audit-journal.ts";
export { createPlanCache, type PlanCache } from "./plan.ts";
export { createUpstream, type ConnectFailure, type Upstream } from "./upstream.ts";
export { checkAddress, compileNetPolicy, resolveChecked, systemResolver, type NetPolicy, type Resolver } from "./netguard.ts";
export { buildProposalHint } from "./hint.ts";
export { createRedactingStream } from "./redact.ts";
export { egressBlind, type BlindInput, type BlindTunnel } from "./blind.ts";
export { egressUpgrade, isWebSocketUpgrade, type Refused, type Switched, type Upgraded } from "./upgrade.ts";
export { encodeCloseFrame, WebSocketProtocolError, type FrameScanner } from "./websocket-frames.ts";
export { SMALL_BODY_BYTES } from "./upstream.ts";
export { ALWAYS_BLOCKED } from "./ip-ranges.ts";
// A socket whose queued writes leave together, shared with the tunnel (HTTP/2 to agents).
export { isGrpcContentType } from "./grpc-body.ts";
// The HTTP/2 frame guard, shared with the tunnel (its agent-facing server).
// The pull side of a byte stream, shared with the tunnel (client streams).
// HTTP/1.1 wire format, shared with the tunnel (which speaks HTTP/1.1 to agents).
export { type Injection } from "./headers.ts";
export { type EgressPlan } from "./plan.ts";
export { type MintedPlan } from "./plan.ts";
export { signAwsRequest } from "./sigv4.ts";
export { Needles } from "./redact.ts";
export type { Grant, MintedState, MintedToken, Minter } from "./minter.ts";
export { decideConnect, type ConnectDecision } from "./connect-decision.ts";
export { splitRecordedError } from "./report-mode.ts";
export { createSessionActivity, type SessionActivity, type SessionActivityLog, type UnmatchedHost } from "./session-activity.ts";
export type { ReferenceValues } from "./reference-values.ts";
export type { AuditExport, RequestSpan, RequestTracing, TracedRequest, TraceRef } from "./telemetry.ts";
export type { CallUsage } from "./llm-usage.ts";
