// The egress core shared by both ingress paths: plan (service match + credential), header
// rules, network guard, forward over a pinned connection, response clean-up (hop-by-hop,
// Set-Cookie on /proxy, echo redaction whatever the Content-Encoding), size caps and one audit
// record per request.
// Takes plain values and streams; never imports Hono or listens on sockets.

import { BrokerError, Internal, MethodNotAllowed, PayloadTooLarge } from "../errors.ts";
import type { Logger } from "../log.ts";
import { declaredBody, headerOf, joinedHeader, wholeBody, withHeader, type Answer } from "./answer.ts";
import { grpcScanStream, isGrpcContentType, isGrpcResponse, messageFraming, refuseGrpcContentCoding, refuseUnscannedMessageCoding } from "./grpc-body.ts";
import { binaryPartsOf, redactBinaryHeaders, redactBinaryTrailers } from "./binary-metadata.ts";
import { auditEntry, type AuditLog } from "./audit.ts";
import { decodeWhole, encodeWhole, parseCodings, type Coding } from "./content-coding.ts";
import { buildUpstreamHeaders, cleanResponseHeaders } from "./headers.ts";
import { headerValues, type HeaderList } from "../http/index.ts";
import { resolveChecked, type NetPolicy, type Resolver } from "./netguard.ts";
import type { EgressPlan, PlanCache } from "./plan.ts";
import { redactWhole, type Needles, type RedactOptions } from "./redact.ts";
import { redactHeaders, redactText } from "./redact-headers.ts";
import { allowedTarget, bodyMayClaimHeld, heldByRule, widenRulesHint } from "./rules.ts";
import { claimedInBody } from "./method-override.ts";
import { awaitApproval, readHeldBody } from "./held-request.ts";
import { scanBodyStream, utf16Of, type BodyDone } from "./scan-body.ts";
import { SMALL_BODY_BYTES, type OutboundRequest, type SendOptions, type Upstream } from "./upstream.ts";
import type { Minter } from "./minter.ts";
import type { RequestApprovalGate } from "../workflows/index.ts";
import { signAwsRequest } from "./sigv4.ts";
import { placeCredential } from "./url-credential.ts";
import { answerRange, isPartialAnswer, planRanges, type RangedRequest } from "./ranges.ts";

export interface EgressInput {
  /** Stable principal id (rate limits and audit). */
  readonly principal: string;
  /** The session was minted by `vault run --contain`: its audit records say so. */
  readonly contained: boolean;
  /** A `vault run` session acting for whoever minted it (`principal` is the minter's id). */
  readonly scoped?: boolean;
  readonly vault: { readonly id: number; readonly name: string };
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
  readonly audit: AuditLog;
  readonly log: Logger;
  readonly now: () => number;
  /** 0 = unlimited. */
  readonly maxRequestBytes: number;
  readonly maxResponseBytes: number;
  /** Prometheus counters and histograms (server/metrics.ts); absent when metrics are off. */
  readonly metrics?: EgressMetrics;
  /** Minted OAuth and GitHub App tokens (minted.ts); a minted-token service fails closed without it. */
  readonly minter?: Minter;
  /** Human approval of single requests (rules with "approve": "each"); such a rule fails closed without it. */
  readonly approvals?: RequestApprovalGate;
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
}

const REFUSED_METHODS = new Set(["TRACE", "TRACK", "CONNECT"]);

