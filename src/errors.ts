// Typed errors, one class per error the broker can produce, and the single JSON envelope
// ({ error, message, ...safe extras } plus X-Broker-Error) they become (DESIGN.md §3.1).
// Messages never contain request input, header values or credential values.

export abstract class BrokerError extends Error {
  abstract readonly status: number;
  abstract readonly code: string;
  /** Safe, non-secret fields added to the envelope. */
  extra(): Record<string, unknown> {
    return {};
  }
  headers(): Record<string, string> {
    return {};
  }
}

export class InvalidRequest extends BrokerError {
  readonly status = 400;
  readonly code = "invalid_request";
  constructor(message: string, readonly field?: string) {
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
  constructor(message = "method not allowed", readonly allow?: string) {
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

export class PayloadTooLarge extends BrokerError {
  readonly status = 413;
  readonly code = "payload_too_large";
}

export class RateLimited extends BrokerError {
  readonly status = 429;
  readonly code = "rate_limited";
  constructor(readonly retryAfterSec: number, message = "rate limit exceeded") {
    super(message);
  }
  override extra() {
    return { retry_after: this.retryAfterSec };
  }
  override headers(): Record<string, string> {
    return { "retry-after": String(this.retryAfterSec) };
  }
}

/** The store is locked (master password not supplied) or a bounded resource is saturated. */
export class Unavailable extends BrokerError {
  readonly status = 503;
  readonly code = "unavailable";
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
  constructor(message: string, readonly hint: string) {
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
