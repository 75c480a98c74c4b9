// Resolved values of references (issue 36), off the request path: a request takes the value in memory; a
// background sweep (`sweep`, run every second by the registry) reads each value again before it is one
// refresh interval old, so a value rotated in the store reaches the next request within one interval and
// no request waits for a store. Only a reference never read (or dropped after a long idle spell) makes its
// request wait. When the store cannot be reached the last good value serves for the connection's grace
// past its interval, then requests get 502 `credential_unavailable`; a store that answers "no such secret"
// or "denied" stops the value at once (a person removed or revoked it there). An upstream's 401 or 403
// asks for one read at once (refreshNow), as minted tokens do. A value that changes, stops or runs out is
// announced (`onChange`), so the plans built on it are built again; an unchanged read keeps the same
// Secret object, so plans built on it stand.

import { CredentialUnavailable } from "../errors.ts";
import type { Secret } from "../secret.ts";
import { formatReference, type SecretReference } from "../policy/index.ts";
import { SecretStoreError, type SecretStoreClient } from "./types.ts";

/** A connection's timing: how often its values are read again, and how long one serves while the store is unreachable. */
export interface ConnectionTiming {
  readonly refreshMs: number;
  readonly graceMs: number;
}

export interface ResolverOptions {
  readonly now: () => number;
  /** The connection's timing (the registry holds every connection a resolve may name). */
  readonly timing: (connection: string) => ConnectionTiming;
  /** How often `sweep` runs: a value is read again when it would pass its interval before the next sweep. */
  readonly sweepMs: number;
  /** A reference's value changed, stopped or ran out: plans built on it must be built again. */
  readonly onChange?: (ref: SecretReference) => void;
  /** SECRET: a value just read, and what the client sent to read it: echo needles from now on. */
  readonly onValues?: (values: readonly Secret[]) => void;
  /** A read's outcome, for metrics. */
  readonly onRead?: (connection: string, outcome: "ok" | "failed") => void;
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
  /** Reads again at once (an upstream refused the value, a person asked): resolves once read; concurrent calls share one read. */
  refreshNow(ref: SecretReference): Promise<void>;
  state(ref: SecretReference): ReferenceState;
  /** SECRET: the value that would serve now, without reading (undefined when none would). */
  peek(ref: SecretReference): Secret | undefined;
  /** Reads again what is due, and announces values that ran out. */
  sweep(): void;
  /** Drops every entry of a connection (its settings changed): the next request reads afresh. */
  forget(connection?: string): void;
  /** SECRET: every value held (the logger's scrub and the echo needles). */
  values(): Iterable<Secret>;
}

interface Entry {
  readonly ref: SecretReference;
  value?: Secret;
  version?: string;
  /** When `value` was read. */
  readAt: number;
  /** When a request last used it: an entry idle for long is dropped rather than read for nobody. */
  usedAt: number;
  /**
   * Plans built on the value use it without asking (they hold it), so an entry that looks idle may be in
   * use: it is first announced (plans built on it are dropped, and the next request's plan asks again,
   * served from memory), and dropped only if it is still idle one idle spell later.
   */
  probed?: boolean;
  lastError?: string;
  /** After a failed read, no new one starts before this (a down store is not asked by every request). */
  retryAt: number;
  /** The store refused or lost the secret: no value serves until a read succeeds. */
  withdrawn: boolean;
  /** Whether the value was usable at the last sweep (so running out is announced once). */
  wasUsable: boolean;
  reading?: Promise<void>;
}

/** After a failed read, the next waits at least this long (or the interval, when shorter). */
const RETRY_AFTER_MS = 5_000;
/** An entry no request used for this many intervals (and at least an hour) is dropped instead of read again. */
const IDLE_INTERVALS = 10;
const MIN_IDLE_MS = 3_600_000;

