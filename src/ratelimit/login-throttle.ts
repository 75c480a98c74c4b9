// Password-guessing throttle: failed sign-ins counted per account (the normalised email, whether or not
// an account has it) and per client address; past a threshold each further failure locks the key for a
// doubling delay. Callers ask before hashing, so a locked attempt costs no Argon2id. In memory, bounded,
// on an injected clock. Not a rate-limit profile: BROKER_RATELIMIT_PROFILE=off leaves it on. Never sees a password.

import ipaddr from "ipaddr.js";

/**
 * Defaults, decided here:
 * - 5 failures per account before the first lock: room for a few typos, too few for a useful guess list.
 * - 20 per client address (IPv6 by /64): one office behind NAT is not locked by one user's typos, while
 *   spraying one password over many accounts from one address stops quickly.
 * - Locks of 1 s, 2 s, 4 s … for each failure past the threshold, capped at 15 minutes: at most ~4 guesses
 *   an hour per account once an attacker hits the cap.
 * - A key is forgotten after an hour without a failure: longer than the cap, so waiting out a lock never
 *   resets the count.
 */
export const LOGIN_THROTTLE_DEFAULTS = {
  accountFailures: 5,
  addressFailures: 20,
  baseDelayMs: 1000,
  maxDelayMs: 15 * 60_000,
  forgetAfterMs: 60 * 60_000,
  maxKeys: 10_000,
} as const;

export type LoginThrottleScope = "account" | "address";

export interface LoginLockEvent {
  readonly scope: LoginThrottleScope;
  /** The email (accounts) or the address key (IPv4, or an IPv6 /64). Never a password. */
  readonly key: string;
  readonly failures: number;
  readonly lockSec: number;
}

export interface LoginThrottleOptions {
  readonly now: () => number;
  readonly accountFailures?: number;
  readonly addressFailures?: number;
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  readonly forgetAfterMs?: number;
  /** Bound on remembered keys, per map (accounts, addresses, account-address pairs). */
  readonly maxKeys?: number;
  /** Called when a failure starts or extends a lock (for the log). */
  readonly onLock?: (event: LoginLockEvent) => void;
}

/** One admitted attempt: settle it exactly once (later calls are ignored). */
export interface LoginAttempt {
  readonly ok: true;
  /** The password was right: the account's count ends, and so do this address's failures on this account. */
  succeed(): void;
  /** The password was wrong (or the account unknown). */
  fail(): void;
  /** The attempt ended without a verdict (hashing busy, store error): it counts for nothing. */
  abandon(): void;
}

export interface LoginRefused {
  readonly ok: false;
  readonly scope: LoginThrottleScope;
  readonly retryAfterSec: number;
}

export interface LoginThrottle {
  admit(account: string, clientAddress: string): LoginAttempt | LoginRefused;
  /** Remembered keys (tests and metrics). */
  stats(): { accounts: number; addresses: number; pairs: number };
}

interface Counter {
  failures: number;
  /** Attempts admitted and not yet settled: they count against the threshold, so a burst of parallel
   *  guesses cannot all slip in before the first failure is recorded. */
  pending: number;
  lockedUntil: number;
  lastFailure: number;
}

