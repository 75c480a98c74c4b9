// Keyed token buckets with a bounded key map, on an injected clock (milliseconds; never reads Date.now).
// Owns the decision shape every tier returns. Never knows which route or tier it serves.

/** Allowed: `remaining` whole tokens are left; the bucket is full again in `resetSec` seconds. */
export interface RateAllowed {
  readonly ok: true;
  readonly limit: number;
  readonly remaining: number;
  readonly resetSec: number;
}

/** Denied: retry in `retryAfterSec` (an integer, at least 1), the value of the Retry-After header. */
export interface RateDenied {
  readonly ok: false;
  readonly limit: number;
  readonly remaining: 0;
  readonly resetSec: number;
  readonly retryAfterSec: number;
  /** Which GLOBAL guard refused: the requests-per-second bucket or the in-flight ceiling. */
  readonly reason: "rate" | "inflight";
}

export type RateDecision = RateAllowed | RateDenied;

/** The decision of a disabled limiter (profile `off`): no headers are sent for it. */
export const UNLIMITED: RateAllowed = Object.freeze({ ok: true, limit: Infinity, remaining: Infinity, resetSec: 0 });

export interface BucketLimits {
  readonly rps: number;
  readonly burst: number;
}

export interface KeyedBucket {
  /** Takes `cost` tokens (default 1) from `key`'s bucket. A cost above the burst needs, and empties, a full bucket. */
  take(key: string, cost?: number): RateDecision;
  /** New limits apply from the next `take`; saved tokens are clamped to the new burst, never topped up. */
  setLimits(limits: BucketLimits): void;
  /** Keys currently remembered (never more than `maxKeys`). */
  size(): number;
}

export interface KeyedBucketOptions {
  readonly limits: BucketLimits;
  readonly now: () => number;
  /** Bound on remembered keys; 10,000 by default (a few hundred bytes each). */
  readonly maxKeys?: number;
}

export const DEFAULT_MAX_KEYS = 10_000;

interface State {
  tokens: number;
  at: number;
}

export function createKeyedBucket(opts: KeyedBucketOptions): KeyedBucket {
  let { rps, burst } = opts.limits;
  const maxKeys = Math.max(1, Math.floor(opts.maxKeys ?? DEFAULT_MAX_KEYS));
  // Insertion order doubles as LRU order: every take moves its key to the end.
  const states = new Map<string, State>();

  const refill = (s: State, now: number): number =>
    // A clock that steps backwards refills nothing rather than draining the bucket.
    Math.min(burst, s.tokens + (Math.max(0, now - s.at) * rps) / 1000);
  // Whole seconds until `tokens` more have refilled (the epsilon keeps 4.0000000001 from becoming 5).
  const secondsUntil = (tokens: number): number => Math.max(0, Math.ceil(tokens / rps - 1e-9));

  function take(key: string, cost = 1): RateDecision {
    if (!(cost > 0) || !Number.isFinite(cost)) throw new RangeError("rate-limit cost must be a positive finite number");
    const now = opts.now();
    const need = Math.min(cost, burst);
    let state = states.get(key);
    if (state) states.delete(key);
    else {
      if (states.size >= maxKeys) evict(now);
      state = { tokens: burst, at: now };
    }
    state.tokens = refill(state, now);
    // Never move `at` backwards: a clock that steps back and then forward again must not earn the gap twice.
    state.at = Math.max(state.at, now);
    states.set(key, state);
    if (state.tokens >= need) {
      state.tokens -= need;
      return { ok: true, limit: burst, remaining: Math.floor(state.tokens), resetSec: secondsUntil(burst - state.tokens) };
    }
    const retryAfterSec = Math.max(1, secondsUntil(need - state.tokens));
    return { ok: false, limit: burst, remaining: 0, resetSec: secondsUntil(burst - state.tokens), retryAfterSec, reason: "rate" };
  }

  /**
   * Frees room for a new key. Invariant: eviction only ever forgets, and a forgotten key comes back as a fresh
   * full bucket, so it can never be granted more than `burst`. Full buckets carry no state worth keeping, so they
   * go first; only if that frees under a tenth of the map are the least recently used (most idle) keys dropped,
   * forgetting their remaining debt. Sweeping down to 90% keeps the O(n) sweep amortised O(1) per new key.
   */
  function evict(now: number): void {
    for (const [key, s] of states) if (refill(s, now) >= burst) states.delete(key);
    const target = Math.min(maxKeys - 1, Math.floor(maxKeys * 0.9));
    for (const key of states.keys()) {
      if (states.size <= target) break;
      states.delete(key);
    }
  }

  return {
    take,
    setLimits(limits) {
      // Settle what was earned at the old rate before switching, then clamp to the new burst.
      const now = opts.now();
      for (const s of states.values()) {
        s.tokens = refill(s, now);
        s.at = Math.max(s.at, now);
      }
      ({ rps, burst } = limits);
      for (const s of states.values()) s.tokens = Math.min(s.tokens, burst);
    },
    size: () => states.size,
  };
}
