// Errors of proxied requests (the egress core and the transparent proxy): a host or a request the vault does not allow,
// a hold for a person, a budget reached, a credential missing or unreadable, the network guard, the upstream failing
// or timing out, the proxy's own authentication and request heads. Re-exported by errors.ts, which every caller
// imports. Messages never contain request input, header values or credential values.

import { BrokerError } from "./errors-base.ts";

/**
 * A budget on the vault (issue 38) has reached its limit for this period: which budget, what it counts, the limit and
 * what was used, and when it starts again (Retry-After; none for a budget without a period). `x-should-retry: false`
 * tells the OpenAI and Anthropic SDKs not to retry on their own: only the reset (or a person) lifts it.
 */
export class BudgetExceeded extends BrokerError {
  readonly status = 429;
  readonly code = "budget_exceeded";
  constructor(
    readonly budget: string,
    readonly measure: string,
    readonly limit: number,
    readonly used: number,
    /** What the numbers count, for the message: "requests", "input tokens", "USD". */
    unit: string,
    readonly resetsAt: number | undefined,
    readonly now: number,
  ) {
    super(
      `the vault's budget "${budget}" has reached its limit of ${limit} ${unit} (${used} used)` +
        (resetsAt === undefined
          ? "; ask a human admin to raise or reset it"
          : `; it resets at ${new Date(resetsAt).toISOString()}, or a human admin can raise or reset it`),
    );
  }
  private get retryAfterSec(): number | undefined {
    return this.resetsAt === undefined ? undefined : Math.max(1, Math.ceil((this.resetsAt - this.now) / 1000));
  }
  override extra() {
    return {
      budget: this.budget,
      measure: this.measure,
      limit: this.limit,
      used: this.used,
      resets_at: this.resetsAt === undefined ? null : new Date(this.resetsAt).toISOString(),
      ...(this.retryAfterSec !== undefined && { retry_after: this.retryAfterSec }),
    };
  }
  override headers(): Record<string, string> {
    const retry = this.retryAfterSec;
    return { "x-should-retry": "false", ...(retry !== undefined && { "retry-after": String(retry) }) };
  }
}

/** Contract: 403 forbidden when the host is not among the vault's services; the hint lets the agent file a proposal. */
export class HostNotAllowed extends BrokerError {
  readonly status = 403;
  readonly code = "forbidden";
  constructor(
    readonly host: string,
    readonly vault: string,
    readonly hint: Record<string, unknown>,
  ) {
    super(`${host} is not among the services of vault ${vault}; file a proposal to request access`);
  }
  override extra() {
    return { proposal_hint: this.hint };
  }
}

/**
 * The service has rules and this request is outside them. The envelope lists what is allowed, and the
 * hint is a proposal skeleton that would widen the rules to this request (a human decides).
 */
export class RequestNotAllowed extends BrokerError {
  readonly status = 403;
  readonly code = "request_not_allowed";
  constructor(
    readonly host: string,
    readonly allowed: readonly { methods: readonly string[]; paths: readonly string[] }[],
    described: string,
    readonly hint: Record<string, unknown>,
  ) {
    super(`the service for ${host} allows only: ${described}; file a proposal to widen its rules`);
  }
  override extra() {
    return { host: this.host, allowed: this.allowed, proposal_hint: this.hint };
  }
}

/** What a held request's answers carry: where a human decides, where the agent polls, and until when. */
export interface HeldRequestLinks {
  readonly approval_id: string;
  readonly approval_url: string;
  readonly poll_url: string;
  readonly expires_at: string;
}

/**
 * A rule asks a human to approve each matching request, and this one is not approved (yet): it was
 * held, not forwarded. 428, never a 2xx, so no client can take a held request for a done one.
 */
export class ApprovalRequired extends BrokerError {
  readonly status = 428;
  readonly code = "approval_required";
  constructor(
    readonly links: HeldRequestLinks,
    message?: string,
  ) {
    super(
      message ??
        `a human must approve this exact request first; send the approval_url to one, then retry the same request (same method, URL, body and headers) once approved, or retry with "Prefer: wait=<seconds>" to have the broker wait (at most 120 s each time)`,
    );
  }
  override extra() {
    return { ...this.links };
  }
  /**
   * The approval's id and link in headers too: SDKs that surface only part of an error body (the OpenAI SDK keeps
   * the body's `error` field) still show every header, so the agent can find where a person decides.
   */
  override headers(): Record<string, string> {
    return { "x-broker-approval-id": this.links.approval_id, "x-broker-approval-url": this.links.approval_url };
  }
}

