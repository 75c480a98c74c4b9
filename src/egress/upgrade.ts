// WebSocket upgrades through the egress core (wss:// for realtime APIs): the same plan, header
// rules, injection and network guard as any request, then the upstream's answer, redacted. On an
// injected upgrade no extension may be negotiated and every server frame is scanned (architecture.md D15).
// Metrics count an upgrade when the upstream answers: a 101 is status class "1xx", the relay after it
// is not timed (a socket open for hours is not a slow request).

import { BrokerError, CredentialRefreshFailed, Internal, UndecodableResponse, UpstreamUnreachable } from "../errors.ts";
import { auditEntry } from "./audit.ts";
import type { Connection } from "./connection.ts";
import type { EgressDeps, EgressInput, EgressMetrics } from "./exchange.ts";
import { buildUpstreamHeaders, WEBSOCKET_HEADERS } from "./headers.ts";
import { hostHeader, serializeHead, type ResponseHead } from "../http/index.ts";
import { resolveChecked } from "./netguard.ts";
import { RANGE_HEADERS } from "./ranges.ts";
import { ClosedBeforeHead, readResponseHead } from "./upstream-head.ts";
import { createFrameScanner, type FrameScanner } from "./websocket-frames.ts";
import { namesExtension, redactResponseHead, shapeRefusal, withoutExtensions } from "./websocket-head.ts";
import { allowedTarget, canonicalTarget, heldByRule, widenRulesHint } from "./rules.ts";
import { recordedError, reporterFor, rulesModeOf, unlessReported } from "./report-mode.ts";
import { awaitApproval } from "./held-request.ts";
import { placeCredential } from "./url-credential.ts";
import type { BudgetTicket } from "../workflows/index.ts";
import { unmeteredRefusal } from "./stage-budget.ts";

export type Upgraded = Switched | Refused;

/** The upstream answered 101: the caller relays frames. */
export interface Switched {
  readonly kind: "switched";
  /** The 101 head, with injected values redacted. */
  readonly head: ResponseHead;
  /** The upstream connection, positioned after the response head. */
  readonly conn: Connection;
  /**
   * Server-to-client bytes must go through this before reaching the agent; undefined when nothing
   * was injected (a passthrough service), where bytes are relayed as they are.
   */
  readonly scanner: FrameScanner | undefined;
  /** Call when the relay ends, with the bytes moved each way and an audit error code, to write the audit record. */
  readonly finish: (bytesIn: number, bytesOut: number, error?: string | null) => void;
}

/** Any other answer: a Response (redacted, re-framed) to write before closing the connection. */
export interface Refused {
  readonly kind: "refused";
  readonly response: Response;
}

export function isWebSocketUpgrade(method: string, headers: Iterable<[string, string]>): boolean {
  if (method !== "GET") return false;
  let upgrade = false;
  let connection = false;
  for (const [k, v] of headers) {
    if (k.length !== 7 && k.length !== 10) continue; // neither "upgrade" nor "connection"
    const name = k.toLowerCase();
    if (
      name === "upgrade" &&
      v
        .toLowerCase()
        .split(",")
        .some((t) => t.trim() === "websocket")
    )
      upgrade = true;
    if (
      name === "connection" &&
      v
        .toLowerCase()
        .split(",")
        .some((t) => t.trim() === "upgrade")
    )
      connection = true;
  }
  return upgrade && connection;
}

