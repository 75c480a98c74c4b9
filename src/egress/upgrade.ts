// WebSocket upgrades through the egress core (wss:// for realtime APIs): the same plan, header
// rules, injection and network guard as any request, then the upstream's answer. On 101 the caller
// relays raw bytes both ways; frames are not inspected (no echo redaction inside WebSocket frames).

import { BrokerError, UpstreamUnreachable } from "../errors.ts";
import { auditEntry } from "./audit.ts";
import type { Connection } from "./connection.ts";
import type { EgressDeps, EgressInput } from "./egress.ts";
import { buildUpstreamHeaders } from "./headers.ts";
import { findHeadEnd, parseResponseHead, serializeHead, type ResponseHead } from "./http1.ts";
import { resolveChecked } from "./netguard.ts";

export interface Upgraded {
  readonly head: ResponseHead;
  /** The upstream connection, positioned after the response head. */
  readonly conn: Connection;
  /** Call when the relay ends, with the bytes moved each way, to write the audit record. */
  readonly finish: (bytesIn: number, bytesOut: number) => void;
}

const WEBSOCKET_HEADERS = new Set(["sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol", "sec-websocket-extensions"]);

export function isWebSocketUpgrade(method: string, headers: Iterable<[string, string]>): boolean {
  let upgrade = false;
  let connection = false;
  for (const [k, v] of headers) {
    const name = k.toLowerCase();
    if (name === "upgrade" && v.toLowerCase().split(",").some((t) => t.trim() === "websocket")) upgrade = true;
    if (name === "connection" && v.toLowerCase().split(",").some((t) => t.trim() === "upgrade")) connection = true;
  }
  return method === "GET" && upgrade && connection;
}

export async function egressUpgrade(input: EgressInput, deps: EgressDeps): Promise<Upgraded> {
  const started = deps.now();
  const record = (status: number, bytesIn: number, bytesOut: number, error: string | null, keys: readonly string[], service: string | null) =>
    deps.audit.record(auditEntry({ ...input, method: "GET" }, started, deps.now(), { status, bytesIn, bytesOut, error, service, credentialKeys: keys }));
  let keys: readonly string[] = [];
  let service: string | null = null;
  try {
    const plan = await deps.plans.plan(input.vault, input.host, input.port);
    keys = plan.credentialKeys;
    service = plan.service.host;
    const pairs = [...input.headers];
    // The Upgrade / Connection pair is hop-by-hop, so the generic rules drop it: put it back.
    const headers = buildUpstreamHeaders(pairs, plan.injection, input.ingress === "explicit");
    headers.push(["Connection", "Upgrade"], ["Upgrade", "websocket"]);
    for (const [k, v] of pairs) if (WEBSOCKET_HEADERS.has(k.toLowerCase()) && !headers.some(([n]) => n.toLowerCase() === k.toLowerCase())) headers.push([k, v]);
    const addresses = await resolveChecked(input.host, input.port, deps.policy, deps.resolver); // before any byte is sent
    const hostHeader = input.port === 443 ? input.host : `${input.host}:${input.port}`;
    const conn = await deps.upstream.open({ host: input.host, port: input.port, addresses: async () => addresses });
    await conn.write(serializeHead(`GET ${input.target} HTTP/1.1`, [["Host", hostHeader], ...headers]));
    const head = await readResponseHead(conn);
    return { head, conn, finish: (bytesIn, bytesOut) => record(head.status, bytesIn, bytesOut, null, keys, service) };
  } catch (err) {
    const e = err instanceof BrokerError ? err : new UpstreamUnreachable(`WebSocket upgrade to ${input.host} failed`);
    record(e.status, 0, 0, e.code, keys, service);
    throw e;
  }
}

async function readResponseHead(conn: Connection): Promise<ResponseHead> {
  let buf: Uint8Array = new Uint8Array(0);
  for (;;) {
    const chunk = await conn.read();
    if (chunk === null) throw new UpstreamUnreachable("the upstream closed the connection during the upgrade");
    buf = buf.byteLength ? Buffer.concat([buf, chunk]) : chunk;
    const end = findHeadEnd(buf);
    if (end >= 0) {
      conn.unread(buf.subarray(end));
      return parseResponseHead(buf.subarray(0, end));
    }
    if (buf.byteLength > 64 * 1024) throw new UpstreamUnreachable("the upstream's upgrade response head is too large");
  }
}
