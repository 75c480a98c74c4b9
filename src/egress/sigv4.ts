// AWS Signature Version 4 for aws_sigv4 services. Agents sign with placeholder keys so their SDKs work
// unchanged; the broker drops that signature and signs the request as it leaves with the vault's keys,
// using a maintained signer (@smithy/signature-v4). The canonical request covers exactly what is sent:
// the query (and an S3 path) is rewritten into SigV4's canonical percent-encoding first, so AWS and
// any verifier read the same bytes; the payload hash is the SHA-256 of a body the broker holds,
// UNSIGNED-PAYLOAD for a large S3 body, or the SDK's own unsigned streaming form, forwarded as is.
// A body whose chunks the SDK signed with its placeholder key (aws-chunked with chunk signatures)
// is decoded to plain bytes and sent unsigned, since those chunk signatures cannot be right.

import { createHash, createHmac, type Hash, type Hmac } from "node:crypto";
import { SignatureV4 } from "@smithy/signature-v4";
import { CredentialRefreshFailed, InvalidRequest, PayloadTooLarge } from "../errors.ts";
import { decodeAwsChunked, withoutAwsChunked } from "./aws-chunked.ts";
import { hostHeader, type HeaderList } from "../http/index.ts";
import type { MintedPlan } from "./plan.ts";

/** What goes upstream: headers without Host (the upstream client adds it), the body and its length. */
export interface SignedRequest {
  readonly target: string;
  readonly headers: HeaderList;
  readonly body: ReadableStream<Uint8Array> | null;
  readonly bodyLength: number | null;
}

/** Bodies held to be hashed: S3 up to this (larger ones go UNSIGNED-PAYLOAD)… */
const S3_HOLD_BYTES = 64 * 1024;
/** …other services (which accept no unsigned payload) up to this. */
const HOLD_BYTES = 16 * 1024 * 1024;
const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const UNSIGNED = "UNSIGNED-PAYLOAD";
/** Headers of the agent's own signature (and a date it chose): replaced, never forwarded. */
export const SIGV4_REPLACED: ReadonlySet<string> = new Set(["authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256", "host"]);

export async function signAwsRequest(
  m: MintedPlan,
  dest: { host: string; port: number },
  req: { method: string; target: string; headers: HeaderList; body: ReadableStream<Uint8Array> | null; bodyLength: number | null },
  now: number,
): Promise<SignedRequest> {
  const { region, service } = regionAndService(m, dest.host);
  const s3 = service === "s3";
  const claimed = header(req.headers, "x-amz-content-sha256");
  let headers = req.headers.filter(([k]) => !SIGV4_REPLACED.has(k.toLowerCase()));
  let body = req.body;
  let bodyLength = req.bodyLength;
  let payloadHash: string;
  if (claimed === "STREAMING-UNSIGNED-PAYLOAD-TRAILER") {
    payloadHash = claimed; // aws-chunked without chunk signatures: nothing in the body depends on the key
  } else if (claimed?.startsWith("STREAMING-") && body) {
    const decoded = Number(header(req.headers, "x-amz-decoded-content-length"));
    if (!Number.isSafeInteger(decoded) || decoded < 0) throw new InvalidRequest("an aws-chunked body needs x-amz-decoded-content-length");
    body = decodeAwsChunked(body, decoded);
    bodyLength = decoded;
    headers = withoutAwsChunked(headers);
    payloadHash = s3 ? UNSIGNED : await hashStream(body, decoded).then((r) => ((body = r.body), r.hash));
  } else if (!body || bodyLength === 0) {
    payloadHash = EMPTY_SHA256;
  } else if (s3 && (bodyLength === null || bodyLength > S3_HOLD_BYTES)) {
    payloadHash = UNSIGNED;
  } else {
    const held = await holdBody(body, s3 ? S3_HOLD_BYTES : HOLD_BYTES);
    body = held.body;
    bodyLength = held.length;
    payloadHash = held.hash;
  }

  const { path, query } = canonicalTarget(req.target, s3);
  const signer = new SignatureV4({
    credentials: {
      // reveal: handed to the signer, which only derives the signing key and the Authorization value
      accessKeyId: m.inputs.get("access_key_id")!.reveal(),
      secretAccessKey: m.inputs.get("secret_access_key")!.reveal(),
      ...(m.inputs.has("session_token") && { sessionToken: m.inputs.get("session_token")!.reveal() }),
    },
    region,
    service,
    sha256: Sha256,
    uriEscapePath: !s3, // S3 alone takes its path encoded once (SigV4 documentation)
    applyChecksum: false,
  });
  const signable: Record<string, string> = { host: hostHeader(dest.host, dest.port), "x-amz-content-sha256": payloadHash };
  for (const [k, v] of headers) {
    const lower = k.toLowerCase();
    signable[lower] = lower in signable ? `${signable[lower]},${v}` : v;
  }
  const signed = await signer.sign(
    { method: req.method, protocol: "https:", hostname: dest.host, port: dest.port, path, query: query.object, headers: signable },
    { signingDate: new Date(now) },
  );
  const out: HeaderList = [];
  for (const [k, v] of Object.entries(signed.headers)) if (k !== "host") out.push([k, String(v)]);
  return { target: `${path}${query.text ? `?${query.text}` : ""}`, headers: out, body, bodyLength };
}

