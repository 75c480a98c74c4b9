// Rate limiting: tiers, profiles, token buckets and in-flight gates, all on an injected clock.
// A leaf module: imports only errors.ts; never knows about routes, ingress paths or the environment itself.
//
//   const limiter = createRateLimiter(resolveSettings(profile, readRateLimitEnv(env, problems), locked), Date.now);
//   const entry = limiter.enterGlobal();            // every request, API and tunnel; entry.release() when done
//   const d = limiter.check("AUTH", ip) | limiter.check("AUTHED", principalId) | limiter.checkProxy(principalId, vaultId);
//   if (!d.ok) throw new RateLimited(d.retryAfterSec);  // and rateLimitHeaders(d) on every limited response

export { createKeyedBucket, DEFAULT_MAX_KEYS, UNLIMITED } from "./bucket.ts";
export type { BucketLimits, KeyedBucket, KeyedBucketOptions, RateAllowed, RateDecision, RateDenied } from "./bucket.ts";
export { createGate, type Gate } from "./gate.ts";
export { shareOf, type LimitShare } from "./share.ts";
export { createRateLimiter, proxyKey } from "./limiter.ts";
export type { GlobalEntry, KeyedTier, RateLimiter, RateLimiterOptions } from "./limiter.ts";
export { applyPatch, checkKnob, checkRateLimitPatch, profileNumbers, RATE_LIMIT_BOUNDS, RATE_PROFILES, resolveSettings } from "./settings.ts";
export type { GlobalLimit, RateLimitOverrides, RateLimitPatch, RateLimitSettings, RateProfile, TierLimit } from "./settings.ts";
export { RATE_LIMIT_ENV_NAMES, RATE_LIMIT_SETTINGS, readRateLimitEnv, type RateLimitSettingDoc } from "./env.ts";
export { enforce, rateLimitHeaders, refusal } from "./headers.ts";
export { RateLimitsLocked } from "./errors.ts";
export { addressKey, createLoginThrottle, LOGIN_THROTTLE_DEFAULTS } from "./login-throttle.ts";
export type { LoginAttempt, LoginLockEvent, LoginRefused, LoginThrottle, LoginThrottleOptions, LoginThrottleScope } from "./login-throttle.ts";