export function createLoginThrottle(opts: LoginThrottleOptions): LoginThrottle {
  const o = { ...LOGIN_THROTTLE_DEFAULTS, ...definedOnly(opts) };
  const accounts = createCounterMap(o.maxKeys, o.forgetAfterMs, opts.now);
  const addresses = createCounterMap(o.maxKeys, o.forgetAfterMs, opts.now);
  // Failures per (address, account): what a success from that address forgives. Resetting the whole
  // address on any success would let an attacker clear it by signing in to an account of their own.
  const pairs = createCounterMap(o.maxKeys, o.forgetAfterMs, opts.now);

  function lockFor(failures: number, threshold: number): number {
    const exponent = Math.min(failures - threshold, 40); // 2^40 s is far past any cap
    return Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** exponent);
  }

  function recordFailure(c: Counter, threshold: number, scope: LoginThrottleScope, key: string): void {
    const now = opts.now();
    c.failures++;
    c.lastFailure = now;
    if (c.failures < threshold) return;
    const lockMs = lockFor(c.failures, threshold);
    c.lockedUntil = Math.max(c.lockedUntil, now + lockMs);
    opts.onLock?.({ scope, key, failures: c.failures, lockSec: Math.ceil(lockMs / 1000) });
  }

  function admit(account: string, clientAddress: string): LoginAttempt | LoginRefused {
    const address = addressKey(clientAddress);
    const pairKey = `${address.length}:${address}|${account}`;
    const acc = accounts.peek(account);
    const addr = addresses.peek(address);
    const refusal = refuse(acc, o.accountFailures, "account", opts.now()) ?? refuse(addr, o.addressFailures, "address", opts.now());
    if (refusal) return refusal;
    const a = accounts.take(account);
    const b = addresses.take(address);
    a.pending++;
    b.pending++;
    let settled = false;
    const settle = (then: () => void) => {
      if (settled) return;
      settled = true;
      a.pending--;
      b.pending--;
      then();
    };
    return {
      ok: true,
      succeed: () =>
        settle(() => {
          // Zeroed rather than deleted: a parallel attempt may still hold these counters.
          a.failures = 0;
          a.lockedUntil = 0;
          const pair = pairs.peek(pairKey);
          b.failures = Math.max(0, b.failures - (pair?.failures ?? 0));
          if (pair) pair.failures = 0;
        }),
      fail: () =>
        settle(() => {
          recordFailure(a, o.accountFailures, "account", account);
          recordFailure(b, o.addressFailures, "address", address);
          const p = pairs.take(pairKey);
          p.failures++;
          p.lastFailure = opts.now();
          accounts.touch(account, a);
          addresses.touch(address, b);
          pairs.touch(pairKey, p);
        }),
      abandon: () => settle(() => {}),
    };
  }

  return {
    admit,
    stats: () => ({ accounts: accounts.size(), addresses: addresses.size(), pairs: pairs.size() }),
  };
}

/** Refused while locked; past the threshold (lock expired) one probe at a time; below it, up to the room left. */
function refuse(c: Counter | undefined, threshold: number, scope: LoginThrottleScope, now: number): LoginRefused | undefined {
  if (!c) return undefined;
  if (now < c.lockedUntil) return { ok: false, scope, retryAfterSec: Math.max(1, Math.ceil((c.lockedUntil - now) / 1000)) };
  if (c.pending >= Math.max(1, threshold - c.failures)) return { ok: false, scope, retryAfterSec: 1 }; // in flight: settles within a hash or two
  return undefined;
}

/**
 * The address a throttle keys on: IPv4 as is (IPv4-mapped IPv6 unwrapped), IPv6 by its /64, since one
 * host commonly holds a whole /64 and could otherwise rotate through it. Anything unparsable is its own key.
 */
export function addressKey(ip: string): string {
  const bare = ip.replace(/^\[|\]$/g, "");
  if (!ipaddr.isValid(bare)) return ip;
  const parsed = ipaddr.process(bare);
  if (parsed.kind() === "ipv4") return parsed.toString();
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 4);
  return `${parts.map((p) => p.toString(16)).join(":")}::/64`;
}

interface CounterMap {
  peek(key: string): Counter | undefined;
  take(key: string): Counter;
  /** Moves a key to the young end, so eviction takes the longest-quiet keys first. */
  touch(key: string, c: Counter): void;
  size(): number;
}

function createCounterMap(maxKeys: number, forgetAfterMs: number, now: () => number): CounterMap {
  const map = new Map<string, Counter>(); // insertion order = order of last failure
  const stale = (c: Counter) => c.pending === 0 && (c.failures === 0 || now() - c.lastFailure > forgetAfterMs) && now() >= c.lockedUntil;

  function peek(key: string): Counter | undefined {
    const c = map.get(key);
    if (c && stale(c)) {
      map.delete(key);
      return undefined;
    }
    return c;
  }

  /** Makes room for a tenth of the bound at once, so a flood of new keys costs O(1) each, not a scan each. */
  function evict(): void {
    const target = Math.floor(maxKeys * 0.9);
    for (const [key, c] of map) if (stale(c)) map.delete(key);
    // Still full of live keys: drop the longest-quiet ones. Their counts are lost, which is the price of a
    // bound; an attacker needs that many fresh failures (each one throttled per address) to get there.
    for (const key of map.keys()) {
      if (map.size <= target) return;
      map.delete(key);
    }
  }

  return {
    peek,
    take(key) {
      const found = peek(key);
      if (found) return found;
      if (map.size >= maxKeys) evict();
      const c: Counter = { failures: 0, pending: 0, lockedUntil: 0, lastFailure: 0 };
      map.set(key, c);
      return c;
    },
    touch(key, c) {
      if (map.get(key) !== c) return; // evicted meanwhile: do not resurrect
      map.delete(key);
      map.set(key, c);
    },
    size: () => map.size,
  };
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
