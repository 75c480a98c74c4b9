// The egress core: both ingress paths (/proxy and the tunnel) call `egress` with a request and
// who is asking. Never imports Hono or listens on sockets.

export { egress, type EgressDeps, type EgressInput, type EgressMetrics, type ExchangeObservation } from "./egress.ts";
export { answerOf, headerOf, toWebResponse, wholeBody, type Answer } from "./answer.ts";
export { createAuditLog, type AuditEntry, type AuditLog } from "./audit.ts";
export { createPlanCache, type PlanCache } from "./plan.ts";
export { createMinter, type Minter, type MintedState } from "./minted.ts";
export { createUpstream, type ConnectFailure, type Upstream } from "./upstream.ts";
export { compileNetPolicy, resolveChecked, systemResolver, type NetPolicy, type Resolver } from "./netguard.ts";
export { buildProposalHint } from "./hint.ts";
export { createWebhookSender, type WebhookSender, type WebhookSenderDeps } from "./webhook-delivery.ts";
export { createRedactingStream } from "./redact.ts";
export { egressBlind, type BlindInput, type BlindTunnel } from "./blind.ts";
export { egressUpgrade, isWebSocketUpgrade, type Refused, type Switched, type Upgraded } from "./upgrade.ts";
export { encodeCloseFrame, WebSocketProtocolError, type FrameScanner } from "./websocket-frames.ts";
export { SMALL_BODY_BYTES } from "./upstream.ts";
export { ALWAYS_BLOCKED } from "./ip-ranges.ts";
// A socket whose queued writes leave together, shared with the tunnel (HTTP/2 to agents).
export { coalescingSocket, drained } from "./coalescing-socket.ts";
export { fieldLines, linesToFields } from "./h2-fields.ts";
export { isGrpcContentType } from "./grpc-body.ts";
// The HTTP/2 frame guard, shared with the tunnel (its agent-facing server).
export { createFrameInspector, FRAME_LIMITS, guardFrames, type FrameLimits } from "./h2-frame-guard.ts";
// The pull side of a byte stream, shared with the tunnel (client streams).
export { createPullQueue, type PullQueue } from "./pull-queue.ts";
// HTTP/1.1 wire format, shared with the tunnel (which speaks HTTP/1.1 to agents).
export {
  createChunkedDecoder,
  encodeChunk,
  findHeadEnd,
  headerValues,
  LAST_CHUNK,
  parseRequestHead,
  requestFraming,
  serializeHead,
  WireError,
  type BodyFraming,
  type HeaderList,
  type RequestHead,
} from "./http1.ts";
