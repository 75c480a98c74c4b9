// Rate-limit settings: tier shapes, the four profiles, validation and resolution (profile + overrides).
// Pure data and functions: never reads the environment (env.ts parses it) and never keeps state.

import { InvalidRequest } from "../errors.ts";

export type RateProfile = "default" | "strict" | "loose" | "off";
export const RATE_PROFILES: readonly RateProfile[] = ["default", "strict", "loose", "off"];

/** A token bucket: `rps` tokens per second refill, at most `burst` tokens saved up. */
export interface TierLimit {
  readonly rps: number;
  readonly burst: number;
}

/** The whole-server backstop. Its bucket holds one second of traffic (burst = rps). */
export interface GlobalLimit {
  readonly rps: number;
  readonly inflight: number;
}

export interface RateLimitSettings {
  /** `off` disables every tier; the numbers are still shown (they apply again if the profile changes). */
  readonly profile: RateProfile;
  /** BROKER_RATELIMIT_LOCK: settings are pinned to the environment and `update` is refused. */
  readonly locked: boolean;
  readonly auth: TierLimit;
  readonly authed: TierLimit;
  readonly proxy: TierLimit;
  readonly global: GlobalLimit;
}

/** Absolute values that replace the profile's, knob by knob (env variables or the owner settings API). */
export interface RateLimitOverrides {
  readonly auth?: Partial<TierLimit>;
  readonly authed?: Partial<TierLimit>;
  readonly proxy?: Partial<TierLimit>;
  readonly global?: Partial<GlobalLimit>;
}

/** What the owner settings API may change at run time: a profile and/or single knobs. */
export interface RateLimitPatch extends RateLimitOverrides {
  readonly profile?: RateProfile;
}

type Numbers = Omit<RateLimitSettings, "profile" | "locked">;

/**
 * The default profile. Sized so that an agent fanning out (tens of requests per second, dozens in flight)
 * never sees a 429, while one runaway client cannot starve the rest:
 * - AUTH 5/s, burst 20 per client IP: login and registration run Argon2id (64 MiB, ~100 ms each), so a human
 *   needs a handful per minute; 20 covers a page load plus retries, and an office behind one NAT still fits.
 * - AUTHED 20/s, burst 100 per principal: CLI and console CRUD is bursty (a console page issues ~10 calls,
 *   a script lists then edits) but never sustained at proxy rates.
 * - PROXY 50/s, burst 200 per (principal, vault): an agent fanning out 30-50 parallel calls, or `git clone`
 *   with its dozens of round trips, stays inside; /proxy and the tunnel draw on this one budget.
 * - GLOBAL 2000/s and 512 in flight: a backstop far above any single principal (40 agents at full PROXY rate),
 *   and 512 concurrent streams (SSE, uploads, WebSockets) is well under a default 1024-descriptor limit.
 */
const DEFAULT_NUMBERS: Numbers = {
  auth: { rps: 5, burst: 20 },
  authed: { rps: 20, burst: 100 },
  proxy: { rps: 50, burst: 200 },
  global: { rps: 2000, inflight: 512 },
};

/** Upper bounds: anything above is a typo, not a tuning choice (and beyond what one process can serve). */
export const RATE_LIMIT_BOUNDS = { rps: 1_000_000, burst: 10_000_000, inflight: 100_000 } as const;

/** The numbers of a profile: strict halves every knob, loose doubles it, off shows the default numbers. */
export function profileNumbers(profile: RateProfile): Numbers {
  const factor = profile === "strict" ? 0.5 : profile === "loose" ? 2 : 1;
  const scale = (t: TierLimit): TierLimit => ({ rps: t.rps * factor, burst: Math.max(1, Math.floor(t.burst * factor)) });
  const d = DEFAULT_NUMBERS;
  return {
    auth: scale(d.auth),
    authed: scale(d.authed),
    proxy: scale(d.proxy),
    global: { rps: d.global.rps * factor, inflight: Math.max(1, Math.floor(d.global.inflight * factor)) },
  };
}