export async function egress(input: EgressInput, deps: EgressDeps): Promise<Answer> {
  const started = deps.now();
  let plan: EgressPlan | undefined;
  let bytesIn = 0;
  let bodyFailure: unknown;
  const m = deps.metrics;
  const t0 = m ? m.now() : 0;
  let tSend = 0;
  let tHead = 0;
  const observe = (status: number) => {
    if (!m) return;
    const end = m.now();
    const upstreamMs = tHead ? tHead - tSend : 0;
    m.observe({
      ingress: input.ingress,
      vault: input.vault.name,
      service: plan?.service.host ?? null,
      status,
      brokerSeconds: (end - t0 - upstreamMs) / 1000,
      upstreamSeconds: tHead ? upstreamMs / 1000 : null,
    });
  };
  let approvedBy: string | null = null;
  const audit = (status: number, bytesOut: number, error: string | null) =>
    deps.audit.record(
      auditEntry(input, started, deps.now(), {
        status,
        bytesIn,
        bytesOut,
        error,
        service: plan?.service.host ?? null,
        credentialKeys: plan?.credentialKeys ?? [],
        approvedBy,
      }),
    );

  try {
    if (REFUSED_METHODS.has(input.method)) throw new MethodNotAllowed(`${input.method} is not allowed through the broker`);
    if (deps.maxRequestBytes && input.bodyLength !== null && input.bodyLength > deps.maxRequestBytes) {
      throw new PayloadTooLarge(`request body is larger than the broker's limit of ${deps.maxRequestBytes} bytes`);
    }
    plan = await deps.plans.plan(input.vault, input.host, input.port);
    const ruled = plan;
    const hint = (m: string, path: string) => widenRulesHint(deps.plans.hintFor(input.host, input.port), ruled, m, path);
    const allowed = allowedTarget(plan, input.method, input.target, hint, input.headers);
    // A POST whose body could claim (`_method`) a method a rule holds here is read first, to know.
    let heldBody: Uint8Array | undefined;
    let bodyClaims: string[] = [];
    if (bodyMayClaimHeld(plan, input.method, allowed)) {
      heldBody = await readHeldBody(
        input.body,
        input.bodyLength,
        "a POST to a path where a rule holds other methods for a human (its body is read for a _method field)",
      );
      bytesIn = heldBody.byteLength;
      bodyClaims = claimedInBody(heldBody, headerValues(input.headers, "content-type")[0]);
      allowedTarget(plan, input.method, input.target, hint, input.headers, bodyClaims);
    }
    // A rule that asks a human for each request: held (428) until this exact request is approved.
    if (heldByRule(plan, input.method, allowed, input.headers, bodyClaims)) {
      heldBody ??= await readHeldBody(input.body, input.bodyLength);
      bytesIn = heldBody.byteLength;
      approvedBy = await awaitApproval(deps.approvals, { ...input, target: allowed, body: heldBody }, plan, plan.needles, input.signal);
    }
    // A URL credential goes in only now: the rules saw the agent's path, and the audit record keeps it.
    const target = plan.placement ? placeCredential(allowed, plan.placement) : allowed;
    const planned = plan;
    const signing = planned.minted?.type === "aws_sigv4";
    const minting = planned.minted !== undefined && !signing;
    let grant = minting ? await minterOf(deps).grant(input.vault, planned) : undefined;
    // The answer is scanned for every value any vault sends anywhere, not only this request's
    // (architecture.md D22): one map look-up, the set compiled once per change (echo-needles.ts).
    const hostWide = (g: typeof grant) => deps.plans.responseNeedles(planned, g);
    let needles = await hostWide(grant);
    // A scanned answer must not come in pieces the agent can join (ranges.ts): Range dropped or widened.
    const ranged = needles.empty ? undefined : planRanges(planned.service.authType, input.headers, input.target);
    const addresses = () => resolveChecked(input.host, input.port, deps.policy, deps.resolver);
    const body = heldBody
      ? null
      : input.body && watchErrors(input.body, (e) => (bodyFailure = e)).pipeThrough(countAndCap(deps.maxRequestBytes, (n) => (bytesIn = n), "request"));
    // A minted token the upstream rejects (401) is refreshed and the request sent once more, which
    // needs its body again: small ones are held for that (a streamed one is not replayed). An
    // approved request's body was read whole already.
    const held = heldBody?.byteLength
      ? heldBody
      : minting && body && input.bodyLength !== null && input.bodyLength <= SMALL_BODY_BYTES
        ? await wholeBody(body)
        : undefined;
    const replayable = !body || held !== undefined;
    const injection = grant?.injection ?? planned.injection;
    const inPath = planned.placement !== undefined;
    // (An HTTP/1.1 agent's request can go out over HTTP/2 too, to an origin that speaks nothing else.)
    const how: SendOptions = input.http2
      ? { ...http2Options(input, injection, inPath), signal: input.signal }
      : { sensitive: sensitiveFields(injection, inPath), signal: input.signal };
    const outbound = async (): Promise<OutboundRequest> => {
      const again = held ? new Blob([held as Uint8Array<ArrayBuffer>]).stream() : body;
      // SigV4 replaces the agent's own Authorization (its placeholder signature) on every ingress.
      let headers = buildUpstreamHeaders(input.headers, grant?.injection ?? planned.injection, signing || input.ingress === "explicit");
      // An injected gRPC call asks for uncompressed messages: less to decode before the scan.
      if (how.http2 === "require" && !(grant?.needles ?? planned.needles).empty) headers = withHeader(headers, "grpc-accept-encoding", "identity");
      if (ranged) headers = ranged.upstreamHeaders(headers); // before signing: SigV4 signs the widened Range
      const req = { method: input.method, target, headers, body: again, bodyLength: heldBody?.byteLength ? heldBody.byteLength : input.bodyLength };
      return signing ? { method: input.method, ...(await signAwsRequest(planned.minted!, input, req, deps.now())) } : req;
    };
    if (m) tSend = m.now();
    let upstream = await deps.upstream.send({ host: input.host, port: input.port, addresses }, await outbound(), how);
    // The rejected token stays in the host's set (a 401 may echo it); the new one joins it. A
    // service refreshed for 401s too often lately gets no new token (minted.ts): the 401 stands.
    // (Settled at once: it is awaited only after the rejected body is let go.)
    const regranting = grant && upstream.status === 401 ? settled(minterOf(deps).regrant(input.vault, planned, grant)) : undefined;
    if (regranting) {
      const rejected = upstream;
      if (replayable) await discardBody(rejected);
      const next = await regranting;
      if (!next.ok) {
        if (!replayable) await discardBody(rejected);
        throw next.error;
      }
      grant = next.value;
      if (replayable) {
        upstream = await deps.upstream.send({ host: input.host, port: input.port, addresses }, await outbound(), how);
        needles = await hostWide(grant);
      }
    }
    if (m) tHead = m.now();
    const answered = upstream;
    const res = await shapeResponse(answered, needles, input.ingress, deps, (bytesOut, error) => audit(answered.status, bytesOut, error), ranged);
    observe(res.status);
    return res;
  } catch (caught) {
    // A request body that failed (malformed chunking, client gone) is the client's fault, not the upstream's.
    // A body cut off at the size cap, or one that failed on the client's side, explains whatever the
    // upstream exchange then reported.
    const overCap = deps.maxRequestBytes > 0 && bytesIn > deps.maxRequestBytes;
    const err = bodyFailure instanceof BrokerError ? bodyFailure : overCap ? new PayloadTooLarge("request body exceeded the broker's limit") : caught;
    if (err instanceof BrokerError) {
      audit(err.status, 0, err.code);
      observe(err.status);
      throw err;
    }
    // An unexpected error's message may quote what the upstream sent (which can echo the injected
    // value): it is logged here once, scrubbed, and never rethrown, so no later handler logs it raw.
    const text = err instanceof Error ? err.message : String(err);
    const message = plan ? redactText(text, plan.needles) : text;
    deps.log.error("egress_failed", { error: err instanceof Error ? err.name : "error", message, host: input.host });
    audit(500, 0, "internal");
    observe(500);
    throw new Internal();
  }
}

