// The one way into the request pipeline, for /proxy and the tunnel alike (architecture.md §3, stage 1):
// the principal's vault opened for proxying and the PROXY rate-limit tier charged, in that order, so
// both ingress paths admit a request by the same rule. Who is asking (the token) and which vault it
// names are read by each ingress from where its protocol carries them.

import { enforce } from "../ratelimit/index.ts";
import type { Domain } from "./context.ts";
import type { Principal } from "./principal.ts";
import { openCachedVault, openVault, type OpenVault } from "./vaults.ts";

/** `xVault`: what the request named as X-Vault (agent tokens must name the vault they address). */
export async function admitToVault(d: Domain, p: Principal, vaultName: string, xVault: string | undefined): Promise<OpenVault> {
  return charged(d, p, await openVault(d, p, vaultName, "read", xVault));
}

/** admitToVault without a wait, when the vault's grant is cached; undefined when it is not (then call admitToVault). */
export function admitCached(d: Domain, p: Principal, vaultName: string, xVault: string | undefined): OpenVault | undefined {
  const open = openCachedVault(d, p, vaultName, "read", xVault);
  return open && charged(d, p, open);
}

function charged(d: Domain, p: Principal, open: OpenVault): OpenVault {
  if (d.rateLimiter) enforce(d.rateLimiter.checkProxy(p.id, open.vault.id));
  return open;
}
