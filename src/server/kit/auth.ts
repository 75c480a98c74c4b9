// Authentication middleware: resolves the bearer token to a principal or answers 401.

import type { MiddlewareHandler } from "hono";
import { Unauthorized } from "../../errors.ts";
import { enforce } from "./limits.ts";
import type { Domain } from "../../identity/index.ts";
import type { ApiEnv } from "./env.ts";
import { bearerToken } from "./request.ts";

/**
 * Authenticates the bearer token and, unless the route charges another tier (the proxy charges
 * PROXY per vault), counts the request against the principal's AUTHED budget.
 */
export function requirePrincipal(d: Domain, tier: "AUTHED" | "none" = "AUTHED"): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const token = bearerToken(c);
    if (!token) throw new Unauthorized("send Authorization: Bearer <token>");
    const principal = await d.auth.authenticate(token);
    if (tier === "AUTHED" && d.rateLimiter) enforce(d.rateLimiter.check("AUTHED", principal.id));
    c.set("principal", principal);
    await next();
  };
}
