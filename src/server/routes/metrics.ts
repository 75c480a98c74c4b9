// GET /metrics: the Prometheus exposition text. Mounted only when metrics are on; with
// BROKER_METRICS_TOKEN set, a matching bearer token is required (compared in constant time).

import { createHash, timingSafeEqual } from "node:crypto";
import { Hono } from "hono";
import { describe } from "../openapi/index.ts";
import { Unauthorized } from "../../errors.ts";
import type { Secret } from "../../secret.ts";
import type { ApiEnv } from "../kit/index.ts";
import type { Metrics } from "../kit/index.ts";

export function metricsRoutes(metrics: Metrics, token: Secret | undefined) {
  // Digests of equal length, so the comparison time says nothing about the token's length or prefix.
  const expected = token && createHash("sha256").update(token.reveal()).digest(); // reveal: hashed once, never logged
  const r = new Hono<ApiEnv>();
  r.get(
    "/",
    describe({
      summary: "Prometheus metrics (names and numbers only)",
      tags: ["meta"],
      auth: "metrics-token",
      who: "anyone when BROKER_METRICS_TOKEN is unset; else its bearer",
      success: { status: 200, contentType: "text/plain" },
    }),
    async (c) => {
      if (expected) {
        const given = /^Bearer\s+(.+)$/i.exec(c.req.header("authorization") ?? "")?.[1]?.trim() ?? "";
        if (!timingSafeEqual(createHash("sha256").update(given).digest(), expected))
          throw new Unauthorized("GET /metrics needs the bearer token from BROKER_METRICS_TOKEN");
      }
      const { body, contentType } = await metrics.render();
      return c.body(body, 200, { "content-type": contentType });
    },
  );
  return r;
}
