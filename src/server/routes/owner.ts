// /v1/owner/settings: instance settings for the owner (allowed signup domains, rate limits), and the
// settings the server was started with (/v1/owner/effective-settings), which `broker doctor` checks.

import { Hono } from "hono";
import type { Domain } from "../../identity/index.ts";
import { EffectiveSettings, OwnerSettingsAnswer, OwnerSettingsInput, type EffectiveSettingsBody } from "../../contract/index.ts";
import { NotFound } from "../../errors.ts";
import { getOwnerSettings, requireOwner, updateOwnerSettings } from "../../identity/index.ts";
import { requirePrincipal } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { jsonBody } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";

export function ownerRoutes(d: Domain, effective?: EffectiveSettingsBody) {
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
  r.get(
    "/effective-settings",
    describe({
      summary: "The settings this server was started with (network guard, ports, public URL, database), as `broker doctor` checks them",
      tags,
      auth: "bearer",
      who: "the instance owner",
      success: { status: 200, schema: EffectiveSettings },
    }),
    (c) => {
      requireOwner(c.get("principal"));
      if (!effective) throw new NotFound("this server does not report its settings");
      return c.json(effective);
    },
  );
  return r;
}
