// /v1/owner/settings: instance settings for the owner (allowed signup domains, rate limits), the LLM price table
// (/v1/owner/llm-prices), and the settings the server was started with (/v1/owner/effective-settings), which
// `broker doctor` checks.

import { Hono } from "hono";
import type { Domain } from "../../identity/index.ts";
import {
  EffectiveSettings,
  OwnerSettingsAnswer,
  OwnerSettingsInput,
  PriceTableInput,
  PriceTableView,
  type EffectiveSettingsBody,
} from "../../contract/index.ts";
import { NotFound } from "../../errors.ts";
import { getOwnerSettings, requireOwner, updateOwnerSettings } from "../../identity/index.ts";
import { resetPrices, setPrices, viewPrices } from "../../workflows/index.ts";
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
  // The LLM price table (issue 38): read by anyone signed in (budgets show money by it), set and reset by the owner.
  r.get(
    "/llm-prices",
    describe({
      summary: "The LLM price table budgets, logs and metrics price calls by, and where it came from",
      tags,
      auth: "bearer",
      who: "anyone signed in",
      success: { status: 200, schema: PriceTableView },
    }),
    (c) => c.json(viewPrices(d)),
  );
  r.put(
    "/llm-prices",
    describe({
      summary: "Set the LLM price table every instance prices calls by (over BROKER_LLM_PRICES_FILE or the shipped table)",
      tags,
      auth: "bearer",
      who: "the instance owner",
      success: { status: 200, schema: PriceTableView },
    }),
    jsonBody(PriceTableInput),
    async (c) => c.json(await setPrices(d, c.get("principal"), c.req.valid("json"))),
  );
  r.delete(
    "/llm-prices",
    describe({
      summary: "Go back to BROKER_LLM_PRICES_FILE's table, or the shipped one",
      tags,
      auth: "bearer",
      who: "the instance owner",
      success: { status: 200, schema: PriceTableView },
    }),
    async (c) => c.json(await resetPrices(d, c.get("principal"))),
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