export async function egressUpgrade(input: EgressInput, deps: EgressDeps): Promise<Upgraded> {
  const started = deps.now();
  let approvedBy: string | null = null;
  let wouldRefuse: string | undefined; // a refusal of the rules report mode let through (report-mode.ts)
  const record = (
    status: number,
    bytesIn: number,
    bytesOut: number,
    error: string | null,
    keys: readonly string[],
    refs: readonly string[],
    service: string | null,
  ) =>
    deps.audit.record(
      auditEntry({ ...input, method: "GET" }, started, deps.now(), {
        status,
        bytesIn,
        bytesOut,
        error: recordedError(error, wouldRefuse),
        service,
        credentialKeys: keys,
        credentialRefs: refs,
        approvedBy,
      }),
    );
  let keys: readonly string[] = [];
  let refs: readonly string[] = [];
  let service: string | null = null;
  let conn: Connection | undefined;
  let budget: BudgetTicket | undefined;
  const timer = startTimer(deps.metrics);
  const observe = (status: number) => timer.observe({ ingress: input.ingress, vault: input.vault.name, service, status });
  try {
    const plan = await deps.plans.plan(input.vault, input.host, input.port);
    keys = plan.credentialKeys;
    refs = plan.credentialRefs ?? [];
    service = plan.service.host;
    // A minted token goes in like a stored one; a SigV4 signature does not fit a WebSocket upgrade.
    if (plan.minted?.type === "aws_sigv4") throw new CredentialRefreshFailed(plan.service.host, "WebSocket upgrades cannot be signed with SigV4", true);
    if (plan.minted && !deps.minter) throw new Internal();
    const grant = plan.minted ? await deps.minter!.grant(input.vault, plan) : undefined;
    // Every value any vault sends this host is looked for, not only this upgrade's (architecture.md D22).
    const needles = await deps.plans.responseNeedles(plan, grant);
    // A WebSocket upgrade is a GET on the wire: the service's rules decide on that (or, in report mode, mark it).
    const report =
      rulesModeOf(plan, input.vault) !== "report" ? undefined : reporterFor(input.vault.name, plan.service.host, deps.metrics, (code) => (wouldRefuse = code));
    const allowed = unlessReported(
      report,
      () => allowedTarget(plan, "GET", input.target, (m, path) => widenRulesHint(deps.plans.hintFor(input.host, input.port), plan, m, path), input.headers),
      () => canonicalTarget(input.target),
    );
    // A rule asking a human for each request holds the upgrade as egress() holds a request (no body).
    if (heldByRule(plan, "GET", allowed, input.headers)) {
      approvedBy = await awaitApproval(
        deps.approvals,
        { ...input, method: "GET", target: allowed, body: new Uint8Array(0), upgrade: true },
        plan,
        needles,
        input.signal,
      );
    }
    // Counted against the vault's budgets as one request (its frames are not metered), held for a person past an
    // approve budget's soft threshold, refused (429) past a limit; a refused or held upgrade is not counted.
    const ticket = await deps.budgets?.admit({
      vault: input.vault,
      principal: input.principal,
      service: plan.service.host,
      host: input.host,
      port: input.port,
    });
    if (ticket) {
      budget = ticket;
      // Its frames' usage is not read (the Realtime API's): under a token or money budget it must not go at all.
      if (ticket.countsUsage) throw unmeteredRefusal("websocket");
      if (ticket.holdFor !== undefined && approvedBy === null) {
        approvedBy = await awaitApproval(
          deps.approvals,
          { ...input, method: "GET", target: allowed, body: new Uint8Array(0), upgrade: true },
          plan,
          needles,
          input.signal,
        );
      }
    }
    // A URL credential goes in after the rules check, as in egress().
    const target = plan.placement ? placeCredential(allowed, plan.placement) : allowed;
    // No Range goes upstream on an upgrade, whatever the auth type: an upstream that ignores the
    // Upgrade and honours a Range would hand back pieces of an echo that are each too short to match
    // (ranges.ts). Nothing here could widen and cut a range, and a WebSocket has no use for one.
    const pairs = input.headers.filter(([k]) => !RANGE_HEADERS.has(k.toLowerCase()));
    // The Upgrade / Connection pair is hop-by-hop, so the generic rules drop it: put it back.
    let headers = buildUpstreamHeaders(pairs, grant?.injection ?? plan.injection, input.ingress === "explicit");
    headers.push(["Connection", "Upgrade"], ["Upgrade", "websocket"]);
    for (const [k, v] of pairs) if (WEBSOCKET_HEADERS.has(k.toLowerCase()) && !headers.some(([n]) => n.toLowerCase() === k.toLowerCase())) headers.push([k, v]);
    // Compressed frames (permessage-deflate) would hide an echoed value from the scan: offer no extension.
    if (!needles.empty) headers = withoutExtensions(headers);
    timer.sent(); // as in egress(), upstream time includes name resolution and the dial
    const addresses = await resolveChecked(input.host, input.port, deps.policy, deps.resolver); // before any byte is sent
    conn = await deps.upstream.open({ host: input.host, port: input.port, addresses: async () => addresses });
    await conn.write(serializeHead(`GET ${target} HTTP/1.1`, [["Host", hostHeader(input.host, input.port)], ...headers]));
    const rawHead = await readResponseHead(conn, { switching: true }).catch((err: unknown) => {
      const closed = err instanceof ClosedBeforeHead;
      throw new UpstreamUnreachable(
        closed ? "the upstream closed the connection during the upgrade" : "the upstream's upgrade response head is invalid or too large",
      );
    });
    timer.answered();
    const head = redactResponseHead(rawHead, needles);
    const upstream = conn;
    if (head.status !== 101) {
      const done = (bytesOut: number, error: string | null) => (
        upstream.close(), budget?.settle(undefined), record(head.status, 0, bytesOut, error, keys, refs, service)
      );
      const response = shapeRefusal(head, upstream, needles, done);
      observe(head.status);
      return { kind: "refused", response };
    }
    // Unasked-for, but an upstream may still name one; the agent must not get frames we cannot read.
    if (!needles.empty && namesExtension(head)) throw new UndecodableResponse("the upstream negotiated a WebSocket extension the broker cannot scan");
    observe(head.status);
    return {
      kind: "switched",
      head,
      conn,
      scanner: needles.empty ? undefined : createFrameScanner(needles),
      finish: (bytesIn, bytesOut, error = null) => (budget?.settle(undefined), record(head.status, bytesIn, bytesOut, error, keys, refs, service)),
    };
  } catch (err) {
    conn?.close();
    if (budget && !conn) budget.release(); // held, or refused before it was sent
    const e = err instanceof BrokerError ? err : new UpstreamUnreachable(`WebSocket upgrade to ${input.host} failed`);
    record(e.status, 0, 0, e.code, keys, refs, service);
    observe(e.status);
    throw e;
  }
}

/** The same observation as egress() makes: broker-added time excludes the wait for the upstream's head. */
function startTimer(m: EgressMetrics | undefined) {
  const t0 = m ? m.now() : 0;
  let tSend = 0;
  let tHead = 0;
  return {
    sent: () => void (m && (tSend = m.now())),
    answered: () => void (m && (tHead = m.now())),
    observe(o: { ingress: EgressInput["ingress"]; vault: string; service: string | null; status: number }) {
      if (!m) return;
      const upstreamMs = tHead ? tHead - tSend : 0;
      m.observe({ ...o, brokerSeconds: (m.now() - t0 - upstreamMs) / 1000, upstreamSeconds: tHead ? upstreamMs / 1000 : null });
    },
  };
}
