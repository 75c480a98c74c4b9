// Header rules for both directions. Upstream: the agent's own Authorization (explicit path),
// hop-by-hop headers, headers named in Connection and broker-scoped headers are dropped; the
// injected credential always wins; everything else passes unchanged and in order. Downstream:
// hop-by-hop headers and any upstream X-Broker-Error are dropped, Set-Cookie too unless the caller
// keeps cookies (the tunnel). Never logs header values.

import type { HeaderList } from "../http/index.ts";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
]);
const BROKER_SCOPED = new Set(["x-vault", "proxy-authorization"]);
/** A WebSocket upgrade's own request headers: forwarded with the upgrade even where Connection names them. */
export const WEBSOCKET_HEADERS: ReadonlySet<string> = new Set([
  "sec-websocket-key",
  "sec-websocket-version",
  "sec-websocket-protocol",
  "sec-websocket-extensions",
]);

/**
 * The TextDecoder label for a body of this Content-Type: its declared charset, or UTF-8 when it
 * declares none or US-ASCII (which TextDecoder would read as windows-1252).
 */
export function bodyCharset(contentType: string | undefined): string {
  const declared = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? "")?.[1]?.toLowerCase();
  return !declared || declared === "us-ascii" ? "utf-8" : declared;
}

export interface Injection {
  /** Lower-case header name to set, e.g. "authorization". */
  readonly header: string;
  /** SECRET: the full header value; revealed only while writing the request. */
  readonly value: { reveal(): string };
}

/** W3C Trace Context's headers: replaced as a pair, never merged with the agent's (telemetry.ts). */
const TRACE_HEADERS = new Set(["traceparent", "tracestate"]);

/**
 * The request's trace headers in place of the agent's own under those names (any case): the upstream's
 * parent is the broker's span, not the agent's (W3C Trace Context: each hop names itself).
 */
export function withTraceContext(headers: HeaderList, trace: readonly (readonly [string, string])[]): HeaderList {
  const out: HeaderList = headers.filter(([k]) => !TRACE_HEADERS.has(k.toLowerCase()));
  for (const [k, v] of trace) out.push([k, v]);
  return out;
}

export function buildUpstreamHeaders(src: Iterable<[string, string]>, injection: Injection | undefined, stripAuthorization: boolean): HeaderList {
  const list = Array.isArray(src) ? (src as [string, string][]) : [...src];
  // Each name lower-cased once; the names a Connection header lists gathered only when there is one.
  const lower = list.map(([k]) => k.toLowerCase());
  let named: Set<string> | undefined;
  lower.forEach((name, i) => {
    if (name !== "connection") return;
    for (const token of list[i]![1].split(",")) {
      const t = token.trim();
      if (t) (named ??= new Set()).add(t.toLowerCase());
    }
  });
  const out: HeaderList = [];
  for (let i = 0; i < list.length; i++) {
    const name = lower[i]!;
    if (HOP_BY_HOP.has(name) || BROKER_SCOPED.has(name) || named?.has(name)) continue;
    if ((stripAuthorization && name === "authorization") || name === injection?.header) continue;
    out.push([list[i]![0], list[i]![1]]);
  }
  // Injection always wins: any client value for the slot was dropped above, so exactly one remains.
  if (injection) out.push([injection.header, injection.value.reveal()]); // reveal: into the upstream request only
  return out;
}

// X-Broker-Error is the broker's own: an upstream must not be able to dress its answer as a broker refusal.
const RESPONSE_DROP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "x-broker-error",
]);
const COOKIES = ["set-cookie", "set-cookie2"];
const BODY_DESCRIBING = new Set(["content-encoding", "content-length", "content-type"]);

const DROPPED_KEEPING_COOKIES = RESPONSE_DROP;
const DROPPED_WITH_COOKIES = new Set([...RESPONSE_DROP, ...COOKIES]);

/** The upstream's header lines without those the agent must not get; the same list when nothing goes. */
export function cleanResponseHeaders(src: HeaderList, opts: { keepCookies: boolean }): HeaderList {
  const fixed = opts.keepCookies ? DROPPED_KEEPING_COOKIES : DROPPED_WITH_COOKIES;
  // Names a Connection header lists: gathered once into one set (a head may list thousands).
  let named: Set<string> | undefined;
  for (const [k, v] of src) {
    if (k.toLowerCase() !== "connection") continue;
    for (const token of v.split(",")) {
      const name = token.trim().toLowerCase();
      // Connection may not take away what says how to read the body: dropping Content-Encoding would
      // hand the agent compressed bytes with nothing saying so (and keep the broker from scanning them).
      if (name && !BODY_DESCRIBING.has(name)) (named ??= new Set()).add(name);
    }
  }
  // Names are compared lower-cased whoever produced the list (the upstream client lower-cases them).
  const dropped = (k: string) => {
    const lower = k.toLowerCase();
    return fixed.has(lower) || named?.has(lower) === true;
  };
  if (!src.some(([k]) => dropped(k))) return src; // the usual case: nothing to drop
  return src.filter(([k]) => !dropped(k));
}
