// Minting and checking sessions. Look-ups are cached by token hash (short TTL, explicit
// invalidation on revoke) and the idle timer is refreshed in memory, written to the store at most
// once per LIMITS.lastSeenWriteIntervalMs, so an authenticated request costs no database write.

import { Conflict, DatabaseUnavailable, Unauthorized } from "../errors.ts";
import { ALWAYS_FRESH, type Freshness } from "../store/index.ts";
import type { Secret } from "../secret.ts";
import type { Repos, SessionChannel, SessionRow, Store, VaultRole } from "../store/index.ts";
import { LIMITS } from "../policy/index.ts";
import type { Principal, UserPrincipal } from "./principal.ts";
import { hashToken, mintPublicId, mintToken } from "../crypto/index.ts";

export interface MintedSession {
  /** SECRET: shown to the caller once. */
  readonly token: Secret;
  readonly row: SessionRow;
}

/**
 * Who is creating a session, as the edge saw it: how (a page's form, the JSON API, an identity provider),
 * the client's User-Agent and its address. Kept with the session so its owner can tell sessions apart;
 * never a token or any other header.
 */
export interface SessionClient {
  readonly channel: SessionChannel;
  readonly userAgent?: string;
  readonly address?: string;
}

const originOf = (client: SessionClient | undefined) => ({
  channel: client?.channel ?? null,
  clientAgent: client?.userAgent ?? null,
  clientAddress: client?.address ?? null,
});

export async function mintUserSession(repos: Repos, userId: number, now: number, client?: SessionClient): Promise<MintedSession> {
  return insertSession(
    repos,
    { kind: "user", userId, agentId: null, vaultId: null, role: null, expiresAt: now + LIMITS.userSessionAbsoluteMs, ...originOf(client) },
    now,
  );
}

export async function mintAgentSession(repos: Repos, agentId: number, ttlMs: number | null, now: number, client?: SessionClient): Promise<MintedSession> {
  await assertAgentSessionRoom(repos, agentId, now);
  return insertSession(
    repos,
    { kind: "agent", userId: null, agentId, vaultId: null, role: null, expiresAt: ttlMs === null ? null : now + ttlMs, ...originOf(client) },
    now,
  );
}

export async function mintScopedSession(
  repos: Repos,
  owner: { userId: number | null; agentId: number | null },
  vaultId: number,
  role: VaultRole,
  ttlMs: number,
  now: number,
  contained = false,
  client?: SessionClient,
): Promise<MintedSession> {
  if (owner.agentId !== null) await assertAgentSessionRoom(repos, owner.agentId, now);
  return insertSession(repos, { kind: "scoped", ...owner, vaultId, role, expiresAt: now + ttlMs, contained, ...originOf(client) }, now);
}

/**
 * A scoped session a workload's platform token was exchanged for: minted for the binding's agent, naming the
 * token's subject. Bounded per agent more loosely than an agent's own (many jobs of one pipeline run at once).
 */
export async function mintWorkloadSession(
  repos: Repos,
  w: { agentId: number; vaultId: number; role: VaultRole; expiresAt: number; subject: string; issuer: string },
  now: number,
  client?: SessionClient,
): Promise<MintedSession> {
  if ((await repos.sessions.countActiveForAgent(w.agentId, now)) >= LIMITS.activeSessionsPerWorkload) {
    throw new Conflict(`the binding already has ${LIMITS.activeSessionsPerWorkload} active sessions; wait for some to expire`);
  }
  const s = { kind: "scoped" as const, userId: null, agentId: w.agentId, vaultId: w.vaultId, role: w.role, expiresAt: w.expiresAt, ...originOf(client) };
  return insertSession(repos, { ...s, workloadSubject: w.subject, workloadIssuer: w.issuer }, now);
}

async function assertAgentSessionRoom(repos: Repos, agentId: number, now: number) {
  if ((await repos.sessions.countActiveForAgent(agentId, now)) >= LIMITS.activeSessionsPerAgent) {
    throw new Conflict(`the agent already has ${LIMITS.activeSessionsPerAgent} active sessions; revoke one first`);
  }
}

