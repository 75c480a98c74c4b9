// Blind tunnels (unmatched_hosts = tunnel) through the egress core: the network guard checks the
// destination, the upstream client dials it over plain TCP (the agent's own TLS runs inside), and
// one audit record is written, refusals included. No plan, no credential, no byte inspected here. A tunnel
// the vault's unmatched-host policy would refuse, opened in report mode (connect-decision.ts), is one too:
// its record says would_refuse:forbidden and /metrics counts it.

import { BrokerError, UpstreamUnreachable } from "../errors.ts";
import { auditEntry } from "./audit.ts";
import type { Connection } from "./connection.ts";
import type { EgressDeps, EgressInput } from "./exchange.ts";
import { resolveChecked } from "./netguard.ts";
import { recordedError } from "./report-mode.ts";

export type BlindInput = Pick<EgressInput, "principal" | "contained" | "workload" | "vault" | "host" | "port">;

export interface BlindTunnel {
  /** The upstream connection: the caller relays bytes both ways, unread and unchanged. */
  readonly conn: Connection;
  /** Call once when the relay ends, with the bytes moved each way, to write the audit record. */
  readonly finish: (bytesIn: number, bytesOut: number) => void;
}

/** `wouldRefuse`: the refusal report mode lets through (`forbidden`: unmatched_hosts is deny). */
export async function egressBlind(input: BlindInput, deps: EgressDeps, wouldRefuse?: string): Promise<BlindTunnel> {
  const started = deps.now();
  const request = { ...input, ingress: "blind", method: "CONNECT", target: "" };
  if (wouldRefuse) deps.metrics?.wouldRefuse?.({ vault: input.vault.name, service: "none", code: wouldRefuse });
  const record = (status: number, bytesIn: number, bytesOut: number, error: string | null) =>
    deps.audit.record(
      auditEntry(request, started, deps.now(), {
        status,
        bytesIn,
        bytesOut,
        error: recordedError(error, wouldRefuse),
        service: null,
        credentialKeys: [],
        credentialRefs: [],
      }),
    );
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
