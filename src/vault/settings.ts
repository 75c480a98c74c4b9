// Owner settings: the allowed signup domains (email registration, identity-provider sign-up and
// vault-invite acceptance; the owner is exempt).

import { InvalidRequest, PermissionDenied } from "../errors.ts";
import type { Repos } from "../store/index.ts";
import type { Domain } from "./context.ts";
import type { Principal } from "./principal.ts";

export interface OwnerSettings {
  allowed_domains: string[];
}

const DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

export async function readSettings(repos: Repos): Promise<OwnerSettings> {
  return { allowed_domains: (await repos.settings.get<string[]>("allowed_domains")) ?? [] };
}

export async function getOwnerSettings(d: Domain, p: Principal): Promise<OwnerSettings> {
  requireOwner(p);
  return readSettings(d.store);
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
  return readSettings(d.store);
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
