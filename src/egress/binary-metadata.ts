// Binary metadata on responses to injected requests: header and trailer fields whose names end in
// "-bin" (grpc-status-details-bin, any x-…-bin). By the gRPC spec their values are base64, padded or
// not, several values possibly sharing one field comma-separated, and every gRPC library hands the
// caller the decoded bytes; an echo there is invisible to a scan of the field's text. So each part is
// decoded, scanned with the body engine, and encoded again when something was replaced. The decoded
// parts are also scanned joined (of one name, and all of them, head then trailers), since a caller
// can join the pieces its library hands it; a match there is masked in place (maskJoined).
//
// Decoding is strict (the standard alphabet, padding only at the end): lenient decoders disagree on
// what they skip (Node's Buffer ignores characters it does not know, others stop or fail), so a value
// outside the strict form could read as a credential to the agent's library and as noise to the scan.
// Such a value fails closed: in a response head the whole response is refused; in trailers, which
// arrive after the body was passed on, the field is dropped and the call is made to fail (see below).

import { UndecodableResponse } from "../errors.ts";
import type { HeaderList } from "../http/index.ts";
import { compileNeedles, redactWhole, type Needles, type NeedleSet } from "./redact.ts";

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

/** The decoded bytes of one comma-separated part of a `-bin` field (`name` lower-cased), as the agent's library hands them on. */
export interface BinaryPart {
  readonly name: string;
  readonly bytes: Uint8Array;
}

/** One part being scanned: its text as it came, its bytes, and whether the bytes were rewritten. */
interface Part {
  readonly name: string;
  readonly text: string;
  bytes: Uint8Array;
  changed: boolean;
}

/**
 * A `-bin` value with each comma-separated base64 part scanned decoded; the same string when nothing
 * was replaced, undefined when a part is not base64 (or the parts spell a value only when read as
 * one, below). A changed part is encoded again with or without padding as it came (gRPC readers
 * accept both). The parts are also scanned joined (see maskJoined).
 */
export function redactBinaryValue(value: string, set: NeedleSet): string | undefined {
  const needles = compileNeedles(set);
  const parts = decodeField("", value, needles);
  if (!parts) return undefined;
  maskJoined([], parts, needles);
  return encodeField(value, parts, needles);
}

/** A field's parts decoded and each scanned alone ("[redacted]" in place of a match); undefined when one is not base64. */
function decodeField(name: string, value: string, needles: Needles): Part[] | undefined {
  const parts: Part[] = [];
  for (const raw of value.split(",")) {
    const text = raw.trim(); // optional whitespace around list elements, trimmed by gRPC readers too
    const bytes = decodeBase64(text);
    if (!bytes) return undefined;
    const scanned = redactWhole(bytes, needles);
    parts.push({ name, text, bytes: scanned, changed: scanned !== bytes });
  }
  return parts;
}

/** The field's text again: the same string when no part changed; undefined when readers reading it as one text would see a value. */
function encodeField(value: string, parts: readonly Part[], needles: Needles): string | undefined {
  const texts = parts.map((p) => {
    if (!p.changed) return p.text;
    const encoded = Buffer.from(p.bytes).toString("base64");
    return p.text.endsWith("=") ? encoded : encoded.replace(/=+$/, "");
  });
  if (texts.length > 1 && readAsOne(texts).some((bytes) => !Buffer.from(redactWhole(bytes, needles)).equals(bytes))) return undefined;
  return parts.some((p) => p.changed) ? texts.join(",") : value;
}

/**
 * The parts a library hands the caller can be joined by the caller: a value cut into 8-byte pieces
 * (one per part, per field line, or half in the head and half in the trailers) is in no piece
 * alone. So the decoded bytes are also scanned joined, in order: the parts of each name (after
 * `fixed`, the same name's parts already sent in the head), and all parts of every name. A match
 * there is masked in place (each of its bytes becomes a filler byte: lengths, and so the pieces,
 * stay as they were) in `parts`; `fixed` was sent already and scanned so, so no match lies in it alone.
 */
function maskJoined(fixed: readonly BinaryPart[], parts: Part[], needles: Needles): void {
  if (fixed.length + parts.length < 2) return;
  const names = new Set(parts.map((p) => p.name));
  for (const name of names)
    maskGroup(
      fixed.filter((f) => f.name === name),
      parts.filter((p) => p.name === name),
      needles,
    );
  if (names.size > 1 || fixed.some((f) => !names.has(f.name))) maskGroup(fixed, parts, needles);
}

