// The pipeline's inject, guard-and-dial and exchange stages (architecture.md §3, stages 4 to 6): the
// credential goes into the request (a header, the URL, a SigV4 signature or a minted token), the
// request goes to a checked address of the host, and a minted token the upstream refuses with 401 is
// refreshed once and the request sent again when its body was kept for that (request-body.ts).

import type { Answer } from "./answer.ts";
import { withHeader } from "./answer.ts";
import { isGrpcContentType } from "./grpc-body.ts";
import { headerValues } from "../http/index.ts";
import { Internal } from "../errors.ts";
import type { EgressDeps, EgressInput, Exchange } from "./exchange.ts";
import { buildUpstreamHeaders, withTraceContext } from "./headers.ts";
import type { Minter } from "./minter.ts";
import { resolveChecked } from "./netguard.ts";
import type { EgressPlan } from "./plan.ts";
import { planRanges, type RangedRequest } from "./ranges.ts";
import type { Needles } from "./redact.ts";
import { countAndCap, keptForResend, watchErrors } from "./request-body.ts";
import { discardBody } from "./shape-response.ts";
import { signAwsRequest } from "./sigv4.ts";
import type { Ruled } from "./stage-rules.ts";
import type { OutboundRequest, SendOptions } from "./upstream.ts";
import { placeCredential } from "./url-credential.ts";

export interface Sent {
  /** The upstream's answer, not yet shaped. */
  readonly answer: Answer;
  /** Everything the answer is scanned for (every value any vault sent to this host, the grant's too). */
  readonly needles: Needles;
  /** Set when the agent's Range was dropped or widened, so the answer is cut back (ranges.ts). */
  readonly ranged?: RangedRequest;
}

export async function sendUpstream(x: Exchange, plan: EgressPlan, ruled: Ruled): Promise<Sent> {
  const { input, deps } = x;
  // A URL credential goes in only now: the rules saw the agent's path, and the audit record keeps it.
  const target = plan.placement ? placeCredential(ruled.target, plan.placement) : ruled.target;
  const signing = plan.minted?.type === "aws_sigv4";
  const minting = plan.minted !== undefined && !signing;
  let grant = minting ? await minterOf(deps).grant(input.vault, plan) : undefined;
  // The answer is scanned for every value any vault sends anywhere, not only this request's
  // (architecture.md D22): one map look-up, the set compiled once per change (echo-needles.ts).
  const hostWide = (g: typeof grant) => deps.plans.responseNeedles(plan, g);
  let needles = await hostWide(grant);
  // A scanned answer must not come in pieces the agent can join (ranges.ts): Range dropped or widened.
  const ranged = needles.empty ? undefined : planRanges(plan.service.authType, input.headers, input.target);
  const addresses = () => resolveChecked(input.host, input.port, deps.policy, deps.resolver);
  const read = ruled.body;
  const source = ruled.stream === undefined ? input.body : ruled.stream;
  const body = read
    ? null
    : source && watchErrors(source, (e) => (x.bodyFailure = e)).pipeThrough(countAndCap(deps.maxRequestBytes, (n) => (x.bytesIn = n), "request"));
  const kept = await keptForResend(read, body, input.bodyLength, minting);
  const replayable = !body || kept !== undefined;
  const injection = grant?.injection ?? plan.injection;
  const inPath = plan.placement !== undefined;
  /** The broker's trace headers, set at dispatch when traces are exported (the same on a resend). */
  let traced: readonly [string, string][] | undefined;
  // (An HTTP/1.1 agent's request can go out over HTTP/2 too, to an origin that speaks nothing else.)
  const how: SendOptions = input.http2
    ? { ...http2Options(input, injection, inPath), signal: ruled.signal ?? input.signal }
    : { sensitive: sensitiveFields(injection, inPath), signal: ruled.signal ?? input.signal };
  const outbound = async (): Promise<OutboundRequest> => {
    const again = kept ? new Blob([kept as Uint8Array<ArrayBuffer>]).stream() : body;
    // SigV4 replaces the agent's own Authorization (its placeholder signature) on every ingress.
    let headers = buildUpstreamHeaders(ruled.headers ?? input.headers, grant?.injection ?? plan.injection, signing || input.ingress === "explicit");
    if (traced) headers = withTraceContext(headers, traced); // before signing: SigV4 signs what is sent
    // An injected gRPC call asks for uncompressed messages: less to decode before the scan.
    if (how.http2 === "require" && !(grant?.needles ?? plan.needles).empty) headers = withHeader(headers, "grpc-accept-encoding", "identity");
    if (ranged) headers = ranged.upstreamHeaders(headers); // before signing: SigV4 signs the widened Range
    const req = { method: input.method, target, headers, body: again, bodyLength: read?.byteLength ? read.byteLength : input.bodyLength };
    return signing ? { method: input.method, ...(await signAwsRequest(plan.minted!, input, req, deps.now())) } : req;
  };
  if (x.tick) x.clock.tSend = x.tick();
  traced = x.span?.dispatched(x.clock.tSend);
  let answer = await deps.upstream.send({ host: input.host, port: input.port, addresses }, await outbound(), how);
  // The rejected token stays in the host's set (a 401 may echo it); the new one joins it. A
  // service refreshed for 401s too often lately gets no new token (minted.ts): the 401 stands.
  // (Settled at once: it is awaited only after the rejected body is let go.)
  const regranting = grant && answer.status === 401 ? settled(minterOf(deps).regrant(input.vault, plan, grant)) : undefined;
  if (regranting) {
    const rejected = answer;
    if (replayable) await discardBody(rejected);
    const next = await regranting;
    if (!next.ok) {
      if (!replayable) await discardBody(rejected);
      throw next.error;
    }
    grant = next.value;
    if (replayable) {
      // The new token is in every answer's set before it goes (architecture.md D22), not after.
      needles = await hostWide(grant);
      answer = await deps.upstream.send({ host: input.host, port: input.port, addresses }, await outbound(), how);
    }
  }
  // A value read from a store that the upstream refuses may have been rotated there: read again, once.
  if (answer.status === 401 || answer.status === 403) deps.plans.refused(input.vault.id, plan);
  if (x.tick) x.clock.tHead = x.tick();
  x.span?.answered(x.clock.tHead);
  return ranged ? { answer, needles, ranged } : { answer, needles };
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

function minterOf(deps: EgressDeps): Minter {
  if (!deps.minter) throw new Internal();
  return deps.minter;
}
