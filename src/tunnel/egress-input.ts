// A request read inside a tunnel, as the egress core takes it: the CONNECT's authority, the path the
// agent sent (absolute-form reduced to its path, anything else refused, never rewritten) and who asks.

import type { RequestHead } from "../http/index.ts";
import type { EgressInput } from "../egress/index.ts";
import { InvalidRequest } from "../errors.ts";
import { isContained, principalName, withWorkload } from "../identity/index.ts";
import type { Authority, TunnelSession } from "./context.ts";

/** `http2`: the request is an HTTP/2 stream (the upstream is asked for HTTP/2, trailers pass). */
export function tunnelEgressInput(
  head: Pick<RequestHead, "method" | "target" | "headers">,
  target: Authority,
  session: TunnelSession,
  body: ReadableStream<Uint8Array> | null,
  bodyLength: number | null,
  http2 = false,
): EgressInput {
  return {
    principal: session.principal.id,
    principalName: principalName(session.principal),
    contained: isContained(session.principal),
    ...withWorkload(session.principal),
    scoped: session.principal.kind === "scoped",
    vault: { id: session.open.vault.id, name: session.open.vault.name, policyMode: session.open.vault.policyMode },
    host: target.host,
    port: target.port,
    method: head.method,
    target: originForm(head.target),
    headers: head.headers,
    body,
    bodyLength,
    ingress: "transparent",
    ...(http2 ? { http2 } : {}),
  };
}

/**
 * Absolute-form targets inside a tunnel keep only their path: the authority is the CONNECT's. Any
 * other form (`*`, a path without its leading /, a backslash or `#` straight after the authority) is
 * refused, never rewritten: the path the rules check and the upstream gets is the one the agent sent.
 */
function originForm(target: string): string {
  if (target.startsWith("/")) return target;
  const rest = /^https?:\/\/[^/?#\\]*(.*)$/i.exec(target)?.[1];
  if (rest === "" || rest?.startsWith("?")) return `/${rest}`; // an empty path is "/" (RFC 9110 §4.2.3)
  if (rest?.startsWith("/")) return rest;
  throw new InvalidRequest("the request target must be a path starting with / or an https:// URL", "path");
}