export function createReferenceResolver(client: (connection: string) => SecretStoreClient, opts: ResolverOptions): ReferenceResolver {
  const entries = new Map<string, Entry>();
  const keyOf = (r: SecretReference) => JSON.stringify([r.connection, r.path, r.field ?? null, r.version ?? null]);

  function entry(ref: SecretReference): Entry {
    const key = keyOf(ref);
    let e = entries.get(key);
    if (!e) entries.set(key, (e = { ref, readAt: 0, usedAt: opts.now(), retryAt: 0, withdrawn: false, wasUsable: false }));
    return e;
  }

  /** One read at a time per reference; its outcome lands in the entry. */
  function read(e: Entry): Promise<void> {
    e.reading ??= (async () => {
      let c: SecretStoreClient | undefined;
      let changed = false;
      try {
        c = client(e.ref.connection);
        const got = await c.read(e.ref);
        // The same text keeps the same Secret: plans built on it stand.
        // reveal: compared, not kept
        const same = e.value !== undefined && !e.withdrawn && e.value.reveal() === got.value.reveal();
        // A first value is announced too: no plan holds it yet, but the echo needles' store half, read while it
        // was on its way, must take it (else it lives only in the recent half, which each answer touches).
        changed = !same;
        Object.assign(e, { value: same ? e.value : got.value, version: got.version, readAt: opts.now(), withdrawn: false, lastError: undefined, retryAt: 0 });
        opts.onValues?.([got.value, ...c.sentValues()]);
        opts.onRead?.(e.ref.connection, "ok");
      } catch (err) {
        e.lastError = describe(err);
        e.retryAt = opts.now() + Math.min(RETRY_AFTER_MS, opts.timing(e.ref.connection).refreshMs);
        // The store answered and said no: the value stops now. Unreachable: the last one serves within the grace.
        if (err instanceof SecretStoreError && (err.kind === "not_found" || err.kind === "denied") && !e.withdrawn) {
          e.withdrawn = true;
          changed = e.value !== undefined;
        }
        if (c) opts.onValues?.(c.sentValues());
        opts.onRead?.(e.ref.connection, "failed");
      } finally {
        e.reading = undefined;
      }
      // A value that ran out while this read was in flight (a store slow to fail) is announced here: the
      // sweep skips an entry being read, and plans built on it must not outlive it.
      const was = e.wasUsable;
      e.wasUsable = usable(e, opts.now()) !== undefined;
      if (changed || (was && !e.wasUsable)) opts.onChange?.(e.ref);
    })();
    return e.reading;
  }

  function usable(e: Entry, at: number): Secret | undefined {
    if (!e.value || e.withdrawn) return undefined;
    const t = opts.timing(e.ref.connection);
    return at - e.readAt < t.refreshMs + t.graceMs ? e.value : undefined;
  }

  return {
    async resolve(ref) {
      const e = entry(ref);
      const at = opts.now();
      e.usedAt = at;
      e.probed = false;
      let value = usable(e, at);
      if (value) {
        // Past its interval (the sweep missed it, or the store is down): read again in the background.
        if (at - e.readAt >= opts.timing(ref.connection).refreshMs && at >= e.retryAt) void read(e);
        return value;
      }
      if (at >= e.retryAt || e.reading) await read(e);
      value = usable(e, opts.now());
      if (value) return value;
      throw new CredentialUnavailable(formatReference(ref), e.lastError ?? "the store did not answer with it");
    },
    refreshNow(ref) {
      return read(entry(ref));
    },
    peek(ref) {
      const e = entries.get(keyOf(ref));
      return e && usable(e, opts.now());
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
    sweep() {
      const at = opts.now();
      for (const [key, e] of entries) {
        const t = opts.timing(e.ref.connection);
        // Ran out (even while a read is in flight): requests now fail, as they must.
        const nowUsable = usable(e, at) !== undefined;
        if (e.wasUsable && !nowUsable) opts.onChange?.(e.ref);
        e.wasUsable = nowUsable;
        if (e.reading) continue;
        if (at - e.usedAt > Math.max(MIN_IDLE_MS, IDLE_INTERVALS * t.refreshMs)) {
          if (e.probed || !e.value) {
            entries.delete(key);
            continue;
          }
          e.probed = true;
          e.usedAt = at;
          opts.onChange?.(e.ref);
        }
        // Read before the value is one interval old, so the next request after a rotation gets the new one.
        if (!e.withdrawn && e.value && at - e.readAt + opts.sweepMs >= t.refreshMs && at >= e.retryAt) void read(e);
      }
    },
    forget(connection) {
      for (const [key, e] of entries) {
        if (connection !== undefined && e.ref.connection !== connection) continue;
        entries.delete(key);
        opts.onChange?.(e.ref);
      }
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