function header(headers: HeaderList, lower: string): string | undefined {
  return headers.find(([k]) => k.toLowerCase() === lower)?.[1];
}

/** Region and service from the service's settings, or read from an AWS host name. */
function regionAndService(m: MintedPlan, host: string): { region: string; service: string } {
  let region = m.fields.region;
  let service = m.fields.service;
  if (!region || !service) {
    const derived = fromAwsHost(host);
    region ??= derived?.region;
    service ??= derived?.service;
  }
  if (!region || !service)
    throw new CredentialRefreshFailed(host, `the AWS region and service cannot be read from ${host}; set auth.region and auth.service on the service`, true);
  return { region, service };
}

const REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;

/** s3.eu-west-1.amazonaws.com, bucket.s3.us-east-2.amazonaws.com, dynamodb.us-east-1.amazonaws.com, sts.amazonaws.com… */
export function fromAwsHost(host: string): { region?: string; service?: string } | undefined {
  const m = /^(.*)\.amazonaws\.com(\.cn)?$/.exec(host.toLowerCase());
  if (!m) return undefined;
  const labels = m[1]!.split(".");
  const s3 = labels.findIndex((l) => l === "s3" || l.startsWith("s3-"));
  if (s3 >= 0) {
    const legacy = labels[s3]!.startsWith("s3-") ? labels[s3]!.slice(3) : undefined;
    const next = labels.slice(s3 + 1).find((l) => REGION.test(l));
    return { service: "s3", region: (legacy && REGION.test(legacy) ? legacy : next) ?? "us-east-1" };
  }
  const regionAt = labels.findIndex((l) => REGION.test(l));
  if (regionAt > 0) return { service: labels[regionAt - 1], region: labels[regionAt] };
  if (labels.length === 1) return { service: labels[0], region: "us-east-1" }; // global endpoints: iam, sts
  return undefined;
}

/** RFC 3986 unreserved characters stay; every other byte is %XX upper-case (SigV4's UriEncode). */
function uriEncode(text: string, keepSlash: boolean): string {
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) || (keepSlash && c === "/") ? c : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

function decodeComponent(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new InvalidRequest("the request URL has invalid percent-encoding");
  }
}

/**
 * The path and query as they will be sent, in canonical encoding. The query keeps its order (the
 * signer sorts its own copy); `a` and `a=` both become `a=`. A '+' is a plus sign, not a space
 * (AWS SDKs never send a bare '+'). Only S3's path is re-encoded: other services take the path as sent.
 */
function canonicalTarget(target: string, s3: boolean): { path: string; query: { text: string; object: Record<string, string | string[]> } } {
  const q = target.indexOf("?");
  const rawPath = q < 0 ? target : target.slice(0, q);
  const rawQuery = q < 0 ? "" : target.slice(q + 1);
  const path = s3 ? uriEncode(decodeComponent(rawPath), true) : rawPath;
  const pairs: string[] = [];
  const object: Record<string, string | string[]> = {};
  for (const part of rawQuery.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const key = decodeComponent(eq < 0 ? part : part.slice(0, eq));
    const value = eq < 0 ? "" : decodeComponent(part.slice(eq + 1));
    pairs.push(`${uriEncode(key, false)}=${uriEncode(value, false)}`);
    const had = object[key];
    object[key] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
  }
  return { path, query: { text: pairs.join("&"), object } };
}

/** Reads a body whole (it was small enough to hash); beyond `max` it is refused, never truncated. */
async function holdBody(body: ReadableStream<Uint8Array>, max: number): Promise<{ body: ReadableStream<Uint8Array>; length: number; hash: string }> {
  const parts: Uint8Array[] = [];
  let length = 0;
  const hash = createHash("sha256");
  for await (const chunk of body) {
    length += chunk.byteLength;
    if (length > max) throw new PayloadTooLarge(`a request body signed with SigV4 is held to be hashed, up to ${max} bytes; this one is larger`);
    parts.push(chunk);
    hash.update(chunk);
  }
  const bytes = Buffer.concat(parts);
  return { body: new Blob([bytes]).stream(), length, hash: hash.digest("hex") };
}

async function hashStream(body: ReadableStream<Uint8Array>, length: number): Promise<{ body: ReadableStream<Uint8Array>; hash: string }> {
  const held = await holdBody(body, Math.min(length, HOLD_BYTES));
  return { body: held.body, hash: held.hash };
}

type SourceData = string | ArrayBuffer | ArrayBufferView;

function bytesOf(data: SourceData): Buffer {
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/** The hash the signer is given: SHA-256, or HMAC-SHA256 with a key (node:crypto). */
class Sha256 {
  #hash: Hash | Hmac;
  readonly #secret: Buffer | undefined;
  constructor(secret?: SourceData) {
    this.#secret = secret === undefined ? undefined : bytesOf(secret);
    this.#hash = this.#fresh();
  }
  #fresh(): Hash | Hmac {
    return this.#secret ? createHmac("sha256", this.#secret) : createHash("sha256");
  }
  update(data: SourceData): void {
    this.#hash.update(bytesOf(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }
  reset(): void {
    this.#hash = this.#fresh();
  }
}