/**
 * An HTTP/2 agent's request goes out over HTTP/2 where the origin offers it; gRPC only so (it needs
 * trailers and HTTP/2 framing end to end). Whatever carries the credential is sent never-indexed.
 */
function http2Options(input: EgressInput, injection: { header: string } | undefined, inPath: boolean): SendOptions {
  const grpc = isGrpcContentType(headerValues(input.headers, "content-type")[0]);
  const sensitive = sensitiveFields(injection, inPath);
  const trailers = /\btrailers\b/i.test(headerValues(input.headers, "te").join(","));
  return { http2: grpc ? "require" : "prefer", sensitive, trailers };
}

/** The fields that carry the credential over HTTP/2, sent never-indexed (kept out of the HPACK tables). */
function sensitiveFields(injection: { header: string } | undefined, inPath: boolean): string[] {
  return ["authorization", ...(injection ? [injection.header] : []), ...(inPath ? [":path"] : [])];
}

/** A promise's outcome as a value (undefined stays undefined), so it can be awaited later without an unhandled rejection meanwhile. */
function settled<T>(p: Promise<T> | undefined): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> | undefined {
  return p?.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

/** An answer that will not be forwarded: its streamed body is cancelled so the connection is freed. */
async function discardBody(a: Answer): Promise<void> {
  if (a.body && !(a.body instanceof Uint8Array)) await a.body.cancel().catch(() => {});
}

function minterOf(deps: EgressDeps): Minter {
  if (!deps.minter) throw new Internal();
  return deps.minter;
}

async function shapeResponse(
  res: Answer,
  needles: Needles,
  ingress: EgressInput["ingress"],
  deps: EgressDeps,
  done: BodyDone,
  ranged?: RangedRequest,
): Promise<Answer> {
  // Inside a tunnel the agent talks to the real origin, so its cookies are forwarded; on /proxy they
  // would land on the broker's own origin, where the console's session cookie lives (architecture.md D19).
  // `-bin` fields are base64 that gRPC clients decode: scanned decoded first (binary-metadata.ts); one
  // that does not decode refuses the response, so the upstream's body is let go.
  let headers: HeaderList;
  try {
    headers = redactHeaders(redactBinaryHeaders(cleanResponseHeaders(res.headers, { keepCookies: ingress === "transparent" }), needles), needles);
  } catch (err) {
    await discardBody(res);
    throw err;
  }
  // The reason phrase is upstream text too: an echo there would reach the agent in the status line.
  // Trailers (HTTP/2: gRPC's status and message) are upstream text like any header.
  // `-bin` trailers are scanned joined with the head's (a value cut between the two).
  const grpc = isGrpcResponse(headers);
  const headBinary = needles.empty ? [] : binaryPartsOf(headers);
  const trailers = res.trailers?.then((t) =>
    redactHeaders(redactBinaryTrailers(cleanResponseHeaders(t, { keepCookies: false }), needles, grpc, headBinary), needles),
  );
  const head = { status: res.status, statusText: redactText(res.statusText, needles), ...(trailers ? { trailers } : {}) };
  // Messages compressed one by one (gRPC, gRPC-Web, Connect) are read only by the message scanner;
  // any other scanned answer naming a per-message codec is refused (grpc-body.ts says why).
  const framing = needles.empty || isPartialAnswer(res.status, headers) ? undefined : messageFraming(headers);
  if (!needles.empty && res.body && !framing) {
    try {
      refuseUnscannedMessageCoding(headers);
    } catch (err) {
      await discardBody(res);
      throw err;
    }
  }
  // A partial answer is refused, or cut back to the agent's range once masked (ranges.ts).
  const cut = ranged && (await answerRange(ranged, { ...head, headers, body: res.body }, needles, deps.maxResponseBytes, done));
  if (cut) return cut;
  const body = res.body;
  if (!body) {
    done(0, null);
    return { ...head, headers, body: null };
  }
  if (framing) {
    // gRPC, gRPC-Web and Connect frame their own messages (and may compress each one): scanned
    // message by message. A Content-Encoding over gRPC messages is refused (grpc-body.ts says why).
    try {
      if (framing === "grpc") refuseGrpcContentCoding(headers);
    } catch (err) {
      await discardBody(res);
      throw err;
    }
    const source = body instanceof Uint8Array ? new Blob([body as Uint8Array<ArrayBuffer>]).stream() : body;
    headers = withHeader(headers, "content-length", undefined);
    return { ...head, headers, body: grpcScanStream(source, needles, headers, framing, deps.maxResponseBytes, done, headBinary) };
  }
  let codings: Coding[] = [];
  if (!needles.empty) {
    // An injected response is scanned whatever its encoding; one the broker cannot decode fails closed.
    try {
      codings = parseCodings(joinedHeader(headers, "content-encoding"));
    } catch (err) {
      if (!(body instanceof Uint8Array)) await body.cancel().catch(() => {});
      throw err;
    }
  }
  const declared = Number(headerOf(headers, "content-length") ?? NaN);
  const utf16 = utf16Of(headerOf(headers, "content-type")); // a match in UTF-16 text is replaced in UTF-16
  if (body instanceof Uint8Array || declared <= SMALL_BODY_BYTES) {
    // A streamed body (HTTP/2) is held only up to its declared length: one that says 5 bytes and
    // sends megabytes is refused after 5, not read whole first.
    const whole = body instanceof Uint8Array ? body : await declaredBody(body, declared);
    const bytes = await shapeSmallBody(whole, needles, codings, deps, done, utf16);
    if (!needles.empty) headers = withHeader(headers, "content-length", String(bytes.byteLength));
    return { ...head, headers, body: bytes };
  }
  if (!needles.empty) headers = withHeader(headers, "content-length", undefined); // redaction may change the length: the ingress re-frames
  return { ...head, headers, body: scanBodyStream(body, { needles, codings, utf16, maxBytes: deps.maxResponseBytes, done }) };
}

/**
 * A small fixed-length body, handled whole: one buffer instead of a chain of streams. A compressed
 * one is decoded, redacted and always encoded again, so bytes the decoder skips (a gzip file name,
 * data after the end of the stream) can never carry an echo past the scan.
 */
async function shapeSmallBody(
  bytes: Uint8Array,
  needles: Needles,
  codings: readonly Coding[],
  deps: EgressDeps,
  done: BodyDone,
  utf16: RedactOptions["utf16"],
): Promise<Uint8Array> {
  // Failures throw to egress(), which writes the audit record for them.
  if (deps.maxResponseBytes && bytes.byteLength > deps.maxResponseBytes) {
    throw new PayloadTooLarge(`response body exceeded the broker's limit of ${deps.maxResponseBytes} bytes`);
  }
  if (!needles.empty) {
    if (codings.length) {
      const { plain, forms } = decodeWhole(bytes, codings);
      bytes = encodeWhole(redactWhole(plain, needles, { utf16 }), codings, forms);
    } else {
      bytes = redactWhole(bytes, needles, { utf16 });
    }
  }
  done(bytes.byteLength, null);
  return bytes;
}

/** Passes a stream through unchanged, reporting the error if its source fails. */
function watchErrors(src: ReadableStream<Uint8Array>, onError: (err: unknown) => void): ReadableStream<Uint8Array> {
  const reader = src.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const { done, value } = await reader.read();
        if (done) ctrl.close();
        else ctrl.enqueue(value);
      } catch (err) {
        onError(err);
        ctrl.error(err);
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

/** Counts bytes through a stream and fails it loudly (never truncates) beyond `max` (0 = no cap). */
function countAndCap(max: number, onCount: (n: number) => void, what: string): TransformStream<Uint8Array, Uint8Array> {
  let n = 0;
  return new TransformStream({
    transform(chunk, ctrl) {
      n += chunk.byteLength;
      onCount(n);
      if (max && n > max) ctrl.error(new PayloadTooLarge(`${what} body exceeded the broker's limit of ${max} bytes`));
      else ctrl.enqueue(chunk);
    },
  });
}
