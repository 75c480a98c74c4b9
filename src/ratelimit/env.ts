// Per-knob environment overrides (BROKER_RATELIMIT_<TIER>_<KNOB>) and their documentation rows.
// Pure: takes an env record, never process.env; each problem names its variable, as config.ts does.

import { profileNumbers, RATE_LIMIT_BOUNDS, type RateLimitOverrides } from "./settings.ts";

type Tier = "auth" | "authed" | "proxy" | "global";
type Knob = "rps" | "burst" | "inflight";

interface KnobDef {
  readonly name: string;
  readonly tier: Tier;
  readonly knob: Knob;
  readonly what: string;
}

const KNOBS: readonly KnobDef[] = [
  {
    name: "BROKER_RATELIMIT_AUTH_RPS",
    tier: "auth",
    knob: "rps",
    what: "AUTH tier (per client IP: login, registration, callbacks, invite and approval pages): requests per second",
  },
  { name: "BROKER_RATELIMIT_AUTH_BURST", tier: "auth", knob: "burst", what: "AUTH tier: burst size" },
  {
    name: "BROKER_RATELIMIT_AUTHED_RPS",
    tier: "authed",
    knob: "rps",
    what: "AUTHED tier (per principal: authenticated API, invite redemption, approval): requests per second",
  },
  { name: "BROKER_RATELIMIT_AUTHED_BURST", tier: "authed", knob: "burst", what: "AUTHED tier: burst size" },
  {
    name: "BROKER_RATELIMIT_PROXY_RPS",
    tier: "proxy",
    knob: "rps",
    what: "PROXY tier (per principal and vault, /proxy and the tunnel together): requests per second",
  },
  { name: "BROKER_RATELIMIT_PROXY_BURST", tier: "proxy", knob: "burst", what: "PROXY tier: burst size" },
  { name: "BROKER_RATELIMIT_GLOBAL_RPS", tier: "global", knob: "rps", what: "GLOBAL backstop (whole server, API and tunnel): requests per second" },
  { name: "BROKER_RATELIMIT_GLOBAL_INFLIGHT", tier: "global", knob: "inflight", what: "GLOBAL ceiling on requests in flight (API and tunnel)" },
];

export interface RateLimitSettingDoc {
  readonly name: string;
  readonly default: string;
  readonly description: string;
}

/** Rows shaped like config.ts SETTINGS, for `broker server --help` and the README. */
export const RATE_LIMIT_SETTINGS: readonly RateLimitSettingDoc[] = KNOBS.map((k) => ({
  name: k.name,
  default: describeDefault(k),
  description: `${k.what}; overrides the profile's value`,
}));

/** Names of every per-knob variable (so config.ts does not warn about them as unknown). */
export const RATE_LIMIT_ENV_NAMES: readonly string[] = KNOBS.map((k) => k.name);

/** Reads the per-knob overrides present in `env`; a bad value adds a problem naming its variable and is skipped. */
export function readRateLimitEnv(env: Record<string, string | undefined>, problems: string[]): RateLimitOverrides {
  const out: Record<Tier, Record<string, number>> = { auth: {}, authed: {}, proxy: {}, global: {} };
  for (const k of KNOBS) {
    const raw = env[k.name]?.trim();
    if (raw === undefined || raw === "") continue;
    const integer = k.knob !== "rps";
    const max = RATE_LIMIT_BOUNDS[k.knob];
    const n = Number(raw);
    const shaped = integer ? /^\d+$/.test(raw) : /^(\d+\.?\d*|\.\d+)$/.test(raw);
    if (!shaped || !(n > 0) || n > max) {
      problems.push(`${k.name}: must be a positive ${integer ? "integer" : "number"} up to ${max}`);
      continue;
    }
    out[k.tier][k.knob] = n;
  }
  const overrides: Record<string, Record<string, number>> = {};
  for (const [tier, knobs] of Object.entries(out)) if (Object.keys(knobs).length) overrides[tier] = knobs;
  return overrides as RateLimitOverrides;
}

function describeDefault(k: KnobDef): string {
  const value = (profile: "default" | "strict" | "loose"): number => (profileNumbers(profile)[k.tier] as unknown as Record<string, number>)[k.knob]!;
  return `${value("default")} (strict ${value("strict")}, loose ${value("loose")})`;
}
