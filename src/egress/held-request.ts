// Requests a service rule holds for a human (`"approve": "each"`): the body read whole (to hash it
// and show it), the fingerprint that binds an approval to this exact request, and the description a
// person reads before deciding (credential values left out, echoes of a credential redacted).
//
// The fingerprint covers the method, whether it is a WebSocket upgrade, host and port, path and
// query, a SHA-256 of the body, and the headers as they will be forwarded (after Connection has
// removed the ones it names), except those below that cannot change what the request does and that
// clients vary from one attempt to the next. Binding every other header (not a short list) is the
// safe side: an approval for a refund on one account must not be replayed with `Stripe-Account`
// naming another, nor with `Connection: Stripe-Account` dropping it on the way.

import { createHash } from "node:crypto";
import { Internal, PayloadTooLarge } from "../errors.ts";
import { LIMITS } from "../policy/index.ts";
import { type HeldRequest, type RequestApprovalGate } from "../workflows/index.ts";
import { wholeBody } from "./answer.ts";
import { bodyCharset, buildUpstreamHeaders, WEBSOCKET_HEADERS } from "./headers.ts";
import { headerValues } from "../http/index.ts";
import type { EgressPlan } from "./plan.ts";
import type { Needles } from "./redact.ts";
import { redactText } from "./redact-headers.ts";
import { SIGV4_REPLACED } from "./sigv4.ts";

/**
 * Forwarded headers left out of the fingerprint: per-attempt values, tracing, and the encodings the
 * answer may come in. (Accept and Accept-Language are bound: they can pick an API version or the
 * language of an email the request sends.)
 */
const NOT_BOUND = new Set([
  "user-agent",
  "accept-encoding",
  "date",
  "traceparent",
  "tracestate",
  "baggage",
  "sentry-trace",
  "x-request-id",
  "x-amzn-trace-id",
  "x-cloud-trace-context",
  "sec-websocket-key",
  "sec-websocket-extensions",
]);
/** Prefixes of per-attempt client telemetry (OpenAI and Anthropic SDKs' retry counts and timeouts, B3 tracing). */
const NOT_BOUND_PREFIXES = ["x-stainless-", "x-b3-"];
const bound = (name: string) => !NOT_BOUND.has(name) && !NOT_BOUND_PREFIXES.some((p) => name.startsWith(p));

/** The whole body of a held request, up to the limit (a larger one is refused: it could not be shown or hashed in memory). */
export async function readHeldBody(
  body: ReadableStream<Uint8Array> | null,
  length: number | null,
  what = "a request that needs a human's approval",
): Promise<Uint8Array> {
  const max = LIMITS.heldRequestBodyMaxBytes;
  const tooLarge = () => new PayloadTooLarge(`${what} may carry at most ${max} bytes of body`);
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
  readonly ingress: "explicit" | "transparent";
  /** Sent by a `vault run` session of `principal` (shown as such, not as the person's own request). */
  readonly scoped?: boolean;
  /** A WebSocket upgrade: a two-way connection, not one request (its own approval, and said so). */
  readonly upgrade?: boolean;
}

/**
 * Waits at the gate for this exact request (describing it for the person deciding): the approver once
 * one approved it, else the gate's 428 or 403. A rule that needs a person fails closed without a gate.
 */
export function awaitApproval(
  gate: RequestApprovalGate | undefined,
  req: HeldRequestInput,
  plan: EgressPlan,
  needles: Needles,
  signal?: AbortSignal,
): Promise<string> {
  if (!gate) throw new Internal();
  return gate.pass(describeHeld(req, plan, needles), { waitMs: preferredWaitMs(req.headers), signal });
}

