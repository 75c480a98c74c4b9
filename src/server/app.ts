// The Hono application: routes and middleware over injected dependencies. It reads no
// environment and opens nothing; `serve.ts` binds it to a socket.

import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { InvalidRequest, NotFound, toErrorResponse } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { Store } from "../store/index.ts";
import { VERSION } from "../version.ts";

export interface ApiDeps {
  readonly store: Store;
  readonly dataKey: CryptoKey;
  readonly log: Logger;
  readonly now: () => number;
  readonly publicUrl: string;
}

export type ApiEnv = { Variables: Record<string, never> };

export function createApi(deps: ApiDeps): Hono<ApiEnv> {
  const api = new Hono<ApiEnv>();
  api.onError((err) => {
    if (err instanceof HTTPException && err.status < 500) return toErrorResponse(new InvalidRequest(err.message || "invalid request"), deps.log);
    return toErrorResponse(err, deps.log);
  });
  api.notFound(() => toErrorResponse(new NotFound("no such endpoint"), deps.log));
  api.use("*", async (c, next) => {
    await next();
    c.header("x-content-type-options", "nosniff");
    c.header("referrer-policy", "no-referrer");
    if (!c.res.headers.has("cache-control")) c.header("cache-control", "no-store");
  });

  api.get("/health", async (c) => {
    await deps.store.db.get("SELECT 1"); // a health check that cannot reach its store is not healthy
    return c.json({ status: "ok", version: VERSION });
  });

  return api;
}
