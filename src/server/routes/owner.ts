// /v1/owner/settings: instance settings for the owner (allowed signup domains).

import { Hono } from "hono";
import type { Domain } from "../../identity/index.ts";
import { OwnerSettingsAnswer, OwnerSettingsInput } from "../../contract/index.ts";
import { getOwnerSettings, updateOwnerSettings } from "../../identity/index.ts";
import { requirePrincipal } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { jsonBody } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";

export function ownerRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));
  const tags = ["owner"];
  r.get(
    "/settings",
    describe({
      summary: "The instance's settings (allowed sign-up domains, rate limits)",
      tags,
      auth: "bearer",
      who: "the instance owner",
      success: { status: 200, schema: OwnerSettingsAnswer },
    }),
    async (c) => c.json(await getOwnerSettings(d, c.get("principal"))),
  );
  r.patch(
    "/settings",
    describe({
      summary: "Change the instance's settings",
      tags,
      auth: "bearer",
      who: "the instance owner",
      success: { status: 200, schema: OwnerSettingsAnswer },
    }),
    jsonBody(OwnerSettingsInput),
    async (c) => c.json(await updateOwnerSettings(d, c.get("principal"), c.req.valid("json"))),
  );
  return r;
}
