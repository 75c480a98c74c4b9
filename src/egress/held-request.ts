// Requests a service rule holds for a human (`"approve": "each"`): the body read whole (to hash it
// and show it), the fingerprint that binds an approval to this exact request, and the description a
// person reads before deciding (credential headers left out, echoes of a credential redacted).
//
// The fingerprint covers the method, host and port, path and query, a SHA-256 of the body, and every
// header except those below that cannot change what the request does and that clients vary from one
// attempt to the next. Binding every other header (not a short list) is the safe side: an approval for
// a refund on one account must not be replayed with `Stripe-Account` naming another.

import { createHash } from "node:crypto";
import { Internal, PayloadTooLarge } from "../errors.ts";
import { LIMITS, type HeldRequest, type RequestApprovalGate } from "../vault/index.ts";
import { wholeBody } from "./answer.ts";
import { buildUpstreamHeaders } from "./headers.ts";
import { headerValues } from "./http1.ts";
import type { EgressPlan } from "./plan.ts";
import { redactText, type Needles } from "./redact.ts";

/** Headers left out of the fingerprint: framing, negotiation, tracing, and the credential the broker replaces. */
const NOT_BOUND = new Set([
  "host", "content-length", "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade",
  "user-agent", "accept", "accept-encoding", "accept-language", "date", "prefer", "traceparent", "tracestate", "baggage", "sentry-trace",
  "x-request-id", "x-amzn-trace-id", "x-cloud-trace-context", "sec-websocket-key", "sec-websocket-extensions",
]);
/** Prefixes of per-attempt client telemetry (OpenAI and Anthropic SDKs' retry counts and timeouts, B3 tracing). */
const NOT_BOUND_PREFIXES = ["x-stainless-", "x-b3-"];
/** Never shown to the person deciding: they carry (or stand in for) credentials. */
const HIDDEN = new Set(["authorization", "proxy-authorization", "cookie"]);

const bound = (name: string, injected: string | undefined) =>
  !name.startsWith(":") && !NOT_BOUND.has(name) && name !== injected && !NOT_BOUND_PREFIXES.some((p) => name.startsWith(p));

/** The whole body of a held request, up to the limit (a larger one is refused: it could not be shown or hashed in memory). */
export async function readHeldBody(body: ReadableStream<Uint8Array> | null, length: number | null): Promise<Uint8Array> {
  const max = LIMITS.heldRequestBodyMaxBytes;
  const tooLarge = () => new PayloadTooLarge(`a request that needs a human's approval may carry at most ${max} bytes of body`);
  if (length !== null && length > max) {
    await body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (!body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.byteLength;
    if (total > max) throw tooLarge();
    chunks.push(chunk);
  }
  return await wholeBody(new Blob(chunks as Uint8Array<ArrayBuffer>[]).stream());
}

/** Seconds asked for with `Prefer: wait=<seconds>` (RFC 7240), capped; 0 when absent. */
export function preferredWaitMs(headers: readonly [string, string][]): number {
  const m = /(?:^|[,;\s])wait\s*=\s*"?(\d{1,9})"?/i.exec(headerValues(headers, "prefer").join(","));
  return m ? Math.min(Number(m[1]) * 1000, LIMITS.requestApprovalWaitMaxMs) : 0;
}

export interface HeldRequestInput {
  readonly vault: { readonly id: number; readonly name: string };
  readonly principal: string;
  readonly method: string;
  readonly host: string;
  readonly port: number;
  /** Path and query as they would be forwarded (before a URL credential is placed). */
  readonly target: string;
  readonly headers: readonly [string, string][];
  readonly body: Uint8Array;
}

/**
 * Waits at the gate for this exact request (describing it for the person deciding): the approver once
 * one approved it, else the gate's 428 or 403. A rule that needs a person fails closed without a gate.
 */
export function awaitApproval(gate: RequestApprovalGate | undefined, req: HeldRequestInput, plan: EgressPlan, needles: Needles, signal?: AbortSignal): Promise<string> {
  if (!gate) throw new Internal();
  return gate.pass(describeHeld(req, plan, needles), { waitMs: preferredWaitMs(req.headers), signal });
}

export function describeHeld(req: HeldRequestInput, plan: EgressPlan, needles: Needles): HeldRequest {
  const injected = plan.injection?.header;
  const bodySha256 = createHash("sha256").update(req.body).digest("hex");
  const host = req.port === 443 ? req.host : `${req.host}:${req.port}`;
  const boundHeaders = req.headers
    .map(([n, v]) => [n.toLowerCase(), v] as const)
    .filter(([n]) => bound(n, injected))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)); // stable: same-name headers keep their order
  const fingerprint = createHash("sha256").update(JSON.stringify([req.method, host, req.target, bodySha256, boundHeaders])).digest("hex");
  // What will be sent, as the upstream request is built (no Host, X-Vault or hop-by-hop headers), less
  // what carries a credential.
  const shown = buildUpstreamHeaders(req.headers, undefined, false)
    .map(([n, v]) => [n.toLowerCase(), v] as const)
    .filter(([n]) => !n.startsWith(":") && !HIDDEN.has(n) && n !== injected)
    .map(([n, v]) => [n, visible(redactText(v, needles))] as const);
  return {
    vault: req.vault,
    principal: req.principal,
    fingerprint,
    method: req.method,
    host,
    target: visible(redactText(req.target, needles)),
    service: plan.service.host,
    headers: shown,
    bodyPreview: previewOf(req.body, needles),
    bodyBytes: req.body.byteLength,
    bodySha256,
  };
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Characters that would make the text a person reads differ from the text that is sent (terminal
 * escapes, DEL and C1 controls, bidirectional overrides that reorder what follows) are written out as
 * `<U+202E>`, so the description can be judged as it is.
 */
const DECEPTIVE = /[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
function visible(text: string): string {
  return text.replace(DECEPTIVE, (ch) => `<U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}>`);
}

/** The body as text for a person, redacted before it is cut (a cut must not leave half a credential); null when empty or not text. */
function previewOf(body: Uint8Array, needles: Needles): string | null {
  if (body.byteLength === 0) return null;
  let text: string;
  try {
    text = UTF8.decode(body);
  } catch {
    return null;
  }
  if (/[\x00-\x08\x0e-\x1f]/.test(text)) return null; // binary that happens to be valid UTF-8
  const redacted = visible(redactText(text, needles));
  const max = LIMITS.heldRequestPreviewBytes;
  if (Buffer.byteLength(redacted) <= max) return redacted;
  return new TextDecoder().decode(Buffer.from(redacted).subarray(0, max)).replace(/\uFFFD$/, "");
}
