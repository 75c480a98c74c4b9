// Owner settings: the allowed signup domains (email registration, identity-provider sign-up and
// vault-invite acceptance; the owner is exempt) and the rate limits. A change arrives read by the
// contract's schema (domain names normalised, a rate-limit patch checked); who may change them, and
// whether rate limiting exists on this server, is decided here.

import { InvalidRequest, PermissionDenied } from "../errors.ts";
import { RateLimitsLocked, type RateLimitPatch, type RateLimitSettings } from "../ratelimit/index.ts";
import type { CaHolder, RootCa } from "../crypto/index.ts";
import type { Repos } from "../store/index.ts";
import type { Domain } from "./context.ts";
import type { Principal } from "./principal.ts";

export interface OwnerSettings {
  allowed_domains: string[];
  /** Effective rate limits (profile, per-tier numbers, whether pinned by BROKER_RATELIMIT_LOCK). */
  rate_limits?: RateLimitSettings;
}

/** A change: an absent field keeps its setting. */
export interface OwnerSettingsChange {
  /** Domain names, lower-case and without "@"; [] allows any. */
  allowed_domains?: readonly string[];
  rate_limits?: RateLimitPatch;
}

const RATE_LIMITS_SETTING = "rate_limits";

export async function readSettings(repos: Repos): Promise<OwnerSettings> {
  return { allowed_domains: (await repos.settings.get<string[]>("allowed_domains")) ?? [] };
}

export async function getOwnerSettings(d: Domain, p: Principal): Promise<OwnerSettings> {
  requireOwner(p);
  return { ...(await readSettings(d.store)), rate_limits: d.rateLimiter?.settings() };
}

/** Re-applies rate limits an owner saved earlier (unless BROKER_RATELIMIT_LOCK pins them to the environment). */
export async function restoreRateLimits(d: Domain): Promise<void> {
  const limiter = d.rateLimiter;
  if (!limiter || limiter.settings().locked) return;
  const saved = await d.store.settings.get<RateLimitPatch>(RATE_LIMITS_SETTING);
  if (saved) limiter.update(saved);
}

export async function updateOwnerSettings(d: Domain, p: Principal, change: OwnerSettingsChange): Promise<OwnerSettings> {
  requireOwner(p);
  const patch = change.rate_limits;
  // Every refusal comes before the first write: a refused change leaves every setting as it was.
  if (patch !== undefined && !d.rateLimiter) throw new InvalidRequest("rate limiting is not configured on this server", "rate_limits");
  if (patch !== undefined && d.rateLimiter?.settings().locked) throw new RateLimitsLocked();
  if (change.allowed_domains !== undefined) {
    await d.store.settings.put("allowed_domains", [...new Set(change.allowed_domains)].sort(), d.now());
  }
  if (patch !== undefined && d.rateLimiter) {
    const next = d.rateLimiter.update(patch);
    const { profile, auth, authed, proxy, global } = next;
    await d.store.settings.put(RATE_LIMITS_SETTING, { profile, auth, authed, proxy, global }, d.now());
  }
  return { ...(await readSettings(d.store)), rate_limits: d.rateLimiter?.settings() };
}

/** Throws unless `email` may sign up (or join through an invite) under the owner's domain list. */
export async function assertEmailDomainAllowed(repos: Repos, email: string): Promise<void> {
  const { allowed_domains } = await readSettings(repos);
  if (allowed_domains.length === 0) return;
  const domain = email.slice(email.lastIndexOf("@") + 1);
  if (!allowed_domains.includes(domain)) throw new PermissionDenied("sign-ups from this email domain are not allowed on this instance");
}

export function requireOwner(p: Principal): void {
  if (!(p.kind === "user" && p.instanceRole === "owner")) throw new PermissionDenied("only the instance owner can do this");
}

/** Replaces the root CA (the instance owner only); `ca` is the running server's holder of it. */
export async function rotateCa(p: Principal, ca: CaHolder): Promise<RootCa> {
  requireOwner(p);
  return ca.rotate();
}
