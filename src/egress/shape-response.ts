// The pipeline's last stage before the audit (architecture.md §3, stage 7): the upstream's answer made
// safe to hand to the agent. Hop-by-hop headers go, cookies go on /proxy, and everything the upstream
// wrote (status text, headers, trailers, body in any content coding, gRPC messages, ranges) is scanned
// for every stored value and each match replaced (architecture.md D15, D21, D22).

import { declaredBody, headerOf, joinedHeader, withHeader, type Answer } from "./answer.ts";
import { grpcScanStream, isGrpcResponse, messageFraming, refuseGrpcContentCoding, refuseUnscannedMessageCoding } from "./grpc-body.ts";
import { binaryPartsOf, redactBinaryHeaders, redactBinaryTrailers } from "./binary-metadata.ts";
import { decodeWhole, encodeWhole, parseCodings, type Coding } from "./content-coding.ts";
import { cleanResponseHeaders } from "./headers.ts";
import type { HeaderList } from "../http/index.ts";
import { PayloadTooLarge } from "../errors.ts";
import { redactWhole, type Needles, type RedactOptions } from "./redact.ts";
import { redactHeaders, redactText } from "./redact-headers.ts";
import { scanBodyStream, utf16Of, type BodyDone } from "./scan-body.ts";
import { SMALL_BODY_BYTES } from "./upstream.ts";
import { answerRange, isPartialAnswer, type RangedRequest } from "./ranges.ts";
import type { EgressInput } from "./exchange.ts";

/** What shaping needs of the pipeline's dependencies: the response size cap. */
export interface ShapeDeps {
  readonly maxResponseBytes: number;
}

export async function shapeResponse(
  res: Answer,
  needles: Needles,
  ingress: EgressInput["ingress"],
  deps: ShapeDeps,
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
  deps: ShapeDeps,
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

/** An answer that will not be forwarded: its streamed body is cancelled so the connection is freed. */
export async function discardBody(a: Answer): Promise<void> {
  if (a.body && !(a.body instanceof Uint8Array)) await a.body.cancel().catch(() => {});
}
