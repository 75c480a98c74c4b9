// Response headers for a rate-limit decision: the IETF draft's RateLimit-Limit/-Remaining/-Reset (integers)
// and, when denied, Retry-After. A disabled limiter (profile `off`) sends none.

import { RateLimited } from "../errors.ts";
import type { RateDecision, RateDenied } from "./bucket.ts";

export function rateLimitHeaders(decision: RateDecision): Record<string, string> {
  if (!Number.isFinite(decision.limit)) return {};
  const headers: Record<string, string> = {
    "RateLimit-Limit": String(Math.floor(decision.limit)),
    "RateLimit-Remaining": String(Math.max(0, Math.floor(decision.remaining))),
    "RateLimit-Reset": String(Math.max(0, Math.ceil(decision.resetSec))),
  };
  if (!decision.ok) headers["Retry-After"] = String(Math.max(1, Math.ceil(decision.retryAfterSec)));
  return headers;
}

/** The broker's 429 for a refused decision, with its headers: the same on the API, /proxy and in a tunnel. */
export function refusal(decision: RateDenied): RateLimited {
  return new RateLimited(
    decision.retryAfterSec,
    decision.reason === "inflight" ? "too many requests in flight; retry shortly" : "rate limit exceeded",
    rateLimitHeaders(decision),
  );
}

/** Throws the broker's 429 when the decision refused. */
export function enforce(decision: RateDecision): void {
  if (!decision.ok) throw refusal(decision);
}