async function insertSession(
  repos: Repos,
  s: Pick<
    SessionRow,
    "kind" | "userId" | "agentId" | "vaultId" | "role" | "expiresAt" | "channel" | "clientAgent" | "clientAddress" | "workloadSubject" | "workloadIssuer"
  > & {
    contained?: boolean;
  },
  now: number,
) {
  const minted = mintToken(s.kind === "agent" ? "agent" : "session");
  const row = await repos.sessions.create({ ...s, publicId: mintPublicId("ses_"), tokenHash: minted.hash, createdAt: now, lastSeenAt: now });
  return { token: minted.token, row };
}

interface CacheEntry {
  principal: Principal;
  row: SessionRow;
  loadedAt: number;
  lastSeen: number;
  storedLastSeen: number;
}

export interface Authenticator {
  /** Resolves a raw bearer token to its principal, or throws Unauthorized. */
  authenticate(rawToken: string): Promise<Principal>;
  /** The same for a token already hashed with hashToken (a tunnel hashes its token once, not per request). */
  authenticateHash(tokenHash: string): Promise<Principal>;
  /**
   * authenticateHash without a wait, for a look-up already cached, trusted and live with nothing to write (its
   * last-seen time not due); undefined otherwise (then call authenticateHash, which refuses or reloads).
   */
  cachedHash?(tokenHash: string): Principal | undefined;
  /** Forgets cached look-ups so a revocation takes effect on the very next request. */
  forget(tokenHashes?: readonly string[]): void;
}

export interface AuthenticatorOptions {
  readonly now: () => number;
  /** How long a cached look-up is trusted before the store is asked again (other instances may revoke). */
  readonly cacheTtlMs?: number;
  readonly maxEntries?: number;
  /** Shortens that trust while announcements from other instances may be missed (store/changes.ts). */
  readonly freshness?: Freshness;
  /** While the database is unreachable, a session checked less than this long ago keeps working. */
  readonly outageGraceMs?: number;
}

export function createAuthenticator(store: Store, opts: AuthenticatorOptions): Authenticator {
  const cache = new Map<string, CacheEntry>();
  const ttl = opts.cacheTtlMs ?? 5_000;
  const max = opts.maxEntries ?? 10_000;
  const freshness = opts.freshness ?? ALWAYS_FRESH;
  const grace = opts.outageGraceMs ?? 0;

  // Requests in flight when an entry goes stale share one look-up (an asynchronous store would
  // otherwise read the same session once per concurrent request).
  const loading = new Map<string, Promise<CacheEntry>>();
  let forgotten = 0; // bumped by every forget(): a look-up started before it is not cached

  /** A fresh look-up, or during a database outage the last one if it is recent enough. */
  async function reload(hash: string, cached: CacheEntry | undefined, now: number): Promise<CacheEntry> {
    let pending = loading.get(hash);
    if (!pending) {
      const started = load(hash, now).finally(() => {
        if (loading.get(hash) === started) loading.delete(hash);
      });
      loading.set(hash, (pending = started));
    }
    try {
      return await pending;
    } catch (err) {
      if (err instanceof DatabaseUnavailable && cached && now - cached.loadedAt < grace) return cached;
      throw err;
    }
  }

  async function load(hash: string, now: number): Promise<CacheEntry> {
    const asOf = forgotten;
    const row = await store.sessions.byTokenHash(hash);
    if (!row) throw new Unauthorized();
    const principal = await toPrincipal(store, row);
    const entry = { principal, row, loadedAt: now, lastSeen: row.lastSeenAt, storedLastSeen: row.lastSeenAt };
    cache.delete(hash);
    // A revocation announced while this read was in flight may postdate it: use it once, do not keep it.
    if (asOf !== forgotten) return entry;
    cache.set(hash, entry);
    if (cache.size > max) cache.delete(cache.keys().next().value!);
    return entry;
  }

  async function authenticateHash(hash: string): Promise<Principal> {
    const now = opts.now();
    const cached = cache.get(hash);
    const entry = cached && now - cached.loadedAt < freshness.trustMs(ttl) ? cached : await reload(hash, cached, now);
    if (cached && entry !== cached) entry.lastSeen = Math.max(entry.lastSeen, cached.lastSeen);
    if (!isLive(entry.row, entry.lastSeen, now)) {
      cache.delete(hash);
      throw new Unauthorized("session expired or revoked");
    }
    entry.lastSeen = now;
    if (now - entry.storedLastSeen >= LIMITS.lastSeenWriteIntervalMs) {
      entry.storedLastSeen = now;
      // The idle timer is a convenience; a database outage must not turn it into a refusal.
      await store.sessions.touch(entry.row.id, now).catch((err) => {
        if (!(err instanceof DatabaseUnavailable)) throw err;
      });
    }
    return entry.principal;
  }

  function cachedHash(hash: string): Principal | undefined {
    const now = opts.now();
    const entry = cache.get(hash);
    if (!entry || now - entry.loadedAt >= freshness.trustMs(ttl)) return undefined;
    if (!isLive(entry.row, entry.lastSeen, now) || now - entry.storedLastSeen >= LIMITS.lastSeenWriteIntervalMs) return undefined;
    entry.lastSeen = now;
    return entry.principal;
  }

  return {
    authenticate: (rawToken) => authenticateHash(hashToken(rawToken)),
    authenticateHash,
    cachedHash,
    forget(hashes) {
      forgotten++;
      loading.clear();
      if (!hashes) return cache.clear();
      for (const h of hashes) cache.delete(h);
    },
  };
}

