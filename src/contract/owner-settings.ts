// PATCH /v1/owner/settings: the allowed sign-up domains and the rate limits. A rate-limit patch is a
// grammar the configuration shares (ratelimit/settings.ts checks it wherever a patch comes from), so
// the schema hands the object to that check rather than spelling the knobs a second time.

import { z } from "zod";
import { InvalidRequest } from "../errors.ts";
import { checkRateLimitPatch, RATE_LIMIT_BOUNDS, RATE_PROFILES, type RateLimitPatch } from "../ratelimit/index.ts";
import { says } from "../schema-input.ts";

const DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

/**
 * Domain names, read trimmed, lower-cased and without a leading "@". A bad one is refused as a whole
 * list (the field stays `allowed_domains`, the message says which entry), so an entry that is no
 * text at all reads as "" and is refused the same way.
 */
const AllowedDomains = z
  .array(z.string().catch(""), says("{field} must be a list of domain names"))
  .transform((list, ctx) => {
    const domains = list.map((v) => v.trim().toLowerCase().replace(/^@/, ""));
    const bad = domains.findIndex((v) => !DOMAIN.test(v));
    if (bad < 0) return domains;
    ctx.addIssue({ code: "custom", message: `{field}[${bad}] is not a domain name`, input: list });
    return z.NEVER;
  })
  .describe("email domains that may sign up; [] allows any")
  .meta({ items: { type: "string", description: "a domain name, e.g. example.com (a leading @ is dropped)" } }); // not .catch's "" default

const tier = (knobs: readonly (keyof typeof RATE_LIMIT_BOUNDS)[]) => ({
  type: "object",
  properties: Object.fromEntries(knobs.map((k) => [k, { type: k === "rps" ? "number" : "integer", exclusiveMinimum: 0, maximum: RATE_LIMIT_BOUNDS[k] }])),
});
// Documented knob by knob (the OpenAPI document) but checked by ratelimit/: its check names the bad
// knob and lists every problem, so the schema leaves each value to it.
const documented = (description: string, doc: Record<string, unknown>) => z.unknown().meta(doc).optional().describe(description);

/** A patch: a profile and/or single knobs, each an absolute value replacing the profile's. */
const RateLimits = z
  .strictObject(
    {
      profile: documented("default, strict (half), loose (double) or off (no limits)", { type: "string", enum: [...RATE_PROFILES] }),
      auth: documented("sign-in and registration, per client address", tier(["rps", "burst"])),
      authed: documented("authenticated API calls, per principal", tier(["rps", "burst"])),
      proxy: documented("proxied requests, per principal and vault", tier(["rps", "burst"])),
      global: documented("the whole server: requests per second and at most in flight", tier(["rps", "inflight"])),
    },
    { error: (iss) => (iss.code === "invalid_type" ? "{field} must be an object" : undefined) },
  )
  .transform((patch, ctx): RateLimitPatch => {
    try {
      return checkRateLimitPatch(patch as RateLimitPatch);
    } catch (e) {
      if (!(e instanceof InvalidRequest)) throw e;
      // The check names the knob inside the patch ("proxy.rps"): the issue sits there, under rate_limits.
      ctx.addIssue({ code: "custom", message: e.message, input: patch, path: e.field ? e.field.split(".") : [] });
      return z.NEVER;
    }
  })
  .describe("a profile and/or single knobs; refused while BROKER_RATELIMIT_LOCK pins them");

export const OwnerSettingsInput = z.strictObject({
  allowed_domains: AllowedDomains.optional(),
  rate_limits: RateLimits.optional(),
});
