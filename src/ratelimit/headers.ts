// Response headers for a rate-limit decision: the IETF draft's RateLimit-Limit/-Remaining/-Reset (integers)
// and, when denied, Retry-After. A disabled limiter (profile `off`) sends none.

import type { RateDecision } from "./bucket.ts";

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