/** Effective settings: the profile's numbers, then each override knob replacing its value. */
export function resolveSettings(profile: RateProfile, overrides: RateLimitOverrides = {}, locked = false): RateLimitSettings {
  return freezeSettings({ profile, locked, ...applyOverrides(profileNumbers(profile), overrides) });
}

/**
 * Applies a run-time patch to current settings. A new profile restarts from that profile's numbers; knobs in the
 * same patch then replace single values. Throws InvalidRequest (400, naming the field) on a bad value.
 */
export function applyPatch(current: RateLimitSettings, patch: RateLimitPatch): RateLimitSettings {
  checkRateLimitPatch(patch);
  const base = patch.profile ? profileNumbers(patch.profile) : current;
  return freezeSettings({ profile: patch.profile ?? current.profile, locked: current.locked, ...applyOverrides(base, patch) });
}

/**
 * The grammar of a patch from outside (the owner settings API's `rate_limits`, read by the contract's
 * schema; a saved one again when it is applied): throws InvalidRequest naming the first bad field
 * ("profile", "proxy.rps") and every problem in the message. Returns the patch it checked.
 */
export function checkRateLimitPatch(patch: RateLimitPatch): RateLimitPatch {
  const problems: string[] = [];
  if (patch.profile != null && !RATE_PROFILES.includes(patch.profile))
    throw new InvalidRequest(`profile must be one of ${RATE_PROFILES.join(", ")}`, "profile");
  checkOverrides(patch, problems);
  if (problems.length) throw new InvalidRequest(problems.join("; "), problems[0]!.split(":")[0]);
  return patch;
}

/** Validates one knob ("proxy.rps", 50); pushes "<field>: <why>" onto problems when it is out of range. */
export function checkKnob(field: string, value: unknown, problems: string[]): void {
  const kind = field.split(".")[1];
  if (kind !== "rps" && kind !== "burst" && kind !== "inflight") {
    problems.push(`${field}: not a rate-limit setting`);
    return;
  }
  const max = RATE_LIMIT_BOUNDS[kind];
  const integer = kind !== "rps";
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0 || value > max || (integer && !Number.isInteger(value)))
    problems.push(`${field}: must be a positive ${integer ? "integer" : "number"} up to ${max}`);
}

function applyOverrides(base: Numbers, o: RateLimitOverrides): Numbers {
  return {
    auth: { ...base.auth, ...pickDefined(o.auth) },
    authed: { ...base.authed, ...pickDefined(o.authed) },
    proxy: { ...base.proxy, ...pickDefined(o.proxy) },
    global: { ...base.global, ...pickDefined(o.global) },
  };
}

/** Validates every knob of an untrusted patch, naming each bad field ("proxy.rps", "global.burst"). */
function checkOverrides(o: RateLimitOverrides, problems: string[]): void {
  for (const tier of ["auth", "authed", "proxy", "global"] as const) {
    const knobs: unknown = o[tier];
    if (knobs === undefined) continue;
    if (typeof knobs !== "object" || knobs === null) {
      problems.push(`${tier}: must be an object`);
      continue;
    }
    const allowed = tier === "global" ? ["rps", "inflight"] : ["rps", "burst"];
    for (const [k, v] of Object.entries(knobs)) {
      if (v === undefined) continue;
      if (allowed.includes(k)) checkKnob(`${tier}.${k}`, v, problems);
      else problems.push(`${tier}.${k}: not a rate-limit setting`);
    }
  }
}

function pickDefined<T extends object>(o: T | undefined): Partial<T> {
  if (!o) return {};
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function freezeSettings(s: RateLimitSettings): RateLimitSettings {
  return Object.freeze({
    ...s,
    auth: Object.freeze({ ...s.auth }),
    authed: Object.freeze({ ...s.authed }),
    proxy: Object.freeze({ ...s.proxy }),
    global: Object.freeze({ ...s.global }),
  });
}