/** The request was held and a human said no, or nobody decided before the approval expired. */
export class ApprovalRefused extends BrokerError {
  readonly status = 403;
  constructor(
    readonly code: "approval_denied" | "approval_expired",
    readonly links: HeldRequestLinks,
  ) {
    super(
      code === "approval_denied"
        ? "a human denied this exact request; do not retry it unchanged (a new approval for it can be asked once this one expires)"
        : "the approval for this exact request expired before it was used; retry to ask a human again",
    );
  }
  override extra() {
    return { ...this.links };
  }
}

export class ServiceDisabled extends BrokerError {
  readonly status = 403;
  readonly code = "service_disabled";
  constructor(readonly host: string) {
    super(`the service for ${host} is disabled in this vault; ask a human to enable it (do not file a duplicate proposal)`);
  }
}

/** Names the key (key names are not secret), never a value. */
export class CredentialNotFound extends BrokerError {
  readonly status = 502;
  readonly code = "credential_not_found";
  constructor(
    readonly key: string,
    reason = "is missing",
  ) {
    super(`credential ${key} ${reason}; ask a human to set it`);
  }
  override extra() {
    return { key: this.key };
  }
}

/**
 * The broker could not mint or sign the service's credential (OAuth token endpoint, GitHub App token
 * exchange, a SigV4 setting). Says what the provider answered (its OAuth error code, an HTTP status),
 * never a value; `refused` means a human must change a credential before it is tried again.
 */
export class CredentialRefreshFailed extends BrokerError {
  readonly status = 502;
  readonly code = "credential_refresh_failed";
  constructor(
    readonly host: string,
    readonly reason: string,
    readonly refused = false,
  ) {
    super(`cannot obtain a credential for ${host}: ${reason}${refused ? "; ask a human to set the service's credentials again" : "; retry shortly"}`);
  }
  override extra() {
    return { host: this.host };
  }
}

/**
 * A credential held in an external store (issue 36) cannot be had: the store refused it, no longer has it, or
 * has been unreachable for longer than the connection's grace. Names the reference (connection, path, field:
 * names, never a value) and what the store said in the broker's own words.
 */
export class CredentialUnavailable extends BrokerError {
  readonly status = 502;
  readonly code = "credential_unavailable";
  constructor(
    readonly reference: string,
    readonly reason: string,
  ) {
    super(`the credential at ${reference} cannot be read: ${reason}`);
  }
  override extra() {
    return { reference: this.reference };
  }
}

/** The network guard refused the destination: names the host, never the credential. */
export class EgressBlocked extends BrokerError {
  readonly status = 403;
  readonly code = "egress_blocked";
  constructor(
    readonly host: string,
    reason: string,
  ) {
    super(`egress to ${host} is blocked: ${reason}`);
  }
  override extra() {
    return { host: this.host };
  }
}

export class UpstreamUnreachable extends BrokerError {
  readonly status = 502;
  readonly code = "upstream_unreachable";
}

/**
 * The agent went away (reset its HTTP/2 stream, closed its connection) before its answer came: the
 * upstream exchange is cancelled. Only the audit log sees it (499, as nginx names it).
 */
export class ClientClosedRequest extends BrokerError {
  readonly status = 499;
  readonly code = "client_closed_request";
}

/**
 * A response to an injected request that the broker cannot decode to scan for echoed credentials
 * (an unknown Content-Encoding, or a corrupt or oversized compressed body): it fails closed.
 */
export class UndecodableResponse extends BrokerError {
  readonly status = 502;
  readonly code = "undecodable_response";
}

export class UpstreamTimeout extends BrokerError {
  readonly status = 504;
  readonly code = "upstream_timeout";
}

/** The transparent proxy wants Proxy-Authorization (407 keeps the connection open for the retry). */
export class ProxyAuthRequired extends BrokerError {
  readonly status = 407;
  readonly code = "unauthorized";
  override headers(): Record<string, string> {
    return { "proxy-authenticate": 'Basic realm="broker"' };
  }
}

/** A request head the tunnel refuses before parsing it: too large (431), line too long (414), malformed (400). */
export class HeadRejected extends BrokerError {
  readonly code: string;
  constructor(
    readonly status: 400 | 414 | 431,
    message: string,
  ) {
    super(message);
    this.code = status === 431 ? "request_header_too_large" : "invalid_request";
  }
}
