// The base of every error the broker answers with (errors.ts, errors-proxy.ts): a status, a code, safe extra fields for
// the envelope and headers. Its own file so that the error modules can share it without importing each other.

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
