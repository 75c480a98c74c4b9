// Resolved values of references (issue 36), off the request path: a request takes the value in memory; a
// value older than the connection's refresh interval is read again in the background while it keeps serving;
// only a reference never read makes its request wait. When the store cannot be reached the last good value
// serves for the connection's grace past its interval, then requests get 502 `credential_unavailable`; a store
// that answers "no such secret" or "denied" stops the value at once (a person removed or revoked it there).
// An upstream's 401 or 403 asks for one read at once (refreshNow), as minted tokens do.

import { CredentialUnavailable } from "../errors.ts";
import type { Secret } from "../secret.ts";
import { formatReference, type SecretReference } from "./reference.ts";
import { SecretStoreError, type SecretStoreClient } from "./types.ts";

export interface ResolverOptions {
  readonly now: () => number;
  /** A value older than this is read again (in the background: it keeps serving meanwhile). */
  readonly refreshMs: number;
  /** While the store is unreachable, a value keeps serving this long past its refresh interval (0: fail closed). */
  readonly graceMs: number;
}

/** What a person sees of a reference: never its value. */
export interface ReferenceState {
  readonly reference: string;
  /** When the store last answered with the value (epoch ms). */
  readonly lastRefresh?: number;
  /** The version it answered with. */
  readonly version?: string;
  /** The last failure, in the broker's words; cleared by the next good read. */
  readonly lastError?: string;
}

export interface ReferenceResolver {
  /** SECRET: the value to send; waits only for a reference never read (or whose value was withdrawn). */
  resolve(ref: SecretReference): Promise<Secret>;
  /** Reads again at once (an upstream refused the value): resolves once read; concurrent calls share one read. */
  refreshNow(ref: SecretReference): Promise<void>;
  state(ref: SecretReference): ReferenceState;
  /** SECRET: every value held (the logger's scrub and the echo needles). */
  values(): Iterable<Secret>;
}

interface Entry {
  value?: Secret;
  version?: string;
  /** When `value` was read. */
  readAt: number;
  lastError?: string;
  /** The store refused or lost the secret: no value serves until a read succeeds. */
  withdrawn: boolean;
  reading?: Promise<void>;
}

export function createReferenceResolver(client: (connection: string) => SecretStoreClient, opts: ResolverOptions): ReferenceResolver {
  const entries = new Map<string, Entry>();
  const keyOf = (r: SecretReference) => JSON.stringify([r.connection, r.path, r.field ?? null, r.version ?? null]);

  function entry(ref: SecretReference): Entry {
    const key = keyOf(ref);
    let e = entries.get(key);
    if (!e) entries.set(key, (e = { readAt: 0, withdrawn: false }));
    return e;
  }

  /** One read at a time per reference; its outcome lands in the entry. */
  function read(ref: SecretReference, e: Entry): Promise<void> {
    e.reading ??= (async () => {
      try {
        const got = await client(ref.connection).read(ref);
        Object.assign(e, { value: got.value, version: got.version, readAt: opts.now(), withdrawn: false, lastError: undefined });
      } catch (err) {
        e.lastError = describe(err);
        // The store answered and said no: the value stops now. Unreachable: the last one serves within the grace.
        if (err instanceof SecretStoreError && (err.kind === "not_found" || err.kind === "denied")) e.withdrawn = true;
      } finally {
        e.reading = undefined;
      }
    })();
    return e.reading;
  }

  function usable(e: Entry, at: number): Secret | undefined {
    if (!e.value || e.withdrawn) return undefined;
    return at - e.readAt < opts.refreshMs + opts.graceMs ? e.value : undefined;
  }

  return {
    async resolve(ref) {
      const e = entry(ref);
      const at = opts.now();
      if (e.value && !e.withdrawn && at - e.readAt >= opts.refreshMs) void read(ref, e); // in the background
      let value = usable(e, at);
      if (value) return value;
      await read(ref, e);
      value = usable(e, opts.now());
      if (value) return value;
      throw new CredentialUnavailable(formatReference(ref), e.lastError ?? "the store did not answer with it");
    },
    refreshNow(ref) {
      return read(ref, entry(ref));
    },
    state(ref) {
      const e = entries.get(keyOf(ref));
      return {
        reference: formatReference(ref),
        ...(e?.value && { lastRefresh: e.readAt }),
        ...(e?.version !== undefined && { version: e.version }),
        ...(e?.lastError !== undefined && { lastError: e.lastError }),
      };
    },
    *values() {
      for (const e of entries.values()) if (e.value) yield e.value;
    },
  };
}

/** The client's own words (they name host and path only), or a fixed sentence for anything else. */
function describe(err: unknown): string {
  return err instanceof SecretStoreError ? err.message : "the store's client failed unexpectedly";
}
