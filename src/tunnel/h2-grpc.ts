// gRPC's view of broker errors. A gRPC client reads the call's outcome from `grpc-status` and
// `grpc-message`, not from the HTTP status or a JSON body; answering a refused call with a 403 and
// an envelope would surface as an opaque "unexpected HTTP status". The broker's refusal is therefore
// sent as a trailers-only gRPC response whose message is the usual error envelope (proposal hint
// included), with the status mapped as the gRPC HTTP-to-status table suggests.

import type { Answer } from "../egress/index.ts";

/** gRPC status codes (grpc/doc/statuscodes.md) for the HTTP statuses the broker answers with. */
const GRPC_STATUS: Record<number, number> = {
  400: 3, // INVALID_ARGUMENT
  401: 16, // UNAUTHENTICATED
  403: 7, // PERMISSION_DENIED
  404: 12, // UNIMPLEMENTED
  405: 12,
  407: 16,
  413: 8, // RESOURCE_EXHAUSTED
  428: 9, // FAILED_PRECONDITION
  429: 8,
  431: 8,
  500: 13, // INTERNAL
  502: 14, // UNAVAILABLE
  503: 14,
  504: 4, // DEADLINE_EXCEEDED
};

export function grpcStatusFor(httpStatus: number): number {
  return GRPC_STATUS[httpStatus] ?? 2; // UNKNOWN
}

/** The broker's error Response as a trailers-only gRPC answer; the envelope becomes grpc-message. */
export async function grpcErrorAnswer(res: Response): Promise<Answer> {
  const envelope = await res.text();
  const headers: [string, string][] = [
    ["content-type", "application/grpc"],
    ["grpc-status", String(grpcStatusFor(res.status))],
    ["grpc-message", percentEncode(envelope)],
  ];
  for (const name of ["x-broker-error", "retry-after"]) {
    const value = res.headers.get(name);
    if (value !== null) headers.push([name, value]);
  }
  return { status: 200, statusText: "", headers, body: null };
}

/** grpc-message encoding: printable ASCII except "%" stays, everything else is %XX of its UTF-8 bytes. */
export function percentEncode(text: string): string {
  let out = "";
  for (const byte of Buffer.from(text, "utf8"))
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  return out;
}
