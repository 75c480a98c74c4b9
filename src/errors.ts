// Typed errors, one class per error the broker can produce, and the single JSON envelope
// ({ error, message, ...safe extras } plus X-Broker-Error) they become (architecture.md D1).
// Messages never contain request input, header values or credential values. The errors of proxied requests are in
// errors-proxy.ts, re-exported here.

import { BrokerError } from "./errors-base.ts";

export { BrokerError };
export * from "./errors-proxy.ts";

export class InvalidRequest extends BrokerError {
  readonly status = 400;
  readonly code = "invalid_request";
  constructor(
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
  override extra() {
    return this.field ? { field: this.field } : {};
  }
}

export class Unauthorized extends BrokerError {
  readonly status = 401;
  readonly code = "unauthorized";
  constructor(message = "missing, invalid or expired token") {
    super(message);
  }
}

/** A principal lacks the role for an operation (no proposal_hint: filing a proposal would not help). */
export class PermissionDenied extends BrokerError {
  readonly status = 403;
  readonly code = "forbidden";
}

export class NotFound extends BrokerError {
  readonly status = 404;
  readonly code = "not_found";
  constructor(message = "not found") {
    super(message);
  }
}

export class MethodNotAllowed extends BrokerError {
  readonly status = 405;
  readonly code = "method_not_allowed";
  constructor(
    message = "method not allowed",
    readonly allow?: string,
  ) {
    super(message);
  }
  override headers(): Record<string, string> {
    return this.allow ? { allow: this.allow } : {};
  }
}

export class Conflict extends BrokerError {
  readonly status = 409;
  readonly code = "conflict";
}

/** A write to a vault kept as code (issue 39) that did not come through `broker apply`. */
export class VaultManaged extends BrokerError {
  readonly status = 409;
  readonly code = "vault_managed";
  constructor(
    readonly vault: string,
    also = "",
  ) {
    super(`vault ${vault} is managed as code: change its file and run broker apply${also}`);
  }
  override extra() {
    return { vault: this.vault };
  }
}

export class PayloadTooLarge extends BrokerError {
  readonly status = 413;
  readonly code = "payload_too_large";
}

/**
 * The request names a host this broker is not configured to answer to (DNS rebinding from a browser page
 * looks exactly like this). The message never repeats the Host header: request input is not echoed.
 */
export class MisdirectedRequest extends BrokerError {
  readonly status = 421;
  readonly code = "misdirected_request";
  constructor() {
    super("this broker does not answer to the host name in the request; use its configured address (the operator can add names with BROKER_ALLOWED_HOSTS)");
  }
}

export class RateLimited extends BrokerError {
  readonly status = 429;
  readonly code = "rate_limited";
  constructor(
    readonly retryAfterSec: number,
    message = "rate limit exceeded",
    readonly rateHeaders: Record<string, string> = {},
  ) {
    super(message);
  }
  override extra() {
    return { retry_after: this.retryAfterSec };
  }
  override headers(): Record<string, string> {
    // Retry-After is ours alone; the RateLimit-* fields come from the limiter's decision.
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.rateHeaders)) if (k.toLowerCase() !== "retry-after") out[k.toLowerCase()] = v;
    return { ...out, "retry-after": String(this.retryAfterSec) };
  }
}

/** The store is locked (master password not supplied) or a bounded resource is saturated. */
export class Unavailable extends BrokerError {
  readonly status = 503;
  readonly code = "unavailable";
}

/** The shared database (PostgreSQL) cannot be reached; proxied requests already cached keep working. */
export class DatabaseUnavailable extends BrokerError {
  readonly status = 503;
  readonly code = "database_unavailable";
  constructor(readonly reason: string) {
    super("the broker's database is unreachable; retry shortly");
  }
  override headers(): Record<string, string> {
    return { "retry-after": "1" };
  }
}

export class Internal extends BrokerError {
  readonly status = 500;
  readonly code = "internal";
  constructor() {
    super("internal error");
  }
}

/** Errors of the local key material, raised by the keyring and shown by the CLI. */
export class KeyringError extends Error {
  constructor(
    message: string,
    readonly hint: string,
  ) {
    super(message);
  }
}

export interface ErrorSink {
  error(event: string, fields?: Record<string, unknown>): void;
}

/** The one place where any thrown value becomes an HTTP response. */
export function toErrorResponse(err: unknown, log?: ErrorSink): Response {
  const known = err instanceof BrokerError ? err : undefined;
  if (!known) log?.error("unhandled_error", { err });
  const e = known ?? new Internal();
  const body = { error: e.code, message: e.message, ...e.extra() };
  return new Response(JSON.stringify(body), {
    status: e.status,
    headers: {
      "content-type": "application/json; charset=utf-8",
      "cache-control": "no-store",
      "x-broker-error": e.code,
      ...e.headers(),
    },
  });
}

/**
 * A workload's platform token was refused at POST /v1/sessions/exchange (RFC 6749 §5.2's code, which RFC 8693 uses):
 * the message says which check failed, never the token or its claims' values beyond the names a person configured.
 */
export class InvalidGrant extends BrokerError {
  readonly status = 400;
  readonly code = "invalid_grant";
}
