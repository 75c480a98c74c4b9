// The upstream's answer to an injected WebSocket upgrade, before any frame: its head redacted (no
// reveal by echo in a 101), and a refused upgrade's body decoded (framing, content coding) and
// redacted. Never passes an upstream byte it could not scan to the agent.

import { UndecodableResponse } from "../errors.ts";
import type { Connection } from "./connection.ts";
import { parseCodings } from "./content-coding.ts";
import { headerValues, responseFraming, type HeaderList, type ResponseHead } from "../http/index.ts";
import { redactBinaryHeaders } from "./binary-metadata.ts";
import { isPartialAnswer } from "./ranges.ts";
import { compileNeedles, type NeedleSet } from "./redact.ts";
import { redactHeaders, redactText } from "./redact-headers.ts";
import { scanBodyStream } from "./scan-body.ts";
import { bodyStream } from "./upstream-body.ts";

const UNASKED_PARTIAL =
  "the upstream answered the WebSocket upgrade with a partial response the broker did not ask for, so it could not be checked for echoed credentials";

// Framing and connection management are ours on the agent's side (the refusal is re-framed).
const REFUSAL_DROP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "content-length",
  "x-broker-error",
]);

/**
 * The head with every needle replaced in the reason phrase and header values (in every form
 * redact.ts knows, latin1 included); a header whose name holds one is dropped. `-bin` values are
 * scanned decoded (binary-metadata.ts); one that is not base64 throws UndecodableResponse.
 */
export function redactResponseHead(head: ResponseHead, set: NeedleSet): ResponseHead {
  const needles = compileNeedles(set);
  if (needles.empty) return head;
  // The shared rules keep the upstream's order, spelling and repeats.
  return { ...head, statusText: redactText(head.statusText, needles), headers: redactHeaders(redactBinaryHeaders(head.headers, needles), needles) };
}

/** Whether a 101 names any extension: on a scanned connection that means frames we could not read. */
export function namesExtension(head: ResponseHead): boolean {
  return headerValues(head.headers, "sec-websocket-extensions").some((v) => v.trim() !== "");
}

/** Drops Sec-WebSocket-Extensions from an injected upgrade request, so the upstream cannot negotiate compression. */
export function withoutExtensions(headers: HeaderList): HeaderList {
  return headers.filter(([k]) => k.toLowerCase() !== "sec-websocket-extensions");
}

/**
 * A non-101 answer as a Response for the agent (the connection closes after it): the body read to
 * its framed end, decoded, redacted and encoded again like any injected response; a coding the
 * broker cannot decode throws UndecodableResponse. `done` runs once with the upstream body bytes
 * read and an audit error code (null when clean).
 */
export function shapeRefusal(head: ResponseHead, conn: Connection, set: NeedleSet, done: (bytesOut: number, error: string | null) => void): Response {
  const needles = compileNeedles(set);
  // An upgrade goes out without Range (upgrade.ts), so a partial answer is one nobody asked for: its
  // pieces could each hold too little of an echo to match, so it fails closed as egress() refuses
  // one (ranges.ts). The message is fixed: no upstream text in it. (A raw head keeps the
  // upstream's spelling of names; isPartialAnswer reads them lower-case.)
  if (
    !needles.empty &&
    isPartialAnswer(
      head.status,
      head.headers.map(([k, v]) => [k.toLowerCase(), v]),
    )
  )
    throw new UndecodableResponse(UNASKED_PARTIAL);
  const encoding = headerValues(head.headers, "content-encoding").join(",");
  const codings = needles.empty ? [] : parseCodings(encoding || null);
  const headers = new Headers();
  for (const [k, v] of head.headers) if (!REFUSAL_DROP.has(k.toLowerCase())) headers.append(k, v);
  const upstream = bodyStream(conn, responseFraming(head, "GET"), async () => {});
  if (!upstream) {
    done(0, null);
    return new Response(null, { status: head.status, statusText: head.statusText, headers });
  }
  const body = scanBodyStream(upstream, { needles, codings, maxBytes: 0, done });
  return new Response(body, { status: head.status, statusText: head.statusText, headers });
}
