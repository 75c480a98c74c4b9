// Authenticating a proxy client: the token from Proxy-Authorization resolves to a principal, the
// vault comes from the proxy URL's password (Basic token:vault) or from a scoped session, and the
// pair is re-checked on every request so a revoked token fails at once, even in an open tunnel.

import { InvalidRequest, Unauthorized } from "../errors.ts";
import { hashToken } from "../crypto/index.ts";
import { admitCached, admitToVault, vaultNameById } from "../identity/index.ts";
import type { TunnelDeps, TunnelSession } from "./context.ts";
import { parseProxyAuthorization } from "./proxy-auth.ts";
import { ProxyAuthRequired } from "./respond.ts";

export async function authenticateProxy(deps: TunnelDeps, header: string | undefined): Promise<TunnelSession> {
  const session = proxySession(header);
  await refreshSession(deps, session);
  return session;
}

/**
 * The session a Proxy-Authorization header names, not yet checked: a request sent to the proxy
 * without CONNECT is admitted with the request itself (refreshSession, in egressForSession).
 */
export function proxySession(header: string | undefined): TunnelSession {
  const creds = parseProxyAuthorization(header);
  if (!creds) throw new ProxyAuthRequired("proxy authentication required: use http://<session_token>:<vault>@host:port");
  // Only the token's hash is kept for the tunnel's life: it is all the per-request re-check needs.
  return { tokenHash: hashToken(creds.token), vaultName: creds.vault } as TunnelSession;
}

/**
 * Re-checks the session and re-admits it to its vault (the PROXY tier charged). The usual case needs no wait:
 * the token's look-up and the vault's grant are both in their caches, which whatever revokes either clears, and
 * the same checks run on them; anything else (a first request, a cache dropped or past its trust, a last-seen
 * time due) takes the full path. Returns undefined when done without a wait.
 */
export function refreshSession(deps: TunnelDeps, session: TunnelSession): Promise<void> | undefined {
  const d = deps.domain;
  const principal = d.auth.cachedHash?.(session.tokenHash);
  if (!principal) return recheckSession(deps, session);
  const vaultName = session.vaultName ?? (principal.kind === "scoped" ? d.vaultAccess?.nameOf(principal.vaultId) : undefined);
  if (!vaultName) return recheckSession(deps, session);
  session.principal = principal;
  const open = admitCached(d, principal, vaultName, principal.kind === "agent" ? vaultName : undefined);
  if (!open) return recheckSession(deps, session);
  session.open = open;
  return undefined;
}

async function recheckSession(deps: TunnelDeps, session: TunnelSession): Promise<void> {
  const d = deps.domain;
  const principal = await d.auth.authenticateHash(session.tokenHash).catch((err) => {
    throw err instanceof Unauthorized ? new ProxyAuthRequired(err.message) : err;
  });
  const vaultName = session.vaultName ?? (principal.kind === "scoped" ? await vaultNameById(d, principal.vaultId) : undefined);
  if (!vaultName) throw new InvalidRequest("name the vault in the proxy URL: http://<token>:<vault>@host:port");
  // The vault in the proxy URL plays the role of X-Vault for agent tokens. Admission charges the
  // PROXY tier: each CONNECT and each request inside a tunnel spend from the same budget as /proxy.
  session.principal = principal;
  session.open = await admitToVault(d, principal, vaultName, principal.kind === "agent" ? vaultName : undefined);
}
