// Owner settings: the allowed signup domains (email registration, identity-provider sign-up and
// vault-invite acceptance; the owner is exempt).

import { InvalidRequest, PermissionDenied } from "../errors.ts";
import type { RateLimitPatch, RateLimitSettings } from "../ratelimit/index.ts";
import type { Repos } from "../store/index.ts";
import type { Domain } from "./context.ts";
import type { Principal } from "./principal.ts";

export interface OwnerSettings {
  allowed_domains: string[];
  /** Effective rate limits (profile, per-tier numbers, whether pinned by BROKER_RATELIMIT_LOCK). */
  rate_limits?: RateLimitSettings;
}

const RATE_LIMITS_SETTING = "rate_limits";

const DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

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

export async function updateOwnerSettings(d: Domain, p: Principal, input: unknown): Promise<OwnerSettings> {
  requireOwner(p);
  const body = (input ?? {}) as { allowed_domains?: unknown };
  if (body.allowed_domains !== undefined) {
    if (!Array.isArray(body.allowed_domains)) throw new InvalidRequest("allowed_domains must be a list of domain names", "allowed_domains");
    const domains = body.allowed_domains.map((v) => (typeof v === "string" ? v.trim().toLowerCase().replace(/^@/, "") : ""));
    const bad = domains.findIndex((v) => !DOMAIN.test(v));
    if (bad >= 0) throw new InvalidRequest(`allowed_domains[${bad}] is not a domain name`, "allowed_domains");
    await d.store.settings.put("allowed_domains", [...new Set(domains)].sort(), d.now());
  }
  const patch = (body as { rate_limits?: unknown }).rate_limits;
  if (patch !== undefined) {
    if (!d.rateLimiter) throw new InvalidRequest("rate limiting is not configured on this server", "rate_limits");
    if (typeof patch !== "object" || patch === null || Array.isArray(patch)) throw new InvalidRequest("rate_limits must be an object", "rate_limits");
    const next = d.rateLimiter.update(patch as RateLimitPatch); // throws 403 when locked, 400 naming a bad knob
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
