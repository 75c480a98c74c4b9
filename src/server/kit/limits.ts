// Rate-limit middleware for the API: the GLOBAL gate (in-flight ceiling and requests-per-second
// backstop, shared with the tunnel) on every request, and the AUTH tier keyed on the client IP for
// anonymous endpoints (login, registration, invite and approval-token pages). AUTHED and PROXY are
// charged where the principal and vault are known (auth.ts, routes/proxy.ts). The client IP is the one
// client-address.ts resolved (X-Forwarded-For behind BROKER_TRUSTED_PROXIES), else the socket peer.

import type { Context, MiddlewareHandler } from "hono";
import { RateLimited } from "../../errors.ts";
import { enforce, rateLimitHeaders, type RateLimiter } from "../../ratelimit/index.ts";
import { readPeerAddress } from "./client-address.ts";

/** Throws 429 (envelope, integer Retry-After, RateLimit-* headers) for a denied decision. */
export { enforce };

export function globalGate(limiter: RateLimiter | undefined): MiddlewareHandler {
  return async (_c, next) => {
    if (!limiter) return next();
    const entry = limiter.enterGlobal();
    if (!entry.ok) return enforce(entry);
    try {
      await next();
    } finally {
      entry.release();
    }
  };
}

export function clientIp(c: Context): string {
  return (c.get("clientIp") as string | undefined) ?? readPeerAddress(c);
}

export function authTier(limiter: RateLimiter | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (limiter) enforce(limiter.check("AUTH", clientIp(c)));
    await next();
  };
}
