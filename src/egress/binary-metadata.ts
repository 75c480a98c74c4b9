// Binary metadata on responses to injected requests: header and trailer fields whose names end in
// "-bin" (grpc-status-details-bin, any x-…-bin). By the gRPC spec their values are base64, padded or
// not, several values possibly sharing one field comma-separated, and every gRPC library hands the
// caller the decoded bytes; an echo there is invisible to a scan of the field's text. So each part is
// decoded, scanned with the body engine, and encoded again when something was replaced.
//
// Decoding is strict (the standard alphabet, padding only at the end): lenient decoders disagree on
// what they skip (Node's Buffer ignores characters it does not know, others stop or fail), so a value
// outside the strict form could read as a credential to the agent's library and as noise to the scan.
// Such a value fails closed: in a response head the whole response is refused; in trailers, which
// arrive after the body was passed on, the field is dropped and the call is made to fail (see below).

import { UndecodableResponse } from "../errors.ts";
import type { HeaderList } from "./http1.ts";
import { compileNeedles, redactWhole, type NeedleSet } from "./redact.ts";

/** One base64 part: the standard alphabet, then at most two "=" of padding. */
const BASE64_PART = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * The status the agent's gRPC call ends with when a trailer could not be scanned: INTERNAL, what gRPC
 * clients themselves report for a response they cannot parse (grpc/doc/statuscodes.md). Not
 * UNAVAILABLE (the broker's mapping for a refused head): the upstream has already run the call and
 * its messages were delivered, so a retry-on-UNAVAILABLE policy must not run it a second time.
 */
const GRPC_INTERNAL = "13";
// Printable ASCII without "%": valid as a grpc-message as it stands (no percent-encoding needed).
const TRAILER_REFUSAL = "the broker dropped a binary (-bin) trailer that was not base64 and could not be scanned (undecodable_response)";
/** What no longer describes the call once its status is replaced. */
const UPSTREAM_STATUS = new Set(["grpc-status", "grpc-message", "grpc-status-details-bin"]);

export function isBinaryField(name: string): boolean {
  return name.toLowerCase().endsWith("-bin");
}

/**
 * A `-bin` value with each comma-separated base64 part scanned decoded; the same string when nothing
 * was replaced, undefined when a part is not base64 (or the parts spell a value only when read as
 * one, below). A changed part is encoded again with or without padding as it came (gRPC readers
 * accept both).
 */
export function redactBinaryValue(value: string, set: NeedleSet): string | undefined {
  const needles = compileNeedles(set);
  const parts = value.split(",").map((p) => p.trim()); // optional whitespace around list elements, trimmed by gRPC readers too
  let changed = false;
  for (let i = 0; i < parts.length; i++) {
    const bytes = decodeBase64(parts[i]!);
    if (!bytes) return undefined;
    const scanned = redactWhole(bytes, needles);
    if (scanned === bytes) continue;
    changed = true;
    const encoded = Buffer.from(scanned).toString("base64");
    parts[i] = parts[i]!.endsWith("=") ? encoded : encoded.replace(/=+$/, "");
  }
  if (parts.length > 1 && readAsOne(parts).some((bytes) => !Buffer.from(redactWhole(bytes, needles)).equals(bytes))) return undefined;
  return changed ? parts.join(",") : value;
}

function decodeBase64(part: string): Uint8Array | undefined {
  if (!BASE64_PART.test(part)) return undefined;
  // Padded: whole quads. Unpadded: a lone sixth of a byte (length 1 mod 4) is no encoding at all.
  if (part.endsWith("=") ? part.length % 4 !== 0 : part.length % 4 === 1) return undefined;
  return Buffer.from(part, "base64");
}

/**
 * What readers that decode a several-part field as one base64 text see: grpc-js does so for
 * grpc-* keys (grpc-status-details-bin), where Node skips the commas and stops at the first "=";
 * other lenient decoders skip the "=" too. Split across parts ("QmV,hcm…"), a value is in neither
 * part alone; such a field cannot be rewritten for every reader at once, so it fails closed.
 */
function readAsOne(parts: readonly string[]): Uint8Array[] {
  const all = parts.join("");
  const pad = all.indexOf("=");
  const untilPad = pad < 0 ? all : all.slice(0, pad);
  const views = [Buffer.from(untilPad, "base64")];
  if (pad >= 0) views.push(Buffer.from(all.replaceAll("=", ""), "base64"));
  return views;
}

/** Response head fields with every `-bin` value scanned decoded; one that is not base64 refuses the response. */
export function redactBinaryHeaders(headers: HeaderList, set: NeedleSet): HeaderList {
  const needles = compileNeedles(set);
  if (needles.empty || !headers.some(([k]) => isBinaryField(k))) return headers;
  return headers.map(([k, v]) => {
    if (!isBinaryField(k)) return [k, v];
    const scanned = redactBinaryValue(v, needles);
    // The message names neither the field nor its value: both are upstream text.
    if (scanned === undefined) throw new UndecodableResponse("the upstream sent a binary (-bin) header that is not base64, which the broker cannot decode to scan");
    return [k, scanned];
  });
}

/**
 * Trailer fields with every `-bin` value scanned decoded. The body has been passed on by the time
 * trailers arrive, so a response can no longer be refused: a field that is not base64 is dropped,
 * `x-broker-error: undecodable_response` says why, and on a gRPC call (content type, or a grpc-status
 * among the trailers) the upstream's status, message and details are replaced by INTERNAL, so the
 * agent's call fails instead of completing with metadata missing in silence.
 */
export function redactBinaryTrailers(trailers: HeaderList, set: NeedleSet, grpcResponse: boolean): HeaderList {
  const needles = compileNeedles(set);
  if (needles.empty || !trailers.some(([k]) => isBinaryField(k))) return trailers;
  let dropped = false;
  const kept: HeaderList = [];
  for (const [k, v] of trailers) {
    const scanned = isBinaryField(k) ? redactBinaryValue(v, needles) : v;
    if (scanned === undefined) dropped = true;
    else kept.push([k, scanned]);
  }
  if (!dropped) return kept;
  const grpc = grpcResponse || trailers.some(([k]) => k.toLowerCase() === "grpc-status");
  const out = grpc ? kept.filter(([k]) => !UPSTREAM_STATUS.has(k.toLowerCase())) : kept;
  out.push(["x-broker-error", "undecodable_response"]);
  if (grpc) out.push(["grpc-status", GRPC_INTERNAL], ["grpc-message", TRAILER_REFUSAL]);
  return out;
}
