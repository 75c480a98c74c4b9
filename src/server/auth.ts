// Authentication middleware: resolves the bearer token to a principal or answers 401.

import type { MiddlewareHandler } from "hono";
import { Unauthorized } from "../errors.ts";
import type { Domain } from "../vault/context.ts";
import type { ApiEnv } from "./env.ts";
import { bearerToken } from "./request.ts";

export function requirePrincipal(d: Domain): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const token = bearerToken(c);
    if (!token) throw new Unauthorized("send Authorization: Bearer <token>");
    c.set("principal", await d.auth.authenticate(token));
    await next();
  };
}