/**
 * The person of user session `publicId` while it is live (not revoked, expired or idle): a browser flow that
 * left for another site (an OAuth provider's sign-in) resumes as them, even when the way back is a cross-site
 * navigation that leaves the SameSite=Strict session cookie behind.
 */
export async function liveUserSession(store: Store, publicId: string, now: number): Promise<UserPrincipal | undefined> {
  const row = await store.sessions.byPublicId(publicId);
  if (!row || row.kind !== "user" || !isLive(row, row.lastSeenAt, now)) return undefined;
  const p = await toPrincipal(store, row).catch(() => undefined);
  return p?.kind === "user" ? p : undefined;
}

export function isLive(row: SessionRow, lastSeen: number, now: number): boolean {
  if (row.revokedAt !== null) return false;
  if (row.expiresAt !== null && now >= row.expiresAt) return false;
  if (row.kind === "user" && now - lastSeen >= LIMITS.userSessionIdleMs) return false;
  return true;
}

async function toPrincipal(store: Store, row: SessionRow): Promise<Principal> {
  const base = { sessionId: row.id, sessionPublicId: row.publicId, expiresAt: row.expiresAt };
  if (row.kind === "user" && row.userId !== null) {
    const user = await store.users.byId(row.userId);
    if (!user) throw new Unauthorized();
    return { kind: "user", id: `user:${user.id}`, userId: user.id, email: user.email, instanceRole: user.role, ...base };
  }
  if (row.kind === "agent" && row.agentId !== null) {
    const agent = await store.agents.byId(row.agentId);
    if (!agent) throw new Unauthorized();
    return { kind: "agent", id: `agent:${agent.id}`, agentId: agent.id, agentName: agent.name, instanceRole: agent.role, ...base };
  }
  if (row.kind === "scoped" && row.vaultId !== null && row.role) {
    // Rate limits key on `id`: a scoped session counts against whoever minted it, so minting many cannot multiply a budget.
    const id = row.userId !== null ? `user:${row.userId}` : `agent:${row.agentId}`;
    return {
      kind: "scoped",
      id,
      vaultId: row.vaultId,
      role: row.role as VaultRole,
      userId: row.userId,
      agentId: row.agentId,
      contained: row.contained,
      ...(row.workloadSubject ? { workload: { issuer: row.workloadIssuer ?? null, subject: row.workloadSubject } } : {}),
      ...base,
    };
  }
  throw new Unauthorized();
}
