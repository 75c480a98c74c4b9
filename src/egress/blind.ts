// Blind tunnels (unmatched_hosts = tunnel) through the egress core: the network guard checks the
// destination, the upstream client dials it over plain TCP (the agent's own TLS runs inside), and
// one audit record is written, refusals included. No plan, no credential, no byte inspected here.

import { BrokerError, UpstreamUnreachable } from "../errors.ts";
import { auditEntry } from "./audit.ts";
import type { Connection } from "./connection.ts";
import type { EgressDeps, EgressInput } from "./exchange.ts";
import { resolveChecked } from "./netguard.ts";

export type BlindInput = Pick<EgressInput, "principal" | "contained" | "vault" | "host" | "port">;

export interface BlindTunnel {
  /** The upstream connection: the caller relays bytes both ways, unread and unchanged. */
  readonly conn: Connection;
  /** Call once when the relay ends, with the bytes moved each way, to write the audit record. */
  readonly finish: (bytesIn: number, bytesOut: number) => void;
}

export async function egressBlind(input: BlindInput, deps: EgressDeps): Promise<BlindTunnel> {
  const started = deps.now();
  const request = { ...input, ingress: "blind", method: "CONNECT", target: "" };
  const record = (status: number, bytesIn: number, bytesOut: number, error: string | null) =>
    deps.audit.record(auditEntry(request, started, deps.now(), { status, bytesIn, bytesOut, error, service: null, credentialKeys: [], credentialRefs: [] }));
  try {
    const addresses = await resolveChecked(input.host, input.port, deps.policy, deps.resolver);
    const conn = await deps.upstream.openPlain({ host: input.host, port: input.port, addresses: async () => addresses });
    return { conn, finish: (bytesIn, bytesOut) => record(200, bytesIn, bytesOut, null) };
  } catch (err) {
    const e = err instanceof BrokerError ? err : new UpstreamUnreachable(`cannot connect to ${input.host}:${input.port}`);
    record(e.status, 0, 0, e.code);
    throw e;
  }
}