function maskGroup(fixed: readonly BinaryPart[], parts: Part[], needles: Needles): void {
  if (fixed.length + parts.length < 2) return;
  const joined = Buffer.concat([...fixed.map((f) => f.bytes), ...parts.map((p) => p.bytes)]);
  const masked = redactWhole(joined, needles, { preserveLength: true });
  if (masked === joined) return;
  let at = fixed.reduce((n, f) => n + f.bytes.byteLength, 0);
  for (const p of parts) {
    const next = masked.subarray(at, at + p.bytes.byteLength);
    at += p.bytes.byteLength;
    if (Buffer.from(next).equals(p.bytes)) continue;
    p.bytes = Uint8Array.from(next);
    p.changed = true;
  }
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

/**
 * Each field line's value with every `-bin` value scanned decoded (parts alone, then joined after
 * `fixed`); undefined for a `-bin` line that is not base64 or cannot be rewritten for every reader.
 */
function scanFields(fields: HeaderList, needles: Needles, fixed: readonly BinaryPart[]): (string | undefined)[] {
  const decoded = fields.map(([k, v]) => (isBinaryField(k) ? (decodeField(k.toLowerCase(), v, needles) ?? null) : undefined));
  maskJoined(
    fixed,
    decoded.flatMap((parts) => parts ?? []),
    needles,
  );
  return fields.map(([, v], i) => {
    const parts = decoded[i];
    if (parts === undefined) return v; // not -bin
    return parts === null ? undefined : encodeField(v, parts, needles);
  });
}

/** The decoded parts of a (scanned) head's `-bin` fields, in order: what its trailers are scanned joined with. */
export function binaryPartsOf(headers: HeaderList): BinaryPart[] {
  return headers.flatMap(([k, v]) => {
    if (!isBinaryField(k)) return [];
    const parts = v.split(",").map((p) => decodeBase64(p.trim()));
    return parts.every((b) => b !== undefined) ? parts.map((bytes) => ({ name: k.toLowerCase(), bytes: bytes! })) : [];
  });
}

/** Response head fields with every `-bin` value scanned decoded; one that is not base64 refuses the response. */
export function redactBinaryHeaders(headers: HeaderList, set: NeedleSet): HeaderList {
  const needles = compileNeedles(set);
  if (needles.empty || !headers.some(([k]) => isBinaryField(k))) return headers;
  const values = scanFields(headers, needles, []);
  return headers.map(([k], i) => {
    const scanned = values[i];
    // The message names neither the field nor its value: both are upstream text.
    if (scanned === undefined)
      throw new UndecodableResponse("the upstream sent a binary (-bin) header that is not base64, which the broker cannot decode to scan");
    return [k, scanned];
  });
}

/**
 * Trailer fields with every `-bin` value scanned decoded, and joined after `head` (the head's parts,
 * binaryPartsOf: a value cut between head and trailers). The body has been passed on by the time
 * trailers arrive, so a response can no longer be refused: a field that is not base64 is dropped,
 * `x-broker-error: undecodable_response` says why, and on a gRPC call (content type, or a grpc-status
 * among the trailers) the upstream's status, message and details are replaced by INTERNAL, so the
 * agent's call fails instead of completing with metadata missing in silence.
 */
export function redactBinaryTrailers(trailers: HeaderList, set: NeedleSet, grpcResponse: boolean, head: readonly BinaryPart[] = []): HeaderList {
  const needles = compileNeedles(set);
  if (needles.empty || !trailers.some(([k]) => isBinaryField(k))) return trailers;
  const values = scanFields(trailers, needles, head);
  let dropped = false;
  const kept: HeaderList = [];
  trailers.forEach(([k], i) => {
    const scanned = values[i];
    if (scanned === undefined) dropped = true;
    else kept.push([k, scanned]);
  });
  if (!dropped) return kept;
  const grpc = grpcResponse || trailers.some(([k]) => k.toLowerCase() === "grpc-status");
  const out = grpc ? kept.filter(([k]) => !UPSTREAM_STATUS.has(k.toLowerCase())) : kept;
  out.push(["x-broker-error", "undecodable_response"]);
  if (grpc) out.push(["grpc-status", GRPC_INTERNAL], ["grpc-message", TRAILER_REFUSAL]);
  return out;
}
