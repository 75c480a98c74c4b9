// The tiered rate limiter: AUTH (client IP), AUTHED (principal id), PROXY ((principal, vault) pair) and GLOBAL
// (in-flight ceiling + requests-per-second backstop), with settings editable at run time unless locked.
// Never knows about routes or ingress paths: callers name a tier and a key, nothing else.

import { createKeyedBucket, DEFAULT_MAX_KEYS, UNLIMITED, type RateDecision, type RateDenied } from "./bucket.ts";
import { RateLimitsLocked } from "./errors.ts";
import { createGate } from "./gate.ts";
import { shareOf, type LimitShare } from "./share.ts";
import { applyPatch, type RateLimitPatch, type RateLimitSettings, type TierLimit } from "./settings.ts";

/** Tiers keyed by a caller-supplied string. PROXY has its own method so its key cannot be labelled by ingress. */
export type KeyedTier = "AUTH" | "AUTHED";

/** A GLOBAL admission: call `release` exactly when the request (or tunnelled request) finishes. */
export interface GlobalEntry {
  readonly ok: true;
  readonly decision: RateDecision;
  readonly release: () => void;
}

export interface RateLimiter {
  /** AUTH: key = client IP. AUTHED: key = the principal's stable id (user, agent or scoped session). */
  check(tier: KeyedTier, key: string, cost?: number): RateDecision;
  /** PROXY: one budget per (principal, vault), whichever ingress (/proxy or the tunnel) is asking. */
  checkProxy(principalId: string, vaultId: string | number, cost?: number): RateDecision;
  /** GLOBAL: takes an in-flight slot and a backstop token, or returns the denial (reason "inflight" or "rate"). */
  enterGlobal(): GlobalEntry | RateDenied;
  settings(): RateLimitSettings;
  /** Validated run-time change; throws RateLimitsLocked (403) when locked, InvalidRequest (400) on a bad value. */
  update(patch: RateLimitPatch): RateLimitSettings;
  /** Remembered keys per keyed tier and GLOBAL requests in flight (metrics and tests). */
  stats(): { auth: number; authed: number; proxy: number; inflight: number };
}

export interface RateLimiterOptions {
  /** Bound on remembered keys per tier (default 10,000). */
  readonly maxKeys?: number;
  /**
   * This process among those sharing the limits (`broker server --workers N`): each enforces its share, 1/N of every
   * rate, and of every burst and in-flight ceiling its whole-number part (share.ts), so together they never allow more
   * than the settings say (a setting below N excepted: each worker allows at least 1). The kernel spreads connections
   * evenly, so a client on several connections gets about the whole limit; one on a single connection, its worker's
   * share. `settings()` still reports the whole limits.
   */
  readonly share?: LimitShare;
}

/** One process's share of a bucket: the rate divided, the burst shared out (share.ts). */
function shareLimits(limits: TierLimit, s: LimitShare | undefined): TierLimit {
  return !s || s.count <= 1 ? limits : { rps: limits.rps / s.count, burst: shareOf(limits.burst, s) };
}

/** Unambiguous even if an id contains the separator: "a|b" + "c" and "a" + "b|c" stay distinct. */
export function proxyKey(principalId: string, vaultId: string | number): string {
  return `${principalId.length}:${principalId}|${vaultId}`;
}

export function createRateLimiter(initial: RateLimitSettings, now: () => number, opts: RateLimiterOptions = {}): RateLimiter {
  let current = initial;
  const maxKeys = opts.maxKeys ?? DEFAULT_MAX_KEYS;
  const mine = (l: TierLimit) => shareLimits(l, opts.share);
  const auth = createKeyedBucket({ limits: mine(current.auth), now, maxKeys });
  const authed = createKeyedBucket({ limits: mine(current.authed), now, maxKeys });
  const proxy = createKeyedBucket({ limits: mine(current.proxy), now, maxKeys });
  // The backstop holds one second of traffic: a burst above that would defeat a per-second ceiling.
  const globalLimits = (s: RateLimitSettings) => mine({ rps: s.global.rps, burst: Math.max(1, Math.floor(s.global.rps)) });
  const global = createKeyedBucket({ limits: globalLimits(current), now, maxKeys: 1 });
  const inflightOf = (s: RateLimitSettings) => shareOf(s.global.inflight, opts.share);
  const gate = createGate(inflightOf(current));
  const enabled = () => current.profile !== "off";

  function check(tier: KeyedTier, key: string, cost = 1): RateDecision {
    if (!enabled()) return UNLIMITED;
    return (tier === "AUTH" ? auth : authed).take(key, cost);
  }

  function checkProxy(principalId: string, vaultId: string | number, cost = 1): RateDecision {
    if (!enabled()) return UNLIMITED;
    return proxy.take(proxyKey(principalId, vaultId), cost);
  }

  function enterGlobal(): GlobalEntry | RateDenied {
    if (!enabled()) return { ok: true, decision: UNLIMITED, release: () => {} };
    const release = gate.acquire();
    if (!release) {
      const ceiling = inflightOf(current);
      return { ok: false, limit: ceiling, remaining: 0, resetSec: 1, retryAfterSec: 1, reason: "inflight" };
    }
    const decision = global.take("*");
    if (!decision.ok) {
      release();
      return decision;
    }
    return { ok: true, decision, release };
  }

  function update(patch: RateLimitPatch): RateLimitSettings {
    if (current.locked) throw new RateLimitsLocked();
    const next = applyPatch(current, patch);
    auth.setLimits(mine(next.auth));
    authed.setLimits(mine(next.authed));
    proxy.setLimits(mine(next.proxy));
    global.setLimits(globalLimits(next));
    gate.setCeiling(inflightOf(next));
    current = next;
    return current;
  }

  return {
    check,
    checkProxy,
    enterGlobal,
    settings: () => current,
    update,
    stats: () => ({ auth: auth.size(), authed: authed.size(), proxy: proxy.size(), inflight: gate.inFlight() }),
  };
}
