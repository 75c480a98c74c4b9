// /v1/owner/settings: instance settings for the owner (allowed signup domains).

import { Hono } from "hono";
import type { Domain } from "../../vault/index.ts";
import { getOwnerSettings, updateOwnerSettings } from "../../vault/index.ts";
import { requirePrincipal } from "../auth.ts";
import type { ApiEnv } from "../env.ts";
import { readJson } from "../request.ts";

export function ownerRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));
  r.get("/settings", async (c) => c.json(await getOwnerSettings(d, c.get("principal"))));
  r.patch("/settings", async (c) => c.json(await updateOwnerSettings(d, c.get("principal"), await readJson(c))));
  return r;
}
