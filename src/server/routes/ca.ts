// The broker's root CA: GET /v1/ca.pem (public: clients must trust it for the transparent proxy)
// and POST /v1/ca/rotate (owner only; existing tunnels keep their leaves until reconnect).

import { Hono } from "hono";
import type { Logger } from "../../log.ts";
import type { CaHolder } from "../../crypto/index.ts";
import type { Domain } from "../../identity/index.ts";
import { CaRotated } from "../../contract/index.ts";
import { describe } from "../openapi/index.ts";
import { rotateCa } from "../../identity/index.ts";
import { requirePrincipal } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";

export function caRoutes(d: Domain, ca: CaHolder, log: Logger) {
  const r = new Hono<ApiEnv>();
  r.get(
    "/",
    describe({
      summary: "The root CA certificate (as /v1/ca.pem)",
      tags: ["ca"],
      auth: "none",
      success: { status: 200, contentType: "application/x-pem-file" },
    }),
    (c) => c.body(ca.current.certPem, 200, { "content-type": "application/x-pem-file", "cache-control": "no-cache" }),
  );
  r.post(
    "/rotate",
    describe({
      summary: "Replace the root CA (new tunnels get leaves from the new one)",
      tags: ["ca"],
      auth: "bearer",
      who: "the instance owner",
      success: { status: 200, schema: CaRotated },
    }),
    requirePrincipal(d),
    async (c) => {
      const fresh = await rotateCa(c.get("principal"), ca);
      log.info("ca_rotated", { by: c.get("principal").id });
      return c.json({ certificate: fresh.certPem, not_after: new Date(fresh.notAfter).toISOString() });
    },
  );
  return r;
}