export function describeHeld(req: HeldRequestInput, plan: EgressPlan, needles: Needles): HeldRequest {
  const bodySha256 = createHash("sha256").update(req.body).digest("hex");
  const host = req.port === 443 ? req.host : `${req.host}:${req.port}`;
  const forwarded = forwardedHeaders(req, plan);
  const boundHeaders = forwarded
    .filter(([n]) => bound(n))
    .map(([n, v]) => (n === "prefer" ? ([n, withoutWait(v)] as const) : ([n, v] as const)))
    .filter(([n, v]) => n !== "prefer" || v !== "")
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)); // stable: same-name headers keep their order
  const kind = req.upgrade ? "websocket" : "request";
  const fingerprint = createHash("sha256")
    .update(JSON.stringify([req.method, kind, host, req.target, bodySha256, boundHeaders]))
    .digest("hex");
  // Every forwarded header is shown, the agent's own Cookie or Authorization too (the person must see
  // all that the upstream acts on); the credential the broker adds is not among them.
  const shown = forwarded.map(([n, v]) => [n, visible(redactText(v, needles))] as const);
  return {
    vault: req.vault,
    principal: req.principal,
    viaSession: req.scoped === true,
    fingerprint,
    method: req.method,
    host,
    target: visible(redactText(req.target, needles)),
    service: plan.service.host,
    headers: req.upgrade ? [["upgrade", "websocket"], ...shown] : shown,
    bodyPreview: previewOf(req.body, headerValues(req.headers, "content-type")[0], needles),
    bodyBytes: req.body.byteLength,
    bodySha256,
  };
}

/**
 * The agent's headers as the upstream will get them, names lower-cased, less the credential the
 * broker puts in: hop-by-hop headers and those Connection names dropped, the agent's Authorization
 * dropped where the broker replaces it (explicit ingress, SigV4), a WebSocket upgrade's own headers kept.
 */
function forwardedHeaders(req: HeldRequestInput, plan: EgressPlan): [string, string][] {
  const signing = plan.minted?.type === "aws_sigv4";
  const injected = plan.injection?.header;
  const out = buildUpstreamHeaders(req.headers, undefined, signing || req.ingress === "explicit").map(([n, v]): [string, string] => [n.toLowerCase(), v]);
  if (req.upgrade)
    for (const [n, v] of req.headers) if (WEBSOCKET_HEADERS.has(n.toLowerCase()) && !out.some(([o]) => o === n.toLowerCase())) out.push([n.toLowerCase(), v]);
  return out.filter(([n]) => !n.startsWith(":") && n !== injected && !(signing && SIGV4_REPLACED.has(n)));
}

/** A Prefer value without the broker's own `wait=` preference (the rest can change what the upstream does). */
function withoutWait(value: string): string {
  return value
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p && !/^wait\s*=/i.test(p))
    .join(", ");
}

/**
 * Characters that would make the text a person reads differ from the text that is sent (terminal
 * escapes, DEL and C1 controls, bidirectional overrides that reorder what follows, and invisible
 * ones: a soft hyphen or zero-width space inside `acct_1Legit` looks like the real account) are
 * written out as `<U+202E>`, so the description can be judged as it is.
 */
const DECEPTIVE = /[\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;
function visible(text: string): string {
  return text.replace(DECEPTIVE, (ch) => `<U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}>`);
}

/**
 * The body as text for a person, decoded in the charset its Content-Type declares (as the upstream
 * will read it: `charset=utf-16le` bytes are not the UTF-8 text they might also be), redacted before
 * it is cut (a cut must not leave half a credential); null when empty, not text, or in a charset the
 * broker cannot decode (UTF-7: shown as UTF-8 it would read as another request).
 */
function previewOf(body: Uint8Array, contentType: string | undefined, needles: Needles): string | null {
  if (body.byteLength === 0) return null;
  let text: string;
  try {
    text = new TextDecoder(bodyCharset(contentType), { fatal: true }).decode(body);
  } catch {
    return null;
  }
  if (/[\x00-\x08\x0e-\x1f]/.test(text)) return null; // binary that happens to be valid UTF-8
  const redacted = visible(redactText(text, needles));
  const max = LIMITS.heldRequestPreviewBytes;
  if (Buffer.byteLength(redacted) <= max) return redacted;
  return new TextDecoder().decode(Buffer.from(redacted).subarray(0, max)).replace(/\uFFFD$/, "");
}
