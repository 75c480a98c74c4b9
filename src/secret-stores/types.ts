// What every external secret store client offers (issue 36, architecture.md D24): read one secret by its
// path (and field, and version where the store keeps versions) through the connection's own auth, and say
// which version it read. Values travel as Secret; errors say what went wrong in words that never hold one.

import type { Secret } from "../secret.ts";

/** `<connection>:<path>#<field>`, parsed: the connection is chosen by the caller, the rest is the store's. */
export interface SecretAddress {
  /** The store's own name for the secret (a KV v2 path, an ARN or name, a secret id, a secret name). */
  readonly path: string;
  /** One field of a structured secret (a KV v2 key, a JSON key of a string secret); absent: the whole value. */
  readonly field?: string;
  /** A version the store keeps (KV v2 version, AWS VersionId or stage, Google and Azure versions); absent: the latest. */
  readonly version?: string;
}

export interface SecretRead {
  /** SECRET: the value (or the field's value). */
  readonly value: Secret;
  /** The version the store says it returned, for "re-read when the version changed" and for display. */
  readonly version: string;
}

/** A connection's client: reads through its own auth (logging in, and again when the login expires). */
export interface SecretStoreClient {
  read(address: SecretAddress): Promise<SecretRead>;
  /** SECRET: what the client sends that must never be echoed (store tokens, secret ids, signed assertions). */
  sentValues(): readonly Secret[];
}

/**
 * The store answered, but not with the secret: unknown path or field, access denied, a malformed answer.
 * `status` is the store's HTTP status where there was one. The message names the store and the path, never
 * a value, and never repeats text the store chose beyond a fixed set of codes.
 */
export class SecretStoreError extends Error {
  constructor(
    message: string,
    readonly kind: "not_found" | "denied" | "unreachable" | "invalid",
    readonly status?: number,
  ) {
    super(message);
  }
}
